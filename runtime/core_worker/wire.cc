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

rpc::ErrorInfo::Type ToProtoErrorType(ErrorType t) {
  if (t == ErrorType::kTimeout) return rpc::ErrorInfo::OBJECT_LOST;
  return static_cast<rpc::ErrorInfo::Type>(static_cast<int>(t));
}

ErrorType FromProtoErrorType(rpc::ErrorInfo::Type t) { return static_cast<ErrorType>(static_cast<int>(t)); }

std::string AddressKey(const rpc::Address& a) { return a.ip() + ":" + std::to_string(a.port()); }

}  // namespace manta::core
