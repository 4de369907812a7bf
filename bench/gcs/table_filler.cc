#include "bench/gcs/table_filler.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/id.h"
#include "common/rpc/client_call.h"
#include "common/rpc/grpc_util.h"
#include "common/status.h"
#include "proto/gcs_service.grpc.pb.h"

namespace manta::bench {
namespace {

constexpr int kWindow = 256;  // calls in flight
constexpr absl::Duration kFillCallTimeout = absl::Seconds(30);

using Finish = std::function<void(const absl::Status&)>;

// Runs start(i, finish) for every i below `count`, at most kWindow at once;
// each call ends by invoking `finish` once (from any thread). The first
// error, once every started call has ended.
absl::Status RunWindowed(int count, const std::function<void(int, Finish)>& start) {
  // Shared: a call's last finish may still be unlocking when this returns.
  struct State {
    absl::Mutex mu;
    int in_flight ABSL_GUARDED_BY(mu) = 0;
    absl::Status first ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<State>();
  for (int i = 0; i < count; ++i) {
    {
      absl::MutexLock lock(&state->mu);
      state->mu.Await(absl::Condition(
          +[](int* n) { return *n < kWindow; }, &state->in_flight));
      if (!state->first.ok()) break;
      ++state->in_flight;
    }
    start(i, [state](const absl::Status& s) {
      absl::MutexLock lock(&state->mu);
      if (!s.ok() && state->first.ok()) state->first = s;
      --state->in_flight;
    });
  }
  absl::MutexLock lock(&state->mu);
  state->mu.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &state->in_flight));
  return state->first;
}

// Calls `count_done` (how many are done; an error ends the wait) with a
// growing pause until it reaches `want`.
absl::Status WaitForCount(int want, absl::Duration timeout, const std::function<absl::StatusOr<int>()>& count_done,
                          const char* what) {
  absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(10);
  int done = 0;
  while (true) {
    absl::StatusOr<int> n = count_done();
    if (!n.ok()) return n.status();
    done = *n;
    if (done >= want) return absl::OkStatus();
    if (absl::Now() > deadline) break;
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(250));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(done, " of ", want, " ", what, " after ", absl::FormatDuration(timeout)));
}

template <typename Reply, typename Request, typename StartFn>
absl::StatusOr<Reply> SyncCall(const std::string& token, const Request& request, StartFn start) {
  absl::Notification done;
  absl::Status status;
  Reply out;
  rpc::UnaryCall<Reply>(nullptr, token, kFillCallTimeout, request, start, [&](const absl::Status& s, Reply&& reply) {
    status = s;
    out = std::move(reply);
    done.Notify();
  });
  done.WaitForNotification();
  if (!status.ok()) return status;
  return out;
}

}  // namespace

struct TableFiller::Stubs {
  std::unique_ptr<rpc::JobGcsService::Stub> jobs;
  std::unique_ptr<rpc::ActorGcsService::Stub> actors;
  std::unique_ptr<rpc::PlacementGroupGcsService::Stub> groups;
};

TableFiller::TableFiller(const std::string& address, std::string token)
    : token_(std::move(token)), stubs_(std::make_unique<Stubs>()) {
  auto channel = rpc::MakeChannel(address);
  stubs_->jobs = rpc::JobGcsService::NewStub(channel);
  stubs_->actors = rpc::ActorGcsService::NewStub(channel);
  stubs_->groups = rpc::PlacementGroupGcsService::NewStub(channel);
}

TableFiller::~TableFiller() = default;

absl::Status TableFiller::AddJob() {
  rpc::AddJobRequest request;
  request.mutable_job()->set_driver_ip("127.0.0.1");
  request.mutable_job()->set_driver_pid(getpid());
  request.mutable_job()->set_entrypoint("bench_gcs_load");
  auto reply = SyncCall<rpc::AddJobReply>(token_, request, [this](auto* ctx, auto* req, auto* reply, auto cb) {
    stubs_->jobs->async()->AddJob(ctx, req, reply, std::move(cb));
  });
  if (!reply.ok()) return reply.status();
  job_id_ = reply->job_id();
  return absl::OkStatus();
}

