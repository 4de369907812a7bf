#include "train/kernels/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace manta::train {
namespace fs = std::filesystem;
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("fsync", path);
  return absl::OkStatus();
}

// Writes `path` atomically: <path>.partial, fsync, rename.
// `tmp` names the temporary file (default <path>.partial).
absl::Status WriteFileAtomic(const std::string& path, const std::vector<std::pair<const void*, size_t>>& parts,
                             const CheckpointStore::Progress& progress = nullptr, std::string tmp = "") {
  if (tmp.empty()) tmp = path + ".partial";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create", tmp);
  for (const auto& [data, size] : parts) {
    const char* p = static_cast<const char*>(data);
    size_t left = size;
    while (left > 0) {
      ssize_t w = ::write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        absl::Status s = Errno("write", tmp);
        ::close(fd);
        return s;
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    if (progress) progress(static_cast<int64_t>(size));
  }
  if (::fsync(fd) != 0) {
    absl::Status s = Errno("fsync", tmp);
    ::close(fd);
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename", tmp);
  return absl::OkStatus();
}

std::string ShardName(int tensor_rank, int fsdp_rank) {
  return absl::StrCat("t", tensor_rank, "_f", fsdp_rank, ".bin");
}

}  // namespace

absl::Status WriteSmallFileAtomic(const std::string& path, const std::string& contents) {
  const size_t thread = std::hash<std::thread::id>()(std::this_thread::get_id());
  return WriteFileAtomic(path, {{contents.data(), contents.size()}}, nullptr,
                         absl::StrCat(path, ".partial.", ::getpid(), ".", thread));
}

absl::Status CheckpointStore::WriteExtra(int64_t step, const std::string& name, const std::string& contents) const {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name == "manifest.json") {
    return absl::InvalidArgumentError("checkpoint: bad extra file name '" + name + "'");
  }
  return WriteSmallFileAtomic(StepDir(step) + ".tmp/" + name, contents);
}

std::string CheckpointStore::StepDir(int64_t step) const { return absl::StrCat(dir_, "/", step); }

absl::StatusOr<int64_t> CheckpointStore::LatestStep() const {
  std::error_code ec;
  int64_t best = -1;
  if (fs::is_directory(dir_, ec)) {
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      int64_t step = 0;
      if (!absl::SimpleAtoi(entry.path().filename().string(), &step) || step < 0) continue;
      if (step > best && ReadManifest(step).ok()) best = step;
    }
  }
  if (best < 0) return absl::NotFoundError("no complete checkpoint under " + dir_);
  return best;
}

// Bounds a manifest read from disk must respect before anything is sized
// from it: shard counts and each model dimension.
constexpr int kMaxShards = 1 << 16;
constexpr int64_t kMaxDim = int64_t{1} << 22;

