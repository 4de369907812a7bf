// What the trainer's integration tests start their runs from.
#pragma once

#include <string>

namespace manta::testing {

// The kernels' base config (MaxText's base.yml), in the source tree.
inline const std::string kBaseConfig = std::string(MANTA_SOURCE_DIR) + "/train/kernels/configs/base.yml";

}  // namespace manta::testing
