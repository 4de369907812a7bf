"""JobSubmissionClient: Ray's job submission client over Manta's Jobs REST API
(dashboard/jobs_api.h), with urllib."""

import asyncio
import codecs
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, AsyncIterator, Dict, List, Optional, Union

from . import _address
from . import _packaging
from ._models import JobDetails, JobStatus

SUPPORTED_RUNTIME_ENV_KEYS = ("env_vars", "working_dir")
_TIMEOUT_S = 60  # one request's connect and read timeout
_TAIL_TIMEOUT_S = 3600  # a quiet job sends nothing for long; then the status is polled


class JobSubmissionClient:
    """Submits jobs to a Manta cluster and follows them, as Ray's client does.

        client = JobSubmissionClient()            # this host's cluster, or address="http://HOST:8265"
        job = client.submit_job(entrypoint="python3 train.py", runtime_env={"working_dir": "."})
        client.get_job_status(job)                 # JobStatus.RUNNING
        async for lines in client.tail_job_logs(job): print(lines, end="")

    `address` is the dashboard's URL; with none (or "auto") it is found as
    `manta job` finds it (see _address.py), and so is the cluster token,
    sent as "Authorization: Bearer <token>" unless `headers` carries an
    Authorization of its own. `cookies` and `metadata` are Ray's: cookies
    sent with every request, metadata merged into every job's. `verify` is
    for https: False skips certificate checks, a path names a CA bundle
    (file or directory). `temp_dir` is where `manta start` keeps its
    sessions (/tmp/manta). `create_cluster_if_needed` is accepted for Ray's
    signature; a cluster is never started.

    Raises ConnectionError when the dashboard cannot be reached, and
    RuntimeError carrying the dashboard's message when it refuses a request
    (a missing or wrong token included).
    """

    def __init__(self, address: Optional[str] = None, create_cluster_if_needed: bool = False,
                 cookies: Optional[Dict[str, Any]] = None, metadata: Optional[Dict[str, Any]] = None,
                 headers: Optional[Dict[str, Any]] = None, verify: Optional[Union[str, bool]] = True, *,
                 temp_dir: Optional[str] = None):
        del create_cluster_if_needed
        self._temp_dir = temp_dir or _address.DEFAULT_TEMP_DIR
        self._address = _address.resolve_dashboard_url(address, self._temp_dir)
        self._default_metadata = dict(metadata or {})
        self._headers = {str(k): str(v) for k, v in (headers or {}).items()}
        if not any(k.lower() in ("authorization", "x-ray-authorization") for k in self._headers):
            token = _address.resolve_token(self._address, self._temp_dir)
            if token:
                self._headers["Authorization"] = f"Bearer {token}"
        if cookies:
            self._headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        self._ssl = self._ssl_context(verify)
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=self._ssl))
        self._version = self._check_connection_and_version()

    @property
    def address(self) -> str:
        return self._address

    # --- HTTP ---------------------------------------------------------------

    @staticmethod
    def _ssl_context(verify):
        if verify is False:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        if isinstance(verify, str):
            if os.path.isdir(verify):
                return ssl.create_default_context(capath=verify)
            return ssl.create_default_context(cafile=verify)
        return ssl.create_default_context()

    def _request(self, method, path, body=None, content_type=None, timeout=_TIMEOUT_S):
        """Sends a request; the open response (status 200) or an exception."""
        headers = dict(self._headers)
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self._address + path, data=body, headers=headers, method=method)
        try:
            return self._opener.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            try:
                text = e.read().decode("utf-8", "replace").strip()
            finally:
                e.close()
            raise RuntimeError(f"Request failed with status code {e.code}: {text or e.reason}.") from None
        except urllib.error.URLError as e:
            raise ConnectionError(f"Failed to connect to the Manta dashboard at {self._address}: "
                                  f"{e.reason}") from None
        except OSError as e:
            raise ConnectionError(f"Failed to connect to the Manta dashboard at {self._address}: {e}") from None

    def _call(self, method, path, payload=None, raw=None, content_type=None):
        """A request whose answer is JSON; the decoded JSON."""
        body = raw
        if payload is not None:
            body = json.dumps(payload).encode("utf-8")
            content_type = "application/json"
        with self._request(method, path, body, content_type) as resp:
            text = resp.read()
        try:
            return json.loads(text)
        except ValueError:
            raise RuntimeError(f"the dashboard at {self._address} sent invalid JSON: {text[:200]!r}") from None

    @staticmethod
    def _job_path(job_id, suffix=""):
        if not isinstance(job_id, str) or not job_id:
            raise ValueError(f"a job's submission id must be a non-empty string, got {job_id!r}")
        return "/api/jobs/" + urllib.parse.quote(job_id, safe="") + suffix

    def _check_connection_and_version(self):
        version = self._call("GET", "/api/version")
        if not isinstance(version, dict) or "version" not in version:
            raise RuntimeError(f"{self._address} does not serve the Jobs API (GET /api/version: {version!r})")
        return version

    def get_version(self) -> str:
        """The Jobs API version the dashboard serves."""
        return str(self._version["version"])

    # --- runtime_env and working_dir ------------------------------------------

    def _upload_package_if_needed(self, name, archive):
        path = "/api/packages/gcs/" + name
        try:
            with self._request("GET", path):
                return  # the dashboard has it
        except RuntimeError as e:
            if "status code 404" not in str(e):
                raise
        with self._request("PUT", path, archive, "application/octet-stream"):
            pass

    def _prepare_runtime_env(self, runtime_env, entrypoint):
        if runtime_env is None:
            return {}
        if not hasattr(runtime_env, "items"):
            raise TypeError(f"runtime_env must be a dict, got {type(runtime_env).__name__}")
        env = {str(k): v for k, v in runtime_env.items() if v is not None}
        for key in env:
            if key not in SUPPORTED_RUNTIME_ENV_KEYS:
                raise ValueError(f"runtime_env field '{key}' is not supported "
                                 "(Manta supports working_dir and env_vars)")
        if "env_vars" in env:
            env_vars = env["env_vars"]
            if not hasattr(env_vars, "items") or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
                raise TypeError("runtime_env['env_vars'] must be a dict of str to str")
            env["env_vars"] = dict(env_vars)
        if "working_dir" in env:
            working_dir = env["working_dir"]
            if isinstance(working_dir, os.PathLike):
                working_dir = os.fspath(working_dir)
            if not isinstance(working_dir, str):
                raise TypeError("runtime_env['working_dir'] must be a local directory or a gcs:// URI")
            if not working_dir.startswith("gcs://"):
                if "://" in working_dir:
                    raise ValueError(f"runtime_env working_dir '{working_dir}': only local directories "
                                     "and gcs:// packages are supported")
                program = _packaging.entrypoint_file(working_dir, entrypoint)
                archive = _packaging.pack_directory(working_dir, [program] if program else [])
                name = _packaging.package_name(archive)
                self._upload_package_if_needed(name, archive)
                working_dir = "gcs://" + name
            env["working_dir"] = working_dir
        return env

    # --- the Jobs API ----------------------------------------------------------

    def submit_job(self, *, entrypoint: str, job_id: Optional[str] = None, runtime_env: Optional[Dict[str, Any]] = None,
                   metadata: Optional[Dict[str, str]] = None, submission_id: Optional[str] = None,
                   entrypoint_num_cpus: Optional[Union[int, float]] = None,
                   entrypoint_num_gpus: Optional[Union[int, float]] = None, entrypoint_memory: Optional[int] = None,
                   entrypoint_resources: Optional[Dict[str, float]] = None) -> str:
        """Submits a job that runs `entrypoint` (a shell command) on the head;
        its submission id. `job_id` is the older name of `submission_id`.

        A runtime_env may hold env_vars and working_dir (a local directory,
        packed and uploaded unless the dashboard has it, or a gcs:// URI);
        any other field raises ValueError.
        """
        if job_id and submission_id and job_id != submission_id:
            raise ValueError("give submission_id or job_id (its older name), not both")
        if not isinstance(entrypoint, str):
            raise TypeError("entrypoint must be a string: the shell command to run")
        submission_id = submission_id or job_id
        env = self._prepare_runtime_env(runtime_env, entrypoint)
        merged = dict(self._default_metadata)
        merged.update(metadata or {})
        body: Dict[str, Any] = {"entrypoint": entrypoint, "runtime_env": env, "metadata": merged}
        if submission_id:
            body["submission_id"] = submission_id
        for field, value in (("entrypoint_num_cpus", entrypoint_num_cpus), ("entrypoint_num_gpus", entrypoint_num_gpus),
                             ("entrypoint_memory", entrypoint_memory), ("entrypoint_resources", entrypoint_resources)):
            if value is not None:
                body[field] = value
        reply = self._call("POST", "/api/jobs/", body)
        return reply["submission_id"]

    def stop_job(self, job_id: str) -> bool:
        """Asks the job to stop; whether it was still running (False: it had ended)."""
        return bool(self._call("POST", self._job_path(job_id, "/stop")).get("stopped", False))

    def delete_job(self, job_id: str) -> bool:
        """Deletes an ended job's record and logs; RuntimeError while it runs."""
        return bool(self._call("DELETE", self._job_path(job_id)).get("deleted", False))

    def get_job_info(self, job_id: str) -> JobDetails:
        """The job's details (status, message, times, driver, exit code, ...)."""
        return JobDetails.from_json(self._call("GET", self._job_path(job_id)))

    def list_jobs(self) -> List[JobDetails]:
        """Every job the cluster knows."""
        return [JobDetails.from_json(j) for j in self._call("GET", "/api/jobs/")]

    def get_job_status(self, job_id: str) -> JobStatus:
        return self.get_job_info(job_id).status

    def get_job_logs(self, job_id: str) -> str:
        """The job's output so far (stdout and stderr of its entrypoint)."""
        return self._call("GET", self._job_path(job_id, "/logs")).get("logs", "")

    async def tail_job_logs(self, job_id: str) -> AsyncIterator[str]:
        """Yields the job's output as it comes, until the job has ended and all
        of it was yielded. A dropped stream is made up for by polling."""
        loop = asyncio.get_running_loop()
        path = self._job_path(job_id, "/logs/tail")
        resp = await loop.run_in_executor(None, lambda: self._request("GET", path, timeout=_TAIL_TIMEOUT_S))
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        sent = 0
        try:
            while True:
                try:
                    chunk = await loop.run_in_executor(None, resp.read1, 65536)
                except (OSError, ValueError, ConnectionError):
                    break  # the stream dropped: poll below
                if not chunk:
                    text = decoder.decode(b"", final=True)
                    if text:
                        yield text
                    return
                sent += len(chunk)
                text = decoder.decode(chunk)
                if text:
                    yield text
        finally:
            _close_response(resp)
        while not (await loop.run_in_executor(None, self.get_job_status, job_id)).is_terminal():
            await asyncio.sleep(0.5)
        logs = (await loop.run_in_executor(None, self.get_job_logs, job_id)).encode("utf-8")
        if len(logs) > sent:
            yield logs[sent:].decode("utf-8", "replace")


def _close_response(resp):
    """Closes a streaming response, waking a read blocked on it in another thread."""
    try:
        sock = resp.fp.raw._sock  # http.client's socket; shutting it down ends a blocked recv
        sock.shutdown(2)
    except Exception:  # noqa: BLE001 - already closed, or not a plain socket
        pass
    try:
        resp.close()
    except Exception:  # noqa: BLE001
        pass
