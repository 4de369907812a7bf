"""init, shutdown, get, put, wait, cancel and the cluster's tables, with
Ray's names and semantics, over the core worker (manta._core)."""

import atexit
import json
import os
import sys

from manta import _core
from manta import exceptions
from manta._private import serialization
from manta._private.state import lock, state

_SUPPORTED_ENV_KEYS = ("env_vars", "working_dir")
# The bootstrap a worker runs (python3 -c _BOOT <the driver's sys.path as
# JSON>): first, before anything is imported, it runs itself again with
# tcmalloc preloaded (as TPU VM images run JAX; the core worker's threads
# allocate much faster with it) unless it is there already, absent, or
# MANTA_WORKER_TCMALLOC=0 (the pid stays the same); then it takes the
# driver's sys.path and runs manta._worker's task loop.
_TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
_BOOT = "\n".join([
    "import os,sys",
    "t=%r;p=os.environ.get('LD_PRELOAD','')" % _TCMALLOC,
    "if 'tcmalloc' not in p and os.environ.get('MANTA_WORKER_TCMALLOC')!='0' and os.path.exists(t):",
    " os.execve(sys.executable,open('/proc/self/cmdline','rb').read().split(b'\\0')[:-1],"
    "dict(os.environ,LD_PRELOAD=(p+' '+t).strip()))",
    "import json;sys.path[:0]=json.loads(sys.argv[1]);import manta._worker as w;w.main()",
])


