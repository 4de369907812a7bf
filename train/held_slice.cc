#include "train/held_slice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "manta/api.h"
#include "train/try_call.h"
#include "train/worker.h"

namespace manta::train {

int FreeSlices(const ScalingSpec& scaling) {
  auto slices = tpu::TryListSlices(scaling.label_selector);
  if (!slices.ok()) return 0;
  auto it = slices->find(scaling.pod_type);
  if (it == slices->end()) return 0;
  return static_cast<int>(std::count_if(it->second.begin(), it->second.end(),
                                        [](const tpu::SliceInfo& s) { return s.head_free && s.chips_free; }));
}

absl::StatusOr<std::unique_ptr<HeldSlice>> HeldSlice::Reserve(const ScalingSpec& scaling, absl::Duration timeout) {
  tpu::SliceOptions options;
  options.topology = scaling.topology;
  options.accelerator_version = scaling.accelerator_version;
  options.num_slices = 1;
  options.resources_per_bundle = scaling.resources_per_worker;
  options.label_selector = scaling.label_selector;
  options.timeout = timeout;
  auto r = tpu::TryReserveSlices(options);
  if (!r.ok()) return r.status();
  std::unique_ptr<HeldSlice> s(new HeldSlice());
  s->info_ = r->slices().at(0);
  s->host_ips_ = r->host_ips(0);
  s->group_ = r->groups().at(0);
  s->node_ids_.assign(r->hosts_per_slice(), "");
  absl::Status located = TryCall([&] {
    for (const BundleLocation& b : s->group_.Bundles()) {
      if (b.index >= 0 && b.index < static_cast<int>(s->node_ids_.size())) s->node_ids_[b.index] = b.node_id;
    }
  });
  if (!located.ok()) return located;  // the destructor gives the slice back
  return s;
}

HeldSlice::~HeldSlice() { Release(); }

bool HeldSlice::Holds(const std::string& node_id) const {
  return std::find(node_ids_.begin(), node_ids_.end(), node_id) != node_ids_.end();
}

absl::Status HeldSlice::StartWorkers(const std::string& attempt_id, const std::map<std::string, double>& resources,
                                     const std::map<std::string, std::string>& env, absl::Duration timeout) {
  workers_.clear();
  std::vector<ObjectRef<WorkerInfo>> setups;
  absl::Status created = TryCall([&] {
    for (int h = 0; h < static_cast<int>(host_ips_.size()); ++h) {
      std::map<std::string, std::string> process_env = env;
      // The host's own TPU variables; the group's MEGASCALE_* come with each group.
      for (const char* name :
           {"TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "TPU_NAME", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY"}) {
        auto host_env = tpu::SliceProcessEnv({info_}, {host_ips_}, 0, h);
        if (host_env.count(name)) process_env[name] = host_env.at(name);
      }
      auto creator = Actor(TrainWorker::Create);
      creator.SetPlacementGroup(group_, h).SetEnv(process_env).SetResources(resources).SetMaxConcurrency(3);
      Worker w;
      w.actor = creator.Remote(attempt_id);
      setups.push_back(w.actor.Task(&TrainWorker::Setup).Remote());
      workers_.push_back(std::move(w));
    }
  });
  if (!created.ok()) return created;
  manta::Wait(setups, static_cast<int>(setups.size()), timeout);
  for (size_t h = 0; h < setups.size(); ++h) {
    auto info = TryGet(setups[h], absl::ZeroDuration());
    if (!info.ok()) {
      return absl::UnavailableError(absl::StrCat("the worker on ", info_.name, " host ", h, " did not start within ",
                                                 absl::FormatDuration(timeout), ": ", info.status().message()));
    }
    workers_[h].info = **info;
  }
  return absl::OkStatus();
}

void HeldSlice::Release() {
  if (released_) return;
  released_ = true;
  for (const Worker& w : workers_) {
    if (!w.actor.ID().IsNil()) TryCall([&] { Kill(w.actor); }).IgnoreError();
  }
  if (group_.Valid()) TryRemovePlacementGroup(group_).IgnoreError();
}

}  // namespace manta::train
