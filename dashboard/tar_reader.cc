#include "dashboard/tar_reader.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/utf8.h"

namespace manta::dashboard {
namespace {

absl::Status Bad(std::string_view path, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("archive entry '", PrintableAscii(path, 200), "' ", why, "; the archive was rejected"));
}

// A NUL-terminated field of at most `n` bytes.
std::string Field(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

absl::StatusOr<uint64_t> Octal(const char* p, size_t n, const char* what) {
  if (static_cast<unsigned char>(p[0]) & 0x80) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar header field ", what, " uses base-256, which is not supported"));
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\0')) ++i;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v > (UINT64_MAX >> 3)) return absl::InvalidArgumentError(absl::StrCat("tar header field ", what, " overflows"));
    v = (v << 3) | static_cast<uint64_t>(p[i] - '0');
  }
  for (; i < n; ++i) {
    if (p[i] != ' ' && p[i] != '\0') {
      return absl::InvalidArgumentError(absl::StrCat("tar header field ", what, " is not an octal number"));
    }
  }
  return v;
}

bool IsZeroBlock(const char* p) {
  for (size_t i = 0; i < kTarBlock; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

absl::Status CheckChecksum(const char* h) {
  ASSIGN_OR_RETURN(uint64_t expected, Octal(h + 148, 8, "chksum"));
  uint64_t sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  }
  if (sum != expected) return absl::InvalidArgumentError("tar header checksum mismatch: not a tar archive or corrupt");
  return absl::OkStatus();
}

// "./a//b/" -> "a/b". Empty for the archive root ("./"). Errors for absolute
// paths, ".." components, and paths past the limits.
absl::StatusOr<std::string> NormalizePath(std::string_view raw, const TarLimits& limits) {
  if (raw.empty()) return Bad(raw, "has an empty name");
  if (raw[0] == '/') return Bad(raw, "has an absolute path");
  if (raw.size() > limits.max_path_bytes) {
    return Bad(raw,
               absl::StrCat("has a path of ", raw.size(), " bytes; at most ", limits.max_path_bytes, " are allowed"));
  }
  std::string out;
  size_t depth = 0;
  for (absl::string_view part : absl::StrSplit(absl::string_view(raw.data(), raw.size()), '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return Bad(raw, "contains '..'");
    if (part.size() > limits.max_name_bytes) {
      return Bad(
          raw, absl::StrCat("has a name of ", part.size(), " bytes; at most ", limits.max_name_bytes, " are allowed"));
    }
    if (++depth > limits.max_depth) {
      return Bad(raw, absl::StrCat("is more than ", limits.max_depth, " directories deep"));
    }
    if (!out.empty()) out += '/';
    out.append(part.data(), part.size());
  }
  return out;
}

// Pax extended header records: "<len> <key>=<value>\n".
absl::Status ParsePax(std::string_view data, std::map<std::string, std::string>* out) {
  while (!data.empty()) {
    size_t space = data.find(' ');
    uint64_t len = 0;
    if (space == std::string_view::npos || !absl::SimpleAtoi(absl::string_view(data.data(), space), &len) ||
        len <= space + 1 || len > data.size() || data[len - 1] != '\n') {
      return absl::InvalidArgumentError("malformed pax extended header in the archive");
    }
    std::string_view record = data.substr(space + 1, len - space - 2);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos) return absl::InvalidArgumentError("malformed pax record in the archive");
    (*out)[std::string(record.substr(0, eq))] = std::string(record.substr(eq + 1));
    data.remove_prefix(len);
  }
  return absl::OkStatus();
}

// Checks that `link` (a symlink at `path`) resolves inside the tree without
// passing through another symlink of the archive.
absl::Status CheckSymlinkTarget(const std::string& path, const std::string& link,
                                const std::set<std::string>& symlinks) {
  if (link.empty()) return Bad(path, "is a symlink with an empty target");
  if (link[0] == '/')
    return Bad(path, absl::StrCat("is a symlink to an absolute path '", PrintableAscii(link, 200), "'"));
  std::vector<std::string> stack = absl::StrSplit(path, '/');
  stack.pop_back();  // the link's own name
  std::vector<std::string> parts = absl::StrSplit(link, '/');
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (stack.empty())
        return Bad(path, absl::StrCat("is a symlink pointing outside the tree ('", PrintableAscii(link, 200), "')"));
      stack.pop_back();
      continue;
    }
    stack.emplace_back(part);
    bool more = false;
    for (size_t j = i + 1; j < parts.size(); ++j) more |= !(parts[j].empty() || parts[j] == ".");
    if (more && symlinks.count(absl::StrJoin(stack, "/")) > 0) {
      return Bad(path, absl::StrCat("is a symlink whose target '", PrintableAscii(link, 200),
                                    "' passes through another symlink"));
    }
  }
  return absl::OkStatus();
}

