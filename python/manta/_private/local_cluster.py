"""A cluster on this machine for manta.init() with no cluster to join, as
ray.init() starts one: a head (GCS and raylet) in a private session
directory, with loopback ports and a token kept in that directory (0600),
stopped and removed when the driver exits."""

import json
import os
import shutil
import socket
import subprocess
import tempfile


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(name):
    """A Manta program: $MANTA_BIN_DIR, the installed package's _bin, or
    the build tree the package was imported from (build/python/manta ->
    build/bin)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = []
    if os.environ.get("MANTA_BIN_DIR"):
        candidates.append(os.environ["MANTA_BIN_DIR"])
    candidates.append(os.path.join(here, "_bin"))
    candidates.append(os.path.join(os.path.dirname(os.path.dirname(here)), "bin"))
    for d in candidates:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    raise RuntimeError("cannot find the Manta program '%s' (looked in %s); set MANTA_BIN_DIR to the "
                       "directory that holds it" % (name, ", ".join(candidates)))


class LocalCluster:

    def __init__(self, num_cpus=None, num_gpus=None, resources=None, labels=None, include_dashboard=False):
        self.temp_dir = tempfile.mkdtemp(prefix="manta-local-")
        self.manta = find_binary("manta")
        args = [
            self.manta, "start", "--head", "--temp-dir", self.temp_dir, "--port",
            str(_free_port()), "--node-ip-address", "127.0.0.1", "--metrics-export-port",
            str(_free_port()), "--include-dashboard", "1" if include_dashboard else "0"
        ]
        if include_dashboard:
            args += ["--dashboard-port", str(_free_port())]
        if num_cpus is not None:
            args += ["--num-cpus", str(num_cpus)]
        custom = dict(resources or {})
        if num_gpus is not None:
            custom["GPU"] = num_gpus  # logical where there are no GPUs
        if custom:
            args += ["--resources", json.dumps(custom)]
        if labels:
            args += ["--labels", ",".join("%s=%s" % kv for kv in labels.items())]
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            self.stop()
            raise RuntimeError("could not start a local Manta cluster:\n" + proc.stdout)
        session = os.path.join(self.temp_dir, "session_latest")
        with open(os.path.join(session, "gcs_address")) as f:
            self.address = f.read().strip()

    def stop(self):
        if self.temp_dir is None:
            return
        if os.path.isdir(os.path.join(self.temp_dir, "session_latest")):
            subprocess.run([self.manta, "stop", "--temp-dir", self.temp_dir, "-g", "5"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.temp_dir = None


def raylet_of(temp_dir, slice_name, worker_id):
    """(pid, environment) of the raylet of the simulated TPU host `slice_name`/`worker_id`
    in the cluster kept under `temp_dir` (tests and benchmarks kill it)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if not cmd or not cmd[0].endswith(b"raylet") or temp_dir.encode() not in b" ".join(cmd):
            continue
        if env.get(b"TPU_NAME") == slice_name.encode() and env.get(b"TPU_WORKER_ID") == str(worker_id).encode():
            return int(entry), {k.decode(): v.decode() for k, v in env.items()}
    raise LookupError(f"no raylet for {slice_name}/{worker_id}")
