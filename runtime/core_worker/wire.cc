#include "runtime/core_worker/wire.h"

#include <cstring>

#include "common/check.h"

namespace manta::core {

ObjectId ReturnObjectId(std::string_view task_id, uint32_t index) {
  static_assert(ObjectId::kSize == TaskId::kSize + 4);
  CHECK_EQ(task_id.size(), TaskId::kSize) << "malformed task id";
  char bin[ObjectId::kSize];
  std::memcpy(bin, task_id.data(), TaskId::kSize);
  for (int i = 0; i < 4; ++i) bin[TaskId::kSize + i] = static_cast<char>((index >> (8 * (3 - i))) & 0xff);
  return *ObjectId::FromBinary(std::string_view(bin, sizeof(bin)));
}

ObjectId ReturnObjectId(const TaskId& task, uint32_t index) { return ReturnObjectId(task.Binary(), index); }

void ToProtoStrategy(const SchedulingStrategy& s, rpc::SchedulingStrategy* out) {
  out->set_kind(static_cast<rpc::SchedulingStrategy::Kind>(static_cast<int>(s.kind)));
  if (s.kind == SchedulingStrategy::Kind::kNodeAffinity) {
    out->set_node_id(s.node_id.Binary());
    out->set_soft(s.soft);
  }
}

int NumReturns(const rpc::TaskSpec& spec) { return spec.num_returns() > 0 ? spec.num_returns() : 1; }

rpc::ErrorInfo::Type ToProtoErrorType(ErrorType t) {
  if (t == ErrorType::kTimeout) return rpc::ErrorInfo::OBJECT_LOST;
  return static_cast<rpc::ErrorInfo::Type>(static_cast<int>(t));
}

ErrorType FromProtoErrorType(rpc::ErrorInfo::Type t) { return static_cast<ErrorType>(static_cast<int>(t)); }

void ToErrorInfo(const absl::Status& status, rpc::ErrorInfo* out) {
  out->set_type(ToProtoErrorType(GetErrorType(status)));
  out->set_message(std::string(status.message()));
  if (auto data = ErrorData(status); data.has_value()) out->set_data(std::move(*data));
}

absl::Status FromErrorInfo(const rpc::ErrorInfo& info) {
  return WithErrorData(MakeError(FromProtoErrorType(info.type()), info.message()), info.data());
}

std::string AddressKey(const rpc::Address& a) { return a.ip() + ":" + std::to_string(a.port()); }

NodeData NodeDataFromProto(const rpc::NodeInfo& n) {
  NodeData d;
  if (auto id = NodeId::FromBinary(n.node_id()); id.ok()) d.node_id = *id;
  d.ip = n.node_ip();
  d.alive = n.state() == rpc::NodeInfo::ALIVE;
  d.is_head = n.is_head();
  d.resources_total.insert(n.resources_total().begin(), n.resources_total().end());
  d.labels.insert(n.labels().begin(), n.labels().end());
  d.draining = n.draining();
  d.drain_reason = n.drain_reason();
  d.drain_deadline_ms = n.drain_deadline_ms();
  d.death_reason = n.death_reason();
  d.death_expected = n.death_expected();
  return d;
}

void SetProgram(const std::string& executable, const std::vector<std::string>& args, rpc::TaskSpec* spec) {
  if (executable.empty()) return;
  spec->set_worker_executable(executable);
  spec->clear_worker_args();
  for (const auto& a : args) spec->add_worker_args(a);
}

}  // namespace manta::core
