"""Ray Train v2's import paths (ray.train.v2.*), as Ray's docs use them."""
