"""manta.job_submission against a real head's dashboard (the `cluster` fixture)."""

import asyncio
import os
import shlex
import sys
import time

import pytest

from manta.job_submission import JobDetails, JobStatus, JobSubmissionClient, JobType
from manta.job_submission import _packaging

PY = shlex.quote(sys.executable)


@pytest.fixture(autouse=True)
def _no_ambient_cluster_env(monkeypatch):
    for name in ("MANTA_ADDRESS", "MANTA_DASHBOARD_ADDRESS", "MANTA_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def client(cluster):
    # Found the way `manta job` finds it: session_latest under the temp dir.
    return JobSubmissionClient(temp_dir=cluster.temp_dir)


def wait_status(client, job_id, statuses, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.get_job_status(job_id)
        if status in statuses:
            return status
        if status.is_terminal() or time.monotonic() >= deadline:
            info = client.get_job_info(job_id)
            pytest.fail(f"job {job_id} is {status} ({info.message}), expected one of {statuses}; "
                        f"logs: {client.get_job_logs(job_id)!r}")
        time.sleep(0.1)


def wait_terminal(client, job_id, timeout_s=60):
    return wait_status(client, job_id, (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED), timeout_s)


def test_job_status_enum():
    assert [s.value for s in JobStatus] == ["PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]
    assert {s for s in JobStatus if s.is_terminal()} == {JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED}
    assert JobStatus.SUCCEEDED == "SUCCEEDED" and str(JobStatus.RUNNING) == "RUNNING"


def test_finds_the_dashboard_and_token_of_the_session(client, cluster):
    assert client.address == cluster.dashboard_url
    assert client.get_version() == "2"


def test_address_and_token_from_the_environment(cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("MANTA_DASHBOARD_ADDRESS", cluster.dashboard_url.replace("http://", ""))
    monkeypatch.setenv("MANTA_TOKEN", cluster.token)
    c = JobSubmissionClient(temp_dir=str(tmp_path))  # no session here: only the environment
    assert c.address == cluster.dashboard_url
    assert c.list_jobs() is not None


def test_python_entrypoint_succeeds_with_logs(client):
    job = client.submit_job(entrypoint=f"{PY} -c \"print('hello from manta', 6 * 7)\"", metadata={"owner": "tests"})
    assert wait_terminal(client, job) == JobStatus.SUCCEEDED
    assert "hello from manta 42" in client.get_job_logs(job)
    info = client.get_job_info(job)
    assert isinstance(info, JobDetails)
    assert info.type == JobType.SUBMISSION
    assert info.submission_id == job
    assert info.status == JobStatus.SUCCEEDED and info.driver_exit_code == 0
    assert info.metadata == {"owner": "tests"}
    assert info.start_time and info.end_time and info.end_time >= info.start_time
    assert info.driver_info is not None and info.driver_info.id == job
    assert info.dict()["status"] == "SUCCEEDED"


def test_shell_entrypoint_with_env_vars_and_own_id(client):
    job = client.submit_job(entrypoint='echo "value=$GREETING" && echo to-stderr >&2',
                            runtime_env={"env_vars": {"GREETING": "bonjour"}},
                            submission_id="pytest-shell-job-%d" % os.getpid())
    assert job == "pytest-shell-job-%d" % os.getpid()
    assert wait_terminal(client, job) == JobStatus.SUCCEEDED
    logs = client.get_job_logs(job)
    assert "value=bonjour" in logs and "to-stderr" in logs
    assert client.get_job_info(job).runtime_env == {"env_vars": {"GREETING": "bonjour"}}


def test_failing_job(client):
    job = client.submit_job(entrypoint=f"{PY} -c \"import sys; print('bye'); sys.exit(3)\"")
    assert wait_terminal(client, job) == JobStatus.FAILED
    info = client.get_job_info(job)
    assert info.driver_exit_code == 3
    assert info.message


def test_tail_job_logs_streams_until_the_end(client):
    job = client.submit_job(entrypoint=f"{PY} -u -c \"import time\nfor i in range(5): print('line', i); "
                            "time.sleep(0.2)\"")

    async def collect():
        pieces = []
        async for text in client.tail_job_logs(job):
            assert isinstance(text, str)
            pieces.append(text)
        return "".join(pieces)

    text = asyncio.run(asyncio.wait_for(collect(), timeout=60))
    assert [f"line {i}" for i in range(5)] == [line for line in text.splitlines() if line.startswith("line")]
    assert client.get_job_status(job) == JobStatus.SUCCEEDED


def test_stop_a_sleeping_job(client):
    job = client.submit_job(entrypoint="echo started; sleep 600")
    wait_status(client, job, (JobStatus.RUNNING,))
    assert client.stop_job(job) is True
    assert wait_terminal(client, job) == JobStatus.STOPPED
    assert client.stop_job(job) is False  # already ended


def test_list_and_delete(client):
    running = client.submit_job(entrypoint="sleep 600")
    done = client.submit_job(entrypoint="true")
    assert wait_terminal(client, done) == JobStatus.SUCCEEDED
    ids = {j.submission_id for j in client.list_jobs()}
    assert {running, done} <= ids
    assert all(isinstance(j, JobDetails) for j in client.list_jobs())
    with pytest.raises(RuntimeError):
        client.delete_job(running)  # only ended jobs can be deleted
    assert client.delete_job(done) is True
    assert done not in {j.submission_id for j in client.list_jobs()}
    with pytest.raises(RuntimeError, match="404.*does not exist"):
        client.get_job_info(done)
    client.stop_job(running)
    assert wait_terminal(client, running) == JobStatus.STOPPED
    assert client.delete_job(running) is True


def test_working_dir_is_packed_and_uploaded(client, tmp_path):
    (tmp_path / "data.txt").write_text("payload-from-the-working-dir\n")
    (tmp_path / "ignored.log").write_text("must not be shipped\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "reader.py").write_text(
        "import os\nprint(open('data.txt').read().strip())\nprint('log shipped:', os.path.exists('ignored.log'))\n")
    entrypoint = f"{PY} pkg/reader.py"
    job = client.submit_job(entrypoint=entrypoint, runtime_env={"working_dir": str(tmp_path)})
    assert wait_terminal(client, job) == JobStatus.SUCCEEDED
    logs = client.get_job_logs(job)
    assert "payload-from-the-working-dir" in logs
    assert "log shipped: False" in logs
    uri = client.get_job_info(job).runtime_env["working_dir"]
    name = _packaging.package_name(_packaging.pack_directory(str(tmp_path)))
    assert uri == "gcs://" + name
    # The same tree again: the dashboard has the package; the URI is reused as is.
    again = client.submit_job(entrypoint=entrypoint, runtime_env={"working_dir": uri})
    assert wait_terminal(client, again) == JobStatus.SUCCEEDED
    assert "payload-from-the-working-dir" in client.get_job_logs(again)


def test_missing_working_dir_is_refused(client, tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        client.submit_job(entrypoint="true", runtime_env={"working_dir": str(tmp_path / "nope")})


@pytest.mark.parametrize("key", ["pip", "conda", "py_modules", "container"])
def test_unsupported_runtime_env_key_is_refused(client, key):
    before = len(client.list_jobs())
    with pytest.raises(ValueError, match=f"'{key}'"):
        client.submit_job(entrypoint="true", runtime_env={key: ["x"], "env_vars": {"A": "1"}})
    assert len(client.list_jobs()) == before


def test_server_errors_carry_the_servers_message(client):
    with pytest.raises(RuntimeError, match="400.*submission id"):
        client.submit_job(entrypoint="true", submission_id="../escape")
    with pytest.raises(RuntimeError, match="404"):
        client.get_job_logs("no-such-job")


def test_missing_token_is_refused(cluster, tmp_path):
    # No MANTA_TOKEN, and no session under tmp_path holds the token.
    with pytest.raises(RuntimeError, match="401.*token"):
        JobSubmissionClient(cluster.dashboard_url, temp_dir=str(tmp_path))


def test_wrong_token_is_refused(cluster, tmp_path):
    with pytest.raises(RuntimeError, match="403"):
        JobSubmissionClient(cluster.dashboard_url, temp_dir=str(tmp_path),
                            headers={"Authorization": "Bearer " + "0" * 64})


def test_token_in_headers_is_used(cluster, tmp_path):
    c = JobSubmissionClient(cluster.dashboard_url, temp_dir=str(tmp_path),
                            headers={"Authorization": f"Bearer {cluster.token}"})
    assert c.get_version() == "2"


def test_unreachable_dashboard(tmp_path):
    from conftest import free_port
    with pytest.raises(ConnectionError):
        JobSubmissionClient(f"http://127.0.0.1:{free_port()}", temp_dir=str(tmp_path))


def test_no_dashboard_found(tmp_path):
    with pytest.raises(ConnectionError, match="no dashboard found"):
        JobSubmissionClient(temp_dir=str(tmp_path))
