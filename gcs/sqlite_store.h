// SqliteStore: the durable Store, the default for `manta start --head`.
//
// Why SQLite: it is the most widely deployed embedded store, packaged and
// kept current by Debian, a single file that survives a killed process
// without recovery tooling (WAL journal), small in memory (a head that is
// mostly idle must stay light), and its transactions let us group many
// writes into one commit. LevelDB/RocksDB would also do, but bring more
// memory, background threads and compaction for tables this small.
//
// Threads: writes are queued from the loop thread and applied by one writer
// thread in call order; each batch of queued writes is one transaction, and
// its `done` callbacks are posted back to the loop after the commit.
// Durability: WAL with synchronous=NORMAL, so a committed write survives the
// GCS process being killed (it is in the OS once committed).
#pragma once

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/event_loop.h"
#include "gcs/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace manta::gcs {

class SqliteStore : public Store {
 public:
  // Opens (creating if needed) the database at `path`.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, EventLoop* loop);
  // Applies every queued write before returning.
  ~SqliteStore() override;

  absl::StatusOr<Rows> ReadAll(const std::string& table) override;
  void Put(const std::string& table, std::string key, std::string value, Done done) override;
  void Delete(const std::string& table, std::string key, Done done) override;

 private:
  struct Op {
    bool is_delete;
    std::string table;
    std::string key;
    std::string value;
    Done done;
  };

  SqliteStore(sqlite3* db, EventLoop* loop);
  void Enqueue(Op op);
  void WriterLoop();
  absl::Status ApplyBatch(std::deque<Op>& batch);
  // Prepares `sql` into `*stmt` unless already prepared.
  absl::Status Statement(sqlite3_stmt** stmt, const char* sql);
  absl::Status Step(sqlite3_stmt* stmt, const std::string& what);

  sqlite3* const db_;
  EventLoop* const loop_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread writer_;
  // Owned by the writer thread; finalized after it is joined.
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* rollback_ = nullptr;
  sqlite3_stmt* put_ = nullptr;
  sqlite3_stmt* del_ = nullptr;
};

}  // namespace manta::gcs
