#include "train/worker_group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "manta/api.h"
#include "train/scaling.h"
#include "train/try_call.h"
#include "train/worker.h"

namespace manta::train {
namespace {

absl::StatusOr<PlacementGroup> ReservePlainGroup(const ScalingSpec& scaling, int n, absl::Duration timeout) {
  PlacementGroupOptions options;
  options.strategy = ParsePlacementStrategy(scaling.placement_strategy);
  for (int i = 0; i < n; ++i) {
    options.bundles.push_back({.resources = scaling.resources_per_worker, .label_selector = scaling.label_selector});
  }
  auto group = TryCreatePlacementGroup(options);
  if (!group.ok()) return group.status();
  bool ready = false;
  std::string why;
  absl::Status s = TryCall([&] {
    ready = group->Wait(timeout);
    if (!ready) why = group->StateMessage();
  });
  if (s.ok() && ready) return *group;
  TryRemovePlacementGroup(*group).IgnoreError();
  if (!s.ok()) return s;
  return absl::DeadlineExceededError(absl::StrCat("could not reserve ", n, " worker(s) of ",
                                                  PythonDict(scaling.resources_per_worker), " within ",
                                                  absl::FormatDuration(timeout), ": ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::Reserve(const ControllerSpec& spec, int num_workers,
                                                                  absl::Duration timeout) {
  std::unique_ptr<WorkerGroup> g(new WorkerGroup(spec));
  const ScalingSpec& scaling = spec.scaling;
  if (!scaling.use_tpu) {
    auto group = ReservePlainGroup(scaling, num_workers, timeout);
    if (!group.ok()) return group.status();
    g->group_ = *group;
    for (int i = 0; i < num_workers; ++i) {
      Member m;
      m.group = g->group_;
      m.bundle = i;
      g->members_.push_back(std::move(m));
    }
    return g;
  }
  tpu::SliceOptions options;
  options.topology = scaling.topology;
  options.accelerator_version = scaling.accelerator_version;
  options.num_slices = num_workers / scaling.hosts_per_slice;
  options.resources_per_bundle = scaling.resources_per_worker;
  options.label_selector = scaling.label_selector;
  options.one_group = false;  // one group per slice: a slice can be given back alone
  options.timeout = timeout;
  auto r = tpu::TryReserveSlices(options);
  if (!r.ok()) return r.status();
  g->slices_ = *std::move(r);
  // Slices in name order, so ranks (slice-major, then TPU_WORKER_ID) do not
  // depend on which slice the reservation found first; the MEGASCALE_*
  // variables follow the same order.
  const int num = g->slices_.num_slices();
  std::vector<int> order(num);
  for (int s = 0; s < num; ++s) order[s] = s;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return g->slices_.slices()[a].name < g->slices_.slices()[b].name; });
  std::vector<tpu::SliceInfo> sorted;
  std::vector<std::vector<std::string>> ips;
  for (int s : order) {
    sorted.push_back(g->slices_.slices()[s]);
    ips.push_back(g->slices_.host_ips(s));
  }
  for (int i = 0; i < num; ++i) {
    for (int h = 0; h < g->slices_.hosts_per_slice(); ++h) {
      Member m;
      m.slice_id = i;
      m.worker_id = h;
      m.slice_name = sorted[i].name;
      std::tie(m.group, m.bundle) = g->slices_.Bundle(order[i], h);
      m.env = tpu::SliceProcessEnv(sorted, ips, i, h);
      g->members_.push_back(std::move(m));
    }
  }
  return g;
}

WorkerGroup::~WorkerGroup() { Shutdown(); }

absl::Status WorkerGroup::Start(const std::string& attempt_id, int attempt_number, absl::Duration timeout) {
  std::vector<ObjectRef<WorkerInfo>> setups;
  absl::Status created = TryCall([&] {
    for (Member& m : members_) {
      // The user's variables first; the host's TPU_* and MEGASCALE_* win.
      std::map<std::string, std::string> env = spec_.worker_env;
      for (const auto& [k, v] : m.env) env[k] = v;
      auto creator = Actor(TrainWorker::Create);
      creator.SetPlacementGroup(m.group, m.bundle)
          .SetEnv(env)
          .SetResources(spec_.scaling.resources_per_worker)
          .SetMaxConcurrency(2);
      m.actor = creator.Remote(attempt_id);
      setups.push_back(m.actor.Task(&TrainWorker::Setup).Remote());
    }
  });
  if (!created.ok()) return created;
  manta::Wait(setups, static_cast<int>(setups.size()), timeout);
  for (size_t i = 0; i < setups.size(); ++i) {
    auto info = TryGet(setups[i], absl::ZeroDuration());
    if (!info.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "worker ", i, " of ", setups.size(), " (",
          members_[i].slice_name.empty() ? "bundle " + std::to_string(i)
                                         : members_[i].slice_name + " host " + std::to_string(members_[i].worker_id),
          ") did not start within ", absl::FormatDuration(timeout), ": ", info.status().message()));
    }
    members_[i].info = **info;
  }
  AssignRanks(attempt_id, attempt_number);
  return absl::OkStatus();
}

