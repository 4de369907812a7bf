#include "train/elastic.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "manta/api.h"
#include "train/controller_common.h"
#include "train/scaling.h"
#include "train/worker.h"

namespace manta::train {
namespace {

// How long survivors may take to report after their group ended.
constexpr absl::Duration kArrivalTimeout = absl::Seconds(60);
// How long a worker's death waits for the news that its host died.
constexpr absl::Duration kHostGrace = absl::Seconds(3);
// How often a waiting run looks for free slices besides node events.
constexpr absl::Duration kWaitingRetry = absl::Seconds(5);
// How often Run wakes, with no event, to check its deadlines.
constexpr absl::Duration kTick = absl::Seconds(1);
// The longest the run watcher waits on the running workers at once; workers
// started meanwhile are watched from the next round.
constexpr absl::Duration kWatchRound = absl::Milliseconds(200);

// "09:04:03.402": when an event reached the controller, in local time.
std::string Clock(absl::Time t) { return absl::FormatTime("%H:%M:%E3S", t, absl::LocalTimeZone()); }

}  // namespace

ElasticDriver::Event ElasticDriver::MakeEvent(Event::Kind kind, WorkerKey key, absl::Status status) {
  Event e;
  e.kind = kind;
  e.key = std::move(key);
  e.status = std::move(status);
  e.at = absl::Now();
  return e;
}

ElasticDriver::ElasticDriver(RunControl* control, ActorHandle<TrainController> self)
    : c_(control),
      self_(std::move(self)),
      hosts_(control->Spec().scaling.hosts_per_slice),
      min_slices_(control->Spec().scaling.min_workers / std::max(1, hosts_)),
      max_slices_(control->Spec().scaling.max_workers / std::max(1, hosts_)) {}

ElasticDriver::~ElasticDriver() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  watch_.reset();
  if (run_watcher_.joinable()) run_watcher_.join();
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, h] : slices_) names.push_back(name);
  }
  for (const std::string& n : names) Drop(n);
}

void ElasticDriver::Post(Event e) {
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(e));
}

void ElasticDriver::OnPaused() { Post(MakeEvent(Event::kPaused, WorkerKey{}, absl::OkStatus())); }

AwaitReply ElasticDriver::Await(const AwaitRequest& request) {
  AwaitReply leave;
  leave.leave = true;
  absl::MutexLock lock(&mu_);
  if (request.attempt_id != attempt_id_ || request.epoch != epoch_ || members_.count(request.worker_key) == 0) {
    return leave;
  }
  arrived_[request.worker_key] = request;
  events_.push_back(MakeEvent(Event::kArrived, request.worker_key, absl::OkStatus()));
  const WorkerKey key = request.worker_key;
  auto planned = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return plans_.count(key) > 0 || stopping_; };
  mu_.Await(absl::Condition(&planned));
  if (plans_.count(key) == 0) return leave;
  AwaitReply reply = std::move(plans_[key]);
  plans_.erase(key);
  return reply;
}

void ElasticDriver::WatchRuns() {
  // Workers are marked running under mu_ (StartGroup), so the condition is
  // checked again whenever that happens.
  auto busy = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_) return true;
    for (const auto& [name, h] : slices_) {
      for (const HeldSlice::Worker& x : h.slice->workers()) {
        if (x.running) return true;
      }
    }
    return false;
  };
  while (true) {
    std::vector<std::pair<WorkerKey, ObjectRef<void>>> running;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&busy));
      if (stopping_) return;
      for (auto& [name, h] : slices_) {
        for (size_t w = 0; w < h.slice->workers().size(); ++w) {
          const HeldSlice::Worker& x = h.slice->workers()[w];
          if (x.running) running.emplace_back(WorkerKey{name, static_cast<int>(w)}, x.run);
        }
      }
    }
    std::vector<ObjectRef<void>> refs;
    for (const auto& r : running) refs.push_back(r.second);
    auto ready = manta::Wait(refs, 1, kWatchRound);
    for (const auto& [key, ref] : running) {
      if (std::find(ready.ready.begin(), ready.ready.end(), ref) == ready.ready.end()) continue;
      absl::Status s = TryGet(ref, absl::ZeroDuration());
      {
        absl::MutexLock lock(&mu_);
        for (auto& [name, h] : slices_) {
          for (size_t w = 0; w < h.slice->workers().size(); ++w) {
            HeldSlice::Worker& x = h.slice->workers()[w];
            if (WorkerKey{name, static_cast<int>(w)} == key && x.run == ref) x.running = false;
          }
        }
      }
      Event ev = MakeEvent(Event::kRunEnded, key, s);
      ev.run = ref.ID();
      Post(std::move(ev));
    }
  }
}

