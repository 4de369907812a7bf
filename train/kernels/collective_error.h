// CollectiveError: a collective that cannot complete because a peer failed
// or the group was aborted. Thrown inside the kernels' device threads and
// caught where a step ends (see session.h); never crosses the library's API.
#pragma once

#include <stdexcept>

namespace manta::train {

class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace manta::train
