#include "common/package_name.h"

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/utf8.h"

namespace manta {

std::string PackageNameOf(std::string_view archive) {
  const bool gzipped = archive.size() >= 2 && static_cast<unsigned char>(archive[0]) == 0x1f &&
                       static_cast<unsigned char>(archive[1]) == 0x8b;
  return absl::StrCat("_manta_pkg_", Sha256Hex(archive), gzipped ? ".tar.gz" : ".tar");
}

absl::Status ValidatePackageRef(std::string_view name) {
  constexpr std::string_view kPrefix = "_manta_pkg_";
  constexpr size_t kHexDigits = 64;
  bool ok = name.substr(0, kPrefix.size()) == kPrefix && name.size() > kPrefix.size() + kHexDigits;
  if (ok) {
    std::string_view hex = name.substr(kPrefix.size(), kHexDigits);
    std::string_view suffix = name.substr(kPrefix.size() + kHexDigits);
    for (char c : hex) ok &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    ok &= suffix == ".tar" || suffix == ".tar.gz";
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("'", PrintableAscii(name, 100), "' is not a package name (_manta_pkg_<sha256 hex>.tar[.gz])"));
}

absl::Status CheckPackageContent(std::string_view name, std::string_view data) {
  if (auto s = ValidatePackageRef(name); !s.ok()) return s;
  std::string actual = PackageNameOf(data);
  if (name == actual) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("package '", PrintableAscii(name, 100),
                                                 "' does not match its content: a package of these bytes is named ",
                                                 actual));
}

absl::Status CheckFunctionContent(std::string_view name, std::string_view data) {
  std::string actual = Sha256Hex(data);
  if (name == actual) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("function '", PrintableAscii(name, 100),
                                                 "' does not match its content: these bytes are named ", actual));
}

}  // namespace manta
