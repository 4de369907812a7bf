#include "runtime/core_worker/task_event_buffer.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "common/utf8.h"

namespace manta::core {

namespace {

bool Terminal(rpc::TaskEvent::State s) { return s == rpc::TaskEvent::FINISHED || s == rpc::TaskEvent::FAILED; }

template <typename Id>
Id IdOrNil(std::string_view binary) {
  auto id = Id::FromBinary(binary);
  return id.ok() ? *id : Id();
}

}  // namespace

std::shared_ptr<const TaskEventBuffer::Resources> TaskEventBuffer::ResourcesOf(const rpc::TaskSpec& spec) {
  if (spec.resources().empty()) return nullptr;
  auto resources = std::make_shared<Resources>(spec.resources().begin(), spec.resources().end());
  std::sort(resources->begin(), resources->end());
  return resources;
}

bool TaskEventBuffer::Record(const rpc::TaskSpec& spec, rpc::TaskEvent::State state, const rpc::ErrorInfo* error,
                             const Location* where, std::shared_ptr<const Resources> resources, Ticket* ticket) {
  auto task_id = TaskId::FromBinary(spec.task_id());
  if (!task_id.ok()) return false;
  Entry e;
  e.task_id = *task_id;
  e.job_id = IdOrNil<JobId>(spec.job_id());
  e.actor_id = IdOrNil<ActorId>(spec.actor_id());
  if (where != nullptr) {
    e.worker_id = IdOrNil<WorkerId>(where->worker_id);
    e.node_id = IdOrNil<NodeId>(where->node_id);
    e.pid = std::max(0, where->pid);
  }
  e.attempt = std::max(0, spec.attempt());
  e.type = spec.type();
  e.state = state;
  e.timestamp_ms = absl::ToUnixMillis(absl::Now());
  e.name = std::string(Utf8Prefix(spec.function_name(), kMaxNameBytes));
  e.resources = std::move(resources);
  if (error != nullptr) {
    e.error = std::make_unique<rpc::ErrorInfo>(*error);
    if (e.error->message().size() > kMaxErrorMessageBytes) {
      e.error->mutable_message()->resize(Utf8Prefix(e.error->message(), kMaxErrorMessageBytes).size());
    }
  }
  absl::MutexLock lock(&mu_);
  if (ticket != nullptr) *ticket = Ticket{takes_, entries_.size(), true};
  entries_.push_back(std::move(e));
  return entries_.size() == 1;
}

void TaskEventBuffer::Withdraw(const Ticket& ticket) {
  if (!ticket.valid) return;
  absl::MutexLock lock(&mu_);
  if (ticket.take == takes_ && ticket.index < entries_.size()) entries_[ticket.index].withdrawn = true;
}

void TaskEventBuffer::Merge(Entry& held, Entry&& later) {
  // Fields: a set value in the later record wins (protobuf MergeFrom).
  if (!later.job_id.IsNil()) held.job_id = later.job_id;
  if (!later.actor_id.IsNil()) held.actor_id = later.actor_id;
  if (!later.worker_id.IsNil()) held.worker_id = later.worker_id;
  if (!later.node_id.IsNil()) held.node_id = later.node_id;
  if (later.pid != 0) held.pid = later.pid;
  if (later.type != rpc::TaskSpec::NORMAL_TASK) held.type = later.type;
  if (!later.name.empty()) held.name = std::move(later.name);
  if (later.resources) {
    if (!held.resources) {
      held.resources = std::move(later.resources);
    } else if (held.resources != later.resources) {
      auto merged = std::make_shared<Resources>(*later.resources);
      for (const auto& r : *held.resources) {
        bool overridden = false;
        for (const auto& l : *later.resources) overridden |= l.first == r.first;
        if (!overridden) merged->push_back(r);
      }
      std::sort(merged->begin(), merged->end());
      held.resources = std::move(merged);
    }
  }
  if (later.error) {
    if (!held.error) {
      held.error = std::move(later.error);
    } else {
      held.error->MergeFrom(*later.error);
    }
  }
  // State and time: as the GCS folds them, an attempt only moves forward
  // (gcs/task_event_manager.cc); an end is final unless a later end
  // corrects it.
  if (Terminal(later.state) || (!Terminal(held.state) && later.state >= held.state)) {
    held.state = later.state;
    if (later.timestamp_ms != 0) held.timestamp_ms = later.timestamp_ms;
  }
}

void TaskEventBuffer::ToProto(const Entry& e, rpc::TaskEvent* out) {
  out->set_task_id(e.task_id.Binary());
  if (!e.job_id.IsNil()) out->set_job_id(e.job_id.Binary());
  out->set_name(e.name);
  out->set_state(e.state);
  out->set_type(e.type);
  out->set_attempt(e.attempt);
  if (!e.actor_id.IsNil()) out->set_actor_id(e.actor_id.Binary());
  out->set_timestamp_ms(e.timestamp_ms);
  if (!e.worker_id.IsNil()) out->set_worker_id(e.worker_id.Binary());
  if (!e.node_id.IsNil()) out->set_node_id(e.node_id.Binary());
  if (e.pid > 0) out->set_worker_pid(e.pid);
  if (e.resources) {
    for (const auto& [name, quantity] : *e.resources) (*out->mutable_resources())[name] = quantity;
  }
  if (e.error) *out->mutable_error() = *e.error;
}

std::vector<rpc::AddTaskEventsRequest*> TaskEventBuffer::Take(google::protobuf::Arena* arena) {
  std::vector<Entry> taken;
  {
    absl::MutexLock lock(&mu_);
    if (entries_.empty()) return {};
    taken.swap(entries_);
    entries_.swap(spare_);
    ++takes_;
  }
  // First record of each attempt, in order; later ones fold into it.
  absl::flat_hash_map<std::pair<TaskId, int32_t>, size_t> first;
  first.reserve(taken.size());
  std::vector<size_t> order;
  order.reserve(taken.size());
  for (size_t i = 0; i < taken.size(); ++i) {
    if (taken[i].withdrawn) continue;
    auto [it, inserted] = first.try_emplace(std::make_pair(taken[i].task_id, taken[i].attempt), i);
    if (inserted) {
      order.push_back(i);
    } else {
      Merge(taken[it->second], std::move(taken[i]));
    }
  }
  std::vector<rpc::AddTaskEventsRequest*> requests;
  for (size_t i : order) {
    if (requests.empty() || requests.back()->events_size() >= kMaxEventsPerRequest) {
      requests.push_back(google::protobuf::Arena::CreateMessage<rpc::AddTaskEventsRequest>(arena));
    }
    ToProto(taken[i], requests.back()->add_events());
  }
  taken.clear();
  spare_ = std::move(taken);
  return requests;
}

}  // namespace manta::core
