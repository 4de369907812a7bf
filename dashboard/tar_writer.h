// Packing a job's working directory into a gzip-compressed tar archive, as
// `manta job submit --working-dir DIR` uploads it. The archive is
// deterministic (sorted entries, zero times and owners), so the same tree
// always gives the same package name. Like Ray, it leaves out `.git/` and
// what the tree's `.gitignore` and `.mantaignore` files exclude (see
// ignore_rules.h), except the files named in `always_include`.
//
//   PackOptions options;
//   options.always_include = {"build/bin/trainer"};
//   ASSIGN_OR_RETURN(PackedDirectory packed, PackDirectoryWithReport("./my_project", 100 << 20, options));
//   std::string name = PackageName(packed.archive);     // "_manta_pkg_<64 hex>.tar.gz"
//
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::dashboard {

struct PackOptions {
  // Leave out what `.gitignore` and `.mantaignore` files in the tree exclude.
  // Each applies to its own directory and below; files above `dir` are not
  // read. An ignored directory is not entered.
  bool honour_ignore_files = true;
  // Paths of files relative to `dir` ('/'-separated; "./" and "//" are
  // tolerated) that are packed even when ignored, with the directories
  // leading to them. A path that does not exist packs nothing.
  std::vector<std::string> always_include;
};

struct PackedDirectory {
  std::string archive;  // gzip-compressed tar
  struct Forced {
    std::string path;        // an always_include path, normalized
    std::string ignored_by;  // the ignore file that excluded it or a directory above it, or ".git"
  };
  // The always_include files that were packed although ignored, in archive order.
  std::vector<Forced> forced;
};

// Packs regular files, directories and symlinks under `dir` (other file types
// are skipped), always leaving out `.git/` directories, and what ignore
// files exclude as `options` says. Symlinks are stored as links, so one that
// points outside `dir` makes the archive invalid; PackDirectory checks the
// result with ParseTar and returns that error. ResourceExhausted when the
// packed files add up to more than `max_bytes`; NotFound / InvalidArgument
// when `dir` is missing or not a directory, InvalidArgument for an
// always_include path that is absolute or has a ".." component.
absl::StatusOr<PackedDirectory> PackDirectoryWithReport(const std::string& dir, uint64_t max_bytes,
                                                        const PackOptions& options = {});

// PackDirectoryWithReport's archive.
absl::StatusOr<std::string> PackDirectory(const std::string& dir, uint64_t max_bytes, const PackOptions& options = {});

// gzip of `data`.
absl::StatusOr<std::string> Gzip(std::string_view data);

// The name a package is stored under: "_manta_pkg_" + the SHA-256 of
// `archive` in hex + ".tar.gz" (".tar" when it is not gzipped).
std::string PackageName(std::string_view archive);

// Appends one tar entry; `type` is '0', '5' or '2'. Exposed for tests that
// build hostile archives.
void AppendTarEntry(std::string* out, std::string_view path, char type, std::string_view data,
                    std::string_view link_target = "", uint32_t mode = 0644);
// Appends the two zero blocks that end an archive.
void FinishTar(std::string* out);

}  // namespace manta::dashboard
