#include "dashboard/package_store.h"

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/utf8.h"
#include "dashboard/tar_writer.h"
#include "dashboard/validation.h"

namespace manta::dashboard {

PackageStore::PackageStore(std::string root, TarLimits limits) : root_(std::move(root)), limits_(limits) {}

absl::Status PackageStore::Init() {
  RETURN_IF_ERROR(MakeDirs(root_ + "/packages", 0700));
  return MakeDirs(root_ + "/working_dir", 0700);
}

std::string PackageStore::PackagePath(std::string_view name) const { return root_ + "/packages/" + std::string(name); }

std::string PackageStore::WorkingDirPath(std::string_view submission_id) const {
  return root_ + "/working_dir/" + std::string(submission_id);
}

bool PackageStore::Exists(std::string_view name) const {
  return ValidatePackageName(name).ok() && PathExists(PackagePath(name));
}

absl::Status PackageStore::Put(std::string_view name, std::string_view data) {
  RETURN_IF_ERROR(ValidatePackageName(name));
  // Stored by content: a name is the SHA-256 of its bytes, so what a later
  // submit finds under a name is what was packed under it.
  const std::string expected = PackageName(data);
  if (name != expected) {
    return absl::InvalidArgumentError(absl::StrCat("package '", PrintableAscii(name, 80),
                                                   "' is not named by its contents: a package's name is ", expected));
  }
  if (PathExists(PackagePath(name))) return absl::OkStatus();  // the same bytes: kept as they are
  if (data.size() > limits_.max_unpacked_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the package is ", data.size(), " bytes; the limit is ", limits_.max_unpacked_bytes));
  }
  ASSIGN_OR_RETURN(std::string tar, MaybeGunzip(data, limits_.max_unpacked_bytes));
  RETURN_IF_ERROR(ParseTar(tar, limits_).status());
  return WriteFileAtomic(PackagePath(name), std::string(data), 0600);
}

absl::StatusOr<std::string> PackageStore::Read(std::string_view name) const {
  RETURN_IF_ERROR(ValidatePackageName(name));
  auto data = ReadFile(PackagePath(name));
  if (!data.ok()) {
    std::string n(name);
    return absl::NotFoundError(
        absl::StrCat("working_dir package gcs://", n, " was not uploaded (PUT /api/packages/gcs/", n, ")"));
  }
  return data;
}

absl::StatusOr<std::string> PackageStore::PrepareWorkingDir(std::string_view submission_id, std::string_view package) {
  RETURN_IF_ERROR(ValidateSubmissionId(submission_id));
  std::string dir = WorkingDirPath(submission_id);
  RETURN_IF_ERROR(RemoveTree(dir));
  if (package.empty()) {
    RETURN_IF_ERROR(MakeDirs(dir, 0755));
    return dir;
  }
  RETURN_IF_ERROR(ValidatePackageName(package));
  auto data = ReadFile(PackagePath(package));
  if (!data.ok()) {
    std::string name(package);
    return absl::NotFoundError(
        absl::StrCat("working_dir package gcs://", name, " was not uploaded (PUT /api/packages/gcs/", name, ")"));
  }
  RETURN_IF_ERROR(ExtractTar(*data, dir, limits_));
  return dir;
}

absl::Status PackageStore::RemoveWorkingDir(std::string_view submission_id) {
  RETURN_IF_ERROR(ValidateSubmissionId(submission_id));
  return RemoveTree(WorkingDirPath(submission_id));
}

}  // namespace manta::dashboard
