"""Ray Train v2's configs (ray.train.v2.api.config): what a JaxTrainer is
given. They hold values only; JaxTrainer.fit checks them (in C++, as the
C++ trainer does) before anything is reserved."""

import dataclasses
from typing import Any, Dict, Optional, Tuple, Union


@dataclasses.dataclass
class ScalingConfig:
    """How many workers and what each holds.

    num_workers: an int, or (min, max) for an elastic run; with use_tpu both
    are whole slices of `topology` (one worker per host).
    label_selector: node labels every worker's node matches; with use_tpu,
    only slices whose every host matches are reserved.
    """
    num_workers: Union[int, Tuple[int, int]] = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Dict[str, float]] = None
    placement_strategy: str = "PACK"
    accelerator_type: Optional[str] = None
    use_tpu: bool = False
    topology: Optional[str] = None
    label_selector: Optional[Dict[str, str]] = None

    @property
    def min_workers(self):
        return self.num_workers[0] if isinstance(self.num_workers, (tuple, list)) else self.num_workers

    @property
    def max_workers(self):
        return self.num_workers[1] if isinstance(self.num_workers, (tuple, list)) else self.num_workers

    @property
    def elastic(self):
        return self.min_workers != self.max_workers


@dataclasses.dataclass
class FailureConfig:
    """max_failures: attempts that may fail before the run errors; -1: unlimited."""
    max_failures: int = 0
    controller_failure_limit: int = -1


@dataclasses.dataclass
class CheckpointConfig:
    """num_to_keep: committed checkpoints kept, newest first (None: all)."""
    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"


@dataclasses.dataclass
class RunConfig:
    """name: the run's directory under storage_path (default: a dated name);
    storage_path: a local or mounted directory (default ~/manta_results);
    worker_runtime_env: {"env_vars": {...}} for every worker."""
    name: Optional[str] = None
    storage_path: Optional[str] = None
    storage_filesystem: Any = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    callbacks: Optional[list] = None
    worker_runtime_env: Optional[Dict[str, Any]] = None