RunOutcome ElasticDriver::Run() {
  auto watch = TryWatchNodes([this](const NodeEvent& e) {
    Event ev = MakeEvent(Event::kNode, WorkerKey{}, absl::OkStatus());
    ev.node = e;
    ev.at = e.received;
    Post(std::move(ev));
  });
  if (!watch.ok()) {
    c_->Transition(state::TrainRunState::kErrored, std::string(watch.status().message()));
    return c_->Finish(watch.status());
  }
  watch_ = std::move(*watch);
  run_watcher_ = std::thread([this] { WatchRuns(); });
  c_->Transition(state::TrainRunState::kScheduling, "");
  waiting_since_ = absl::Now();
  RestartAll("the run begins", /*counts_as_failure=*/false);
  while (!done_) {
    std::optional<Event> e;
    {
      absl::MutexLock lock(&mu_);
      auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&any), kTick);
      if (!events_.empty()) {
        e = std::move(events_.front());
        events_.pop_front();
      }
    }
    if (e) Handle(*e);
    if (!done_) Progress();
  }
  return outcome_;
}

void ElasticDriver::Handle(const Event& e) {
  switch (e.kind) {
    case Event::kNode:
      HandleNode(e.node);
      break;
    case Event::kRunEnded:
      HandleRunEnded(e);
      break;
    case Event::kPaused: {
      absl::MutexLock lock(&mu_);
      ended_ = true;  // the group's last step is applied; its workers arrive
      break;
    }
    case Event::kArrived:
      break;  // Progress counts the arrivals
  }
}

std::string ElasticDriver::DescribeNode(const std::string& node_id) const {
  return absl::StrCat("node ", node_id.substr(0, 8));
}

void ElasticDriver::HandleNode(const NodeEvent& e) {
  if (e.kind == NodeEvent::kAlive) {
    want_growth_ = true;  // a slice may be whole again
    growth_event_ = e.received;
    growth_node_ = e.node.node_id;
    return;
  }
  std::string name;
  SliceRole role = SliceRole::kActive;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [n, h] : slices_) {
      if (h.slice->Holds(e.node.node_id)) {
        name = n;
        role = h.role;
      }
    }
  }
  if (name.empty() || role == SliceRole::kLeaving) return;
  const std::string what =
      e.kind == NodeEvent::kDead
          ? absl::StrCat(DescribeNode(e.node.node_id), " of ", name, " died")
          : absl::StrCat(DescribeNode(e.node.node_id), " of ", name, " is draining (", e.node.drain_reason, ")");
  c_->Log().info("Detected changes in the cluster resources: {} (received {}).", what, Clock(e.received));
  if (role == SliceRole::kJoining) {
    Drop(name);  // never joined: nothing to re-form
    return;
  }
  if (e.kind == NodeEvent::kDead) {
    LoseSlice(name, what, e.received);
  } else {
    {
      absl::MutexLock lock(&mu_);
      slices_[name].role = SliceRole::kLeaving;
    }
    EndGroup(what, e.received, /*now=*/false);
  }
}

void ElasticDriver::HandleRunEnded(const Event& e) {
  const WorkerKey& key = e.key;
  bool member = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(key.slice);
    if (members_.count(key) > 0 && it != slices_.end() && it->second.role == SliceRole::kActive) {
      // Not an earlier worker of that host.
      member = it->second.slice->workers().at(key.host).run.ID() == e.run;
    }
  }
  if (!member) return;  // a worker we let go or gave up on
  if (e.status.ok()) {
    finished_.insert(key);
    bool all = true;
    {
      absl::MutexLock lock(&mu_);
      for (const WorkerKey& m : members_) all = all && finished_.count(m) > 0;
    }
    if (all) Finish(absl::OkStatus());
    return;
  }
  if (ErrorTypeOf(e.status) == ErrorType::kApplicationError) {
    WorkerFailed(key, e.status);
    return;
  }
  suspects_.push_back(Suspect{key, e.status, e.at});
  CheckSuspects();
}

