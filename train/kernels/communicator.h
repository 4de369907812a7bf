// Collectives over groups of the device mesh.
//
// Each local device runs on its own thread and calls the collectives for
// itself; a group is every device that agrees with the caller outside the
// axes of `mask` (see Mesh::GroupMembers). The exchange is hierarchical:
// the local devices of a group meet in memory first, then one thread per
// process runs the exchange among the group's processes through gloo over
// TCP. Groups that live inside one process never touch the network.
//
//   auto comm = Communicator::Create(mesh, env);
//   // on the thread of device d:
//   (*comm)->AllReduce(kTensorAxis, d, activations, n);
//   (*comm)->AllGather(kFsdpAxis, d, shard, shard_size, full);
//
// Every member of a group must make the same sequence of calls with the
// same sizes (SPMD). A peer that fails mid-collective, or Abort, breaks the
// communicator: the pending and every later collective of every local
// device throws CollectiveError (net_group.h); build a new one to go on.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "train/kernels/collective_error.h"
#include "train/kernels/mesh.h"

namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace manta::train {

class RendezvousServer;
class RendezvousClient;
class CollectiveGroup;

// Thread-safe: any local device thread may call any method for its device.
class Communicator {
 public:
  // Connects to the coordinator (process 0 starts the rendezvous server
  // there) and builds the gloo contexts of every group that spans
  // processes. Blocks until every process has joined or `timeout` passes.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const Mesh& mesh, const DistributedEnv& env,
                                                              absl::Duration timeout = absl::Seconds(120));
  // The same in two steps, so another thread can Abort while Connect waits
  // for the other processes: Connect returns Cancelled then.
  static std::unique_ptr<Communicator> Make(const Mesh& mesh, const DistributedEnv& env);
  absl::Status Connect(absl::Duration timeout);
  ~Communicator();

  // From any thread: breaks the communicator (see above) with `why`, and
  // closes its connections, so peers blocked on this process fail as well.
  // Idempotent.
  void Abort(const std::string& why);
  bool broken() const { return broken_.load(); }

  // Sums `data` (n floats) over the group, in place. The double forms sum
  // exactly enough that the result does not depend on the group's shape.
  void AllReduce(unsigned mask, int device, float* data, int64_t n);
  void AllReduce(unsigned mask, int device, double* data, int64_t n);
  // out[i * n, (i + 1) * n) = `in` of the group's i-th member.
  void AllGather(unsigned mask, int device, const float* in, int64_t n, float* out);
  // out (n floats) = sum over members of in[i * n, (i + 1) * n), where i is
  // the caller's index in the group; `in` holds group-size * n floats.
  void ReduceScatter(unsigned mask, int device, const float* in, int64_t n, float* out);
  void ReduceScatter(unsigned mask, int device, const double* in, int64_t n, double* out);
  // Copies the data of the group's `root`-th member to every member.
  void Broadcast(unsigned mask, int device, float* data, int64_t n, int root);
  void Barrier(unsigned mask, int device);

  int GroupSize(unsigned mask) const;
  // Index of `device` within its group.
  int IndexInGroup(unsigned mask, int device) const;

  // Seconds spent inside collectives called for `device`, from any thread.
  double SecondsInCollectives(int device) const;
  const Mesh& mesh() const { return mesh_; }

 private:
  Communicator(const Mesh& mesh, const DistributedEnv& env);
  CollectiveGroup& Group(unsigned mask, int device);
  // Builds the groups; the rendezvous is set up.
  absl::Status ConnectGroups(std::shared_ptr<gloo::transport::Device> device, absl::Duration timeout);
  // Runs a collective; a failure breaks the communicator and throws.
  template <typename F>
  void Guarded(const char* what, F&& f);

  const Mesh mesh_;
  const DistributedEnv env_;
  std::unique_ptr<RendezvousServer> server_;
  std::unique_ptr<RendezvousClient> store_;
  std::shared_ptr<gloo::transport::Device> device_;  // null with one process
  // Keyed by (mask, first member); built in Connect, read-only afterwards.
  std::map<std::pair<unsigned, int>, std::unique_ptr<CollectiveGroup>> groups_;
  std::atomic<bool> broken_{false};
  std::atomic<bool> connected_{false};  // groups_ is complete (Abort may walk it)
  absl::Mutex abort_mu_;                // serializes Abort with the end of Connect
  std::string broken_why_ ABSL_GUARDED_BY(abort_mu_);
  std::vector<std::atomic<int64_t>> nanos_in_collectives_;  // per local device
};

}  // namespace manta::train
