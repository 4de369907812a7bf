"""ray.train.v2.api.config: the configs a JaxTrainer is given."""

from manta.train._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig

__all__ = ["CheckpointConfig", "FailureConfig", "RunConfig", "ScalingConfig"]
