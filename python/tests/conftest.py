"""Shared fixtures: a real local Manta cluster started with the built binaries.

    def test_something(cluster):               # one head for the whole session
        cluster.address        # "127.0.0.1:PORT", the GCS
        cluster.dashboard_url  # "http://127.0.0.1:PORT"
        cluster.token          # the cluster token ("" with auth="none")
        cluster.session_dir    # <temp_dir>/session_..., holding logs/, token, ...
        cluster.temp_dir       # what --temp-dir was
        cluster.env            # MANTA_ADDRESS, MANTA_DASHBOARD_ADDRESS, MANTA_TOKEN for a subprocess
        cluster.manta(["status"])   # runs the CLI against it (--temp-dir added); CompletedProcess

    def test_fresh(start_cluster):              # a head of the test's own
        c = start_cluster(num_cpus=2)           # stopped when the test ends

`cluster` is session-scoped; `start_cluster` starts heads that are stopped
at the end of the test that started them. Teardown runs `manta stop`, then
kills whatever the cluster left running (job drivers and workers included:
every process whose command line or working directory lies under the temp
dir), then removes the temp dir, whatever the test did. The binaries are
found in $MANTA_BIN_DIR, else build/bin of this checkout; when missing, the
tests that need them are skipped.

The package `manta` is importable from python/ without the compiled module:
when importing it fails, a bare namespace package stands in for it, so the
pure-Python modules (manta.exceptions, manta.job_submission, ...) still load.
"""

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.error
import urllib.request

import pytest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(PYTHON_DIR)

# The build tree's package (build/python: the package's files beside the
# compiled module) when it is built, else the sources (the pure-Python parts).
BUILD_PYTHON_DIR = os.environ.get("MANTA_PYTHON_DIR") or os.path.join(REPO_DIR, "build", "python")
if os.path.isdir(os.path.join(BUILD_PYTHON_DIR, "manta")):
    PACKAGE_DIR = BUILD_PYTHON_DIR
else:
    PACKAGE_DIR = PYTHON_DIR
if PACKAGE_DIR not in sys.path:
    sys.path.insert(0, PACKAGE_DIR)


def _import_manta():
    try:
        import manta  # noqa: F401
    except Exception:  # noqa: BLE001 - no __init__ yet, or the compiled module is missing
        for name in [n for n in sys.modules if n == "manta" or n.startswith("manta.")]:
            del sys.modules[name]
        stub = types.ModuleType("manta")
        stub.__path__ = [os.path.join(PYTHON_DIR, "manta")]
        sys.modules["manta"] = stub


_import_manta()


def bin_dir():
    """The directory of the manta, gcs_server, raylet and dashboard binaries, or None."""
    for candidate in (os.environ.get("MANTA_BIN_DIR"), os.path.join(REPO_DIR, "build", "bin")):
        if candidate and os.path.isfile(os.path.join(candidate, "manta")):
            return candidate
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout_s, what, interval_s=0.05):
    """Calls `condition` until it returns a true value (returned); fails after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


@dataclasses.dataclass
class Cluster:
    address: str
    dashboard_url: str
    token: str
    session_dir: str
    temp_dir: str
    bin_dir: str

    @property
    def env(self):
        env = {"MANTA_ADDRESS": self.address, "MANTA_DASHBOARD_ADDRESS": self.dashboard_url}
        if self.token:
            env["MANTA_TOKEN"] = self.token
        return env

    def manta(self, args, timeout_s=120, check=False):
        """Runs `manta <args> --temp-dir=<temp_dir>`; the CompletedProcess (text)."""
        cmd = [os.path.join(self.bin_dir, "manta")] + list(args) + [f"--temp-dir={self.temp_dir}"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=check,
                              env=dict(os.environ, **self.env))


def _dashboard_up(url, token):
    req = urllib.request.Request(url + "/api/version", headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _processes_under(temp_dir):
    """Pids of the processes whose command line or working directory is under temp_dir."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                cwd = ""
        except OSError:
            continue
        if temp_dir in cmdline or cwd == temp_dir or cwd.startswith(temp_dir + "/"):
            pids.append(int(entry))
    return pids


def _kill_leftovers(temp_dir):
    """SIGKILLs what the cluster under temp_dir left running; waits until it is gone."""
    for sig_round in range(3):
        pids = _processes_under(temp_dir)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            wait_for(lambda: not any(os.path.exists(f"/proc/{p}") and not _is_zombie(p) for p in pids), 5,
                     "leftover processes to exit")
        except TimeoutError:
            if sig_round == 2:
                raise


