// The training state and step of one logical device. Internal to the
// kernels (see session.h).
//
// DeviceState is what a device keeps across steps and across groups: its
// FSDP shards of the parameters and AdamW moments for one (tensor rank,
// fsdp rank) of a layout. DeviceTrainer runs steps on it inside one mesh:
// ComputeGradients (forward and backward over the device's rows of the
// global batch, in micro-batches, and the gradient reductions) and then,
// when the step is committed, ApplyUpdate. Nothing of the state changes
// before ApplyUpdate, so a step interrupted by a failed peer leaves the
// state of the previous step. Runs on the device's own thread; not
// thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "train/kernels/buffer.h"
#include "train/kernels/checkpoint.h"
#include "train/kernels/communicator.h"
#include "train/kernels/config.h"
#include "train/kernels/data.h"
#include "train/kernels/grad_reducer.h"
#include "train/kernels/model.h"
#include "train/kernels/params.h"

namespace manta::train {

struct DeviceState {
  int tensor = 1, tensor_rank = 0, fsdp = 1, fsdp_rank = 0;
  std::vector<FloatBuffer> param, m, v;  // per block, one FSDP shard each

  bool Holds(int t, int t_rank, int f, int f_rank) const {
    return tensor == t && tensor_rank == t_rank && fsdp == f && fsdp_rank == f_rank;
  }
};

struct DeviceStepResult {
  double loss = 0;
  double grad_norm = 0;
  double learning_rate = 0;
};

class DeviceTrainer : public BlockOps {
 public:
  // `global_batch` rows are split over the mesh's batch shards; the
  // device's rows go through the model `micro_rows` at a time (which must
  // divide them). `state` is kept when it holds this device's shards of
  // this mesh, else replaced by zeroed buffers (see state_reused()).
  DeviceTrainer(const Config& config, const Mesh& mesh, Communicator* comm, int device, int64_t global_batch,
                int64_t micro_rows, std::unique_ptr<DeviceState> state);

  // Sets the parameters to their initial values and zeroes the moments.
  void Init();
  // The gradients of 0-based `step` on the global batch of that step,
  // reduced over the mesh, with the loss and gradient norm. Changes no
  // state. Throws CollectiveError when the group breaks.
  DeviceStepResult ComputeGradients(int64_t step, const Dataset& data);
  // AdamW with the gradients of the last ComputeGradients.
  void ApplyUpdate(int64_t step, const DeviceStepResult& r);

  // Copies the state of group member `root` of this device's data group
  // (devices that differ only in the data coordinate hold the same shards)
  // to every member. Throws CollectiveError.
  void BroadcastState(int root);

  int device() const { return device_; }
  const ParamLayout& layout() const { return layout_; }
  int fsdp() const { return fsdp_; }
  int fsdp_rank() const { return fsdp_rank_; }
  int64_t rows() const { return rows_; }
  int64_t shard_size(int b) const { return static_cast<int64_t>(state_->param[b].size()); }
  // The state's arrays, for checkpoints.
  ShardView View();
  bool state_reused() const { return state_reused_; }
  // Bytes of the arrays this device holds: its state, gradients, gathered
  // parameters, the reductions' padded copies and the model's activations.
  int64_t BytesHeld() const;
  // Gives the state up (the trainer is done with it).
  std::unique_ptr<DeviceState> TakeState() { return std::move(state_); }

  const GradientReducer& reducer() const { return reducer_; }

  // BlockOps.
  const float* AcquireBlock(int b) override;
  void BlockGradReady(int b, float* grad) override;
  void TensorAllReduce(float* data, int64_t n) override;

 private:
  const Config& config_;
  const Mesh& mesh_;
  Communicator* const comm_;
  const int device_;
  const int64_t global_batch_, rows_, micro_rows_, micros_;
  const int fsdp_, fsdp_rank_;
  ParamLayout layout_;
  DecoderModel model_;
  std::unique_ptr<DeviceState> state_;
  bool state_reused_ = false;
  std::vector<FloatBuffer> grad_;  // per block, one FSDP shard: the reduced gradient
  std::vector<FloatBuffer> full_;  // gathered blocks (fsdp > 1)
  // Per block, the local gradient summed over micro-batches in double
  // (exact_gradient_sums, micros_ > 1) when nothing is reduced; else the sum
  // is kept in the reducer's padded copy or in grad_.
  std::vector<DoubleBuffer> acc64_;
  std::vector<bool> gathered_;  // per block: full_ holds this step's parameters
  int64_t micro_ = 0;           // the micro-batch being run
  // Whether block gradients travel (over fsdp or data) to become grad_.
  bool Reduces() const { return fsdp_ > 1 || mesh_.data() > 1; }
  GradientReducer reducer_;  // fills grad_ from the model's block gradients
  std::vector<int32_t> inputs_, targets_;
};

}  // namespace manta::train
