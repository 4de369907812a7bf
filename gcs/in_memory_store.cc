#include "gcs/in_memory_store.h"

namespace manta::gcs {

absl::StatusOr<Store::Rows> InMemoryStore::ReadAll(const std::string& table) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  Rows rows;
  auto it = tables_.find(table);
  if (it == tables_.end()) return rows;
  for (const auto& kv : it->second) rows.push_back(kv);
  return rows;
}

void InMemoryStore::Put(const std::string& table, std::string key, std::string value, Done done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  tables_[table][std::move(key)] = std::move(value);
  Complete(std::move(done));
}

void InMemoryStore::Delete(const std::string& table, std::string key, Done done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  tables_[table].erase(key);
  Complete(std::move(done));
}

void InMemoryStore::Complete(Done done) {
  if (done) loop_->Post([done = std::move(done)] { done(absl::OkStatus()); });
}

}  // namespace manta::gcs
