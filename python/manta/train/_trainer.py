"""JaxTrainer: Ray Train v2's trainer, on Manta's C++ controller.

    from manta.train.v2.api.config import ScalingConfig, RunConfig
    from manta.train.v2.jax import JaxTrainer

    trainer = JaxTrainer(train_loop_per_worker=loop, train_loop_config={"lr": 1e-3},
                         scaling_config=ScalingConfig(use_tpu=True, num_workers=4, topology="4x4",
                                                      accelerator_type="TPU-V6E"),
                         run_config=RunConfig(name="run", storage_path="/mnt/shared"))
    result = trainer.fit()   # a Result, or raises TrainingFailedError

The loop is exported like a remote function and its config pickled; fit()
hands both to the C++ trainer (manta/train.h), whose controller actor
reserves the slices and starts the worker actors in Python workers, which
run the loop. Bad input (a loop that is not callable, a config that cannot
be pickled, a scaling that is not whole slices, a storage_path that is not
a directory) raises from fit() before anything is reserved.
"""

import math
import os
import threading

import cloudpickle

from manta import _core
from manta._private import api, serialization
from manta._private.remote_function import export
from manta.train import _session
from manta.train._checkpoint import Checkpoint
from manta.train._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from manta.train._errors import ControllerError, WorkerGroupError

# absl::StatusCode values the C++ trainer's Result carries.
_INVALID_ARGUMENT = 3
_RESOURCE_EXHAUSTED = 8


class Result:
    """How a run ended: rank 0's latest metrics, the latest committed
    checkpoint, the run's directory."""

    def __init__(self, d):
        self.metrics = d["metrics"]
        self.checkpoint = Checkpoint(d["checkpoint"]) if d["checkpoint"] else None
        self.path = d["path"]
        self.error = None
        self.run_id = d["run_id"]
        self.num_failures = d["num_failures"]
        self.num_attempts = d["num_attempts"]

    def __repr__(self):
        return "Result(metrics=%r, checkpoint=%r, path=%r)" % (self.metrics, self.checkpoint, self.path)


def _storage_path(path):
    """The local directory `path` names; ValueError for a remote URI."""
    if path is None:
        return ""
    path = os.fspath(path)
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif "://" in path:
        raise ValueError("RunConfig(storage_path=%r): Manta's trainer keeps checkpoints in a local or mounted "
                         "directory that every worker sees; mount the bucket (e.g. with gcsfuse) and give its path"
                         % path)
    return os.path.abspath(os.path.expanduser(path))


def _worker_env(runtime_env):
    if not runtime_env:
        return {}
    runtime_env = dict(runtime_env)
    env = runtime_env.pop("env_vars", None) or {}
    if runtime_env:
        raise ValueError("RunConfig(worker_runtime_env=...): only env_vars is supported, got %s"
                         % ", ".join(sorted(runtime_env)))
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise TypeError("worker_runtime_env['env_vars'] must map str to str")
    return env


