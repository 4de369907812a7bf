#include "train/kernels/collective_group.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "train/kernels/check.h"

#if defined(MANTA_TSAN)
// TSan's dynamic annotations (libtsan exports them; gcc ships no header).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace manta::train {
namespace {

// The text of an exception gloo made on its own thread and rethrew here.
// libstdc++ hands it over through exception_ptr, whose count TSan cannot
// see (Debian's library is not instrumented), so in a TSan build
// (scripts/sanitize.sh tsan) the copy's reads are not checked. It is copied
// a byte at a time: strlen and memcpy are TSan's interceptors, which check
// their reads even inside an ignored region.
std::string ForeignExceptionText(const std::exception& e) {
#if defined(MANTA_TSAN)
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  std::string text;
  for (const char* c = e.what(); *c != '\0'; ++c) text.push_back(*c);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  return text;
#else
  return e.what();
#endif
}

}  // namespace

CollectiveGroup::CollectiveGroup(std::vector<int> members, std::vector<int> local, std::unique_ptr<NetGroup> flat,
                                 std::unique_ptr<NetGroup> intra, std::unique_ptr<NetGroup> inter)
    : members_(std::move(members)),
      local_(std::move(local)),
      flat_(std::move(flat)),
      intra_(std::move(intra)),
      inter_(std::move(inter)),
      args_(local_.size()) {
  TRAIN_CHECK(!local_.empty());
  TRAIN_CHECK(!intra_ == !inter_);
  for (size_t i = 1; i < local_.size(); ++i) TRAIN_CHECK(local_[i] == local_[0] + static_cast<int>(i));
}

int CollectiveGroup::IndexOf(int device) const {
  auto it = std::find(members_.begin(), members_.end(), device);
  return it == members_.end() ? -1 : static_cast<int>(it - members_.begin());
}

void CollectiveGroup::Meet(int index, Args args, const std::function<void(std::vector<Args>&)>& fn) {
  const int slot = index - local_[0];
  TRAIN_CHECK(slot >= 0 && slot < static_cast<int>(local_.size())) << "index " << index;
  absl::MutexLock lock(&mu_);
  if (!failure_.empty()) throw CollectiveError(failure_);
  args_[slot] = args;
  const int64_t my_generation = generation_;
  if (++arrived_ == static_cast<int>(local_.size())) {
    try {
      fn(args_);
    } catch (const std::exception& e) {
      failure_ = ForeignExceptionText(e);
    }
    arrived_ = 0;
    ++generation_;
    cv_.SignalAll();
  } else {
    while (generation_ == my_generation && failure_.empty()) cv_.Wait(&mu_);
  }
  if (!failure_.empty()) throw CollectiveError(failure_);
}

void CollectiveGroup::Abort(const std::string& why) {
  // The network first, without mu_: a member may hold mu_ while it runs a
  // network exchange, which this makes throw.
  for (NetGroup* g : {flat_.get(), intra_.get(), inter_.get()}) {
    if (g != nullptr) g->Abort(why);
  }
  {
    absl::MutexLock lock(&mu_);
    if (failure_.empty()) failure_ = why;
  }
  cv_.SignalAll();
}

template <typename T>
void CollectiveGroup::NetAllReduce(T* buf, int64_t n) {
  if (!intra_) return flat_->AllReduce(buf, n);
  intra_->AllReduce(buf, n);
  inter_->AllReduce(buf, n);
}

void CollectiveGroup::NetAllGather(const float* in, int64_t n, float* out) {
  if (!intra_) return flat_->AllGather(in, n, out);
  // Slices are the major index of the member order, so gathering inside
  // the slice first and then across slices lands every part in place.
  gather_scratch_.resize(n * intra_->size());
  intra_->AllGather(in, n, gather_scratch_.data());
  inter_->AllGather(gather_scratch_.data(), n * intra_->size(), out);
}

