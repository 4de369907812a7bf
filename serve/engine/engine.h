// The serving engine of one tensor rank: the decoder's forward pass over a
// preallocated KV cache of `slots` sequences of up to `max_len` tokens.
//
//   Engine engine(weights, {.slots = 8, .max_len = 512}, /*sum=*/nullptr);
//   engine.Prefill(slot, prompt, logits);          // the prompt's K/V into the slot
//   engine.Decode({s0, s1}, {tok0, tok1}, logits);  // one token for each slot at once
//   engine.Release(slot);                           // the slot is free for the next request
//
// Decode runs every listed slot as one batch: the weight matrices are read
// once per step whatever the batch, which is what continuous batching buys.
// With tensor parallelism each rank holds its query and KV heads and its
// MLP columns; `sum` adds the ranks' partial outputs after the attention
// output and MLP down projections (Megatron-style, as in training), so every
// rank must run the same calls in the same order.
//
// Not thread-safe: one thread drives an engine.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "serve/engine/packed_matrix.h"
#include "serve/engine/sampler.h"
#include "serve/engine/weights.h"
#include "train/kernels/buffer.h"
#include "train/kernels/layers.h"

namespace manta::serve {

// Sums a buffer over the tensor-parallel ranks, in place.
class TensorSum {
 public:
  virtual ~TensorSum() = default;
  virtual void Sum(float* data, int64_t n) = 0;
};

// Disaggregated serving: prompts are prefilled by other engines and their
// K/V arrive here. The batcher hands a prompt off (with how to sample) and,
// at a later step, takes the prefilled sequence into a free slot: its K/V
// imported and its first output token, drawn by the prefill engine.
class RemotePrefill {
 public:
  // One prefill taken into a slot.
  struct Arrival {
    int64_t id = 0;
    int32_t first_token = 0;
  };
  virtual ~RemotePrefill() = default;
  // Hands `prompt` off as request `id`; returns at once. Unavailable when the
  // group cannot go on.
  virtual absl::Status StartPrefill(int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& sampling) = 0;
  // Imports arrived prefills, in arrival order, one into each of
  // `free_slots` (as many as have arrived). With `wait`, blocks a little for
  // a first arrival.
  virtual absl::StatusOr<std::vector<Arrival>> ImportArrived(const std::vector<int>& free_slots, bool wait) = 0;
  // Prompts that may be handed off and not yet imported (the transfer
  // backlog's bound).
  virtual int max_in_flight() const = 0;
};

// What a batcher drives: an engine, or the ranks of a tensor-parallel group
// running the same calls.
class StepRunner {
 public:
  // Non-null when prompts are prefilled elsewhere (Prefill is then unused).
  virtual RemotePrefill* remote() { return nullptr; }
  virtual ~StepRunner() = default;
  virtual absl::Status Prefill(int slot, const std::vector<int32_t>& prompt, float* logits) = 0;
  virtual absl::Status Decode(const std::vector<int>& slots, const std::vector<int32_t>& tokens, float* logits) = 0;
  virtual void Release(int slot) = 0;
  virtual int slots() const = 0;
  virtual int64_t max_len() const = 0;
  virtual int64_t vocab() const = 0;
};

struct EngineOptions {
  int slots = 8;          // sequences decoded at once
  int64_t max_len = 512;  // tokens per sequence, prompt and output
  // How the engine keeps the projections (see packed_matrix.h); the
  // embedding and the norms stay F32.
  WeightFormat weights = WeightFormat::kF32;
};

class Engine : public StepRunner {
 public:
  // The engine packs its own copy of `weights` (which may go once the
  // engine is built); `sum` may be null when tensor is 1.
  Engine(const ServingWeights& weights, const EngineOptions& options, TensorSum* sum);

  // Writes the prompt's K/V at positions [0, n) of `slot` (which must be
  // free) and the logits of its last token to `logits` (vocab floats).
  absl::Status Prefill(int slot, const std::vector<int32_t>& prompt, float* logits) override;
  // For each i, feeds tokens[i] at the next position of slots[i] (distinct
  // slots, each holding a sequence shorter than max_len); logits[i * vocab..]
  // are the next token's.
  absl::Status Decode(const std::vector<int>& slots, const std::vector<int32_t>& tokens, float* logits) override;
  // Frees the slot (its K/V are overwritten by the next prefill).
  void Release(int slot) override;

  int64_t length(int slot) const { return lengths_[slot]; }
  int slots() const override { return options_.slots; }
  int64_t max_len() const override { return options_.max_len; }
  int64_t vocab() const override { return shape_.vocab_size; }
  // K and V floats one token takes on this rank: 2 x layers x kv heads x head_dim.
  int64_t KvFloatsPerToken() const { return 2 * shape_.num_layers * kvw_; }
  // Bytes of the packed projections and output head in options' format:
  // what a decode step reads of the weights, besides an embedding row for
  // each token.
  int64_t weight_bytes() const { return weight_bytes_; }
  // The first `len` positions of a slot's K/V (KvFloatsPerToken() * len
  // floats), and the reverse: what a prefill engine hands a decode engine.
  void ExportKv(int slot, int64_t len, float* out) const;
  absl::Status ImportKv(int slot, int64_t len, const float* in);

 private:
  // Runs rows (token, slot, position) through the decoder, writing each
  // row's K/V to its slot; logits of the rows with want_logits go to out.
  void Forward(int64_t n, const int32_t* tokens, const int* row_slot, const int32_t* positions, bool last_only,
               float* out);
  void Layer(int layer, int64_t n, const int* row_slot, const int32_t* positions);
  void Attend(int layer, int64_t n, const int* row_slot, const int32_t* positions);
  void PackWeights(const ServingWeights& weights);
  float* KCache(int slot, int layer) { return kcache_.data() + (slot * shape_.num_layers + layer) * cache_stride_; }
  float* VCache(int slot, int layer) { return vcache_.data() + (slot * shape_.num_layers + layer) * cache_stride_; }

  // One decoder layer's weights as the engine reads them.
  struct LayerWeights {
    PackedMatrix wq, wk, wv, wo, gate, up, down;
    std::vector<float> attn_norm, mlp_norm;
  };

  const train::ModelShape shape_;
  const EngineOptions options_;
  TensorSum* sum_;
  const int64_t heads_, kv_heads_, mlp_, qw_, kvw_, cache_stride_;
  train::RopeTable rope_;
  // Constant after construction: the weights, projections packed into one
  // arena (2 MiB pages where the kernel gives them).
  std::vector<uint8_t, train::HugePageAllocator<uint8_t>> arena_;
  int64_t weight_bytes_ = 0;  // of arena_, the matrices' Layout bytes
  std::vector<LayerWeights> layers_;
  PackedMatrix head_;
  std::vector<float> final_norm_;
  train::FloatBuffer embed_;      // vocab x emb_dim
  std::vector<int64_t> lengths_;  // tokens held by each slot, 0 when free
  std::vector<bool> busy_;
  train::FloatBuffer kcache_, vcache_;
  // Scratch for up to max(max_len, slots) rows: no step allocates.
  train::FloatBuffer x_, h_, q_, k_, v_, o_, proj_, gate_, up_, scores_;
  std::vector<float> rinv_;
  std::vector<int> row_slot_;
  std::vector<int32_t> positions_;
  std::vector<char> seen_;
};

}  // namespace manta::serve
