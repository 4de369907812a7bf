"""The elastic tutorial's variant of maxtext_ray_trainer.py on Manta: the
run trains on one or two v6e-16 slices (num_workers=(4, 8)), shrinking
when a host dies or drains and growing back when a slice is whole again;
survivors keep the model's state in memory and new workers take it from
them. Only the imports differ from the tutorial's: `ray` is `manta`, and
MaxText's main is the training kernels' (manta.train.maxtext).

    manta job submit --working-dir . -- python3 examples/python/maxtext_elastic_trainer.py \\
        train/kernels/configs/base.yml base_output_directory=/tmp/data dataset_type=synthetic \\
        per_device_batch_size=1 max_target_length=256 model_name=manta-35m steps=100 \\
        ici_fsdp_parallelism=4 ici_tensor_parallelism=4 dcn_data_parallelism=-1 run_name=elastic
"""

import os
import sys
from typing import Sequence

import manta as ray
from manta.train.v2.api.config import FailureConfig, RunConfig, ScalingConfig
from manta.train.v2.jax import JaxTrainer


def train_loop_per_worker(config):
    from manta.train.maxtext import main as maxtext_main

    argv = config["argv"]
    maxtext_main(argv)


def main(argv: Sequence[str]):
    absolute_argv = [argv[0], os.path.abspath(argv[1])] + list(argv[2:])
    ray.init()
    trainer = JaxTrainer(
        train_loop_per_worker=train_loop_per_worker,
        train_loop_config={"argv": absolute_argv},
        scaling_config=ScalingConfig(
            use_tpu=True,
            num_workers=(4, 8),
            topology="4x4",
            accelerator_type="TPU-V6E",
            resources_per_worker={"TPU": 4},
            placement_strategy="SPREAD",
        ),
        run_config=RunConfig(
            name="maxtext_elastic_jaxtrainer",
            failure_config=FailureConfig(max_failures=3),
            worker_runtime_env={"env_vars": {"JAX_PLATFORMS": "tpu"}},
        ),
    )
    result = trainer.fit()
    print("Training finished: final loss %.3f, checkpoint %s" %
          (result.metrics.get("loss", 0.0), result.checkpoint.path if result.checkpoint else None))


if __name__ == "__main__":
    main(sys.argv)
