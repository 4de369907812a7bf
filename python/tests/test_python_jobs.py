"""A Python driver submitted through the Jobs API runs on the cluster with
its working directory, and its workers' print lines come back as Ray's do."""

import os
import sys
import textwrap

from conftest import PACKAGE_DIR, wait_for
from manta.job_submission import JobStatus, JobSubmissionClient


def test_a_python_job_runs_its_tasks_in_its_working_dir(cluster, tmp_path):
    (tmp_path / "helper.py").write_text("def greet(x):\n    return 'hello %s' % x\n")
    (tmp_path / "my_script.py").write_text(
        textwrap.dedent("""
        import manta
        from helper import greet

        manta.init()

        @manta.remote
        def work(i):
            from helper import greet  # found in the job's working directory
            print("working on", i)
            return greet(i)

        print(manta.get([work.remote(i) for i in range(3)]))
    """))
    client = JobSubmissionClient(temp_dir=cluster.temp_dir)
    job = client.submit_job(entrypoint="%s my_script.py" % sys.executable,
                            runtime_env={"working_dir": str(tmp_path), "env_vars": {"PYTHONPATH": PACKAGE_DIR}})
    wait_for(lambda: client.get_job_status(job).is_terminal(), 60, "the job to end")
    logs = client.get_job_logs(job)
    assert client.get_job_status(job) == JobStatus.SUCCEEDED, logs
    assert "['hello 0', 'hello 1', 'hello 2']" in logs
    assert "(work pid=" in logs and "working on 2" in logs


def test_init_runtime_env_reaches_every_worker(cluster, tmp_path):
    (tmp_path / "data.txt").write_text("from the working dir")
    proc = __import__("subprocess").run([
        sys.executable, "-c",
        textwrap.dedent("""
        import os, sys
        import manta
        manta.init(runtime_env={"working_dir": sys.argv[1], "env_vars": {"JOB_VAR": "job"}})

        @manta.remote
        def read():
            with open("data.txt") as f:
                return f.read(), os.environ.get("JOB_VAR"), os.environ.get("TASK_VAR")

        print(manta.get(read.remote()))
        print(manta.get(read.options(runtime_env={"env_vars": {"TASK_VAR": "task"}}).remote()))
    """),
        str(tmp_path)
    ], capture_output=True, text=True, timeout=60, cwd="/", env=dict(os.environ, MANTA_ADDRESS=cluster.address,
                                                                     MANTA_TOKEN=cluster.token, PYTHONPATH=PACKAGE_DIR))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "('from the working dir', 'job', None)"
    assert lines[1] == "('from the working dir', 'job', 'task')"
