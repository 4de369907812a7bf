// Reading and unpacking the tar archives that carry job working directories.
//
// An archive is checked whole before anything is written: every entry must
// stay inside the destination (no absolute path, no ".." component, no path
// through a symlink, no symlink or hard link whose target leaves the tree),
// only regular files, directories, symlinks and hard links are accepted, and
// the unpacked size and entry count are bounded. One bad entry rejects the
// whole archive. Formats: POSIX ustar, pax ('x' records: path, linkpath,
// size) and GNU long names ('L', 'K'), as written by GNU tar, bsdtar and
// Python's tarfile; gzip-compressed when the data starts with the gzip magic.
//
//   TarLimits limits{.max_unpacked_bytes = 100 << 20};
//   RETURN_IF_ERROR(ExtractTar(archive_bytes, session + "/runtime_resources/working_dir/" + id, limits));
//
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::dashboard {

// A ustar header, and the unit every entry's data is padded to.
constexpr size_t kTarBlock = 512;

struct TarLimits {
  uint64_t max_unpacked_bytes = 100ull << 20;  // sum of file sizes, after gunzip
  size_t max_entries = 100000;
  // Every path (and link target) of the archive: at most this many
  // directories deep, each name at most max_name_bytes (NAME_MAX), the whole
  // at most max_path_bytes, so that it fits under any working directory.
  size_t max_depth = 64;
  size_t max_name_bytes = 255;
  size_t max_path_bytes = 1024;
};

struct TarEntry {
  enum class Type { kFile, kDirectory, kSymlink, kHardlink };
  Type type = Type::kFile;
  // Normalized, relative, '/'-separated; never empty, never with "." or "..".
  std::string path;
  // kSymlink: the link text (relative). kHardlink: the normalized path of an
  // earlier kFile entry.
  std::string link_target;
  uint32_t mode = 0644;   // permission bits only
  std::string_view data;  // kFile: points into the archive passed to ParseTar
};

// Parses and validates an uncompressed archive. InvalidArgument naming the
// first offending entry; ResourceExhausted past `limits`.
absl::StatusOr<std::vector<TarEntry>> ParseTar(std::string_view archive, const TarLimits& limits);

// Gunzips `data` if it starts with the gzip magic, else returns it unchanged.
// ResourceExhausted when the output would exceed `max_bytes`; InvalidArgument
// for corrupt data.
absl::StatusOr<std::string> MaybeGunzip(std::string_view data, uint64_t max_bytes);

// Gunzips if needed, validates (ParseTar), and writes every entry under
// `dest`, which must not exist yet: into a temporary directory beside it,
// renamed to `dest` at the end. On any error nothing is left behind. Files
// keep their permission bits without setuid/setgid/sticky and with group and
// others' write removed.
absl::Status ExtractTar(std::string_view archive, const std::string& dest, const TarLimits& limits);

// Removes `path` and everything under it without following symlinks. OK when
// it does not exist.
absl::Status RemoveTree(const std::string& path);

}  // namespace manta::dashboard
