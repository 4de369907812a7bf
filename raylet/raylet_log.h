// The logger every room of the raylet writes to ("raylet"; its sinks are set
// in main).
#pragma once

#include <memory>

#include "common/logging.h"

namespace manta::raylet {

inline std::shared_ptr<spdlog::logger> Log() { return Logger("raylet"); }

}  // namespace manta::raylet
