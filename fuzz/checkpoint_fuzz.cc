// The checkpoint reader: a manifest.json and a shard file as a crashed,
// truncated or hostile save may leave them. Input: the manifest's text, a
// NUL, one byte choosing how the shard is written (0: the remaining bytes as
// they are; otherwise: the size the manifest implies, filled by cycling
// them), then those bytes. Reading either gives a value or an error; it
// never crashes, hangs or allocates from a number it was not checked on.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "train/kernels/checkpoint.h"
#include "train/kernels/params.h"

namespace {

constexpr int64_t kStep = 7;
constexpr int64_t kMaxParams = 1 << 18;  // restore only into models this small

const std::string& Dir() {
  static const std::string dir = [] {
    std::string d = FuzzTempDir("manta_checkpoint_fuzz");
    std::filesystem::create_directories(d + "/" + std::to_string(kStep));
    return d;
  }();
  return dir;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::string_view manifest = input.substr(0, nul);
  std::string_view rest = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  const bool exact_size = !rest.empty() && rest[0] != 0;
  if (!rest.empty()) rest.remove_prefix(1);

  const std::string step_dir = Dir() + "/" + std::to_string(kStep);
  for (const char* name : {"/t0_f0.bin", "/t0_f1.bin", "/t1_f0.bin", "/t1_f1.bin"}) {
    std::filesystem::remove(step_dir + name);  // nothing left from the last input
  }
  WriteFile(step_dir + "/manifest.json", manifest);
  manta::train::CheckpointStore store(Dir());
  auto m = store.ReadManifest(kStep);
  if (!m.ok()) return 0;
  FUZZ_CHECK(m->step == kStep && m->tensor >= 1 && m->fsdp >= 1);
  FUZZ_CHECK(manta::train::ParamLayout::CheckTensorSplit(m->model, m->tensor).ok());
  if (m->model.ParamCount() > kMaxParams) return 0;

  // Restore into the manifest's own model, unsplit: the caller a resumed run is.
  manta::train::ParamLayout layout(m->model, 1, 0);
  manta::train::ShardView view;
  std::vector<std::vector<float>> storage;
  int64_t floats = 0;
  for (int b = 0; b < layout.num_blocks(); ++b) {
    view.shard_sizes.push_back(layout.block(b).size);
    floats += 3 * layout.block(b).size;
  }
  view.fields.resize(3);
  for (int field = 0; field < 3; ++field) {
    for (int b = 0; b < layout.num_blocks(); ++b) {
      storage.emplace_back(layout.block(b).size);
      view.fields[field].push_back(storage.back().data());
    }
  }
  // The file rank 0 of the manifest's split reads first.
  std::string shard(rest);
  if (exact_size) {
    const int64_t file_floats = floats / m->tensor / m->fsdp + 3 * layout.num_blocks();
    shard.resize(static_cast<size_t>(file_floats) * sizeof(float));
    for (size_t i = rest.size(); i < shard.size() && !rest.empty(); ++i) shard[i] = rest[i % rest.size()];
  }
  for (int r = 0; r < std::min(m->tensor, 2); ++r) {
    for (int f = 0; f < std::min(m->fsdp, 2); ++f) {
      WriteFile(step_dir + "/t" + std::to_string(r) + "_f" + std::to_string(f) + ".bin", shard);
    }
  }
  (void)store.Restore(*m, layout, 1, 0, view);
  return 0;
}
