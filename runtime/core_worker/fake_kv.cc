// FakeCoreWorker's key-value store (ClusterState): a map in memory, with
// the GCS errors a test queued (FailNextGcsCall) for "KvPut" and "KvGet".
#include "runtime/core_worker/fake_core_worker.h"

namespace manta::core {

absl::StatusOr<bool> FakeCoreWorker::KvPut(const std::string& ns, const std::string& key, const std::string& value,
                                           bool overwrite) {
  if (auto s = TakeGcsError("KvPut"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto [it, added] = kv_.try_emplace({ns, key}, value);
  if (!added && overwrite) it->second = value;
  return added;
}

absl::StatusOr<std::optional<std::string>> FakeCoreWorker::KvGet(const std::string& ns, const std::string& key) {
  if (auto s = TakeGcsError("KvGet"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = kv_.find({ns, key});
  if (it == kv_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

}  // namespace manta::core
