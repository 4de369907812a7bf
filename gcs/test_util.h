// Test helpers for loop-driven managers.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "common/event_loop.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

// Runs everything already posted to `loop`, and what that posts, a few
// rounds deep. Deterministic: no timers involved.
inline void Pump(EventLoop& loop, int rounds = 4) {
  for (int i = 0; i < rounds; ++i) {
    loop.Post([&loop] { loop.Stop(); });
    loop.Run();
  }
}

// A node's registration event, as the node table publishes it.
inline rpc::PubMessage NodeMsg(const std::string& ip) {
  rpc::PubMessage m;
  m.set_channel(rpc::PubMessage::NODE_INFO);
  m.mutable_node_info()->set_node_ip(ip);
  return m;
}

// A node's resource view with `cpus` available, keyed by the node.
inline rpc::PubMessage ResourcesMsg(const std::string& node, double cpus) {
  rpc::PubMessage m;
  m.set_channel(rpc::PubMessage::NODE_RESOURCES);
  m.set_key(node);
  m.mutable_node_resources()->set_node_id(node);
  (*m.mutable_node_resources()->mutable_available())["CPU"] = cpus;
  return m;
}

// A poll reply as its subscriber reads it: the publisher adds messages in
// their wire form, which only parsing turns into `messages`.
inline rpc::PollReply AsReceived(const rpc::PollReply& reply) {
  rpc::PollReply parsed;
  parsed.ParseFromString(reply.SerializeAsString());
  return parsed;
}

// A fresh directory under /tmp, removed with everything in it at the end of
// the scope.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "manta_gcs_test") {
    std::string pattern = "/tmp/" + prefix + "_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  // Empty when the directory could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace manta::gcs
