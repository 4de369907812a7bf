"""manta.train: Ray Train's JaxTrainer and the calls a training loop makes,
on Manta's C++ trainer (one controller for C++ and Python loops).

    import manta.train
    from manta.train import ScalingConfig, RunConfig, JaxTrainer

    def loop(config):
        ctx = manta.train.get_context()
        start = manta.train.get_checkpoint()
        for step in range(config["steps"]):
            ...
            manta.train.report({"loss": loss}, checkpoint=manta.train.Checkpoint.from_directory(d))

    JaxTrainer(loop, train_loop_config={"steps": 10},
               scaling_config=ScalingConfig(num_workers=2)).fit()

Ray's import paths work too: manta.train.v2.api.config for the configs,
manta.train.v2.jax for JaxTrainer.
"""

from manta.train._checkpoint import Checkpoint
from manta.train._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from manta.train._errors import ControllerError, TrainingFailedError, WorkerGroupError
from manta.train._session import (PreemptionInfo, TrainContext, get_checkpoint, get_context, get_preemption_info,
                                  report)
from manta.train._trainer import JaxTrainer, Result

__all__ = [
    "Checkpoint", "CheckpointConfig", "ControllerError", "FailureConfig", "JaxTrainer", "Result", "PreemptionInfo",
    "RunConfig", "ScalingConfig", "TrainContext", "TrainingFailedError", "WorkerGroupError", "get_checkpoint",
    "get_context", "get_preemption_info", "report"
]
