#include "gcs/kv_manager.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/package_name.h"

namespace manta::gcs {
namespace {

absl::Status ValidateNamespaceAndKey(const std::string& ns, const std::string& key, bool key_may_be_empty) {
  if (ns.size() > KvManager::kMaxNamespaceBytes) return absl::InvalidArgumentError("namespace is too long");
  if (ns.find('\0') != std::string::npos) return absl::InvalidArgumentError("namespace contains a NUL byte");
  if (!key_may_be_empty && key.empty()) return absl::InvalidArgumentError("key is empty");
  if (key.size() > KvManager::kMaxKeyBytes) return absl::InvalidArgumentError("key is longer than 4096 bytes");
  return absl::OkStatus();
}

}  // namespace

absl::Status KvManager::Initialize() {
  MANTA_CHECK_THREAD(thread_);
  auto rows = store_->ReadAll(kTable);
  if (!rows.ok()) return rows.status();
  for (auto& [k, v] : *rows) data_[k] = std::move(v);
  return absl::OkStatus();
}

void KvManager::HandlePut(const rpc::KvPutRequest& request, rpc::KvPutReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidateNamespaceAndKey(request.ns(), request.key(), false); !s.ok()) return done(s);
  if (auto s = rpc::ValidateRequestId(request.request_id()); !s.ok()) return done(s);
  if (request.ns() == kPackageKvNamespace) {
    // Stored by content: what a raylet fetches under a name has that name.
    if (request.value().size() > kMaxKvPackageBytes) {
      return done(absl::ResourceExhaustedError(
          absl::StrCat("a package is at most ", kMaxKvPackageBytes, " bytes; this one is ", request.value().size())));
    }
    if (auto s = CheckPackageContent(request.key(), request.value()); !s.ok()) return done(s);
  }
  if (request.ns() == kFunctionKvNamespace) {
    if (auto s = CheckFunctionContent(request.key(), request.value()); !s.ok()) return done(s);
  }
  if (puts_.Replay(request.request_id(), reply, done)) return;
  done = puts_.Record(request.request_id(), reply, std::move(done));
  std::string k = StoreKey(request.ns(), request.key());
  auto it = data_.find(k);
  reply->set_added(it == data_.end());
  if (it != data_.end() && !request.overwrite()) return done(absl::OkStatus());
  data_[k] = request.value();
  store_->Put(kTable, k, request.value(), std::move(done));
  if (on_change_) on_change_(request.ns());
}

void KvManager::HandleGet(const rpc::KvGetRequest& request, rpc::KvGetReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidateNamespaceAndKey(request.ns(), request.key(), false); !s.ok()) return done(s);
  if (const std::string* v = Find(request.ns(), request.key())) {
    reply->set_found(true);
    reply->set_value(*v);
  }
  done(absl::OkStatus());
}

void KvManager::HandleDel(const rpc::KvDelRequest& request, rpc::KvDelReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidateNamespaceAndKey(request.ns(), request.key(), request.by_prefix()); !s.ok()) return done(s);
  if (auto s = rpc::ValidateRequestId(request.request_id()); !s.ok()) return done(s);
  if (dels_.Replay(request.request_id(), reply, done)) return;
  done = dels_.Record(request.request_id(), reply, std::move(done));
  std::string k = StoreKey(request.ns(), request.key());
  std::vector<std::string> doomed;
  if (request.by_prefix()) {
    for (auto it = data_.lower_bound(k); it != data_.end() && it->first.compare(0, k.size(), k) == 0; ++it) {
      doomed.push_back(it->first);
    }
  } else if (data_.count(k) > 0) {
    doomed.push_back(k);
  }
  reply->set_deleted(static_cast<int64_t>(doomed.size()));
  if (doomed.empty()) return done(absl::OkStatus());
  // Reply when the last delete is durable; deletes apply in order.
  for (size_t i = 0; i < doomed.size(); ++i) {
    data_.erase(doomed[i]);
    store_->Delete(kTable, doomed[i], i + 1 == doomed.size() ? std::move(done) : nullptr);
  }
  if (on_change_) on_change_(request.ns());
}

void KvManager::HandleKeys(const rpc::KvKeysRequest& request, rpc::KvKeysReply* reply, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  if (auto s = ValidateNamespaceAndKey(request.ns(), request.prefix(), true); !s.ok()) return done(s);
  std::string k = StoreKey(request.ns(), request.prefix());
  size_t ns_len = request.ns().size() + 1;
  for (auto it = data_.lower_bound(k); it != data_.end() && it->first.compare(0, k.size(), k) == 0; ++it) {
    reply->add_keys(it->first.substr(ns_len));
    if (reply->keys_size() >= 100000) break;
  }
  done(absl::OkStatus());
}

const std::string* KvManager::Find(const std::string& ns, const std::string& key) const {
  MANTA_CHECK_THREAD(thread_);
  auto it = data_.find(StoreKey(ns, key));
  return it == data_.end() ? nullptr : &it->second;
}

void KvManager::Put(const std::string& ns, const std::string& key, std::string value, rpc::Done done) {
  MANTA_CHECK_THREAD(thread_);
  std::string k = StoreKey(ns, key);
  data_[k] = value;
  store_->Put(kTable, k, std::move(value), std::move(done));
}

}  // namespace manta::gcs
