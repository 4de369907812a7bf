// maxtext_elastic_trainer: the C++ counterpart of the GKE TPU tutorial's
// maxtext_elastic_trainer.py (examples/python/maxtext_elastic_trainer.py is
// that script on Manta). The same MaxText loop as maxtext_trainer, with
// num_workers {one slice, every slice found} (e.g. {4, 8} on two v6e-16
// slices) and max_failures 3: the run starts on every whole slice, shrinks
// when a host dies or drains, and grows back when the slice is whole again,
// in whole slices, keeping the state in memory where the slices replicate it
// (dcn_data_parallelism, the default).
//
//   manta job submit --working-dir . -- build/bin/maxtext_elastic_trainer train/kernels/configs/base.yml
//       base_output_directory=/tmp/data model_name=tiny steps=200 ici_fsdp_parallelism=4
//       ici_tensor_parallelism=4 enable_checkpointing=true checkpoint_period=20 run_name=elastic
//
// Takes maxtext_trainer's flags; --num_workers=MIN,MAX overrides the range.
#include "examples/maxtext_main.h"

int main(int argc, char** argv) { return maxtext_example::Main(argc, argv, /*elastic=*/true); }