absl::Status TableFiller::CreateActors(int count, double cpus, absl::Duration timeout) {
  rpc::Address owner;
  owner.set_ip("127.0.0.1");
  owner.set_worker_id(WorkerId::FromRandom().Binary());
  RETURN_IF_ERROR(RunWindowed(count, [&](int i, Finish finish) {
    rpc::RegisterActorRequest request;
    rpc::TaskSpec* spec = request.mutable_creation_task();
    spec->set_type(rpc::TaskSpec::ACTOR_CREATION_TASK);
    spec->set_task_id(TaskId::FromRandom().Binary());
    spec->set_job_id(job_id_);
    spec->set_actor_id(ActorId::FromRandom().Binary());
    spec->set_function_name("BenchActor");
    (*spec->mutable_resources())["CPU"] = cpus;
    *spec->mutable_caller_address() = owner;
    rpc::ActorCreationOptions* o = spec->mutable_actor_creation();
    o->set_detached(true);
    o->set_name(absl::StrCat("bench-actor-", i));
    o->set_ray_namespace("bench");
    o->set_class_name("BenchActor");
    rpc::UnaryCall<rpc::RegisterActorReply>(
        nullptr, token_, kFillCallTimeout, std::move(request),
        [this](auto* ctx, auto* req, auto* reply, auto cb) {
          stubs_->actors->async()->RegisterActor(ctx, req, reply, std::move(cb));
        },
        [finish](const absl::Status& s, rpc::RegisterActorReply&&) { finish(s); });
  }));
  // Counted by state, one actor sent at most: the GCS under measurement
  // does not serialize every actor for each look.
  auto in_state = [&](rpc::ActorInfo::State state) {
    rpc::ListActorsRequest request;
    request.set_job_id(job_id_);
    request.add_states(state);
    request.set_limit(1);
    return SyncCall<rpc::ListActorsReply>(token_, request, [this](auto* ctx, auto* req, auto* reply, auto cb) {
      stubs_->actors->async()->ListActors(ctx, req, reply, std::move(cb));
    });
  };
  return WaitForCount(
      count, timeout,
      [&]() -> absl::StatusOr<int> {
        ASSIGN_OR_RETURN(auto dead, in_state(rpc::ActorInfo::DEAD));
        if (dead.actors_size() > 0) {
          const rpc::ActorInfo& a = dead.actors(0);
          return absl::InternalError("actor " + ToHex(a.actor_id()) + " died: " + a.death_cause().message());
        }
        ASSIGN_OR_RETURN(auto alive, in_state(rpc::ActorInfo::ALIVE));
        return static_cast<int>(alive.total());
      },
      "actors ALIVE");
}

absl::Status TableFiller::CreatePlacementGroups(int count, int bundles, double cpus, absl::Duration timeout) {
  RETURN_IF_ERROR(RunWindowed(count, [&](int i, Finish finish) {
    rpc::CreatePlacementGroupRequest request;
    rpc::PlacementGroupInfo* spec = request.mutable_spec();
    spec->set_placement_group_id(PlacementGroupId::FromRandom().Binary());
    spec->set_name(absl::StrCat("bench-pg-", i));
    spec->set_ray_namespace("bench");
    spec->set_strategy(rpc::PlacementGroupInfo::SPREAD);
    spec->set_creator_job_id(job_id_);
    spec->set_detached(true);
    for (int b = 0; b < bundles; ++b) {
      rpc::Bundle* bundle = spec->add_bundles();
      bundle->set_index(b);
      (*bundle->mutable_resources())["CPU"] = cpus;
    }
    rpc::UnaryCall<rpc::CreatePlacementGroupReply>(
        nullptr, token_, kFillCallTimeout, std::move(request),
        [this](auto* ctx, auto* req, auto* reply, auto cb) {
          stubs_->groups->async()->CreatePlacementGroup(ctx, req, reply, std::move(cb));
        },
        [finish](const absl::Status& s, rpc::CreatePlacementGroupReply&&) { finish(s); });
  }));
  return WaitForCount(
      count, timeout,
      [&]() -> absl::StatusOr<int> {
        rpc::ListPlacementGroupsRequest request;
        request.set_job_id(job_id_);
        ASSIGN_OR_RETURN(auto reply, SyncCall<rpc::ListPlacementGroupsReply>(
                                         token_, request, [this](auto* ctx, auto* req, auto* reply, auto cb) {
                                           stubs_->groups->async()->ListPlacementGroups(ctx, req, reply, std::move(cb));
                                         }));
        int created = 0;
        for (const rpc::PlacementGroupInfo& g : reply.placement_groups()) {
          created += g.state() == rpc::PlacementGroupInfo::CREATED;
        }
        return created;
      },
      "placement groups CREATED");
}

}  // namespace manta::bench
