// The decoder's forward and backward pass on one logical device.
//
// The model sees only its tensor rank's slice of each block (see
// ParamLayout) and reaches the rest of the mesh through BlockOps: the
// trainer gathers FSDP shards when a block is acquired, reduces gradients
// when a block's gradient is ready, and sums partial activations over the
// tensor-parallel group (Megatron-style: one sum after the attention output
// and MLP down projections in forward, one after the input projections in
// backward).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/numeric/int128.h"
#include "train/kernels/buffer.h"
#include "train/kernels/config.h"
#include "train/kernels/layers.h"
#include "train/kernels/params.h"

namespace manta::train {

class BlockOps {
 public:
  virtual ~BlockOps() = default;
  // Full local-block parameters of block `b`, valid until the end of the
  // step. Called in forward order, once per block per step.
  virtual const float* AcquireBlock(int b) = 0;
  // The local-block gradient of block `b` is complete in `grad` (which the
  // callee may modify). Called once per block per step, in reverse order.
  virtual void BlockGradReady(int b, float* grad) = 0;
  // Sums `data` over the tensor-parallel group, in place.
  virtual void TensorAllReduce(float* data, int64_t n) = 0;
};

// Owns the activation buffers for one (batch, seq) shape. Not thread-safe;
// one per device.
class DecoderModel {
 public:
  DecoderModel(const ModelShape& shape, const ParamLayout& layout, int64_t batch, int64_t seq);

  // One forward and backward pass. Returns the sum of the token losses of
  // this batch; gradients are of loss_scale * that sum.
  double ForwardBackward(const int32_t* inputs, const int32_t* targets, float loss_scale, BlockOps* ops);
  // The forward pass alone: logits [batch * seq, vocab], valid until the
  // next call (ops' BlockGradReady is not called).
  const float* Forward(const int32_t* inputs, BlockOps* ops);

  // Floats the constructor allocates for this shape, without allocating.
  static absl::int128 BufferFloats(const ModelShape& shape, const ParamLayout& layout, int64_t batch, int64_t seq);
  // Floats this model holds (equals BufferFloats of its shape).
  int64_t allocated_floats() const;

 private:
  struct LayerActs {
    FloatBuffer x_in, h1, r1, q, k, v, probs, o, x_mid, h2, r2, gate, up, a;
  };
  void LayerForward(int layer, const float* params, float* x);
  void LayerBackward(int layer, const float* params, float* grad, float* dx, BlockOps* ops);

  const ModelShape shape_;
  const ParamLayout& layout_;
  const int64_t batch_, seq_, tokens_;
  const int64_t heads_, kv_heads_, mlp_;  // local to the tensor rank
  RopeTable rope_;

  BlockOps* ops_ = nullptr;  // set for the duration of ForwardBackward
  std::vector<const float*> block_params_;
  std::vector<LayerActs> acts_;
  FloatBuffer x_, xf_, hf_, rf_, logits_;
  FloatBuffer grad_, dx_, dh_, dbig_, dq_, dk_, dv_, scratch_;
};

}  // namespace manta::train