absl::Status Errno(const char* what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot write", path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// The directories above the entry being written, open, from the tree's root
// down. Archives list a directory's entries together, so each directory is
// made and opened once: extraction is linear in the archive's size.
class DirChain {
 public:
  explicit DirChain(int root_fd) { chain_.push_back({"", root_fd}); }
  ~DirChain() {
    for (size_t i = 1; i < chain_.size(); ++i) close(chain_[i].fd);
  }
  DirChain(const DirChain&) = delete;
  DirChain& operator=(const DirChain&) = delete;

  // The descriptor of directory `rel` ("" for the root), made as needed.
  absl::StatusOr<int> Open(const std::string& rel) {
    while (chain_.size() > 1 && !Within(chain_.back().path, rel)) {
      close(chain_.back().fd);
      chain_.pop_back();
    }
    while (chain_.back().path != rel) {
      const std::string& at = chain_.back().path;
      size_t start = at.empty() ? 0 : at.size() + 1;
      size_t end = std::min(rel.find('/', start), rel.size());
      std::string name = rel.substr(start, end - start);
      if (mkdirat(chain_.back().fd, name.c_str(), 0755) != 0 && errno != EEXIST) {
        return Errno("cannot create directory", rel.substr(0, end));
      }
      int fd = openat(chain_.back().fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("archive path ", PrintableAscii(rel.substr(0, end), 200), " is not a directory"));
      }
      chain_.push_back({rel.substr(0, end), fd});
    }
    return chain_.back().fd;
  }

 private:
  struct Dir {
    std::string path;
    int fd;
  };
  // Whether `dir` is `rel` or one of its ancestors.
  static bool Within(const std::string& dir, const std::string& rel) {
    return rel == dir || (rel.size() > dir.size() && rel.compare(0, dir.size(), dir) == 0 && rel[dir.size()] == '/');
  }
  std::vector<Dir> chain_;
};

