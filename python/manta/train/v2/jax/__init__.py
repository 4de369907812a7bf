"""ray.train.v2.jax: JaxTrainer."""

from manta.train._trainer import JaxTrainer

__all__ = ["JaxTrainer"]
