// GcsJobStore: job records in the GCS internal KV (namespace "job", key =
// submission id, value = the record's JSON), as Ray keeps its job info, so
// they outlive the dashboard process. A job's entrypoint resources are held
// by a detached placement group of one bundle on the head node, named after
// the job (kEntrypointNamespace), so the raylet counts them and tasks cannot
// take them. Blocking gRPC calls with a deadline;
// safe from any thread (the stubs are thread-safe). gRPC stays in the .cc.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "dashboard/job_store.h"

namespace manta::dashboard {

inline constexpr char kJobNamespace[] = "job";

class GcsJobStore : public JobStore {
 public:
  // `token` empty: the cluster runs with --auth=none.
  GcsJobStore(const std::string& gcs_address, std::string token, absl::Duration timeout = absl::Seconds(5));
  ~GcsJobStore() override;

  absl::Status Put(const JobRecord& job) override;
  absl::Status Create(const JobRecord& job) override;
  absl::StatusOr<std::vector<JobRecord>> List() override;
  absl::Status Delete(const std::string& submission_id) override;
  absl::StatusOr<HeadNode> GetHeadNode() override;
  absl::StatusOr<bool> ReserveOnHead(const std::string& submission_id,
                                     const std::map<std::string, double>& demand) override;
  absl::Status ReleaseOnHead(const std::string& submission_id) override;
  absl::Status PublishPackage(const std::string& name, const std::string& data) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::dashboard
