// What the core worker's rooms agree on about the wire: return object ids,
// error types, addresses, nodes and the size limits of values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/id.h"
#include "manta/internal/core_worker.h"
#include "proto/common.pb.h"

namespace manta::core {

// Values up to this size travel inline in replies and task arguments.
constexpr size_t kInlineLimit = 100 * 1024;
// Chunk size of large object transfers.
constexpr size_t kChunkBytes = 4 << 20;

// The return object id of `task`'s `index`-th return (1-based).
ObjectId ReturnObjectId(const TaskId& task, uint32_t index);
// The same from the task's binary id, which must be TaskId::kSize bytes.
ObjectId ReturnObjectId(std::string_view task_id, uint32_t index);
void ToProtoStrategy(const SchedulingStrategy& s, rpc::SchedulingStrategy* out);
// How many values `spec` returns (its num_returns; 0 means 1).
int NumReturns(const rpc::TaskSpec& spec);
rpc::ErrorInfo::Type ToProtoErrorType(ErrorType t);
ErrorType FromProtoErrorType(rpc::ErrorInfo::Type t);
// An error status (its ErrorType, message and front-end bytes) on the wire
// and back.
void ToErrorInfo(const absl::Status& status, rpc::ErrorInfo* out);
absl::Status FromErrorInfo(const rpc::ErrorInfo& info);
std::string AddressKey(const rpc::Address& a);  // "ip:port"
// The seam's NodeData for the GCS's rpc::NodeInfo.
NodeData NodeDataFromProto(const rpc::NodeInfo& n);
// Names `executable` and `args` as the program of `spec`'s worker when
// `executable` is set (TaskOptions::worker_executable); else leaves it.
void SetProgram(const std::string& executable, const std::vector<std::string>& args, rpc::TaskSpec* spec);

}  // namespace manta::core
