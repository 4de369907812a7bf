// Drives a service's handlers, called directly as its gRPC adapters call
// them, from fuzz input: records of
//   [method: 1 byte][length: 2 bytes, little-endian][that many bytes]
// where the method picks a handler (modulo their count) and the bytes are
// parsed as its request. A record that does not parse is skipped.
//
//   std::vector<fuzz::Call> calls = {fuzz::Bind(&kv_, &KvManager::HandlePut, &replies), ...};
//   fuzz::RunRecords(input, calls, [&] { Pump(loop); });
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "common/logging.h"
#include "common/rpc/done.h"
#include "google/protobuf/message.h"
#include "google/protobuf/stubs/logging.h"

namespace manta::fuzz {

using Call = std::function<void(std::string_view)>;

// Replies a handler may answer after it returns (a held poll, a group
// waiting to be ready): kept until the keeper goes, which must be after the
// handlers' owners.
struct Replies {
  std::vector<std::shared_ptr<google::protobuf::Message>> kept;
};

template <typename Req, typename Reply, typename Object, typename Class>
Call Bind(Object* object, void (Class::*handler)(const Req&, Reply*, rpc::Done), Replies* replies) {
  return [object, handler, replies](std::string_view bytes) {
    Req request;
    if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
    auto reply = std::make_shared<Reply>();
    replies->kept.push_back(reply);
    (object->*handler)(request, reply.get(), [](const absl::Status&) {});
  };
}

// Turns the components' and protobuf's logs off, once: the fuzzer makes
// millions of calls.
inline void SilenceLogs() {
  static const bool silenced = [] {
    LoggingOptions off;
    off.level = spdlog::level::off;
    InitLogging(off);
    google::protobuf::SetLogHandler(nullptr);  // "invalid UTF-8" on every bad string
    return true;
  }();
  (void)silenced;
}

// Runs at most `max_records` records of `input`, `after` after each.
inline void RunRecords(std::string_view input, const std::vector<Call>& calls, const std::function<void()>& after,
                       int max_records = 64) {
  for (int records = 0; input.size() >= 3 && records < max_records; ++records) {
    const size_t method = static_cast<uint8_t>(input[0]) % calls.size();
    const size_t length = std::min<size_t>(static_cast<uint8_t>(input[1]) | size_t{static_cast<uint8_t>(input[2])} << 8,
                                           input.size() - 3);
    calls[method](input.substr(3, length));
    input.remove_prefix(3 + length);
    after();
  }
}

}  // namespace manta::fuzz