void ElasticDriver::CheckSuspects() {
  if (suspects_.empty()) return;
  std::vector<NodeInfo> nodes = TryNodes().value_or(std::vector<NodeInfo>{});
  std::vector<Suspect> still;
  for (const Suspect& s : suspects_) {
    const std::string& slice = s.key.slice;
    std::string gone;
    bool held;
    {
      absl::MutexLock lock(&mu_);
      held = slices_.count(slice) > 0;
      for (const NodeInfo& n : nodes) {
        if ((!n.alive || n.draining) && held && slices_[slice].slice->Holds(n.node_id)) gone = n.node_id;
      }
    }
    if (!held) continue;  // dropped meanwhile (its host's death came as an event)
    if (!gone.empty()) {
      LoseSlice(slice, absl::StrCat(DescribeNode(gone), " of ", slice, " died"), s.at);
    } else if (absl::Now() - s.at > kHostGrace) {
      const Suspect failed = s;
      suspects_.clear();
      WorkerFailed(failed.key, failed.status);
      return;
    } else {
      still.push_back(s);
    }
  }
  suspects_ = std::move(still);
}

void ElasticDriver::WorkerFailed(const WorkerKey& key, const absl::Status& status) {
  WorkerFailure f;
  auto rank = ranks_.find(key);
  f.rank = rank == ranks_.end() ? -1 : rank->second;
  WorkerInfo info;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(key.slice);
    if (it != slices_.end() && key.host >= 0 && key.host < static_cast<int>(it->second.slice->workers().size())) {
      info = it->second.slice->workers()[key.host].info;
    }
  }
  f.where = absl::StrCat("rank ", f.rank, " on ", info.node_ip.empty() ? "an unknown host" : info.node_ip, " (node ",
                         info.node_id.substr(0, 8), ", ", key.slice, " worker ", key.host, ", pid ", info.pid, ")");
  f.message = std::string(status.message());
  f.data = core::ErrorData(status).value_or("");
  RestartAll(absl::StrCat("[worker ", key.ToString(), "] ", status.message()), /*counts_as_failure=*/true, {f});
}

void ElasticDriver::LoseSlice(const std::string& name, const std::string& why, absl::Time at) {
  EndGroup(why, at, /*now=*/true);
  Drop(name);
}

void ElasticDriver::EndGroup(const std::string& why, absl::Time at, bool now) {
  if (!c_->Snapshot().resizable && !waiting_) {
    // A loop that cannot re-form in place starts over at the new size.
    RestartAll(why, /*counts_as_failure=*/false);
    return;
  }
  bool running;
  int64_t epoch;
  std::vector<ActorHandle<TrainWorker>> actors;
  {
    absl::MutexLock lock(&mu_);
    running = !waiting_ && !ended_;
    epoch = epoch_;
    for (auto& [name, h] : slices_) {
      if (h.role == SliceRole::kJoining) continue;
      for (const auto& w : h.slice->workers()) actors.push_back(w.actor);
    }
  }
  if (!running) return;  // already ending: the re-form takes the news into account
  if (reform_why_.empty() || now) {
    reform_why_ = why;
    reform_event_ = at;
  }
  if (c_->State() == state::TrainRunState::kRunning) c_->Transition(state::TrainRunState::kResizing, why);
  if (!now) {
    if (!pausing_) c_->RequestPause();
    pausing_ = true;
    return;
  }
  // At once: reports of the group fail (its step is not committed) and its
  // collectives are broken, so every survivor ends its step and arrives.
  c_->CloseReports();
  {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }
  for (const auto& a : actors) {
    try {
      a.Task(&TrainWorker::Interrupt).Remote(epoch, why);
    } catch (const Error&) {
      // A worker that cannot be reached is dead or about to be.
    }
  }
}

