// One group of the mesh as seen from one process: its members, the local
// ones among them, and (when the group spans processes) the gloo groups
// that join the processes: a flat one over all of them and, when the group
// spans several slices with several of its processes in each, one inside
// this process's slice (ici) and one across slices (dcn) among the
// processes at the same position. Internal to Communicator.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "train/kernels/net_group.h"

namespace manta::train {

class CollectiveGroup {
 public:
  // `members`: global device ids in group order; `local`: the positions in
  // `members` of this process's devices (consecutive); `flat`: the group's
  // processes in member order, null when the group lives in this process
  // only; `intra` and `inter`: the two levels, both null when the group is
  // not split hierarchically.
  CollectiveGroup(std::vector<int> members, std::vector<int> local, std::unique_ptr<NetGroup> flat,
                  std::unique_ptr<NetGroup> intra, std::unique_ptr<NetGroup> inter);

  int size() const { return static_cast<int>(members_.size()); }
  // Position of `device` in the group, or -1.
  int IndexOf(int device) const;

  // `index` is the caller's position in the group (see Communicator).
  // Sums: float, or double for exact sums whatever the group's shape.
  template <typename T>
  void AllReduce(int index, T* data, int64_t n);
  void AllGather(int index, const float* in, int64_t n, float* out);
  template <typename T>
  void ReduceScatter(int index, const T* in, int64_t n, T* out);
  void Broadcast(int index, float* data, int64_t n, int root);
  void Barrier(int index);

  // From any thread: local members waiting to meet, and every later call,
  // throw CollectiveError; the network groups are aborted (see NetGroup).
  void Abort(const std::string& why);

 private:
  // Each member's buffers, of the element type of the call.
  struct Args {
    void* data = nullptr;
    const void* in = nullptr;
    void* out = nullptr;
  };
  // Blocks until every local member has arrived; the last one to arrive
  // runs `fn` over all local members' arguments, then all return. When `fn`
  // throws or the group is aborted, every member throws CollectiveError.
  void Meet(int index, Args args, const std::function<void(std::vector<Args>&)>& fn);
  // Exchanges among the group's processes (one call per process),
  // through the two levels when there are two.
  template <typename T>
  void NetAllReduce(T* buf, int64_t n);
  void NetAllGather(const float* in, int64_t n, float* out);
  // Leaves this process's n / processes part of buf summed.
  template <typename T>
  void NetReduceScatter(T* buf, int64_t n);

  const std::vector<int> members_;
  const std::vector<int> local_;  // positions in members_
  // Used only by the thread that runs a Meet (serialized by mu_).
  const std::unique_ptr<NetGroup> flat_, intra_, inter_;
  FloatBuffer gather_scratch_, scratch_;
  DoubleBuffer scratch64_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Args> args_ ABSL_GUARDED_BY(mu_);
  std::string failure_ ABSL_GUARDED_BY(mu_);  // set once: every call throws
};

}  // namespace manta::train
