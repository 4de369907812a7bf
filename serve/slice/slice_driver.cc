#include "serve/slice/slice_driver.h"

#include <atomic>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "manta/api.h"
#include "manta/tpu.h"
#include "serve/slice/serve_worker.h"
#include "train/try_call.h"

namespace manta::serve {

using train::TryCall;

MANTA_REMOTE(ServeWorker::Create, &ServeWorker::Setup, &ServeWorker::Run, &ServeWorker::Submit);

namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// One incarnation of the group: its slice and its processes.
struct Group {
  tpu::SliceReservation slice;
  std::vector<ActorHandle<ServeWorker>> actors;
  std::vector<ServeWorkerInfo> infos;
  std::vector<ObjectRef<ServeRunResult>> runs;
  size_t front = 0;  // the process that serves HTTP

  // Kills every process and gives the slice back. With a grace, the leader
  // first gets that long to end by itself: a broken group fails its
  // collectives within a second, and the leader then answers the requests
  // in flight (503) before its process goes.
  void TearDown(absl::Duration leader_grace = absl::ZeroDuration()) {
    if (front < runs.size() && leader_grace > absl::ZeroDuration()) {
      TryCall([&] { manta::Wait(std::vector<ObjectRef<ServeRunResult>>{runs[front]}, 1, leader_grace); }).IgnoreError();
    }
    for (auto& a : actors) TryCall([&] { Kill(a); }).IgnoreError();
    actors.clear();
    runs.clear();
    TryCall([&] { slice.Release(); }).IgnoreError();
  }
};

// Creates one worker per host and waits for each to answer Setup.
absl::Status StartWorkers(Group& g, absl::Duration timeout) {
  std::vector<ObjectRef<ServeWorkerInfo>> setups;
  absl::Status created = TryCall([&] {
    for (int s = 0; s < g.slice.num_slices(); ++s) {
      for (int h = 0; h < g.slice.hosts_per_slice(); ++h) {
        auto [group, bundle] = g.slice.Bundle(s, h);
        auto creator = Actor(ServeWorker::Create);
        creator.SetPlacementGroup(group, bundle)
            .SetEnv(g.slice.ProcessEnv(s, h))
            .SetResources(g.slice.BundleResources())
            .SetMaxConcurrency(4);  // Setup, Run, and the generate leader's Submits
        g.actors.push_back(creator.Remote());
        setups.push_back(g.actors.back().Task(&ServeWorker::Setup).Remote());
      }
    }
    manta::Wait(setups, static_cast<int>(setups.size()), timeout);
  });
  if (!created.ok()) return created;
  for (size_t h = 0; h < setups.size(); ++h) {
    auto info = TryGet(setups[h], absl::ZeroDuration());
    if (!info.ok()) {
      const int per = g.slice.hosts_per_slice();
      return absl::UnavailableError(absl::StrCat("the serving process on host ", h % per, " of ",
                                                 g.slice.slices()[h / per].name,
                                                 " did not start: ", info.status().message()));
    }
    g.infos.push_back(**info);
  }
  return absl::OkStatus();
}

// Starts Run on every process: the leader's address and each one's index.
absl::Status RunWorkers(Group& g, const SliceServeOptions& o, int64_t restarts) {
  const std::string coordinator = absl::StrCat(g.infos[0].node_ip, ":", g.infos[0].free_port);
  return TryCall([&] {
    for (size_t h = 0; h < g.actors.size(); ++h) {
      ServeRunRequest req;
      req.process_id = static_cast<int>(h);
      req.num_processes = static_cast<int>(g.actors.size());
      req.coordinator = coordinator;
      req.args = o.args;
      req.http_port = o.port;
      req.check_token = o.check_token;
      req.token = o.token;
      req.restarts = restarts;
      req.join_timeout_ms = absl::ToInt64Milliseconds(o.start_timeout);
      req.disaggregated = o.disaggregated;
      req.transfer_backlog = o.transfer_backlog;
      req.weights = o.weights;
      req.prefill_leader = g.actors[0];
      g.runs.push_back(g.actors[h].Task(&ServeWorker::Run).Remote(req));
    }
  });
}

}  // namespace