absl::StatusOr<CheckpointManifest> CheckpointStore::ReadManifest(int64_t step) const {
  const std::string path = StepDir(step) + "/manifest.json";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("no manifest at " + path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("unreadable manifest " + path);
  CheckpointManifest m;
  try {
    m.step = j.at("step").get<int64_t>();
    m.data_position = j.at("data_position").get<int64_t>();
    m.tensor = j.at("tensor").get<int>();
    m.fsdp = j.at("fsdp").get<int>();
    const auto& s = j.at("model");
    m.model.emb_dim = s.at("emb_dim").get<int64_t>();
    m.model.num_query_heads = s.at("num_query_heads").get<int64_t>();
    m.model.num_kv_heads = s.at("num_kv_heads").get<int64_t>();
    m.model.head_dim = s.at("head_dim").get<int64_t>();
    m.model.mlp_dim = s.at("mlp_dim").get<int64_t>();
    m.model.num_layers = s.at("num_layers").get<int64_t>();
    m.model.vocab_size = s.at("vocab_size").get<int64_t>();
    // Absent from checkpoints of earlier versions: the defaults they used.
    m.model.norm_eps = s.value("norm_eps", 1e-5f);
    m.model.rope_max_timescale = s.value("rope_max_timescale", 10000.0f);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("manifest ", path, ": ", e.what()));
  }
  if (m.step != step || m.data_position < 0 || m.tensor < 1 || m.tensor > kMaxShards || m.fsdp < 1 ||
      m.fsdp > kMaxShards) {
    return absl::DataLossError("inconsistent manifest " + path);
  }
  const ModelShape& s = m.model;
  if (!(s.norm_eps > 0 && s.norm_eps < 1) || !(s.rope_max_timescale >= 1 && s.rope_max_timescale < 1e9f)) {
    return absl::DataLossError("manifest " + path + " has an impossible norm_eps or rope_max_timescale");
  }
  for (int64_t dim :
       {s.emb_dim, s.num_query_heads, s.num_kv_heads, s.head_dim, s.mlp_dim, s.num_layers, s.vocab_size}) {
    if (dim < 1 || dim > kMaxDim) return absl::DataLossError("manifest " + path + " has an impossible model shape");
  }
  if (absl::Status split = ParamLayout::CheckTensorSplit(s, m.tensor); !split.ok()) {
    return absl::DataLossError(absl::StrCat("manifest ", path, ": ", split.message()));
  }
  return m;
}

absl::Status CheckpointStore::BeginSave(int64_t step) const {
  const std::string tmp = StepDir(step) + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError("cannot create " + tmp + ": " + ec.message());
  return absl::OkStatus();
}

absl::Status CheckpointStore::WriteShard(int64_t step, int tensor_rank, int fsdp_rank, const ShardView& shard,
                                         const Progress& progress) const {
  std::vector<std::pair<const void*, size_t>> parts;
  for (size_t b = 0; b < shard.shard_sizes.size(); ++b) {
    for (const auto& field : shard.fields) {
      parts.push_back({field[b], sizeof(float) * shard.shard_sizes[b]});
    }
  }
  return WriteFileAtomic(StepDir(step) + ".tmp/" + ShardName(tensor_rank, fsdp_rank), parts, progress);
}

absl::Status CheckpointStore::FinishShards(int64_t step) const {
  const std::string tmp = StepDir(step) + ".tmp", final_dir = StepDir(step);
  RETURN_IF_ERROR(FsyncPath(tmp));
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // an earlier save of this step that never got its manifest
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) return Errno("rename", tmp);
  return FsyncPath(dir_);
}

absl::Status CheckpointStore::WriteManifest(const CheckpointManifest& m) const {
  nlohmann::json j = {
      {"step", m.step},
      {"data_position", m.data_position},
      {"tensor", m.tensor},
      {"fsdp", m.fsdp},
      {"model",
       {{"emb_dim", m.model.emb_dim},
        {"num_query_heads", m.model.num_query_heads},
        {"num_kv_heads", m.model.num_kv_heads},
        {"head_dim", m.model.head_dim},
        {"mlp_dim", m.model.mlp_dim},
        {"num_layers", m.model.num_layers},
        {"vocab_size", m.model.vocab_size},
        {"norm_eps", m.model.norm_eps},
        {"rope_max_timescale", m.model.rope_max_timescale}}},
      {"shard_files", m.tensor * m.fsdp},
  };
  const std::string text = j.dump(2) + "\n";
  RETURN_IF_ERROR(WriteFileAtomic(StepDir(m.step) + "/manifest.json", {{text.data(), text.size()}}));
  return FsyncPath(StepDir(m.step));
}

