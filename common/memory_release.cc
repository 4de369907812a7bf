#include "common/memory_release.h"

#include <dlfcn.h>
#include <malloc.h>

namespace manta {

void ReleaseFreeMemory() {
  using Release = void (*)();
  static const Release tcmalloc_release =
      reinterpret_cast<Release>(dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  if (tcmalloc_release != nullptr) {
    tcmalloc_release();
  } else {
    malloc_trim(0);
  }
}

}  // namespace manta
