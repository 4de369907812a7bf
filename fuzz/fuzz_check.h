// FUZZ_CHECK(cond): an invariant of a parser's accepted output; a violation
// is a crash the fuzzer reports, with the condition. FuzzTempDir(name): a
// directory of this process's own, removed when the fuzzer exits.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

// <tmp>/<name>_<pid>, created on the first call and removed at exit (the
// fuzzer ends its runs with exit()), so runs leave nothing behind.
inline const std::string& FuzzTempDir(const char* name) {
  static const std::string dir = [name] {
    std::string d = std::filesystem::temp_directory_path().string() + "/" + name + "_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  // Registered once `dir` is whole, so it runs before `dir` is destroyed.
  [[maybe_unused]] static const int removed_at_exit = std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(FuzzTempDir(nullptr), ignored);
  });
  return dir;
}
