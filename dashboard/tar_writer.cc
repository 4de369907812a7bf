#include "dashboard/tar_writer.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/id.h"
#include "common/status.h"
#include "dashboard/tar_reader.h"

namespace manta::dashboard {
namespace {

constexpr size_t kBlock = 512;

void PutOctal(char* field, size_t width, uint64_t value) {
  std::string s = absl::StrFormat("%0*o", static_cast<int>(width - 1), value);
  std::memcpy(field, s.data(), std::min(s.size(), width - 1));
  field[width - 1] = '\0';
}

void AppendHeader(std::string* out, std::string_view name, char type, uint64_t size, std::string_view link,
                  uint32_t mode) {
  char h[kBlock];
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
  out->append((kBlock - data.size() % kBlock) % kBlock, '\0');
}

struct Walker {
  std::string root;
  uint64_t max_bytes;
  uint64_t total = 0;
  std::string out{};

  absl::Status Walk(const std::string& rel) {
    std::string dir = rel.empty() ? root : root + "/" + rel;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return absl::InvalidArgumentError(absl::StrCat("cannot read directory ", dir, ": ", std::strerror(errno)));
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      std::string full = root + "/" + child;
      struct stat st;
      if (lstat(full.c_str(), &st) != 0) continue;  // vanished meanwhile
      if (S_ISDIR(st.st_mode)) {
        AppendTarEntry(&out, child + "/", '5', "", "", 0755);
        RETURN_IF_ERROR(Walk(child));
      } else if (S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = readlink(full.c_str(), buf, sizeof(buf));
        if (n < 0) return absl::InvalidArgumentError(absl::StrCat("cannot read symlink ", full));
        AppendTarEntry(&out, child, '2', "", std::string_view(buf, static_cast<size_t>(n)), 0777);
      } else if (S_ISREG(st.st_mode)) {
        total += static_cast<uint64_t>(st.st_size);
        if (total > max_bytes) {
          return absl::ResourceExhaustedError(
              absl::StrCat("working directory ", root, " holds more than ", max_bytes, " bytes of files"));
        }
        ASSIGN_OR_RETURN(std::string data, ReadFile(full));
        AppendTarEntry(&out, child, '0', data, "", st.st_mode & 0777);
      }
    }
    return absl::OkStatus();
  }
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

void FinishTar(std::string* out) { out->append(2 * kBlock, '\0'); }

absl::StatusOr<std::string> PackDirectory(const std::string& dir, uint64_t max_bytes) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("working directory ", dir, " does not exist"));
  if (!S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat("working directory ", dir, " is not a directory"));
  Walker w{dir, max_bytes};
  RETURN_IF_ERROR(w.Walk(""));
  FinishTar(&w.out);
  TarLimits limits;
  limits.max_unpacked_bytes = max_bytes;
  auto parsed = ParseTar(w.out, limits);
  if (!parsed.ok()) return Annotate(parsed.status(), absl::StrCat("working directory ", dir));
  return Gzip(w.out);
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

std::string PackageName(std::string_view archive) {
  // Two FNV-1a passes with different offsets: a content address, not a MAC.
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  for (unsigned char c : archive) {
    a = (a ^ c) * 0x100000001b3ull;
    b = (b ^ (c + 0x5bu)) * 0x100000001b3ull;
  }
  return absl::StrFormat("_manta_pkg_%016x%016x.tar.gz", a, b);
}

}  // namespace manta::dashboard
