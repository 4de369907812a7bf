#include "train/kernels/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "train/kernels/check.h"
#include "train/kernels/collective_group.h"
#include "train/kernels/loop_ticker.h"
#include "train/kernels/rendezvous.h"

namespace manta::train {
namespace {

constexpr unsigned kGroupMasks[] = {kDataAxis, kFsdpAxis, kTensorAxis, kBatchAxes, kFsdpAxis | kTensorAxis, kAllAxes};

class Timer {
 public:
  explicit Timer(std::atomic<int64_t>* sink) : sink_(sink), start_(std::chrono::steady_clock::now()) {}
  ~Timer() {
    *sink_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::atomic<int64_t>* sink_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

Communicator::Communicator(const Mesh& mesh, const DistributedEnv& env)
    : mesh_(mesh), env_(env), nanos_in_collectives_(env.chips_per_host) {}

Communicator::~Communicator() {
  // Closing each connection waits for a turn of the device's loop.
  LoopTicker ticker(device_);
  groups_.clear();
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const Mesh& mesh, const DistributedEnv& env,
                                                                   absl::Duration timeout) {
  std::unique_ptr<Communicator> comm = Make(mesh, env);
  absl::Status s = comm->Connect(timeout);
  if (!s.ok()) return s;
  return comm;
}

std::unique_ptr<Communicator> Communicator::Make(const Mesh& mesh, const DistributedEnv& env) {
  return std::unique_ptr<Communicator>(new Communicator(mesh, env));
}

absl::Status Communicator::Connect(absl::Duration timeout) {
  std::shared_ptr<gloo::transport::Device> device;
  if (env_.num_processes > 1) {
    std::string host;
    int port = 0;
    absl::Status s = ParseHostPort(env_.coordinator_address, &host, &port);
    if (!s.ok()) return s;
    if (port == 0) {
      return absl::InvalidArgumentError("coordinator address '" + env_.coordinator_address +
                                        "' needs a port when there are several processes");
    }
    if (env_.process_id == 0) {
      auto server = RendezvousServer::Start(port);
      if (!server.ok()) return server.status();
      server_ = std::move(*server);
    }
    auto store = RendezvousClient::Connect(env_.coordinator_address, timeout, &broken_);
    if (!store.ok()) {
      absl::MutexLock lock(&abort_mu_);
      if (broken_) return absl::CancelledError("aborted while joining: " + broken_why_);
      return store.status();
    }
    {
      absl::MutexLock lock(&abort_mu_);
      store_ = std::move(*store);
      if (broken_) return absl::CancelledError("aborted while joining: " + broken_why_);
    }
    gloo::transport::tcp::attr attr;
    try {
      attr.hostname = GlooListenAddress(env_.host_address.empty() ? store_->LocalAddress() : env_.host_address);
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("gloo device on '", attr.hostname, "': ", e.what()));
    }
  }
  device_ = device;
  absl::Status s;
  {
    // Each connection this process initiates waits for a turn of the loop.
    LoopTicker ticker(device);
    s = ConnectGroups(device, timeout);
  }
  absl::MutexLock lock(&abort_mu_);
  if (broken_) return absl::CancelledError("aborted while joining: " + broken_why_);
  if (s.ok()) connected_ = true;
  return s;
}

absl::Status Communicator::ConnectGroups(std::shared_ptr<gloo::transport::Device> device, absl::Duration timeout) {
  const Mesh& mesh = mesh_;
  const DistributedEnv& env = env_;
  Communicator* comm = this;
  const int me = env.process_id;
  for (unsigned mask : kGroupMasks) {
    for (int d = 0; d < mesh.num_devices(); ++d) {
      std::vector<int> members = mesh.GroupMembers(mask, d);
      if (members[0] != d) continue;  // each group once, named by its first member
      std::vector<int> processes, local;
      std::map<int, std::vector<int>> positions;
      for (int i = 0; i < static_cast<int>(members.size()); ++i) {
        const int p = mesh.ProcessOf(members[i]);
        if (processes.empty() || processes.back() != p) processes.push_back(p);
        positions[p].push_back(i);
        if (p == me) local.push_back(i);
      }
      for (const auto& [p, pos] : positions) {
        if (pos.size() != positions.begin()->second.size() ||
            pos.back() - pos.front() + 1 != static_cast<int>(pos.size()) || processes.size() != positions.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("mesh ", mesh.DebugString(), " splits a group of devices unevenly over processes (",
                           "chips_per_host ", env.chips_per_host, "); choose axes whose groups hold whole processes"));
        }
      }
      if (local.empty()) continue;
      std::unique_ptr<NetGroup> flat, intra, inter;
      if (processes.size() > 1) {
        const std::string name = absl::StrCat("m", mask, "/g", d);
        auto rank_of = [me](const std::vector<int>& procs) {
          return static_cast<int>(std::find(procs.begin(), procs.end(), me) - procs.begin());
        };
        // Two levels when the group spans slices with several processes in each.
        const int per_slice = env.num_processes / env.num_slices;
        std::map<int, std::vector<int>> by_slice;
        for (int p : processes) by_slice[p / per_slice].push_back(p);
        const size_t in_slice = by_slice.begin()->second.size();
        bool two_levels = by_slice.size() > 1 && in_slice > 1;
        for (const auto& [slice, procs] : by_slice) two_levels &= procs.size() == in_slice;
        auto connect = [&](const std::string& prefix, const std::vector<int>& procs,
                           std::unique_ptr<NetGroup>* out) -> absl::Status {
          try {
            gloo::rendezvous::PrefixStore prefixed(prefix, *comm->store_);
            auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_of(procs), static_cast<int>(procs.size()));
            ctx->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
            ctx->connectFullMesh(prefixed, device);
            *out = std::make_unique<NetGroup>(ctx);
          } catch (const std::exception& e) {
            return absl::UnavailableError(
                absl::StrCat("joining collective group ", prefix, " at ", env.coordinator_address, ": ", e.what()));
          }
          return absl::OkStatus();
        };
        absl::Status s = connect(name, processes, &flat);
        if (s.ok() && two_levels) {
          const int my_slice = me / per_slice;
          const std::vector<int>& mates = by_slice[my_slice];
          const int position = rank_of(mates);
          std::vector<int> peers;
          for (const auto& [slice, procs] : by_slice) peers.push_back(procs[position]);
          s = connect(absl::StrCat(name, "/ici", my_slice), mates, &intra);
          if (s.ok()) s = connect(absl::StrCat(name, "/dcn", position), peers, &inter);
        }
        if (!s.ok()) return s;
      }
      comm->groups_[{mask, d}] = std::make_unique<CollectiveGroup>(std::move(members), std::move(local),
                                                                   std::move(flat), std::move(intra), std::move(inter));
    }
  }
  return absl::OkStatus();
}

void Communicator::Abort(const std::string& why) {
  absl::MutexLock lock(&abort_mu_);
  if (broken_.exchange(true)) return;
  broken_why_ = why;
  if (store_) store_->Abort();  // a Connect waiting on the coordinator fails now
  if (!connected_) return;      // Connect sees broken_ when it ends
  for (auto& [key, group] : groups_) group->Abort(why);
}

template <typename F>
void Communicator::Guarded(const char* what, F&& f) {
  if (broken_) {
    absl::MutexLock lock(&abort_mu_);
    throw CollectiveError(absl::StrCat(what, ": the collective group is broken (", broken_why_, ")"));
  }
  try {
    f();
  } catch (const std::exception& e) {
    const std::string why = absl::StrCat("collective ", what, " failed: ", e.what());
    Abort(why);
    throw CollectiveError(why);
  }
}

CollectiveGroup& Communicator::Group(unsigned mask, int device) {
  const int first = mesh_.GroupMembers(mask, device)[0];
  auto it = groups_.find({mask, first});
  TRAIN_CHECK(it != groups_.end()) << "no group mask=" << mask << " device=" << device;
  return *it->second;
}

int Communicator::GroupSize(unsigned mask) const { return static_cast<int>(mesh_.GroupMembers(mask, 0).size()); }

int Communicator::IndexInGroup(unsigned mask, int device) const {
  std::vector<int> members = mesh_.GroupMembers(mask, device);
  return static_cast<int>(std::find(members.begin(), members.end(), device) - members.begin());
}

double Communicator::SecondsInCollectives(int device) const {
  return nanos_in_collectives_[device - env_.first_device()].load() * 1e-9;
}

#define TRAIN_COLLECTIVE(name, call)                                 \
  Timer timer(&nanos_in_collectives_[device - env_.first_device()]); \
  CollectiveGroup& group = Group(mask, device);                      \
  const int index = group.IndexOf(device);                           \
  Guarded(name, [&] { call; })

void Communicator::AllReduce(unsigned mask, int device, float* data, int64_t n) {
  TRAIN_COLLECTIVE("allreduce", group.AllReduce(index, data, n));
}

void Communicator::AllReduce(unsigned mask, int device, double* data, int64_t n) {
  TRAIN_COLLECTIVE("allreduce", group.AllReduce(index, data, n));
}

void Communicator::ReduceScatter(unsigned mask, int device, const double* in, int64_t n, double* out) {
  TRAIN_COLLECTIVE("reduce_scatter", group.ReduceScatter(index, in, n, out));
}

void Communicator::AllGather(unsigned mask, int device, const float* in, int64_t n, float* out) {
  TRAIN_COLLECTIVE("allgather", group.AllGather(index, in, n, out));
}

void Communicator::ReduceScatter(unsigned mask, int device, const float* in, int64_t n, float* out) {
  TRAIN_COLLECTIVE("reduce_scatter", group.ReduceScatter(index, in, n, out));
}

void Communicator::Broadcast(unsigned mask, int device, float* data, int64_t n, int root) {
  TRAIN_COLLECTIVE("broadcast", group.Broadcast(index, data, n, root));
}

void Communicator::Barrier(unsigned mask, int device) { TRAIN_COLLECTIVE("barrier", group.Barrier(index)); }

}  // namespace manta::train