def _worker_command():
    """The worker program's arguments: the bootstrap, then the driver's
    sys.path with the package's own directory first. An empty entry (the
    current directory) stays empty: a worker runs in the job's working
    directory, which is the same tree on every node, wherever unpacked."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = [here] + list(sys.path)
    return ["-c", _BOOT, json.dumps(path)]


def _check_runtime_env(runtime_env):
    if runtime_env is None:
        return {}
    if not isinstance(runtime_env, dict):
        raise TypeError("runtime_env must be a dict, got %r" % type(runtime_env).__name__)
    for key in runtime_env:
        if key not in _SUPPORTED_ENV_KEYS:
            raise ValueError("runtime_env key '%s' is not supported by Manta (supported: %s)" %
                             (key, ", ".join(_SUPPORTED_ENV_KEYS)))
    env_vars = runtime_env.get("env_vars", {})
    if not isinstance(env_vars, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        raise TypeError("runtime_env['env_vars'] must be a dict of str to str")
    return dict(runtime_env)


def _resolve_address(address):
    if address is None:
        address = os.environ.get("MANTA_ADDRESS") or os.environ.get("RAY_ADDRESS")
    if address is not None and address.startswith("ray://"):
        raise ValueError("ray:// client addresses are not supported by Manta: run the driver on "
                         "a cluster node, or submit it with the Jobs API (manta job submit)")
    return address


def _existing_local_cluster():
    """The address of a cluster `manta start` left on this machine, if its
    GCS answers."""
    import socket
    path = os.path.join("/tmp/manta", "session_latest", "gcs_address")
    try:
        with open(path) as f:
            address = f.read().strip()
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=0.5):
            return address
    except (OSError, ValueError):
        return None


def _check_version():
    cluster = _core.kv_get(_core.CLUSTER_KV_NAMESPACE, _core.VERSION_KEY.encode())
    cluster = cluster.decode() if cluster is not None else "unknown (older than 0.9.0)"
    if cluster != _core.VERSION:
        raise RuntimeError("Version mismatch: the manta package is %s but the cluster runs Manta %s; "
                           "use the package built with the cluster's version" % (_core.VERSION, cluster))


def init(address=None, *, num_cpus=None, num_gpus=None, resources=None, labels=None, namespace=None, runtime_env=None,
         ignore_reinit_error=False, include_dashboard=None, logging_level=None, log_to_driver=True, _temp_dir=None,
         **kwargs):
    """Joins a cluster (address "auto", "HOST:PORT", $MANTA_ADDRESS or
    $RAY_ADDRESS), else the one `manta start` runs on this machine, else
    starts a local one that stops when this process exits."""
    if kwargs:
        raise TypeError("init() got unexpected keyword argument(s): %s" % ", ".join(sorted(kwargs)))
    with lock():
        if _core.is_worker_process():
            return  # a task's worker is joined already
        if state.initialized:
            if ignore_reinit_error:
                return
            raise RuntimeError("Maybe you called manta.init twice by accident? This error can be "
                               "suppressed by passing in 'ignore_reinit_error=True' or by calling "
                               "'manta.shutdown()' prior to 'manta.init()'.")
        runtime_env = _check_runtime_env(runtime_env)
        if resources is not None and any(k in ("CPU", "GPU") for k in resources):
            raise ValueError("Use the num_cpus and num_gpus keyword arguments, not resources, "
                             "for CPUs and GPUs")
        address = _resolve_address(address)
        temp_dir = _temp_dir or ""
        local = None
        if address in (None, "local"):
            found = None if address == "local" else _existing_local_cluster()
            if found is not None:
                address = found
            else:
                from manta._private.local_cluster import LocalCluster
                local = LocalCluster(num_cpus, num_gpus, resources, labels, bool(include_dashboard))
                address, temp_dir = local.address, local.temp_dir
        elif any(v is not None for v in (num_cpus, num_gpus, resources, labels)):
            raise ValueError("When connecting to an existing cluster, num_cpus, num_gpus, "
                             "resources and labels must not be provided.")
        if address == "auto":
            address = ""
        worker_args = _worker_command()
        try:
            working_dir = runtime_env.get("working_dir") or ""
            if working_dir and "://" not in working_dir:
                if not os.path.isdir(working_dir):
                    raise ValueError("runtime_env working_dir %r is not a directory" % working_dir)
                working_dir = os.path.abspath(working_dir)
            _core.init(address, temp_dir, sys.executable, worker_args, working_dir,
                       dict(runtime_env.get("env_vars", {})))
        except ValueError:
            if local is not None:
                local.stop()
            raise
        except Exception as e:
            if local is not None:
                local.stop()
            raise ConnectionError(str(e)) from None
        try:
            _check_version()
        except Exception:
            _core.shutdown()
            if local is not None:
                local.stop()
            raise
        state.initialized = True
        state.local_cluster = local
        state.namespace = namespace or ""
        state.runtime_env = runtime_env
        state.worker_args = worker_args
        state.exported = {}


def shutdown():
    """Disconnects; a local cluster init() started is stopped."""
    with lock():
        if _core.is_worker_process():
            return
        if state.initialized:
            _core.shutdown()
            state.initialized = False
        if state.local_cluster is not None:
            state.local_cluster.stop()
            state.local_cluster = None


atexit.register(shutdown)


def is_initialized():
    return state.initialized or (_core.is_worker_process() and _core.is_initialized())


def auto_init():
    """The first put, get or .remote() without init() initializes, as Ray's does."""
    if not is_initialized():
        init()


def _as_list(refs, what):
    if isinstance(refs, _core.ObjectRef):
        return [refs], True
    if isinstance(refs, (list, tuple)):
        for r in refs:
            if not isinstance(r, _core.ObjectRef):
                raise TypeError("%s expects ObjectRefs, got %r" % (what, type(r).__name__))
        return list(refs), False
    raise TypeError("%s expects an ObjectRef or a list of ObjectRefs, got %r" % (what, type(refs).__name__))


def _timeout(timeout):
    if timeout is None:
        return -1.0
    if timeout < 0:
        raise ValueError("timeout must be None or a non-negative number, got %r" % (timeout,))
    return float(timeout)


def get(object_refs, *, timeout=None):
    """The values of the refs (a list for a list), raising the first error."""
    auto_init()
    refs, single = _as_list(object_refs, "manta.get()")
    values, rest = _core.get(refs, _timeout(timeout))
    for i, r in rest:  # errors, and values not pickled in-band, in order
        if isinstance(r, tuple):
            error_type, message, data = r
            if error_type == 100:
                raise exceptions.GetTimeoutError("Get timed out: some object(s) not ready after %ss (%s)" %
                                                 (timeout, refs[i]))
            raise exceptions.from_error(error_type, message, data)
        values[i] = serialization.deserialize_any(r)
    return values[0] if single else values