template <typename T>
void CollectiveGroup::NetReduceScatter(T* buf, int64_t n) {
  if (!intra_) return flat_->ReduceScatter(buf, n);
  // Across slices first: this slice's region gets the sum over slices,
  // then the slice splits it among its processes.
  inter_->ReduceScatter(buf, n);
  const int64_t region = n / inter_->size();
  intra_->ReduceScatter(buf + region * inter_->rank(), region);
}

template <typename T>
void CollectiveGroup::AllReduce(int index, T* data, int64_t n) {
  Meet(index, {data, nullptr, nullptr}, [&](std::vector<Args>& all) {
    T* sum = static_cast<T*>(all[0].data);
    for (size_t i = 1; i < all.size(); ++i) {
      const T* x = static_cast<const T*>(all[i].data);
      for (int64_t j = 0; j < n; ++j) sum[j] += x[j];
    }
    if (flat_) NetAllReduce(sum, n);
    for (size_t i = 1; i < all.size(); ++i) std::memcpy(all[i].data, sum, sizeof(T) * n);
  });
}

void CollectiveGroup::AllGather(int index, const float* in, int64_t n, float* out) {
  Meet(index, {nullptr, in, out}, [&](std::vector<Args>& all) {
    const int64_t local = static_cast<int64_t>(all.size());
    float* full = static_cast<float*>(all[0].out);
    if (flat_ && local == 1) {
      NetAllGather(static_cast<const float*>(all[0].in), n, full);
    } else if (flat_) {
      // This process's run of members, concatenated, is its contribution.
      scratch_.resize(local * n);
      for (int64_t i = 0; i < local; ++i) std::memcpy(&scratch_[i * n], all[i].in, sizeof(float) * n);
      NetAllGather(scratch_.data(), local * n, full);
    } else {
      for (int64_t i = 0; i < local; ++i) std::memcpy(full + i * n, all[i].in, sizeof(float) * n);
    }
    for (size_t i = 1; i < all.size(); ++i) std::memcpy(all[i].out, full, sizeof(float) * n * size());
  });
}

template <typename T>
void CollectiveGroup::ReduceScatter(int index, const T* in, int64_t n, T* out) {
  Meet(index, {nullptr, in, out}, [&](std::vector<Args>& all) {
    const int64_t total = n * size();
    T* sum;
    if constexpr (std::is_same_v<T, float>) {
      scratch_.resize(total);
      sum = scratch_.data();
    } else {
      scratch64_.resize(total);
      sum = scratch64_.data();
    }
    std::memcpy(sum, all[0].in, sizeof(T) * total);
    for (size_t i = 1; i < all.size(); ++i) {
      const T* x = static_cast<const T*>(all[i].in);
      for (int64_t j = 0; j < total; ++j) sum[j] += x[j];
    }
    if (flat_) NetReduceScatter(sum, total);  // fills this process's part
    for (size_t i = 0; i < all.size(); ++i) {
      std::memcpy(all[i].out, sum + (local_[0] + i) * n, sizeof(T) * n);
    }
  });
}

template void CollectiveGroup::AllReduce<float>(int, float*, int64_t);
template void CollectiveGroup::AllReduce<double>(int, double*, int64_t);
template void CollectiveGroup::ReduceScatter<float>(int, const float*, int64_t, float*);
template void CollectiveGroup::ReduceScatter<double>(int, const double*, int64_t, double*);

void CollectiveGroup::Broadcast(int index, float* data, int64_t n, int root) {
  Meet(index, {data, nullptr, nullptr}, [&](std::vector<Args>& all) {
    const int root_slot = root - local_[0];
    const bool root_here = root_slot >= 0 && root_slot < static_cast<int>(all.size());
    float* src = static_cast<float*>(root_here ? all[root_slot].data : all[0].data);
    if (flat_) flat_->Broadcast(src, n, root / static_cast<int>(local_.size()));
    for (auto& a : all) {
      if (a.data != src) std::memcpy(a.data, src, sizeof(float) * n);
    }
  });
}

void CollectiveGroup::Barrier(int index) {
  Meet(index, {}, [&](std::vector<Args>&) {
    if (flat_) flat_->Barrier();
  });
}

}  // namespace manta::train
