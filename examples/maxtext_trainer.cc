// maxtext_trainer: the C++ counterpart of the GKE TPU tutorial's
// maxtext_ray_trainer.py (examples/python/maxtext_ray_trainer.py is that
// script on Manta). A JaxTrainer runs MaxText's train loop (the training
// kernels) on one worker per TPU host of whole slices; every worker prints
// MaxText's step line and the driver collapses the repeats.
//
//   manta job submit --working-dir . -- build/bin/maxtext_trainer train/kernels/configs/base.yml
//       base_output_directory=/tmp/data dataset_type=synthetic per_device_batch_size=1
//       max_target_length=256 model_name=manta-35m steps=100 ici_fsdp_parallelism=4
//       ici_tensor_parallelism=4 run_name=tp4-4x4
//
// The single- and multi-slice scripts are one program: with two v6e-16 slices
// in the cluster it trains on both (8 workers, MEGASCALE_* set); add
// dcn_fsdp_parallelism=2 or dcn_data_parallelism=2 to say how. Flags, before
// the MaxText arguments:
//   --num_workers=N          default: every host of every whole slice found
//   --topology=4x4 --accelerator_type=TPU-V6E
//   --max_failures=N         FailureConfig(max_failures), default 3 (-1: unlimited)
//   --num_to_keep=N          committed checkpoints kept, default all
//   --storage_path=DIR       default: base_output_directory
//   --scheduling_timeout_s=S how long to wait for the slices, default 600
#include "examples/maxtext_main.h"

int main(int argc, char** argv) { return maxtext_example::Main(argc, argv, /*elastic=*/false); }
