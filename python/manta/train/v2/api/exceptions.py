"""ray.train.v2.api.exceptions: what fit() raises."""

from manta.train._errors import ControllerError, TrainingFailedError, WorkerGroupError

__all__ = ["ControllerError", "TrainingFailedError", "WorkerGroupError"]
