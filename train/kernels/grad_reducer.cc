#include "train/kernels/grad_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace manta::train {

GradientReducer::GradientReducer(Communicator* comm, const Mesh& mesh, int device)
    : comm_(comm), device_(device), fsdp_(mesh.fsdp()), data_(mesh.data()) {
  thread_ = std::thread([this] { Loop(); });
}

GradientReducer::~GradientReducer() {
  try {
    Drain();
  } catch (const CollectiveError&) {
    // The owner saw (or no longer cares about) the failure.
  }
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

double* GradientReducer::PaddedExact(int block, int64_t size, int64_t shard) {
  absl::MutexLock lock(&mu_);
  if (!failure_.empty()) return nullptr;  // Drain reports it
  auto& bufs = padded64_[block];
  bufs.first.resize(shard * fsdp_);
  bufs.second.resize(shard);
  std::fill(bufs.first.begin() + size, bufs.first.end(), 0.0);
  return bufs.first.data();
}

void GradientReducer::SubmitExact(int block, int64_t shard, float* shard_out) {
  std::pair<DoubleBuffer, DoubleBuffer>* bufs;
  {
    absl::MutexLock lock(&mu_);
    bufs = &padded64_[block];
  }
  auto task = [this, bufs, shard, shard_out] {
    double* padded = bufs->first.data();
    double* reduced = bufs->second.data();
    if (fsdp_ > 1) {
      comm_->ReduceScatter(kFsdpAxis, device_, padded, shard, reduced);
    } else {
      std::memcpy(reduced, padded, sizeof(double) * shard);
    }
    if (data_ > 1) comm_->AllReduce(kDataAxis, device_, reduced, shard);
    for (int64_t i = 0; i < shard; ++i) shard_out[i] = static_cast<float>(reduced[i]);
  };
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
  }
  cv_.SignalAll();
}

float* GradientReducer::Padded(int block, int64_t size, int64_t shard) {
  absl::MutexLock lock(&mu_);
  if (!failure_.empty()) return nullptr;  // Drain reports it
  FloatBuffer& buf = padded_[block];
  buf.resize(shard * fsdp_);
  std::fill(buf.begin() + size, buf.end(), 0.0f);
  return buf.data();
}

void GradientReducer::SubmitPadded(int block, int64_t shard, float* shard_out) {
  float* padded;
  {
    absl::MutexLock lock(&mu_);
    padded = padded_[block].data();
  }
  auto task = [this, padded, shard, shard_out] {
    if (fsdp_ > 1) {
      comm_->ReduceScatter(kFsdpAxis, device_, padded, shard, shard_out);
    } else {
      std::memcpy(shard_out, padded, sizeof(float) * shard);
    }
    if (data_ > 1) comm_->AllReduce(kDataAxis, device_, shard_out, shard);
  };
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
  }
  cv_.SignalAll();
}

namespace {

int64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int64_t GradientReducer::BytesHeld() const {
  absl::MutexLock lock(&mu_);
  int64_t floats = 0, doubles = 0;
  for (const auto& [block, buf] : padded_) floats += static_cast<int64_t>(buf.size());
  for (const auto& [block, bufs] : padded64_) doubles += static_cast<int64_t>(bufs.first.size() + bufs.second.size());
  return floats * static_cast<int64_t>(sizeof(float)) + doubles * static_cast<int64_t>(sizeof(double));
}

void GradientReducer::Drain() {
  const auto start = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  while (!queue_.empty() || running_ != 0) cv_.Wait(&mu_);
  drain_nanos_ += NanosSince(start);
  if (!failure_.empty()) throw CollectiveError(failure_);
}

void GradientReducer::Loop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
    if (queue_.empty()) return;  // stopping with nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    mu_.Unlock();
    const auto start = std::chrono::steady_clock::now();
    std::string failed;
    try {
      task();
    } catch (const std::exception& e) {
      failed = e.what();
    } catch (...) {
      failed = "a gradient reduction failed";
    }
    busy_nanos_ += NanosSince(start);
    mu_.Lock();
    --running_;
    if (!failed.empty()) {
      if (failure_.empty()) failure_ = failed;
      queue_.clear();
    }
    cv_.SignalAll();
  }
}

}  // namespace manta::train
