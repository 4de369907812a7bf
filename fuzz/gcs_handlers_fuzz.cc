// The GCS's request handling: every handler its gRPC services dispatch to
// (after the token check), driven by a sequence of requests as a client
// holding the token may send them (fuzz/handler_sequence.h), over the
// managers wired as the GCS wires them: an in-memory store, raylets that
// accept what they are asked. After the sequence every node's resources are
// finite and not negative, and reading the tables twice gives one answer.
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/handler_sequence.h"
#include "gcs/test_managers.h"

namespace manta::gcs {
namespace {

// fuzz::Replies comes first, so it is destroyed after the managers.
class Target : private fuzz::Replies, public TestManagers {
 public:
  void Run(std::string_view input) {
    fuzz::Replies* r = this;
    const std::vector<fuzz::Call> calls = {
        fuzz::Bind(&nodes_, &NodeManager::HandleRegisterNode, r),  // 0
        fuzz::Bind(&nodes_, &NodeManager::HandleUnregisterNode, r),
        fuzz::Bind(&nodes_, &NodeManager::HandleDrainNode, r),
        fuzz::Bind(&nodes_, &NodeManager::HandleGetAllNodeInfo, r),
        fuzz::Bind(&nodes_, &NodeManager::HandleGetClusterId, r),
        fuzz::Bind(&resources_, &ResourceManager::HandleReportResources, r),  // 5
        fuzz::Bind(&resources_, &ResourceManager::HandleGetClusterResources, r),
        fuzz::Bind(&kv_, &KvManager::HandlePut, r),  // 7
        fuzz::Bind(&kv_, &KvManager::HandleGet, r),
        fuzz::Bind(&kv_, &KvManager::HandleDel, r),
        fuzz::Bind(&kv_, &KvManager::HandleKeys, r),
        fuzz::Bind(actors_.get(), &ActorManager::HandleRegisterActor, r),  // 11
        fuzz::Bind(actors_.get(), &ActorManager::HandleGetActorInfo, r),
        fuzz::Bind(actors_.get(), &ActorManager::HandleGetNamedActor, r),
        fuzz::Bind(actors_.get(), &ActorManager::HandleListActors, r),
        fuzz::Bind(actors_.get(), &ActorManager::HandleKillActor, r),
        fuzz::Bind(actors_.get(), &ActorManager::HandleReportWorkerFailure, r),
        fuzz::Bind(&jobs_, &JobManager::HandleAddJob, r),  // 17
        fuzz::Bind(&jobs_, &JobManager::HandleMarkJobFinished, r),
        fuzz::Bind(&jobs_, &JobManager::HandleGetAllJobInfo, r),
        fuzz::Bind(&task_events_, &TaskEventManager::HandleAddTaskEvents, r),  // 20
        fuzz::Bind(&task_events_, &TaskEventManager::HandleListTasks, r),
        fuzz::Bind(&task_events_, &TaskEventManager::HandlePublishLogs, r),
        fuzz::Bind(pgs_.get(), &PlacementGroupManager::HandleCreatePlacementGroup, r),  // 23
        fuzz::Bind(pgs_.get(), &PlacementGroupManager::HandleRemovePlacementGroup, r),
        fuzz::Bind(pgs_.get(), &PlacementGroupManager::HandleGetPlacementGroup, r),
        fuzz::Bind(pgs_.get(), &PlacementGroupManager::HandleListPlacementGroups, r),
        fuzz::Bind(pgs_.get(), &PlacementGroupManager::HandleWaitPlacementGroupReady, r),
        fuzz::Bind(&train_runs_, &TrainRunManager::HandleReportTrainRun, r),  // 28
        fuzz::Bind(&train_runs_, &TrainRunManager::HandleListTrainRuns, r),
        fuzz::Bind(&pub_, &Publisher::HandlePoll, r),  // 30
    };
    fuzz::RunRecords(input, calls, [this] {
      Pump(loop_);
      AnswerRaylets();
    });
    rpc::GetClusterResourcesReply reply;
    resources_.HandleGetClusterResources({}, &reply, [](const absl::Status&) {});
    for (const rpc::NodeResources& n : reply.nodes()) {
      for (const auto* quantities : {&n.total(), &n.available()}) {
        for (const auto& [name, q] : *quantities) FUZZ_CHECK(std::isfinite(q) && q >= 0);
      }
    }
    FUZZ_CHECK(Snapshot() == Snapshot());
  }
};

}  // namespace
}  // namespace manta::gcs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  manta::fuzz::SilenceLogs();
  manta::gcs::Target target;
  target.Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
