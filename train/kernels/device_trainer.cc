#include "train/kernels/device_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "train/kernels/check.h"
#include "train/kernels/optimizer.h"

namespace manta::train {

DeviceTrainer::DeviceTrainer(const Config& config, const Mesh& mesh, Communicator* comm, int device,
                             int64_t global_batch, int64_t micro_rows, std::unique_ptr<DeviceState> state)
    : config_(config),
      mesh_(mesh),
      comm_(comm),
      device_(device),
      global_batch_(global_batch),
      rows_(global_batch / mesh.batch_shards()),
      micro_rows_(micro_rows),
      micros_(rows_ / micro_rows),
      fsdp_(mesh.fsdp()),
      fsdp_rank_(mesh.Coord(device).fsdp),
      layout_(config.model, mesh.tensor(), mesh.Coord(device).tensor),
      model_(config.model, layout_, micro_rows, config.max_target_length),
      reducer_(comm, mesh, device) {
  TRAIN_CHECK(micro_rows_ > 0 && rows_ % micro_rows_ == 0) << "rows " << rows_ << " micro " << micro_rows_;
  const int blocks = layout_.num_blocks();
  const int tensor_rank = mesh.Coord(device).tensor;
  if (state && state->Holds(mesh.tensor(), tensor_rank, fsdp_, fsdp_rank_) &&
      static_cast<int>(state->param.size()) == blocks) {
    state_ = std::move(state);
    state_reused_ = true;
  } else {
    state_ = std::make_unique<DeviceState>();
    state_->tensor = mesh.tensor();
    state_->tensor_rank = tensor_rank;
    state_->fsdp = fsdp_;
    state_->fsdp_rank = fsdp_rank_;
    state_->param.resize(blocks);
    state_->m.resize(blocks);
    state_->v.resize(blocks);
    for (int b = 0; b < blocks; ++b) {
      const int64_t shard = ShardSize(layout_.block(b).size, fsdp_);
      state_->param[b].assign(shard, 0.0f);
      state_->m[b].assign(shard, 0.0f);
      state_->v[b].assign(shard, 0.0f);
    }
  }
  grad_.resize(blocks);
  full_.resize(blocks);
  acc64_.resize(blocks);
  gathered_.assign(blocks, false);
  for (int b = 0; b < blocks; ++b) {
    const int64_t shard = ShardSize(layout_.block(b).size, fsdp_);
    grad_[b].assign(shard, 0.0f);
    if (fsdp_ > 1) full_[b].resize(shard * fsdp_);  // written whole by each gather
    if (micros_ > 1 && config.exact_gradient_sums && !Reduces()) {
      acc64_[b].resize(layout_.block(b).size);  // written by the first micro-batch
    }
  }
  inputs_.resize(micro_rows_ * config.max_target_length);
  targets_.resize(micro_rows_ * config.max_target_length);
}

void DeviceTrainer::Init() {
  for (int b = 0; b < layout_.num_blocks(); ++b) {
    const int64_t size = layout_.block(b).size, shard = shard_size(b);
    const int64_t begin = std::min(size, shard * fsdp_rank_);
    const int64_t end = std::min(size, begin + shard);
    std::fill(state_->param[b].begin(), state_->param[b].end(), 0.0f);
    layout_.InitRange(b, config_.init_weights_seed, begin, end, state_->param[b].data());
    std::fill(state_->m[b].begin(), state_->m[b].end(), 0.0f);
    std::fill(state_->v[b].begin(), state_->v[b].end(), 0.0f);
  }
}

int64_t DeviceTrainer::BytesHeld() const {
  int64_t floats = model_.allocated_floats();
  int64_t doubles = 0;
  using Buffers = const std::vector<FloatBuffer>*;
  for (Buffers buffers : std::initializer_list<Buffers>{&state_->param, &state_->m, &state_->v, &grad_, &full_}) {
    for (const FloatBuffer& b : *buffers) floats += static_cast<int64_t>(b.size());
  }
  for (const DoubleBuffer& b : acc64_) doubles += static_cast<int64_t>(b.size());
  const int64_t ints = static_cast<int64_t>(inputs_.size() + targets_.size());
  return floats * static_cast<int64_t>(sizeof(float)) + doubles * static_cast<int64_t>(sizeof(double)) +
         ints * static_cast<int64_t>(sizeof(int32_t)) + reducer_.BytesHeld();
}

ShardView DeviceTrainer::View() {
  ShardView v;
  v.fields.resize(3);
  for (int b = 0; b < layout_.num_blocks(); ++b) {
    v.fields[0].push_back(state_->param[b].data());
    v.fields[1].push_back(state_->m[b].data());
    v.fields[2].push_back(state_->v[b].data());
    v.shard_sizes.push_back(shard_size(b));
  }
  return v;
}

const float* DeviceTrainer::AcquireBlock(int b) {
  if (fsdp_ == 1) return state_->param[b].data();
  // The parameters do not change within a step: one gather serves every micro-batch.
  if (!gathered_[b]) {
    comm_->AllGather(kFsdpAxis, device_, state_->param[b].data(), shard_size(b), full_[b].data());
    gathered_[b] = true;
  }
  return full_[b].data();
}

void DeviceTrainer::BlockGradReady(int b, float* grad) {
  const int64_t size = layout_.block(b).size, shard = shard_size(b);
  const bool first = micro_ == 0, last = micro_ + 1 == micros_;
  const bool reduce = Reduces();
  // The micro-batches' sum is kept where it is reduced from (the reducer's
  // padded copy) or, when nothing is reduced, in the gradient shard itself
  // (fsdp 1: the shard is the block): no full-size accumulator of its own,
  // which a fresh process would have to fault in.
  if (config_.exact_gradient_sums && (reduce || micros_ > 1)) {
    double* acc = reduce ? reducer_.PaddedExact(b, size, shard) : acc64_[b].data();
    if (acc == nullptr) return;  // a reduction failed: Drain reports it
    for (int64_t i = 0; i < size; ++i) acc[i] = first ? grad[i] : acc[i] + grad[i];
    if (!last) return;
    if (reduce) {
      reducer_.SubmitExact(b, shard, grad_[b].data());
    } else {
      for (int64_t i = 0; i < size; ++i) grad_[b][i] = static_cast<float>(acc[i]);
    }
    return;
  }
  float* acc = reduce ? reducer_.Padded(b, size, shard) : grad_[b].data();
  if (acc == nullptr) return;
  if (first) {
    std::memcpy(acc, grad, sizeof(float) * size);
  } else {
    for (int64_t i = 0; i < size; ++i) acc[i] += grad[i];
  }
  if (last && reduce) reducer_.SubmitPadded(b, shard, grad_[b].data());
}

void DeviceTrainer::TensorAllReduce(float* data, int64_t n) {
  if (mesh_.tensor() > 1) comm_->AllReduce(kTensorAxis, device_, data, n);
}

DeviceStepResult DeviceTrainer::ComputeGradients(int64_t step, const Dataset& data) {
  const int64_t seq = config_.max_target_length;
  const int64_t global_tokens = global_batch_ * seq;
  std::fill(gathered_.begin(), gathered_.end(), false);
  double loss_sum = 0;
  for (micro_ = 0; micro_ < micros_; ++micro_) {
    data.Fill(step, global_batch_, mesh_.BatchShard(device_) * rows_ + micro_ * micro_rows_, micro_rows_,
              inputs_.data(), targets_.data());
    loss_sum += model_.ForwardBackward(inputs_.data(), targets_.data(), 1.0f / static_cast<float>(global_tokens), this);
  }
  reducer_.Drain();
  // Squared norm of the unique gradient elements: tensor-replicated tensors
  // are counted on tensor rank 0 only.
  const bool tensor_rank0 = layout_.tensor_rank() == 0;
  double sq = 0;
  for (int b = 0; b < layout_.num_blocks(); ++b) {
    const int64_t shard = shard_size(b), begin = shard * fsdp_rank_;
    for (const TensorSpec& t : layout_.block(b).tensors) {
      if (t.split == Split::kReplicated && !tensor_rank0) continue;
      const int64_t lo = std::max(begin, t.offset), hi = std::min(begin + shard, t.offset + t.local_size());
      for (int64_t i = lo; i < hi; ++i) {
        const double g = grad_[b][i - begin];
        sq += g * g;
      }
    }
  }
  // Summed in double: the loss and the norm (which scales the update when
  // clipping) then do not depend on how the devices are grouped.
  double loss = loss_sum / static_cast<double>(global_tokens);
  if (mesh_.batch_shards() > 1) comm_->AllReduce(kBatchAxes, device_, &loss, 1);
  if (fsdp_ * mesh_.tensor() > 1) comm_->AllReduce(kFsdpAxis | kTensorAxis, device_, &sq, 1);
  DeviceStepResult result;
  result.loss = static_cast<float>(loss);
  result.grad_norm = static_cast<float>(std::sqrt(sq));
  result.learning_rate = LearningRate(config_, step);
  return result;
}

void DeviceTrainer::ApplyUpdate(int64_t step, const DeviceStepResult& r) {
  const double scale = ClipScale(config_, r.grad_norm);
  for (int b = 0; b < layout_.num_blocks(); ++b) {
    AdamWUpdate(config_, step, r.learning_rate, scale, grad_[b].data(), state_->param[b].data(), state_->m[b].data(),
                state_->v[b].data(), shard_size(b));
  }
}

void DeviceTrainer::BroadcastState(int root) {
  for (int b = 0; b < layout_.num_blocks(); ++b) {
    for (FloatBuffer* f : {&state_->param[b], &state_->m[b], &state_->v[b]}) {
      comm_->Broadcast(kDataAxis, device_, f->data(), static_cast<int64_t>(f->size()), root);
    }
  }
}

}  // namespace manta::train
