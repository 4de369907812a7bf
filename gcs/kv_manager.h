// KvManager: the internal key/value store (namespaced byte keys and values).
//
// Owns an in-memory copy of the store's "kv" table; every write goes to the
// store and replies once durable. A Put or Del that carries a request_id is
// idempotent: a retry gets the first attempt's reply. Thread: the GCS loop
// thread.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "common/rpc/done.h"
#include "common/rpc/reply_cache.h"
#include "common/thread_checker.h"
#include "gcs/store.h"
#include "proto/gcs_service.pb.h"

namespace manta::gcs {

class KvManager {
 public:
  static constexpr char kTable[] = "kv";
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxNamespaceBytes = 256;

  explicit KvManager(Store* store) : store_(store) {}
  absl::Status Initialize();

  void HandlePut(const rpc::KvPutRequest& request, rpc::KvPutReply* reply, rpc::Done done);
  void HandleGet(const rpc::KvGetRequest& request, rpc::KvGetReply* reply, rpc::Done done);
  void HandleDel(const rpc::KvDelRequest& request, rpc::KvDelReply* reply, rpc::Done done);
  void HandleKeys(const rpc::KvKeysRequest& request, rpc::KvKeysReply* reply, rpc::Done done);

  // Called with the namespace after a Put or Del through the handlers
  // changed it.
  void SetChangeListener(std::function<void(const std::string& ns)> listener) { on_change_ = std::move(listener); }

  // Direct access for other managers on the loop thread.
  const std::string* Find(const std::string& ns, const std::string& key) const;
  void Put(const std::string& ns, const std::string& key, std::string value, rpc::Done done);

 private:
  // Store key: namespace, a NUL byte, then the key.
  static std::string StoreKey(const std::string& ns, const std::string& key) { return ns + '\0' + key; }

  Store* const store_;
  std::function<void(const std::string& ns)> on_change_;
  std::map<std::string, std::string> data_;  // by StoreKey, so a prefix scan is a range
  // Replies of recent writes by request_id.
  rpc::ReplyCache<rpc::KvPutReply> puts_;
  rpc::ReplyCache<rpc::KvDelReply> dels_;
  // The loop thread, which every handler and listener runs on.
  ThreadChecker thread_;
};

}  // namespace manta::gcs
