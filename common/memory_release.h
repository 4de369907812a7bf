// ReleaseFreeMemory: gives the process's free heap back to the system, so a
// burst of large requests does not stay resident. Uses tcmalloc's
// MallocExtension_ReleaseFreeMemory when the program links tcmalloc (every
// Manta program does by default), else glibc's malloc_trim.
#pragma once

namespace manta {

void ReleaseFreeMemory();

}  // namespace manta