void ElasticDriver::Drop(const std::string& name) {
  std::unique_ptr<HeldSlice> slice;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(name);
    if (it == slices_.end()) return;
    slice = std::move(it->second.slice);
    slices_.erase(it);
    // Its workers never arrive; any that did leave.
    for (int h = 0; h < hosts_; ++h) {
      const WorkerKey key{name, h};
      members_.erase(key);
      if (arrived_.erase(key) > 0) plans_[key].leave = true;
    }
  }
  const absl::Time began = absl::Now();
  slice->Release();
  c_->AddGroupTime(RunControl::GroupOperation::kShutdown, absl::Now() - began);
}

int ElasticDriver::AcquireSlices(int want) {
  if (want <= 0) return 0;
  const ScalingSpec& sc = c_->Spec().scaling;
  LogReservingSlices(c_->Log(), want, sc.topology);
  int got = 0;
  for (int i = 0; i < want; ++i) {
    const absl::Time tried = absl::Now();
    auto slice = HeldSlice::Reserve(sc, kReserveTry);
    if (!slice.ok()) break;
    absl::Status started = (*slice)->StartWorkers(attempt_id_, sc.resources_per_worker, c_->Spec().worker_env,
                                                  absl::Milliseconds(c_->Spec().worker_start_timeout_ms));
    c_->AddGroupTime(RunControl::GroupOperation::kStart, absl::Now() - tried);
    if (!started.ok()) {
      LogRetryingLaunch(c_->Log(), started.message());
      continue;  // the slice is given back; the next event tries again
    }
    absl::MutexLock lock(&mu_);
    const std::string name = (*slice)->name();
    slices_[name] = Held{std::move(*slice), SliceRole::kJoining};
    ++got;
  }
  return got;
}

void ElasticDriver::Progress() {
  CheckSuspects();
  if (done_) return;
  int active = 0, joining = 0;
  bool ended, all_arrived = true;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, h] : slices_) {
      active += h.role == SliceRole::kActive;
      joining += h.role == SliceRole::kJoining;
    }
    ended = ended_;
    for (const WorkerKey& m : members_) all_arrived = all_arrived && arrived_.count(m) > 0;
  }
  if (!waiting_ && ended && (all_arrived || Since(reform_event_) > absl::ToDoubleSeconds(kArrivalTimeout))) {
    Reform();
    return;
  }
  const bool room = active + joining < max_slices_;
  if (waiting_) {
    // Try when a node arrived, when the demand was placed (a whole slice's
    // head is free), and every few seconds.
    if (!want_growth_ && demand_.has_value() && !DemandPlaced() && absl::Now() - last_try_ < kWaitingRetry) return;
    want_growth_ = false;
    last_try_ = absl::Now();
    DropDemand();  // it may hold the very head the reservation needs
    const int free = FreeSlices(c_->Spec().scaling);
    const int got = room && free > 0 ? AcquireSlices(std::min(free, max_slices_ - active - joining)) : 0;
    if (active + joining + got >= min_slices_) {
      Reform();
    } else {
      CreateDemand();
    }
  } else if (want_growth_ && !pausing_ && !ended && room) {
    want_growth_ = false;
    const int free = FreeSlices(c_->Spec().scaling);
    if (free > 0) {
      c_->Log().info(
          "Detected changes in the cluster resources: {} whole slice(s) free again ({} alive, received "
          "{}).",
          free, DescribeNode(growth_node_), Clock(growth_event_));
    }
    const int got = free > 0 ? AcquireSlices(std::min(free, max_slices_ - active - joining)) : 0;
    if (got > 0) EndGroup(absl::StrCat(got, " slice(s) whole and free again"), growth_event_, /*now=*/false);
  }
  const ControllerSpec& spec = c_->Spec();
  if (waiting_ && Since(waiting_since_) > absl::ToDoubleSeconds(absl::Milliseconds(spec.scheduling_timeout_ms))) {
    Finish(absl::DeadlineExceededError(
        absl::StrCat("the run waited more than ", absl::FormatDuration(absl::Milliseconds(spec.scheduling_timeout_ms)),
                     " for ", min_slices_, " whole slice(s) of ", spec.scaling.pod_type)));
  }
}

}  // namespace manta::train