absl::Status CheckpointStore::Restore(const CheckpointManifest& m, const ParamLayout& layout, int fsdp, int fsdp_rank,
                                      const ShardView& out, const Progress& progress) const {
  const ModelShape& a = m.model;
  // The caller's layout is real memory; nothing is sized from the manifest
  // until its shape matches it.
  if (a.num_layers + 2 != layout.num_blocks()) {
    return absl::FailedPreconditionError("checkpoint model has a different number of layers");
  }
  // Rank 0's layout of the old split: every rank's tensors have the same
  // offsets in their files, only the slice of columns or rows differs.
  const ParamLayout old(a, m.tensor, 0);
  for (int blk = 0; blk < layout.num_blocks(); ++blk) {
    const auto& ot = old.block(blk).tensors;
    const auto& nt = layout.block(blk).tensors;
    for (size_t i = 0; i < nt.size(); ++i) {
      if (ot[i].rows != nt[i].rows || ot[i].cols != nt[i].cols) {
        return absl::FailedPreconditionError(absl::StrCat("checkpoint tensor ", layout.block(blk).name, "/", nt[i].name,
                                                          " is ", ot[i].rows, "x", ot[i].cols, ", the model wants ",
                                                          nt[i].rows, "x", nt[i].cols));
      }
    }
  }
  // Offsets of each block inside one old shard file, per field.
  std::vector<int64_t> old_shard(layout.num_blocks()), old_block_offset(layout.num_blocks());
  int64_t file_floats = 0;
  for (int blk = 0; blk < layout.num_blocks(); ++blk) {
    old_shard[blk] = ShardSize(old.block(blk).size, m.fsdp);
    old_block_offset[blk] = file_floats;
    file_floats += 3 * old_shard[blk];
  }
  std::map<std::pair<int, int>, std::vector<float>> files;
  auto file = [&](int r, int f) -> absl::StatusOr<const std::vector<float>*> {
    auto it = files.find({r, f});
    if (it != files.end()) return &it->second;
    const std::string path = StepDir(m.step) + "/" + ShardName(r, f);
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError("missing checkpoint shard " + path);
    std::vector<float> data(file_floats);
    in.read(reinterpret_cast<char*>(data.data()), sizeof(float) * file_floats);
    if (in.gcount() != static_cast<std::streamsize>(sizeof(float) * file_floats)) {
      return absl::DataLossError("short checkpoint shard " + path);
    }
    return &files.emplace(std::make_pair(r, f), std::move(data)).first->second;
  };
  for (int blk = 0; blk < layout.num_blocks(); ++blk) {
    const int64_t shard = out.shard_sizes[blk];
    const int64_t begin = shard * fsdp_rank;
    for (auto& field : out.fields) std::fill(field[blk], field[blk] + shard, 0.0f);
    for (size_t ti = 0; ti < layout.block(blk).tensors.size(); ++ti) {
      const TensorSpec& t = layout.block(blk).tensors[ti];
      const int64_t lo = std::max(begin, t.offset), hi = std::min(begin + shard, t.offset + t.local_size());
      for (int64_t pos = lo; pos < hi; ++pos) {
        const int64_t g = t.GlobalIndex(layout.tensor_rank(), pos - t.offset);
        const int64_t row = g / t.cols, col = g % t.cols;
        const TensorSpec& o = old.block(blk).tensors[ti];
        int r = 0;
        int64_t orow = row, ocol = col;
        if (o.split == Split::kColumns) {
          r = static_cast<int>(col / o.local_cols);
          ocol = col % o.local_cols;
        }
        if (o.split == Split::kRows) {
          r = static_cast<int>(row / o.local_rows);
          orow = row % o.local_rows;
        }
        const int64_t old_pos = o.offset + orow * o.local_cols + ocol;
        const int f = static_cast<int>(old_pos / old_shard[blk]);
        auto data = file(r, f);
        if (!data.ok()) return data.status();
        const int64_t base = old_block_offset[blk] + old_pos % old_shard[blk];
        for (size_t field = 0; field < out.fields.size(); ++field) {
          out.fields[field][blk][pos - begin] = (**data)[base + field * old_shard[blk]];
        }
      }
    }
    if (progress) progress(static_cast<int64_t>(sizeof(float) * shard * out.fields.size()));
  }
  return absl::OkStatus();
}

}  // namespace manta::train
