"""In-process runs for the package's unit tests: the fake core worker runs
each task on the submitting thread through the executor a worker uses, so
pickling, options, errors and refs are exercised without daemons."""

from manta import _core
from manta._private.state import lock, state


def init_fake():
    from manta import _worker
    with lock():
        if state.initialized:
            raise RuntimeError("manta is already initialized")
        if not getattr(_core, "_executor_set", False):
            _worker.install()
            _core._executor_set = True
        _core._init_fake()
        state.initialized = True
        state.exported = {}