def _scaling_dict(s):
    if not isinstance(s, ScalingConfig):
        raise TypeError("scaling_config must be a ScalingConfig, got %s" % type(s).__name__)
    n = s.num_workers
    if isinstance(n, (tuple, list)):
        if len(n) != 2 or not all(isinstance(x, int) for x in n):
            raise ValueError("ScalingConfig(num_workers=%r): an int or (min, max)" % (n,))
    elif not isinstance(n, int):
        raise ValueError("ScalingConfig(num_workers=%r): an int or (min, max)" % (n,))
    if s.use_gpu:
        raise ValueError("ScalingConfig(use_gpu=True): Manta's JaxTrainer runs on TPUs or CPUs")
    selector = dict(s.label_selector or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
        raise TypeError("ScalingConfig(label_selector=...) must map str to str")
    resources = {}
    for k, v in (s.resources_per_worker or {}).items():
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError("ScalingConfig(resources_per_worker=...): %r must be a finite quantity >= 0, got %r" %
                             (k, v))
        resources[str(k)] = float(v)
    return {
        "use_tpu": bool(s.use_tpu),
        "min_workers": s.min_workers,
        "max_workers": s.max_workers,
        "topology": s.topology or "",
        "accelerator_type": s.accelerator_type or "",
        "resources_per_worker": resources,
        "placement_strategy": s.placement_strategy or "PACK",
        "label_selector": selector,
    }


def _run_dict(r):
    if not isinstance(r, RunConfig):
        raise TypeError("run_config must be a RunConfig, got %s" % type(r).__name__)
    failure = r.failure_config or FailureConfig()
    checkpoint = r.checkpoint_config or CheckpointConfig()
    if r.storage_filesystem is not None:
        raise ValueError("RunConfig(storage_filesystem=...): Manta's trainer uses local or mounted directories")
    return {
        "name": r.name or "",
        "storage_path": _storage_path(r.storage_path),
        "max_failures": int(failure.max_failures),
        "num_to_keep": int(checkpoint.num_to_keep or 0),
        "worker_env": _worker_env(r.worker_runtime_env),
    }


class JaxTrainer:
    """Runs train_loop_per_worker(train_loop_config) on every worker; see the
    module's docstring."""

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, jax_config=None, scaling_config=None,
                 run_config=None, datasets=None, dataset_config=None, resume_from_checkpoint=None, metadata=None):
        if datasets:
            raise NotImplementedError("JaxTrainer(datasets=...) is not supported by Manta's trainer")
        if resume_from_checkpoint is not None:
            raise NotImplementedError("JaxTrainer(resume_from_checkpoint=...): give the run the same "
                                      "RunConfig name and storage_path to resume it")
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = train_loop_config
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        self.jax_config = jax_config

    def _request(self):
        """(loop name, loop args, scaling, run): everything checked here and
        by the C++ trainer before anything is reserved."""
        loop = self.train_loop_per_worker
        if not callable(loop):
            raise TypeError("train_loop_per_worker must be callable, got %s" % type(loop).__name__)
        with_config = _session.takes_config(loop)
        scaling = _scaling_dict(self.scaling_config)
        run = _run_dict(self.run_config)
        try:
            args = serialization.serialize_bytes(([self.train_loop_config if with_config else None], {}))
        except Exception as e:
            raise TypeError("train_loop_config cannot be pickled: %s" % e) from e
        try:
            name = export(_session.Loop(loop, with_config, scaling["min_workers"] != scaling["max_workers"]), "f")
        except Exception as e:
            raise TypeError("train_loop_per_worker cannot be pickled: %s" % e) from e
        return name, args, scaling, run

    def fit(self):
        """Trains to the end: a Result, or raises TrainingFailedError
        (WorkerGroupError with each failed worker's exception when loops
        failed, ControllerError otherwise); ValueError for a bad config."""
        request = self._request()
        api.auto_init()
        outcome = _fit_interruptibly(*request)
        return _result_or_raise(outcome)


def _fit_interruptibly(name, args, scaling, run):
    """Runs the C++ Fit on a thread, so Ctrl-C reaches the driver: then the
    driver exits, and with it the controller it owns and the run's workers
    and slices."""
    box = {}

    def fit():
        try:
            box["result"] = _core.train_fit(name, args, scaling, run)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=fit, name="manta-train-fit", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.5)
    if "error" in box:
        raise box["error"]
    return box["result"]


def _failure_exception(f):
    data = f.get("data") or b""
    if data:
        try:
            error = cloudpickle.loads(data)
            as_cause = getattr(error, "as_instanceof_cause", None)
            return as_cause() if as_cause else error
        except Exception:  # noqa: BLE001 - fall back to the text
            pass
    return RuntimeError("[%s] %s" % (f["where"], f["message"]))


def _result_or_raise(d):
    if d["code"] == 0:
        return Result(d)
    if d["code"] in (_INVALID_ARGUMENT, _RESOURCE_EXHAUSTED):
        raise ValueError(d["message"])
    failures = {f["rank"]: _failure_exception(f) for f in d["worker_failures"]}
    if failures:
        raise WorkerGroupError(d["message"], failures, Result(d))
    raise ControllerError(d["message"], Result(d))
