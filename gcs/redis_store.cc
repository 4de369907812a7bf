#include "gcs/redis_store.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"

namespace manta::gcs {
namespace {

// Writes sent before their replies are read: bounds the memory of one round.
constexpr size_t kMaxPipeline = 512;
// HSCAN's COUNT: rows per round trip when reading a table.
constexpr char kScanCount[] = "1000";

absl::Status ErrorReply(const std::string& what, const std::string& reply) {
  if (IsTransientRedisError(reply)) return absl::UnavailableError(absl::StrCat(what, ": ", reply));
  return absl::InternalError(absl::StrCat(what, ": ", reply));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(RedisStoreOptions options, EventLoop* loop) {
  if (options.ns.empty()) return absl::InvalidArgumentError("the Redis storage namespace must not be empty");
  ASSIGN_OR_RETURN(auto reader,
                   RedisConnection::Connect(options.endpoint, options.connect_timeout, options.io_timeout));
  ASSIGN_OR_RETURN(auto writer,
                   RedisConnection::Connect(options.endpoint, options.connect_timeout, options.io_timeout));
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(options), loop, std::move(reader), std::move(writer)));
}

RedisStore::RedisStore(RedisStoreOptions options, EventLoop* loop, std::unique_ptr<RedisConnection> reader,
                       std::unique_ptr<RedisConnection> writer)
    : options_(std::move(options)), loop_(loop), reader_(std::move(reader)), writer_conn_(std::move(writer)) {
  writer_ = std::thread([this] { WriterLoop(); });
}

RedisStore::~RedisStore() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    flush_deadline_ = absl::Now() + options_.flush_timeout;
  }
  cv_.SignalAll();
  writer_.join();
}

absl::StatusOr<Store::Rows> RedisStore::ReadAll(const std::string& table) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  const std::string hash = HashName(table);
  for (int attempt = 0;; ++attempt) {
    if (reader_ == nullptr) {
      ASSIGN_OR_RETURN(reader_,
                       RedisConnection::Connect(options_.endpoint, options_.connect_timeout, options_.io_timeout));
    }
    std::map<std::string, std::string> found;  // HSCAN may return a field twice
    std::string cursor = "0";
    absl::Status status;
    do {
      auto reply = reader_->Command({"HSCAN", hash, cursor, "COUNT", kScanCount});
      if (!reply.ok()) {
        status = reply.status();
      } else if (reply->is_error()) {
        status = ErrorReply("cannot read " + hash + " from Redis", reply->str);
      } else if (reply->type != RedisReply::kArray || reply->elements.size() != 2 ||
                 reply->elements[1].type != RedisReply::kArray || reply->elements[1].elements.size() % 2 != 0) {
        status = absl::InternalError("unexpected HSCAN reply for " + hash);
      } else {
        cursor = reply->elements[0].str;
        auto& fields = reply->elements[1].elements;
        for (size_t i = 0; i + 1 < fields.size(); i += 2) {
          found.insert_or_assign(std::move(fields[i].str), std::move(fields[i + 1].str));
        }
      }
    } while (status.ok() && cursor != "0");
    if (status.ok()) return Rows(std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
    if (status.code() != absl::StatusCode::kUnavailable || attempt > 0) return status;
    reader_.reset();  // lost: one new connection
  }
}

void RedisStore::Put(const std::string& table, std::string key, std::string value, Done done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  Enqueue(Op{false, HashName(table), std::move(key), std::move(value), std::move(done)});
}

void RedisStore::Delete(const std::string& table, std::string key, Done done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  Enqueue(Op{true, HashName(table), std::move(key), {}, std::move(done)});
}

void RedisStore::Enqueue(Op op) {
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(op));
  }
  cv_.Signal();
}

void RedisStore::WriterLoop() {
  std::deque<Op> pending;  // taken from queue_, not yet acknowledged, in call order
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && queue_.empty() && pending.empty()) cv_.Wait(&mu_);
      while (!queue_.empty()) {
        pending.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (pending.empty()) return;  // stopping, and everything was sent
      if (stop_ && absl::Now() >= flush_deadline_) break;
    }
    Finished finished;
    absl::Status status = SendSome(pending, &finished);
    PostFinished(std::move(finished));
    if (!status.ok() && !Reconnect(status, pending.size())) break;
  }
  Logger("gcs")->error("stopped with {} write(s) never acknowledged by Redis at {}", pending.size(),
                       options_.endpoint.ToString());
}

absl::Status RedisStore::SendSome(std::deque<Op>& pending, Finished* finished) {
  const size_t n = std::min(pending.size(), kMaxPipeline);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = pending[i];
    if (op.is_delete) {
      writer_conn_->Append({"HDEL", op.hash, op.key});
    } else {
      writer_conn_->Append({"HSET", op.hash, op.key, op.value});
    }
  }
  for (size_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(RedisReply reply, writer_conn_->GetReply());
    Op& op = pending.front();
    absl::Status status;
    if (reply.is_error()) {
      status = ErrorReply("Redis refused a write to " + op.hash, reply.str);
      // Retried on a new connection, with every write after it.
      if (status.code() == absl::StatusCode::kUnavailable) return status;
      Logger("gcs")->error("{}", std::string(status.message()));
    }
    if (op.done) finished->emplace_back(std::move(op.done), status);
    pending.pop_front();
  }
  return absl::OkStatus();
}

bool RedisStore::Reconnect(const absl::Status& why, size_t unsent) {
  writer_conn_.reset();
  ++connection_failures_;
  auto log = Logger("gcs");
  log->warn("{}; {} unacknowledged write(s) will be sent again", std::string(why.message()), unsent);
  absl::Duration backoff = options_.min_backoff;
  for (int attempt = 1;; ++attempt) {
    auto conn = RedisConnection::Connect(options_.endpoint, options_.connect_timeout, options_.io_timeout);
    if (conn.ok()) {
      writer_conn_ = std::move(*conn);
      log->info("reconnected to Redis at {} after {} attempt(s)", options_.endpoint.ToString(), attempt);
      return true;
    }
    ++connection_failures_;
    if (attempt == 1 || attempt % 20 == 0) {
      log->warn("still no Redis (attempt {}): {}", attempt, std::string(conn.status().message()));
    }
    if (!Backoff(backoff)) return false;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

bool RedisStore::Backoff(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = absl::Now() + d;
  while (true) {
    absl::Time now = absl::Now();
    if (stop_ && now >= flush_deadline_) return false;
    absl::Time wake = stop_ ? std::min(until, flush_deadline_) : until;
    if (now >= wake) return true;
    cv_.WaitWithTimeout(&mu_, wake - now);
  }
}

void RedisStore::PostFinished(Finished finished) {
  if (finished.empty()) return;
  loop_->Post([finished = std::move(finished)] {
    for (const auto& [done, status] : finished) done(status);
  });
}

}  // namespace manta::gcs
