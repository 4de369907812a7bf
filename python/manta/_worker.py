"""The task loop of a Python worker: a raylet starts the driver's
interpreter with manta's bootstrap (see manta._private.api), which calls
main(). Functions and classes are fetched from the GCS KV by content hash
once per worker, and checked against it before they are unpickled."""

import hashlib
import os
import sys
import traceback

import cloudpickle

from manta import _core
from manta import exceptions
from manta._private import serialization
from manta._private.remote_function import FUNCTION_NS, unpack_args

_loaded = {}  # content hash -> function or class
_named = [None]  # the task name this worker last announced


def _load(name):
    digest = name.split(":", 2)[2]
    obj = _loaded.get(digest)
    if obj is None:
        blob = _core.kv_get(FUNCTION_NS, digest.encode())
        if blob is None:
            raise RuntimeError("the function or class %s was not exported to the cluster" % digest)
        if hashlib.sha256(blob).hexdigest() != digest:
            raise RuntimeError("refusing %s: its content does not match its name" % digest)
        obj = _loaded[digest] = cloudpickle.loads(blob)
    return obj


def _sync_environ():
    """Copies the process's C environment, where the core worker sets a
    task's variables, into os.environ. The worker's invoker calls it before
    a call whenever the core worker changed the environment."""
    env = _core.environ()
    for k in set(os.environ) - set(env):
        os.environ.pop(k, None)
    for k, v in env.items():
        if os.environ.get(k) != v:
            os.environ[k] = v


def _announce(task_name):
    """Names the lines this task prints (the driver's "(f pid=..., ip=...)")."""
    if _named[0] != task_name:
        _named[0] = task_name
        marker = _core.TASK_NAME_MARKER + task_name.split(".")[-1]
        print(marker, flush=True)
        print(marker, file=sys.stderr, flush=True)


def _returns(result, num_returns):
    if num_returns == 1:
        return [serialization.serialize(result)]
    try:
        values = list(result)
    except TypeError:
        values = None
    if values is None or len(values) != num_returns:
        got = "a non-sequence" if values is None else "%d values" % len(values)
        raise ValueError("Task returned %s, but num_returns=%d." % (got, num_returns))
    return [serialization.serialize(v) for v in values]


def execute(kind, name, instance, views):
    """Runs one task: (True, values) or (False, message, pickled error).
    os.environ holds the task's environment already (_sync_environ)."""
    what = name
    try:
        args, kwargs = unpack_args(views)
        if kind == "actor":
            cls = _load(name)
            what = cls.__qualname__ + ".__init__"
            return (True, cls(*args, **kwargs))
        if kind == "task":
            fn = _load(name)
            what = getattr(fn, "__qualname__", name)
            _announce(what)
        else:
            method = name.split(":", 2)[2]
            what = type(instance).__qualname__ + "." + method
            fn = getattr(instance, method)
        result = fn(*args, **kwargs)
        return (True, _returns(result, _core.num_returns()))
    except BaseException as e:  # the caller gets what the task raised, whatever it was
        return _failure(e, what)


def _retryable(e):
    """Whether the task's retry_exceptions list names e's class (with
    retry_exceptions=True and no list, the core worker retries any error)."""
    context = _core.task_context() or {}
    blob = context.get("retry_exception_filter", b"")
    if not context.get("retry_exceptions") or not blob:
        return False
    try:
        return isinstance(e, tuple(cloudpickle.loads(blob)))
    except Exception:
        return False


def _failure(e, what):
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        error = exceptions.make_task_error(e, what, text, os.getpid(), os.environ.get("MANTA_NODE_IP", ""))
        data = cloudpickle.dumps(error)
    except Exception:
        data = b""
    return (False, "%s: %s" % (type(e).__name__, e), data, _retryable(e))


def install():
    """Makes execute this process's executor. The core worker runs a call
    whose arguments are pickled in-band and whose function is loaded and
    announced without execute's frames, with these same helpers."""
    from manta._private.remote_function import _NO_ARGS
    _core.set_executor(
        execute, {
            "sync_environ": _sync_environ,
            "failure": _failure,
            "returns": _returns,
            "loaded": _loaded,
            "named": _named,
            "no_args": b"".join(_NO_ARGS),
        })


def main():
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    from manta._private.state import state
    state.initialized = True
    install()
    from manta._private.api import _BOOT
    # This worker's own tasks' workers run as it does.
    _core.run_worker(sys.executable, ["-c", _BOOT, *sys.argv[1:]])
