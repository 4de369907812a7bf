// GcsServices: the GCS's nine gRPC services (node info, resources, KV,
// pub/sub, actors, jobs, task events, placement groups, train runs) as thin
// adapters over the managers. Each call checks the cluster token on gRPC's
// thread, posts to the loop, runs the manager's HandleX(request, reply,
// done) there, and finishes from there. The managers validate each request
// (a malformed id is INVALID_ARGUMENT) before they use it.
//
//   GcsServiceContext context;
//   context.loop = loop;
//   context.nodes = nodes;  // ... every manager, both callbacks
//   GcsServices services(std::move(context));
//   grpc::ServerBuilder builder;
//   services.RegisterWith(&builder);
//   ... build and run the server; destroy it before `services` ...
//
// Thread: construction and RegisterWith on one thread before the server
// starts; the services are then called on gRPC's threads and touch the
// context's managers only in closures posted to its loop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/id.h"

namespace grpc {
class Service;
class ServerBuilder;
}  // namespace grpc

namespace manta::gcs {

class ActorManager;
class ActorScheduler;
class HealthCheckManager;
class JobManager;
class KvManager;
class NodeManager;
class PlacementGroupManager;
class Publisher;
class ResourceManager;
class TaskEventManager;
class TrainRunManager;

// What the services reach. Every pointer outlives the services and is
// non-null but `health` (null: a dropped poll suspects no node); the
// managers and both callbacks are used on the loop thread only.
struct GcsServiceContext {
  EventLoop* loop = nullptr;
  std::string token;  // empty: auth off
  NodeManager* nodes = nullptr;
  ResourceManager* resources = nullptr;
  KvManager* kv = nullptr;
  Publisher* publisher = nullptr;
  ActorManager* actors = nullptr;
  ActorScheduler* actor_scheduler = nullptr;
  JobManager* jobs = nullptr;
  TaskEventManager* task_events = nullptr;
  PlacementGroupManager* pgs = nullptr;
  TrainRunManager* train_runs = nullptr;
  HealthCheckManager* health = nullptr;
  // A node's resource view changed (a report the resource manager took).
  std::function<void(const NodeId&)> on_resources_changed;
  // True once the server is shutting down: a poll's start and end are no
  // longer told to the job and health managers.
  std::function<bool()> shutting_down;
};

class GcsServices {
 public:
  explicit GcsServices(GcsServiceContext context);
  ~GcsServices();
  GcsServices(const GcsServices&) = delete;
  GcsServices& operator=(const GcsServices&) = delete;

  // Registers every service with `builder`. The server built from it must
  // be shut down and destroyed before this is.
  void RegisterWith(grpc::ServerBuilder* builder);

 private:
  // Constant after construction (the services hold pointers to it).
  const GcsServiceContext context_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
};

}  // namespace manta::gcs
