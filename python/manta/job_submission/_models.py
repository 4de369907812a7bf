"""The Jobs API's data: JobStatus, JobType, DriverInfo and JobDetails, with
Ray's names and fields (the dashboard's JSON is Ray's JobDetails)."""

import dataclasses
import enum
from typing import Any, Dict, Optional


class JobStatus(str, enum.Enum):
    """The status of a submitted job."""

    PENDING = "PENDING"  # submitted; its entrypoint has not started
    RUNNING = "RUNNING"  # its entrypoint runs
    STOPPED = "STOPPED"  # stopped by a user
    SUCCEEDED = "SUCCEEDED"  # its entrypoint exited with 0
    FAILED = "FAILED"  # its entrypoint exited with another code, or could not start

    def __str__(self):
        return self.value

    def is_terminal(self) -> bool:
        """Whether the job has ended: its status will not change again."""
        return self in (JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED)


class JobType(str, enum.Enum):
    """How a job came: through the Jobs API (SUBMISSION) or as a driver that connected."""

    SUBMISSION = "SUBMISSION"
    DRIVER = "DRIVER"

    def __str__(self):
        return self.value


@dataclasses.dataclass
class DriverInfo:
    """The process that runs a job's entrypoint."""

    id: str
    node_ip_address: str
    pid: str


@dataclasses.dataclass
class JobDetails:
    """A job as GET /api/jobs/{id} describes it, with Ray's field names.

    start_time and end_time are milliseconds since the epoch (None before
    the job starts or ends).
    """

    type: JobType
    submission_id: Optional[str]
    status: JobStatus
    entrypoint: str
    job_id: Optional[str] = None
    driver_info: Optional[DriverInfo] = None
    message: Optional[str] = None
    error_type: Optional[str] = None
    start_time: Optional[int] = None
    end_time: Optional[int] = None
    metadata: Optional[Dict[str, str]] = None
    runtime_env: Optional[Dict[str, Any]] = None
    driver_agent_http_address: Optional[str] = None
    driver_node_id: Optional[str] = None
    driver_exit_code: Optional[int] = None
    entrypoint_num_cpus: Optional[float] = None
    entrypoint_num_gpus: Optional[float] = None
    entrypoint_memory: Optional[int] = None
    entrypoint_resources: Optional[Dict[str, float]] = None

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "JobDetails":
        """From the dashboard's JSON; fields this version does not know are ignored."""
        if not isinstance(data, dict):
            raise RuntimeError(f"the dashboard sent a job that is not a JSON object: {data!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        for required in ("status", "entrypoint"):
            if required not in kwargs:
                raise RuntimeError(f"the dashboard sent a job without '{required}': {data!r}")
        kwargs.setdefault("submission_id", None)
        kwargs["type"] = JobType(kwargs.get("type") or "SUBMISSION")
        kwargs["status"] = JobStatus(kwargs["status"])
        driver = kwargs.get("driver_info")
        if isinstance(driver, dict):
            kwargs["driver_info"] = DriverInfo(id=str(driver.get("id", "")),
                                               node_ip_address=str(driver.get("node_ip_address",
                                                                              "")), pid=str(driver.get("pid", "")))
        return cls(**kwargs)

    def dict(self) -> Dict[str, Any]:
        """The fields as a dict of plain values (as pydantic's .dict() gives in Ray)."""
        out = dataclasses.asdict(self)
        out["type"] = self.type.value
        out["status"] = self.status.value
        return out


# Ray's older name for the same record.
JobInfo = JobDetails
