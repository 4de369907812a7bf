// Makes the real core worker the process default for manta::Init. Linked as
// an object file into every program that links manta_runtime, so it is never
// dropped by the linker as an unused archive member.
#include "runtime/core_worker/real_core_worker.h"

namespace manta::core {
namespace {

const bool installed = [] {
  SetDefaultCoreWorkerFactory(&RealCoreWorkerFactory::Get());
  return true;
}();

}  // namespace
}  // namespace manta::core