def put(value):
    """Stores `value` in this process (the owner) and returns its ref."""
    auto_init()
    if isinstance(value, _core.ObjectRef):
        raise TypeError("Calling 'put' on an ObjectRef is not allowed. If you really want to do "
                        "this, you can wrap the ObjectRef in a list and call 'put' on it.")
    if serialization.is_plain(value):
        return _core.put_plain(value)
    collection = _core.RefCollection()
    with collection:
        parts = serialization.serialize(value)
    return _core.put(parts, collection)


# manta.get and manta.put are the binding's: a value this process owns and
# holds (pickled in-band) is read, and a scalar (None, bool, int, float,
# short str or bytes) stored, in one call into C++; every other call runs
# get() and put() above.
if hasattr(_core, "front_get"):
    get = _core.front_get(get)
    put = _core.front_put(put)


def wait(object_refs, *, num_returns=1, timeout=None, fetch_local=True):
    """(ready, not_ready): the first `num_returns` refs ready, in order. A
    ref another process owns is ready once its value is here for get (so
    get needs its owner no more); with fetch_local=False, once its owner
    has the value, which is not fetched."""
    auto_init()
    if isinstance(object_refs, _core.ObjectRef):
        raise TypeError("wait() expected a list of ObjectRef, got a single ObjectRef")
    if not isinstance(object_refs, list):
        object_refs, _ = _as_list(object_refs, "manta.wait()")
    refs = object_refs
    if num_returns <= 0:
        raise ValueError("Invalid number of objects to return %d." % num_returns)
    if num_returns > len(refs):
        raise ValueError("num_returns cannot be greater than the number of objects provided to wait.")
    if not isinstance(fetch_local, bool):
        raise TypeError("fetch_local must be a bool")
    if not refs:
        return [], []
    try:
        return _core.wait_split(refs, num_returns, _timeout(timeout), fetch_local)
    except (TypeError, RuntimeError) as e:
        if any(not isinstance(r, _core.ObjectRef) for r in refs):
            raise TypeError("manta.wait() expects a list of ObjectRefs") from None
        raise e


def nodes():
    """Ray's node table: a dict per node, alive or dead."""
    auto_init()
    out = []
    for n in _core.nodes():
        out.append({
            "NodeID": n["node_id"],
            "Alive": n["alive"],
            "NodeManagerAddress": n["ip"],
            "NodeManagerHostname": n["ip"],
            "NodeName": n["ip"],
            "Resources": n["resources"],
            "Labels": n["labels"],
            "IsHead": n["is_head"],
            "Draining": n["draining"],
            "DeathReason": n["death_reason"],
        })
    return out


def _sum(key):
    auto_init()
    total = {}
    for n in _core.cluster_resources():
        for k, v in n[key].items():
            total[k] = total.get(k, 0.0) + v
    return total


def cluster_resources():
    return _sum("total")


def available_resources():
    return {k: v for k, v in _sum("available").items() if v > 0}


def cancel(object_ref, *, force=False, recursive=True):
    """Cancels the task that makes `object_ref`: a queued one is dropped, a
    running one is interrupted (KeyboardInterrupt in its thread, also out of
    a blocked get or wait) or, with force, its worker is killed; get() then
    raises TaskCancelledError. Actor tasks cannot be forced. With recursive
    (the default), the tasks it submitted that are still pending are
    cancelled too, and theirs."""
    auto_init()
    if not isinstance(object_ref, _core.ObjectRef):
        raise TypeError("manta.cancel() only supported for object refs. For actors, try manta.kill(). "
                        "Got: %r." % type(object_ref).__name__)
    _core.cancel(object_ref, bool(force), bool(recursive))
