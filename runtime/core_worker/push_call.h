// PushCall: one push of a task or actor call to a worker, from the
// submitter that makes it through the transport that carries it (a
// PushTasks stream, push_stream.h) back to the submitter that settles it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/id.h"
#include "proto/core_worker.pb.h"

namespace manta::core {

struct TaskQueue;    // task_submitter.h
struct WorkerLease;  // task_submitter.h

// It owns the spec it carries while the push runs, so a push copies
// nothing. Its completion runs on a gRPC thread, which stores the returns,
// settles the call with its submitter, starts whatever that makes due and
// deletes it (once stopping, the core worker's Stop() deletes it).
struct PushCall {
  rpc::PushTaskRequest request;
  rpc::PushTaskReply reply;
  absl::Status status;
  std::string address;    // the worker's "ip:port"
  std::string worker_id;  // its process's id (binary), when known
  // A normal task: its queue and lease (TaskSubmitter).
  TaskQueue* queue = nullptr;
  std::shared_ptr<WorkerLease> lease;
  // An actor call: the actor, and the call (its key in the actor's pending
  // calls).
  ActorId actor;
  int64_t sequence = 0;     // -1: a skip
  int64_t incarnation = 0;  // the actor's num_restarts when pushed
  int resends = 0;          // a normal task's pushes after a broken connection
  // Fault injection (MANTA_testing_rpc_failure, "PushTask"): the worker's
  // reply to this push is to be dropped, as a lost connection would.
  bool drop_reply = false;
};

}  // namespace manta::core
