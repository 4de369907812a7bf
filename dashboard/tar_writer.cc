#include "dashboard/tar_writer.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/package_name.h"
#include "common/status.h"
#include "dashboard/ignore_rules.h"
#include "dashboard/tar_reader.h"

namespace manta::dashboard {
namespace {

void PutOctal(char* field, size_t width, uint64_t value) {
  std::string s = absl::StrFormat("%0*o", static_cast<int>(width - 1), value);
  std::memcpy(field, s.data(), std::min(s.size(), width - 1));
  field[width - 1] = '\0';
}

void AppendHeader(std::string* out, std::string_view name, char type, uint64_t size, std::string_view link,
                  uint32_t mode) {
  char h[kTarBlock];
  std::memset(h, 0, sizeof(h));
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  PutOctal(h + 100, 8, mode);
  PutOctal(h + 108, 8, 0);
  PutOctal(h + 116, 8, 0);
  PutOctal(h + 124, 12, size);
  PutOctal(h + 136, 12, 0);
  h[156] = type;
  std::memcpy(h + 157, link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  uint64_t sum = 0;
  for (unsigned char c : h) sum += c;
  PutOctal(h + 148, 7, sum);
  h[155] = ' ';
  out->append(h, sizeof(h));
}

void AppendData(std::string* out, std::string_view data) {
  out->append(data.data(), data.size());
  out->append((kTarBlock - data.size() % kTarBlock) % kTarBlock, '\0');
}

// Normalizes an always_include path: drops "." and empty components.
absl::StatusOr<std::string> NormalizeRelative(const std::string& path) {
  if (!path.empty() && path[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat("always_include path ", path, " is absolute"));
  }
  std::string out;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..")
      return absl::InvalidArgumentError(absl::StrCat("always_include path ", path, " leaves the directory"));
    absl::StrAppend(&out, out.empty() ? "" : "/", part);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("always_include path '", path, "' names no file"));
  return out;
}

absl::StatusOr<std::vector<std::string>> SortedNames(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("cannot read directory ", dir, ": ", std::strerror(errno)));
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

class Walker {
 public:
  Walker(std::string root, uint64_t max_bytes, bool honour_ignore_files)
      : root_(std::move(root)), max_bytes_(max_bytes), honour_ignore_files_(honour_ignore_files) {}

  absl::Status AlwaysInclude(const std::string& path) {
    ASSIGN_OR_RETURN(std::string normalized, NormalizeRelative(path));
    for (size_t slash = normalized.find('/'); slash != std::string::npos; slash = normalized.find('/', slash + 1)) {
      include_dirs_.insert(normalized.substr(0, slash));
    }
    include_files_.insert(std::move(normalized));
    return absl::OkStatus();
  }

  // Packs the entries of directory `rel` ("" for the root). `ignored_by` is
  // empty, or names what excluded `rel`: then only always_include paths
  // below it are packed.
  absl::Status Walk(const std::string& rel, const std::string& ignored_by) {
    std::string dir = rel.empty() ? root_ : root_ + "/" + rel;
    ASSIGN_OR_RETURN(std::vector<std::string> names, SortedNames(dir));
    if (honour_ignore_files_ && ignored_by.empty()) RETURN_IF_ERROR(LoadIgnoreFiles(rel, names));
    for (const std::string& name : names) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      std::string full = root_ + "/" + child;
      struct stat st;
      if (lstat(full.c_str(), &st) != 0) continue;  // vanished meanwhile
      bool is_dir = S_ISDIR(st.st_mode);
      std::string why = ignored_by;
      if (why.empty() && name == ".git") why = ".git";
      if (why.empty() && honour_ignore_files_) {
        IgnoreRules::Verdict verdict = rules_.Check(child, is_dir);
        if (verdict.ignored) why = verdict.source;
      }
      if (!why.empty()) {
        if (!(is_dir ? include_dirs_ : include_files_).contains(child)) continue;
        if (!is_dir) forced_.push_back({child, why});
      }
      RETURN_IF_ERROR(Append(child, full, st, why));
    }
    return absl::OkStatus();
  }

  PackedDirectory Finish() && {
    FinishTar(&out_);
    return PackedDirectory{std::move(out_), std::move(forced_)};
  }

