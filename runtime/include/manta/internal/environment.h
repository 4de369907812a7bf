// The process environment a worker's tasks run in: the core worker sets a
// task's env_vars and TPU chip variables before it runs and restores them
// after; a front end that mirrors the environment (Python's os.environ)
// copies it again only when that changed something.
#pragma once

#include <cstdint>

namespace manta::core {

// How many times the core worker changed this process's environment.
uint64_t EnvironmentChanges();
// Counts one change (the core worker's task receiver calls it).
void NoteEnvironmentChange();

}  // namespace manta::core
