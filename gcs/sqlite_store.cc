#include "gcs/sqlite_store.h"

#include <sqlite3.h>

#include <vector>

#include "common/logging.h"
#include "common/status.h"

namespace manta::gcs {
namespace {

absl::Status SqlError(sqlite3* db, const std::string& what) {
  return absl::InternalError(what + ": " + sqlite3_errmsg(db));
}

absl::Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(std::string(sql) + ": " + msg);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path, EventLoop* loop) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    auto s = absl::InternalError("cannot open " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
                          "CREATE TABLE IF NOT EXISTS rows (tbl TEXT NOT NULL, key BLOB NOT NULL, value BLOB "
                          "NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID"}) {
    if (auto s = Exec(db, sql); !s.ok()) {
      sqlite3_close(db);
      return absl::InternalError("cannot initialize " + path + ": " + std::string(s.message()));
    }
  }
  return std::unique_ptr<SqliteStore>(new SqliteStore(db, loop));
}

SqliteStore::SqliteStore(sqlite3* db, EventLoop* loop) : db_(db), loop_(loop) {
  writer_ = std::thread([this] { WriterLoop(); });
}

SqliteStore::~SqliteStore() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  writer_.join();
  for (sqlite3_stmt* stmt : {begin_, commit_, rollback_, put_, del_}) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

absl::StatusOr<Store::Rows> SqliteStore::ReadAll(const std::string& table) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT key, value FROM rows WHERE tbl = ? ORDER BY key", -1, &stmt, nullptr) !=
      SQLITE_OK) {
    return SqlError(db_, "prepare read");
  }
  sqlite3_bind_text(stmt, 1, table.data(), static_cast<int>(table.size()), SQLITE_TRANSIENT);
  Rows rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    auto blob = [&](int col) {
      const void* p = sqlite3_column_blob(stmt, col);
      int n = sqlite3_column_bytes(stmt, col);
      return std::string(static_cast<const char*>(p), static_cast<size_t>(n));
    };
    rows.emplace_back(blob(0), blob(1));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return SqlError(db_, "read table " + table);
  return rows;
}

void SqliteStore::Put(const std::string& table, std::string key, std::string value, Done done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  Enqueue(Op{false, table, std::move(key), std::move(value), std::move(done)});
}

void SqliteStore::Delete(const std::string& table, std::string key, Done done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  Enqueue(Op{true, table, std::move(key), {}, std::move(done)});
}

void SqliteStore::Enqueue(Op op) {
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(op));
  }
  cv_.Signal();
}

void SqliteStore::WriterLoop() {
  while (true) {
    std::deque<Op> batch;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
      if (queue_.empty() && stop_) return;
      batch.swap(queue_);
    }
    absl::Status status = ApplyBatch(batch);
    if (!status.ok()) Logger("gcs")->error("store write failed: {}", status.ToString());
    // One hop to the loop for the whole batch.
    std::vector<Done> dones;
    for (Op& op : batch) {
      if (op.done) dones.push_back(std::move(op.done));
    }
    if (!dones.empty()) {
      loop_->Post([dones = std::move(dones), status] {
        for (const Done& done : dones) done(status);
      });
    }
  }
}

absl::Status SqliteStore::Statement(sqlite3_stmt** stmt, const char* sql) {
  if (*stmt != nullptr) return absl::OkStatus();
  if (sqlite3_prepare_v2(db_, sql, -1, stmt, nullptr) != SQLITE_OK) {
    *stmt = nullptr;
    return SqlError(db_, std::string("prepare ") + sql);
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Step(sqlite3_stmt* stmt, const std::string& what) {
  sqlite3_reset(stmt);
  return sqlite3_step(stmt) == SQLITE_DONE ? absl::OkStatus() : SqlError(db_, what);
}

absl::Status SqliteStore::ApplyBatch(std::deque<Op>& batch) {
  // Statements are prepared once, on this (the writer) thread.
  RETURN_IF_ERROR(Statement(&begin_, "BEGIN IMMEDIATE"));
  RETURN_IF_ERROR(Statement(&commit_, "COMMIT"));
  RETURN_IF_ERROR(Statement(&rollback_, "ROLLBACK"));
  RETURN_IF_ERROR(Statement(&put_, "INSERT OR REPLACE INTO rows (tbl, key, value) VALUES (?, ?, ?)"));
  RETURN_IF_ERROR(Statement(&del_, "DELETE FROM rows WHERE tbl = ? AND key = ?"));
  RETURN_IF_ERROR(Step(begin_, "begin"));
  absl::Status status;
  for (size_t i = 0; status.ok() && i < batch.size(); ++i) {
    const Op& op = batch[i];
    sqlite3_stmt* stmt = op.is_delete ? del_ : put_;
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, op.table.data(), static_cast<int>(op.table.size()), SQLITE_STATIC);
    sqlite3_bind_blob(stmt, 2, op.key.data(), static_cast<int>(op.key.size()), SQLITE_STATIC);
    if (!op.is_delete) {
      sqlite3_bind_blob(stmt, 3, op.value.data(), static_cast<int>(op.value.size()), SQLITE_STATIC);
    }
    if (sqlite3_step(stmt) != SQLITE_DONE) status = SqlError(db_, "write " + op.table);
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);  // the bound buffers die with the batch
  }
  if (!status.ok()) {
    Step(rollback_, "rollback").IgnoreError();
    return status;
  }
  return Step(commit_, "commit");
}

}  // namespace manta::gcs
