// PackageStore: uploaded working-directory packages and the per-job working
// directories unpacked from them, all under <session>/runtime_resources/:
//
//   packages/<name>                  an uploaded .tar or .tar.gz, validated
//   working_dir/<submission_id>/     a job's working directory
//
// Names and ids are validated before they touch a path, so nothing is read or
// written outside runtime_resources/. Safe from any thread: files are
// replaced by rename, never rewritten in place.
//
//   PackageStore packages(session_dir + "/runtime_resources", limits);
//   RETURN_IF_ERROR(packages.Put(PackageName(body), body));
//   ASSIGN_OR_RETURN(std::string cwd, packages.PrepareWorkingDir(id, PackageName(body)));
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "dashboard/tar_reader.h"

namespace manta::dashboard {

class PackageStore {
 public:
  // `limits` bound both the unpacked size of a package and (max_unpacked_bytes)
  // its uploaded size.
  PackageStore(std::string root, TarLimits limits);

  const TarLimits& limits() const { return limits_; }

  // Creates packages/ and working_dir/ (mode 0700).
  absl::Status Init();

  // Whether a package of this (valid) name was uploaded.
  bool Exists(std::string_view name) const;

  // Validates the name, which must be PackageName(data) (tar_writer.h), and
  // the archive (gunzip + every entry, see tar_reader.h) and stores it; a
  // package already there (the same bytes) is kept as it is.
  // InvalidArgument / ResourceExhausted leave nothing behind.
  absl::Status Put(std::string_view name, std::string_view data);

  // The bytes of an uploaded package. NotFound when it was never uploaded.
  absl::StatusOr<std::string> Read(std::string_view name) const;

  // Creates working_dir/<submission_id>/: unpacked from `package` when given,
  // else empty. Replaces what an earlier attempt left. Returns its path.
  // NotFound when the package was never uploaded.
  absl::StatusOr<std::string> PrepareWorkingDir(std::string_view submission_id, std::string_view package);

  // Removes working_dir/<submission_id>/ (OK when absent).
  absl::Status RemoveWorkingDir(std::string_view submission_id);

 private:
  std::string PackagePath(std::string_view name) const;
  std::string WorkingDirPath(std::string_view submission_id) const;

  const std::string root_;
  const TarLimits limits_;
};

}  // namespace manta::dashboard
