"""The process's connection to the cluster: whether and how it is joined,
and the local cluster manta.init() started (stopped at exit)."""

import threading

_lock = threading.RLock()


class _State:

    def __init__(self):
        self.initialized = False
        self.namespace = ""
        self.local_cluster = None  # LocalCluster when init() started one
        self.runtime_env = {}
        self.worker_args = []
        self.exported = {}  # content hash -> True: exported by this process


state = _State()


def lock():
    return _lock