// The directory and the name of `rel`.
std::pair<std::string, std::string> Split(const std::string& rel) {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

absl::Status WriteEntries(const std::vector<TarEntry>& entries, int root_fd) {
  DirChain dirs(root_fd);
  std::map<std::string, std::string_view> file_data;
  for (const TarEntry& e : entries) {
    if (e.type == TarEntry::Type::kDirectory) {
      RETURN_IF_ERROR(dirs.Open(e.path).status());
      continue;
    }
    auto [parent, name] = Split(e.path);
    ASSIGN_OR_RETURN(int dir, dirs.Open(parent));
    if (e.type == TarEntry::Type::kSymlink) {
      if (symlinkat(e.link_target.c_str(), dir, name.c_str()) != 0) return Errno("cannot create symlink", e.path);
      continue;
    }
    std::string_view data = e.type == TarEntry::Type::kFile ? e.data : file_data[e.link_target];
    if (e.type == TarEntry::Type::kFile) file_data[e.path] = e.data;
    int fd = openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e.mode);
    if (fd < 0) return Errno("cannot create", e.path);
    absl::Status s = WriteAll(fd, data, e.path);
    if (s.ok() && fchmod(fd, e.mode) != 0) s = Errno("cannot chmod", e.path);
    close(fd);
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

// GNU long names ('L', 'K') and pax headers ('x'): they apply to the next
// entry only.
struct ExtendedHeaders {
  std::string long_name, long_link;
  std::map<std::string, std::string> pax;

  // The next entry's path and link target, from its header `h` and these;
  // then forgets them.
  std::pair<std::string, std::string> Names(const char* h) {
    std::string raw = Field(h, 100);
    if (std::string_view(h + 257, 5) == "ustar" && h[345] != '\0') raw = Field(h + 345, 155) + "/" + raw;
    if (!long_name.empty()) raw = long_name;
    if (auto it = pax.find("path"); it != pax.end()) raw = it->second;
    std::string link = Field(h + 157, 100);
    if (!long_link.empty()) link = long_link;
    if (auto it = pax.find("linkpath"); it != pax.end()) link = it->second;
    long_name.clear();
    long_link.clear();
    pax.clear();
    return {std::move(raw), std::move(link)};
  }
};

// The kind, contents and link of entry `path` (`raw` as the archive spells
// it) of tar type `type`. A hard link must point at an earlier regular file
// in `seen`; `unpacked` counts the bytes of files against the limit.
absl::Status FillEntry(char type, std::string_view data, const std::string& path, const std::string& raw,
                       const std::string& link, const std::map<std::string, TarEntry::Type>& seen,
                       const TarLimits& limits, uint64_t& unpacked, TarEntry& e) {
  switch (type) {
    case '0':
    case '\0':
    case '7':
      e.type = TarEntry::Type::kFile;
      e.data = data;
      unpacked += data.size();
      if (unpacked > limits.max_unpacked_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the archive unpacks to more than ", limits.max_unpacked_bytes, " bytes"));
      }
      return absl::OkStatus();
    case '5':
      e.type = TarEntry::Type::kDirectory;
      e.mode = 0755;
      return absl::OkStatus();
    case '2':
      e.type = TarEntry::Type::kSymlink;
      e.link_target = link;
      e.mode = 0777;
      return absl::OkStatus();
    case '1': {
      e.type = TarEntry::Type::kHardlink;
      auto target = NormalizePath(link, limits);
      if (!target.ok() || target->empty()) return Bad(path, "is a hard link pointing outside the tree");
      auto it = seen.find(*target);
      if (it == seen.end() || it->second != TarEntry::Type::kFile) {
        return Bad(path, "is a hard link to something that is not an earlier regular file of the archive");
      }
      e.link_target = *target;
      return absl::OkStatus();
    }
    default:
      return Bad(raw, absl::StrCat("has unsupported type '", PrintableAscii(std::string_view(&type, 1), 200),
                                   "' (only files, directories and links are allowed)"));
  }
}

// Checks that need the whole archive: nothing lives under a symlink or a
// file, and symlinks stay inside.
absl::Status CheckTree(const std::vector<TarEntry>& entries, const std::map<std::string, TarEntry::Type>& seen,
                       const std::set<std::string>& symlinks) {
  for (const TarEntry& e : entries) {
    for (size_t slash = e.path.find('/'); slash != std::string::npos; slash = e.path.find('/', slash + 1)) {
      auto it = seen.find(e.path.substr(0, slash));
      if (it == seen.end() || it->second == TarEntry::Type::kDirectory) continue;
      return Bad(e.path, it->second == TarEntry::Type::kSymlink ? "lies under a symlink" : "lies under a file");
    }
    if (e.type == TarEntry::Type::kSymlink) RETURN_IF_ERROR(CheckSymlinkTarget(e.path, e.link_target, symlinks));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TarEntry>> ParseTar(std::string_view archive, const TarLimits& limits) {
  std::vector<TarEntry> entries;
  std::map<std::string, TarEntry::Type> seen;
  std::set<std::string> symlinks;
  uint64_t unpacked = 0;
  ExtendedHeaders ext;
  size_t pos = 0;
  bool ended = false;
  while (pos + kTarBlock <= archive.size()) {
    const char* h = archive.data() + pos;
    if (IsZeroBlock(h)) {
      ended = true;
      break;
    }
    RETURN_IF_ERROR(CheckChecksum(h));
    ASSIGN_OR_RETURN(uint64_t size, Octal(h + 124, 12, "size"));
    if (auto it = ext.pax.find("size"); it != ext.pax.end() && !absl::SimpleAtoi(it->second, &size)) {
      return absl::InvalidArgumentError("malformed pax size in the archive");
    }
    char type = h[156];
    pos += kTarBlock;
    if (size > archive.size() - pos) return absl::InvalidArgumentError("the archive is truncated");
    std::string_view data = archive.substr(pos, size);
    pos += (size + kTarBlock - 1) / kTarBlock * kTarBlock;

    if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
      if (size > (1 << 20)) return absl::InvalidArgumentError("oversized extended header in the archive");
      if (type == 'L') ext.long_name = std::string(data.substr(0, strnlen(data.data(), data.size())));
      if (type == 'K') ext.long_link = std::string(data.substr(0, strnlen(data.data(), data.size())));
      if (type == 'x') RETURN_IF_ERROR(ParsePax(data, &ext.pax));
      continue;  // 'g' (global pax) carries nothing we use
    }

    auto [raw, link] = ext.Names(h);
    if (entries.size() >= limits.max_entries) {
      return absl::ResourceExhaustedError(absl::StrCat("the archive has more than ", limits.max_entries, " entries"));
    }
    ASSIGN_OR_RETURN(std::string path, NormalizePath(raw, limits));
    if (link.size() > limits.max_path_bytes) {
      return Bad(raw, absl::StrCat("has a link target of ", link.size(), " bytes; at most ", limits.max_path_bytes,
                                   " are allowed"));
    }
    ASSIGN_OR_RETURN(uint64_t mode, Octal(h + 100, 8, "mode"));
    TarEntry e;
    e.mode = static_cast<uint32_t>(mode) & 0755;
    e.mode |= 0600;
    RETURN_IF_ERROR(FillEntry(type, data, path, raw, link, seen, limits, unpacked, e));
    if (path.empty()) {
      if (e.type == TarEntry::Type::kDirectory) continue;  // "./": the root itself
      return Bad(raw, "names the root of the tree");
    }
    auto [it, inserted] = seen.emplace(path, e.type);
    if (!inserted && !(it->second == TarEntry::Type::kDirectory && e.type == TarEntry::Type::kDirectory)) {
      return Bad(path, "appears twice");
    }
    if (!inserted) continue;
    if (e.type == TarEntry::Type::kSymlink) symlinks.insert(path);
    e.path = std::move(path);
    entries.push_back(std::move(e));
  }
  if (!ended && pos != archive.size()) return absl::InvalidArgumentError("the archive is truncated");
  if (!ended && archive.empty()) return absl::InvalidArgumentError("the archive is empty");

  RETURN_IF_ERROR(CheckTree(entries, seen, symlinks));
  return entries;
}

absl::StatusOr<std::string> MaybeGunzip(std::string_view data, uint64_t max_bytes) {
  if (data.size() < 2 || static_cast<unsigned char>(data[0]) != 0x1f || static_cast<unsigned char>(data[1]) != 0x8b) {
    return std::string(data);
  }
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return absl::InternalError("inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[64 * 1024];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return absl::InvalidArgumentError("the archive is not valid gzip data");
    }
    size_t n = sizeof(buf) - zs.avail_out;
    // Tar headers and padding come on top of the file bytes: allow 1/8 more.
    if (out.size() + n > max_bytes + max_bytes / 8 + (1 << 20)) {
      inflateEnd(&zs);
      return absl::ResourceExhaustedError(absl::StrCat("the archive unpacks to more than ", max_bytes, " bytes"));
    }
    out.append(buf, n);
    if (rc == Z_OK && n == 0 && zs.avail_in == 0) {
      inflateEnd(&zs);
      return absl::InvalidArgumentError("the gzip data is truncated");
    }
  }
  inflateEnd(&zs);
  return out;
}

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  int rc = nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : -1; }, 32,
      FTW_DEPTH | FTW_PHYS);
  if (rc != 0) return Errno("cannot remove", path);
  return absl::OkStatus();
}

absl::Status ExtractTar(std::string_view archive, const std::string& dest, const TarLimits& limits) {
  ASSIGN_OR_RETURN(std::string tar, MaybeGunzip(archive, limits.max_unpacked_bytes));
  ASSIGN_OR_RETURN(std::vector<TarEntry> entries, ParseTar(tar, limits));
  struct stat st;
  if (lstat(dest.c_str(), &st) == 0) return absl::AlreadyExistsError(absl::StrCat(dest, " already exists"));
  std::string tmp = dest + ".tmp-XXXXXX";
  if (mkdtemp(tmp.data()) == nullptr) return Errno("cannot create a directory beside", dest);
  chmod(tmp.c_str(), 0755);
  int root = open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  absl::Status s = root < 0 ? Errno("cannot open", tmp) : WriteEntries(entries, root);
  if (root >= 0) close(root);
  if (s.ok() && rename(tmp.c_str(), dest.c_str()) != 0) s = Errno("cannot rename into", dest);
  if (!s.ok()) RemoveTree(tmp).IgnoreError();
  return s;
}

}  // namespace manta::dashboard
