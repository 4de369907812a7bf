// JobStore: where job records live and what the supervisor needs to know
// about the head node, behind one interface so unit tests hand in the
// in-memory fake below instead of a GCS.
//
// Implementations are safe to call from any thread; every call blocks for at
// most the implementation's deadline.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dashboard/job_info.h"

namespace manta::dashboard {

// Entrypoint reservations live in this placement-group namespace, one group
// per job named EntrypointReservationName(submission id).
inline constexpr char kEntrypointNamespace[] = "_manta_job_entrypoints";
inline constexpr char kHeadNodeResource[] = "node:__internal_head__";
inline std::string EntrypointReservationName(const std::string& submission_id) { return "entrypoint:" + submission_id; }

struct HeadNode {
  std::string node_ip;
  std::map<std::string, double> resources_total;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Writes `job` under its submission id, replacing any record.
  virtual absl::Status Put(const JobRecord& job) = 0;
  // Writes `job` unless a record with its id exists: AlreadyExists then.
  virtual absl::Status Create(const JobRecord& job) = 0;
  // Every record. Records that do not parse are skipped (and logged).
  virtual absl::StatusOr<std::vector<JobRecord>> List() = 0;
  virtual absl::Status Delete(const std::string& submission_id) = 0;
  // The alive head node; NotFound when none is registered.
  virtual absl::StatusOr<HeadNode> GetHeadNode() = 0;
  // Reserves `demand` on the head node for the job (idempotent: a second
  // call reports on the first reservation). True once it is held; false
  // while it waits for other holders to release.
  virtual absl::StatusOr<bool> ReserveOnHead(const std::string& submission_id,
                                             const std::map<std::string, double>& demand) = 0;
  // Gives the job's reservation back; OK when it holds none.
  virtual absl::Status ReleaseOnHead(const std::string& submission_id) = 0;
  // Makes a working-directory package fetchable by every node (the GCS KV,
  // namespace kPackageKvNamespace, common/package_name.h). OK when it is
  // there already; InvalidArgument when `name` is not the package's.
  virtual absl::Status PublishPackage(const std::string& name, const std::string& data) = 0;
};

// In-memory JobStore for tests: `available` = false makes every call fail
// with Unavailable, as an unreachable GCS would.
class FakeJobStore : public JobStore {
 public:
  absl::Status Put(const JobRecord& job) override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    records_[job.submission_id] = ToStoredJson(job);
    return absl::OkStatus();
  }
  absl::Status Create(const JobRecord& job) override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    if (!records_.emplace(job.submission_id, ToStoredJson(job)).second) {
      return absl::AlreadyExistsError(job.submission_id);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<JobRecord>> List() override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    std::vector<JobRecord> out;
    for (const auto& [id, text] : records_) {
      auto job = FromStoredJson(text);
      if (job.ok()) out.push_back(*job);
    }
    return out;
  }
  absl::Status Delete(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    records_.erase(id);
    return absl::OkStatus();
  }
  absl::StatusOr<HeadNode> GetHeadNode() override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    return head_;
  }

  absl::StatusOr<bool> ReserveOnHead(const std::string& id, const std::map<std::string, double>& demand) override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    auto [it, added] = reservations_.emplace(id, Reservation{demand, false});
    TryHoldLocked();
    return it->second.held;
  }
  absl::Status ReleaseOnHead(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    reservations_.erase(id);
    TryHoldLocked();
    return absl::OkStatus();
  }
  absl::Status PublishPackage(const std::string& name, const std::string& data) override {
    absl::MutexLock lock(&mu_);
    if (!available_) return absl::UnavailableError("fake GCS is down");
    packages_[name] = data;
    return absl::OkStatus();
  }
  std::optional<std::string> Published(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto it = packages_.find(name);
    if (it == packages_.end()) return std::nullopt;
    return it->second;
  }
  // Jobs whose reservation is held.
  std::vector<std::string> Held() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const auto& [id, r] : reservations_) {
      if (r.held) out.push_back(id);
    }
    return out;
  }
  size_t NumReservations() {
    absl::MutexLock lock(&mu_);
    return reservations_.size();
  }

  void set_available(bool available) {
    absl::MutexLock lock(&mu_);
    available_ = available;
  }
  void set_head(HeadNode head) {
    absl::MutexLock lock(&mu_);
    head_ = std::move(head);
  }
  std::optional<JobRecord> Stored(const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto it = records_.find(id);
    if (it == records_.end()) return std::nullopt;
    auto job = FromStoredJson(it->second);
    if (!job.ok()) return std::nullopt;
    return *job;
  }

 private:
  struct Reservation {
    std::map<std::string, double> demand;
    bool held;
  };
  // Holds waiting reservations, in id order, while they fit beside the held ones.
  void TryHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::map<std::string, double> free = head_.resources_total;
    for (const auto& [id, r] : reservations_) {
      if (!r.held) continue;
      for (const auto& [name, q] : r.demand) free[name] -= q;
    }
    for (auto& [id, r] : reservations_) {
      if (r.held) continue;
      bool fits = true;
      for (const auto& [name, q] : r.demand) fits = fits && free[name] >= q - 1e-9;
      if (!fits) continue;
      r.held = true;
      for (const auto& [name, q] : r.demand) free[name] -= q;
    }
  }

  absl::Mutex mu_;
  std::map<std::string, Reservation> reservations_ ABSL_GUARDED_BY(mu_);
  bool available_ ABSL_GUARDED_BY(mu_) = true;
  std::map<std::string, std::string> records_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> packages_ ABSL_GUARDED_BY(mu_);
  HeadNode head_ ABSL_GUARDED_BY(mu_){"127.0.0.1", {{"CPU", 4}}};
};

}  // namespace manta::dashboard