void WorkerGroup::AssignRanks(const std::string& attempt_id, int attempt_number) {
  if (!spec_.scaling.use_tpu) {
    // Workers of a node get consecutive ranks, nodes in address order.
    std::stable_sort(members_.begin(), members_.end(), [](const Member& a, const Member& b) {
      return std::tie(a.info.node_ip, a.info.node_id) < std::tie(b.info.node_ip, b.info.node_id);
    });
  }
  std::map<std::string, int> node_ranks, local_counts;
  for (const Member& m : members_) {
    node_ranks.emplace(m.info.node_id, static_cast<int>(node_ranks.size()));
    ++local_counts[m.info.node_id];
  }
  const Member& head = members_.at(0);
  const std::string coordinator = absl::StrCat(head.info.node_ip, ":", head.info.free_port);
  std::map<std::string, int> local_seen;
  auto tpu = spec_.scaling.resources_per_worker.find("TPU");
  for (size_t rank = 0; rank < members_.size(); ++rank) {
    Member& m = members_[rank];
    TrainContext& c = m.context;
    c.world_rank = static_cast<int>(rank);
    c.world_size = static_cast<int>(members_.size());
    c.local_rank = local_seen[m.info.node_id]++;
    c.local_world_size = local_counts[m.info.node_id];
    c.node_rank = node_ranks[m.info.node_id];
    c.slice_id = m.slice_id;
    c.num_slices = spec_.scaling.use_tpu ? num_slices() : 1;
    c.worker_id = m.worker_id;
    c.chips = tpu == spec_.scaling.resources_per_worker.end() ? 0 : static_cast<int>(tpu->second);
    c.coordinator_address = coordinator;
    c.run_name = spec_.run_name;
    c.run_id = spec_.run_id;
    c.attempt_id = attempt_id;
    c.attempt_number = attempt_number;
    c.storage_path = spec_.run_dir;
  }
}

void WorkerGroup::Run(const WorkerRunRequest& base) {
  runs_.clear();
  run_done_.assign(members_.size(), false);
  for (const Member& m : members_) {
    WorkerRunRequest req = base;
    req.context = m.context;
    req.env["JAX_COORDINATOR_ADDRESS"] = m.context.coordinator_address;
    req.env["JAX_PROCESS_ID"] = std::to_string(m.context.world_rank);
    req.env["JAX_NUM_PROCESSES"] = std::to_string(m.context.world_size);
    if (spec_.scaling.use_tpu && spec_.worker_env.count("JAX_PLATFORMS") == 0) req.env["JAX_PLATFORMS"] = "tpu,cpu";
    runs_.push_back(m.actor.Task(&TrainWorker::Run).Remote(req));
  }
}

WorkerGroup::Outcome WorkerGroup::Wait(absl::Duration timeout) {
  Outcome out;
  const absl::Time deadline = timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  while (true) {
    std::vector<ObjectRef<void>> pending;
    std::vector<int> ranks;
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (!run_done_[i]) {
        pending.push_back(runs_[i]);
        ranks.push_back(static_cast<int>(i));
      }
    }
    if (pending.empty()) {
      out.finished = true;
      return out;
    }
    const absl::Duration left = deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : deadline - absl::Now();
    auto ready = manta::Wait(pending, 1, std::max(left, absl::ZeroDuration()));
    if (ready.ready.empty()) {
      out.timed_out = true;
      return out;
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (std::find(ready.ready.begin(), ready.ready.end(), pending[i]) == ready.ready.end()) continue;
      run_done_[ranks[i]] = true;
      absl::Status s = TryGet(pending[i], absl::ZeroDuration());
      if (!s.ok()) out.failures.emplace_back(ranks[i], s);
    }
    if (!out.failures.empty()) return out;
  }
}

std::string WorkerGroup::Describe(int rank) const {
  const Member& m = members_.at(rank);
  std::string where = m.slice_name.empty() ? "" : absl::StrCat(", ", m.slice_name, " worker ", m.worker_id);
  return absl::StrCat("rank ", rank, " on ", m.info.node_ip.empty() ? "an unknown host" : m.info.node_ip, " (node ",
                      m.info.node_id.substr(0, 8), where, ", pid ", m.info.pid, ")");
}

void WorkerGroup::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (const Member& m : members_) {
    if (m.actor.ID().IsNil()) continue;
    TryCall([&] { Kill(m.actor); }).IgnoreError();
  }
  if (spec_.scaling.use_tpu) {
    TryCall([&] { slices_.Release(); }).IgnoreError();
  } else if (group_.Valid()) {
    TryRemovePlacementGroup(group_).IgnoreError();
  }
}

}  // namespace manta::train
