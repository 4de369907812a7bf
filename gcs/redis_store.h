// RedisStore: the Store kept in an external Redis, so that a head whose
// machine is lost can be started elsewhere and find its tables (Ray's
// "GCS fault tolerance" with external Redis).
//
//   RedisStoreOptions o;
//   o.endpoint = {.host = "10.0.0.5", .port = 6379, .password = "secret"};
//   o.ns = "prod";                      // tables are hashes "prod@<table>"
//   ASSIGN_OR_RETURN(auto store, RedisStore::Open(o, &loop));
//
// Layout, as in Ray: one Redis hash per table, named `<ns>@<table>`, whose
// fields are the rows' keys. The namespace separates clusters sharing one
// Redis; a head restarted with the same namespace finds its tables.
//
// Threads: ReadAll runs on the loop thread over its own connection. Writes
// are queued from the loop thread and sent by one writer thread over
// another, pipelined in call order; each write's `done` is posted to the
// loop once Redis acknowledged it. When the connection fails (Redis
// restarted, network cut), the writer reconnects with exponential backoff and
// sends again, in order, every write not yet acknowledged (HSET and HDEL
// replayed in order leave the same table). A write is never reported done
// before Redis acknowledged it; an error reply that retrying cannot cure
// (e.g. WRONGTYPE: the key is not a hash) is reported to its `done`.
// Durability is Redis's own (its AOF or RDB settings).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/event_loop.h"
#include "gcs/redis_connection.h"
#include "gcs/store.h"

namespace manta::gcs {

struct RedisStoreOptions {
  RedisEndpoint endpoint;
  std::string ns = "manta";  // non-empty
  absl::Duration connect_timeout = absl::Seconds(5);
  // Bounds each read or write on a connection; a Redis silent for longer
  // counts as lost.
  absl::Duration io_timeout = absl::Seconds(10);
  // Reconnection backoff: doubles from min to max.
  absl::Duration min_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  // How long the destructor keeps trying to send queued writes.
  absl::Duration flush_timeout = absl::Seconds(5);
};

class RedisStore : public Store {
 public:
  // Connects (twice: reads and writes) and logs in. Unavailable when Redis
  // cannot be reached, PermissionDenied when it refuses the password or
  // needs one, InvalidArgument for an empty namespace.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Open(RedisStoreOptions options, EventLoop* loop);
  // Keeps sending queued writes for up to flush_timeout; the `done` of a
  // write not acknowledged by then is never called.
  ~RedisStore() override;

  // HSCAN of the table's hash. Unavailable when Redis cannot be reached (one
  // reconnection is tried).
  absl::StatusOr<Rows> ReadAll(const std::string& table) override;
  void Put(const std::string& table, std::string key, std::string value, Done done) override;
  void Delete(const std::string& table, std::string key, Done done) override;

  // The hash that holds `table`.
  std::string HashName(const std::string& table) const { return options_.ns + "@" + table; }
  // Times the writer lost Redis or failed to reach it again. Any thread.
  int64_t connection_failures() const { return connection_failures_.load(); }

 private:
  struct Op {
    bool is_delete;
    std::string hash;
    std::string key;
    std::string value;
    Done done;
  };
  using Finished = std::vector<std::pair<Done, absl::Status>>;

  RedisStore(RedisStoreOptions options, EventLoop* loop, std::unique_ptr<RedisConnection> reader,
             std::unique_ptr<RedisConnection> writer);
  void Enqueue(Op op);
  void WriterLoop();
  // Sends up to a pipeline's worth of `pending` and removes from its front
  // each write Redis answered, adding it to `finished`. An error when the
  // connection failed or Redis cannot take writes for now.
  absl::Status SendSome(std::deque<Op>& pending, Finished* finished);
  // Drops the writer connection and connects again, backing off between
  // attempts. False when stopping and the flush deadline passed first.
  bool Reconnect(const absl::Status& why, size_t unsent);
  // Waits `d`, cut short by the flush deadline once stopping. False when
  // that deadline passed.
  bool Backoff(absl::Duration d);
  void PostFinished(Finished finished);

  // Constant after construction.
  const RedisStoreOptions options_;
  EventLoop* const loop_;

  // Loop thread only.
  std::unique_ptr<RedisConnection> reader_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);  // not yet taken by the writer
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time flush_deadline_ ABSL_GUARDED_BY(mu_);  // set with stop_

  std::atomic<int64_t> connection_failures_{0};

  // Writer thread only. Null only inside Reconnect.
  std::unique_ptr<RedisConnection> writer_conn_;
  std::thread writer_;
};

}  // namespace manta::gcs