int ServeOnSlice(const SliceServeOptions& o) {
  auto log = Logger("serve");
  // Whichever thread takes the signal (the runtime's threads do not block
  // it), the loop below sees it within a second.
  struct sigaction action {};
  action.sa_handler = [](int) { g_stop = true; };
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::atomic<bool>& stop = g_stop;

  auto shape = tpu::TrySliceShapeOf(o.accelerator_type, o.topology);
  if (!shape.ok()) {
    log->error("{}", std::string(shape.status().message()));
    return 2;
  }
  int64_t restarts = 0;
  int quick_failures = 0;  // groups in a row that broke within a minute: back off as a crash loop does
  bool said_waiting = false;
  int status = 0;
  while (!stop) {
    Group g;
    tpu::SliceOptions so;
    so.topology = o.topology;
    so.accelerator_version = o.accelerator_type;
    so.num_slices = o.disaggregated ? 2 : 1;
    so.timeout = std::min(o.reserve_timeout, absl::Seconds(2));
    absl::StatusOr<tpu::SliceReservation> reserved = tpu::TryReserveSlices(so);
    if (!reserved.ok()) {
      if (reserved.status().code() == absl::StatusCode::kInvalidArgument) {
        log->error("{}", std::string(reserved.status().message()));
        return 2;
      }
      if (!said_waiting) {
        log->info("waiting for a whole {} slice: {}", shape->pod_type, std::string(reserved.status().message()));
      }
      said_waiting = true;
      continue;
    }
    said_waiting = false;
    g.slice = *std::move(reserved);
    g.front = o.disaggregated ? static_cast<size_t>(g.slice.hosts_per_slice()) : 0;
    std::string names;
    for (const auto& info : g.slice.slices()) names += (names.empty() ? "" : " and ") + info.name;
    log->info("{} the serving group on {} ({} hosts{}){}", restarts == 0 ? "Starting" : "Recreating", names,
              g.slice.hosts_per_slice(), o.disaggregated ? " each; prefill on the first, generate on the second" : "",
              restarts == 0 ? "" : absl::StrCat(", restart ", restarts));
    const absl::Time started = absl::Now();
    absl::Status s = StartWorkers(g, o.start_timeout);
    if (s.ok()) s = RunWorkers(g, o, restarts);
    if (s.ok()) {
      log->info("the leader serves on http://{}:{}", g.infos[g.front].node_ip, o.port);
      // Until any process of the group ends: none ends while the group is whole.
      while (!stop) {
        auto ready = manta::Wait(g.runs, 1, absl::Seconds(1));
        if (!ready.ready.empty()) break;
      }
      if (stop) {
        g.TearDown();
        break;
      }
      for (size_t h = 0; h < g.runs.size(); ++h) {
        auto ended = TryGet(g.runs[h], absl::ZeroDuration());
        if (ended.status().code() == absl::StatusCode::kDeadlineExceeded) continue;  // still running
        const std::string who = absl::StrCat("process ", h, " (", g.infos[h].node_ip, ", pid ", g.infos[h].pid, ")");
        if (!ended.ok()) {
          s = absl::UnavailableError(absl::StrCat(who, " died: ", ended.status().message()));
        } else if ((*ended)->refused) {
          s = absl::InvalidArgumentError((*ended)->why);
        } else {
          s = absl::UnavailableError(absl::StrCat(who, " left the group: ", (*ended)->why));
        }
        break;
      }
    }
    g.TearDown(/*leader_grace=*/absl::Seconds(5));
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      log->error("the serving group cannot start: {}", std::string(s.message()));
      status = 1;
      break;
    }
    quick_failures = absl::Now() - started < absl::Minutes(1) ? quick_failures + 1 : 0;
    const absl::Duration backoff =
        quick_failures <= 1 ? absl::ZeroDuration()
                            : std::min(absl::Seconds(30), absl::Milliseconds(500) * (1 << std::min(quick_failures, 8)));
    log->warn("the serving group failed: {}; recreating the whole group{}", std::string(s.message()),
              backoff > absl::ZeroDuration() ? absl::StrCat(" in ", absl::FormatDuration(backoff)) : "");
    for (absl::Time until = absl::Now() + backoff; !stop && absl::Now() < until;) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    ++restarts;
  }
  return status;
}

}  // namespace manta::serve
