"""Ray's job submission API over Manta's Jobs REST API.

    from manta.job_submission import JobSubmissionClient, JobStatus

    client = JobSubmissionClient()          # the cluster on this host, or "http://HOST:8265"
    job = client.submit_job(entrypoint="python3 -c 'print(1)'")
    client.get_job_status(job)              # JobStatus.PENDING / RUNNING / SUCCEEDED ...

Only the standard library is used: this package imports without the
compiled module, so a machine with no cluster binaries can submit jobs.
"""

from ._client import JobSubmissionClient
from ._models import DriverInfo, JobDetails, JobInfo, JobStatus, JobType

__all__ = ["JobSubmissionClient", "JobStatus", "JobDetails", "JobInfo", "JobType", "DriverInfo"]