def _is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def start_head(num_cpus=4, auth="token", extra_args=(), attempts=3):
    """Starts a head (GCS, raylet, dashboard) in a fresh temp dir on free ports.

    Returns a Cluster; the caller must call stop_head(cluster). Retries on
    a port taken meanwhile. pytest.skip when the binaries are not built.
    """
    bins = bin_dir()
    if bins is None:
        pytest.skip("the Manta binaries are not built (set MANTA_BIN_DIR or build build/bin)")
    last_error = ""
    for _ in range(attempts):
        temp_dir = tempfile.mkdtemp(prefix="manta-pytest-")
        port, dash_port, metrics_port = free_port(), free_port(), free_port()
        cmd = [
            os.path.join(bins, "manta"), "start", "--head", f"--port={port}", f"--dashboard-port={dash_port}",
            f"--metrics-export-port={metrics_port}", f"--temp-dir={temp_dir}", f"--num-cpus={num_cpus}",
            f"--auth={auth}", *extra_args
        ]
        env = {
            k: v for k, v in os.environ.items() if k not in ("MANTA_ADDRESS", "MANTA_TOKEN", "MANTA_DASHBOARD_ADDRESS")
        }
        try:
            # The daemons, and the jobs the dashboard starts, run in the temp dir.
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=temp_dir)
        except subprocess.TimeoutExpired as e:
            proc = None
            last_error = f"manta start timed out: {e}"
        if proc is not None and proc.returncode == 0:
            session = os.path.realpath(os.path.join(temp_dir, "session_latest"))
            token_file = os.path.join(session, "token")
            token = ""
            if auth == "token":
                with open(token_file) as f:
                    token = f.read().strip()
            with open(os.path.join(session, "dashboard_address")) as f:
                url = f.read().strip()
            cluster = Cluster(address=f"127.0.0.1:{port}", dashboard_url=url, token=token, session_dir=session,
                              temp_dir=temp_dir, bin_dir=bins)
            try:
                wait_for(lambda: _dashboard_up(url, token), 30, f"the dashboard at {url}")
            except BaseException:
                stop_head(cluster)
                raise
            return cluster
        if proc is not None:
            last_error = (proc.stderr or proc.stdout).strip()
        stop_head(Cluster("", "", "", "", temp_dir, bins))
    raise RuntimeError(f"could not start a Manta head: {last_error}")


def stop_head(cluster):
    """Stops everything of the cluster and removes its temp dir; never raises for a
    cluster that is already gone."""
    try:
        subprocess.run(
            [os.path.join(cluster.bin_dir, "manta"), "stop", f"--temp-dir={cluster.temp_dir}", "--grace-period=5"],
            capture_output=True, timeout=60)
    except (subprocess.TimeoutExpired, OSError):
        pass
    finally:
        _kill_leftovers(cluster.temp_dir)
        shutil.rmtree(cluster.temp_dir, ignore_errors=True)


def start_tpu_cluster(pod_type, slices=2, attempts=3):
    """`manta up --tpu POD_TYPE --slices N`: a head and simulated TPU hosts
    (1 CPU each) in a fresh temp dir on free ports. The caller must call
    stop_head(cluster). pytest.skip when the binaries are not built."""
    bins = bin_dir()
    if bins is None:
        pytest.skip("the Manta binaries are not built (set MANTA_BIN_DIR or build build/bin)")
    last = ""
    for _ in range(attempts):
        temp_dir = tempfile.mkdtemp(prefix="manta-pytest-tpu-")
        port = free_port()
        cmd = [
            os.path.join(bins, "manta"), "up", "--tpu", pod_type, "--slices",
            str(slices), "--host-cpus", "1", f"--port={port}", f"--dashboard-port={free_port()}",
            f"--metrics-export-port={free_port()}", f"--temp-dir={temp_dir}"
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MANTA_")}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=temp_dir)
        cluster = Cluster(address=f"127.0.0.1:{port}", dashboard_url="", token="",
                          session_dir=os.path.realpath(os.path.join(temp_dir,
                                                                    "session_latest")), temp_dir=temp_dir, bin_dir=bins)
        if proc.returncode == 0:
            return cluster
        last = (proc.stderr or proc.stdout).strip()
        stop_head(cluster)
    raise RuntimeError(f"manta up failed: {last}")


@pytest.fixture(scope="session")
def cluster():
    c = start_head()
    try:
        yield c
    finally:
        stop_head(c)


@pytest.fixture
def start_cluster():
    started = []

    def start(**kwargs):
        c = start_head(**kwargs)
        started.append(c)
        return c

    try:
        yield start
    finally:
        for c in reversed(started):
            stop_head(c)
