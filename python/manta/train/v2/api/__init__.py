"""ray.train.v2.api: the configs and errors."""
