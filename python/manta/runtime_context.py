"""get_runtime_context(): who and where the calling code runs, as Ray's
RuntimeContext says it."""

import os

from manta import _core
from manta._private import api
from manta._private.state import state


class RuntimeContext:

    def get_job_id(self):
        return _core.job_id()

    def get_node_id(self):
        return _core.node_id()

    def get_worker_id(self):
        return _core.worker_id()

    def _task(self):
        return _core.task_context() or {}

    def get_task_id(self):
        """The running task's id (hex), or None in a driver."""
        return self._task().get("task_id") or None

    def get_actor_id(self):
        """The actor's id (hex) in an actor's methods, else None."""
        return self._task().get("actor_id") or None

    def get_assigned_resources(self):
        """What the running task or actor holds, e.g. {"CPU": 1.0}."""
        return dict(self._task().get("resources", {}))

    def get_accelerator_ids(self):
        """The accelerators visible to this process, by kind: TPU chips
        (TPU_VISIBLE_CHIPS) and GPUs (CUDA_VISIBLE_DEVICES)."""

        def ids(name):
            value = os.environ.get(name, "")
            return [v for v in value.split(",") if v] if value else []

        return {"TPU": ids("TPU_VISIBLE_CHIPS"), "GPU": ids("CUDA_VISIBLE_DEVICES")}

    def get_node_ip_address(self):
        return _core.node_ip()

    @property
    def namespace(self):
        return state.namespace

    @property
    def was_current_actor_reconstructed(self):
        return False if self.get_actor_id() is None else self._task().get("attempt", 0) > 0

    def get(self):
        return {
            "job_id": self.get_job_id(), "node_id": self.get_node_id(), "task_id": self.get_task_id(),
            "actor_id": self.get_actor_id(), "namespace": self.namespace
        }


def get_runtime_context():
    api.auto_init()
    return RuntimeContext()
