// Sharded checkpoints of parameters, AdamW moments, step and data position.
//
// Layout under <base_output_directory>/<run_name>/checkpoints/:
//   <step>/manifest.json        written last; a directory without it is ignored
//   <step>/t<r>_f<f>.bin        tensor rank r, FSDP shard f: for every block in
//                               order, the shard's parameters, first moment and
//                               second moment (float32, native byte order)
// A save writes into <step>.tmp/ (each file under a .partial name, fsynced
// and renamed), then renames the directory to <step>/ and writes the
// manifest the same way, fsyncing the directories in between. A save killed
// at any point leaves the previous complete checkpoint as the latest one.
// Restore reads any tensor/FSDP layout and reshards onto the caller's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/kernels/config.h"
#include "train/kernels/params.h"

namespace manta::train {

struct CheckpointManifest {
  int64_t step = 0;           // optimizer steps completed
  int64_t data_position = 0;  // global batches consumed
  int tensor = 1, fsdp = 1;   // layout of the shard files
  ModelShape model;
};

// The three flat arrays (parameters, first and second moment) of one
// device's FSDP shard of every block.
struct ShardView {
  std::vector<std::vector<float*>> fields;  // [field][block]
  std::vector<int64_t> shard_sizes;         // [block]
};

// Writes a small file atomically: a temporary file of this process and
// thread, fsync, rename. Writers of the same file at once never expose a
// partial one.
absl::Status WriteSmallFileAtomic(const std::string& path, const std::string& contents);

class CheckpointStore {
 public:
  // `checkpoints_dir` is <base_output_directory>/<run_name>/checkpoints.
  explicit CheckpointStore(std::string checkpoints_dir) : dir_(std::move(checkpoints_dir)) {}

  // Latest step with a readable manifest; NotFound when there is none.
  absl::StatusOr<int64_t> LatestStep() const;
  absl::StatusOr<CheckpointManifest> ReadManifest(int64_t step) const;

  // Save, in order: BeginSave once (process 0), WriteShard by each writer,
  // FinishShards once (process 0, after all writers), WriteManifest.
  absl::Status BeginSave(int64_t step) const;
  // `progress` (optional) hears of each part's bytes as they are written.
  using Progress = std::function<void(int64_t bytes)>;
  absl::Status WriteShard(int64_t step, int tensor_rank, int fsdp_rank, const ShardView& shard,
                          const Progress& progress = nullptr) const;
  absl::Status FinishShards(int64_t step) const;
  // A file that travels with the step's shards (as tokenizer.json), written
  // by process 0 between BeginSave and FinishShards; `name` has no '/'.
  absl::Status WriteExtra(int64_t step, const std::string& name, const std::string& contents) const;
  absl::Status WriteManifest(const CheckpointManifest& manifest) const;

  // Fills `out` (the caller's shard of `layout`, split `fsdp` ways, at
  // `fsdp_rank`) from the checkpoint at `step`, whatever its layout.
  // `progress` (optional) hears of each block's restored bytes.
  absl::Status Restore(const CheckpointManifest& manifest, const ParamLayout& layout, int fsdp, int fsdp_rank,
                       const ShardView& out, const Progress& progress = nullptr) const;

  std::string StepDir(int64_t step) const;

 private:
  std::string dir_;
};

}  // namespace manta::train