 private:
  absl::Status LoadIgnoreFiles(const std::string& rel, const std::vector<std::string>& names) {
    for (const char* file : {".gitignore", ".mantaignore"}) {  // the later one wins
      if (!std::binary_search(names.begin(), names.end(), file)) continue;
      std::string child = rel.empty() ? file : rel + "/" + file;
      std::string full = root_ + "/" + child;
      struct stat st;
      if (stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      ASSIGN_OR_RETURN(std::string text, ReadFile(full));
      rules_.AddFile(child, text);
    }
    return absl::OkStatus();
  }

  absl::Status Append(const std::string& child, const std::string& full, const struct stat& st,
                      const std::string& ignored_by) {
    if (S_ISDIR(st.st_mode)) {
      AppendTarEntry(&out_, child + "/", '5', "", "", 0755);
      return Walk(child, ignored_by);
    }
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      ssize_t n = readlink(full.c_str(), buf, sizeof(buf));
      if (n < 0) return absl::InvalidArgumentError(absl::StrCat("cannot read symlink ", full));
      AppendTarEntry(&out_, child, '2', "", std::string_view(buf, static_cast<size_t>(n)), 0777);
    } else if (S_ISREG(st.st_mode)) {
      total_ += static_cast<uint64_t>(st.st_size);
      if (total_ > max_bytes_) {
        return absl::ResourceExhaustedError(absl::StrCat("working directory ", root_, " holds more than ", max_bytes_,
                                                         " bytes of files that are not ignored",
                                                         " (list the rest in a .mantaignore file)"));
      }
      ASSIGN_OR_RETURN(std::string data, ReadFile(full));
      AppendTarEntry(&out_, child, '0', data, "", st.st_mode & 0777);
    }
    return absl::OkStatus();
  }

  // Constant after construction.
  const std::string root_;
  const uint64_t max_bytes_;
  const bool honour_ignore_files_;
  absl::flat_hash_set<std::string> include_files_;  // normalized always_include paths
  absl::flat_hash_set<std::string> include_dirs_;   // every directory above one of them

  // Built up by Walk; rules_ gains each directory's ignore files before its entries are checked.
  IgnoreRules rules_;
  uint64_t total_ = 0;  // bytes of the regular files packed so far
  std::string out_;
  std::vector<PackedDirectory::Forced> forced_;
};

}  // namespace

void AppendTarEntry(std::string* out, std::string_view path, char type, std::string_view data,
                    std::string_view link_target, uint32_t mode) {
  if (path.size() > 100) {
    std::string long_name(path);
    long_name.push_back('\0');
    AppendHeader(out, "././@LongLink", 'L', long_name.size(), "", 0644);
    AppendData(out, long_name);
  }
  if (link_target.size() > 100) {
    std::string long_link(link_target);
    long_link.push_back('\0');
    AppendHeader(out, "././@LongLink", 'K', long_link.size(), "", 0644);
    AppendData(out, long_link);
  }
  AppendHeader(out, path, type, data.size(), link_target, mode);
  AppendData(out, data);
}

void FinishTar(std::string* out) { out->append(2 * kTarBlock, '\0'); }

absl::StatusOr<PackedDirectory> PackDirectoryWithReport(const std::string& dir, uint64_t max_bytes,
                                                        const PackOptions& options) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat("working directory ", dir, " does not exist"));
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("working directory ", dir, " is not a directory"));
  Walker walker(dir, max_bytes, options.honour_ignore_files);
  for (const std::string& path : options.always_include) RETURN_IF_ERROR(walker.AlwaysInclude(path));
  RETURN_IF_ERROR(walker.Walk("", ""));
  PackedDirectory packed = std::move(walker).Finish();
  TarLimits limits;
  limits.max_unpacked_bytes = max_bytes;
  auto parsed = ParseTar(packed.archive, limits);
  if (!parsed.ok()) return Annotate(parsed.status(), absl::StrCat("working directory ", dir));
  ASSIGN_OR_RETURN(packed.archive, Gzip(packed.archive));
  return packed;
}

absl::StatusOr<std::string> PackDirectory(const std::string& dir, uint64_t max_bytes, const PackOptions& options) {
  ASSIGN_OR_RETURN(PackedDirectory packed, PackDirectoryWithReport(dir, max_bytes, options));
  return std::move(packed.archive);
}

absl::StatusOr<std::string> Gzip(std::string_view data) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("deflateInit2 failed");
  }
  std::string out{};
  out.resize(deflateBound(&zs, data.size()) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return absl::InternalError("gzip compression failed");
  out.resize(zs.total_out);
  return out;
}

std::string PackageName(std::string_view archive) { return PackageNameOf(archive); }

}  // namespace manta::dashboard
