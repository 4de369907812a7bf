// SyncGcsClient: blocking calls to the GCS through a GcsClient, for threads
// that may wait — a user's thread in the core worker, the CLI, the
// dashboard's job store — never the client's loop thread.
//
//   SyncGcsClient gcs(&loop, client.get(), absl::Seconds(15));  // over a running loop
//   auto reply = gcs.Call<rpc::GetNamedActorReply>(
//       [req](GcsClient& c, auto done) { c.GetNamedActor(req, std::move(done)); });
//
//   auto gcs = SyncGcsClient::Connect("10.0.0.1:6379", token, absl::Seconds(5));  // a loop of its own
//
// `start` runs on the loop, possibly after Call returned (a wait that timed
// out): capture by value. A call is waited for at most `wait`; a reply that
// never comes (the loop stopped meanwhile) is DeadlineExceeded then. With
// `reconnect`, a call failing UNAVAILABLE (the GCS is away: a restarting
// head) is made again, after a backoff that doubles up to 1 s, until that
// much time has passed — only for requests the GCS handles idempotently.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gcs/client/gcs_client.h"

namespace manta::gcs {

// How SyncGcsClient::Call waits.
struct SyncCallOptions {
  // How long one attempt is waited for; zero: the client's default.
  absl::Duration wait = absl::ZeroDuration();
  // How long an unreachable GCS is waited out; zero: not at all.
  absl::Duration reconnect = absl::ZeroDuration();
};

class SyncGcsClient {
 public:
  template <typename Reply>
  using Start = std::function<void(GcsClient&, GcsClient::Callback<Reply>)>;

  using CallOptions = SyncCallOptions;

  // A call in flight: one reply, waited for by one or more threads.
  template <typename Reply>
  class Pending {
   public:
    // The reply; DeadlineExceeded when none came within `wait`, Cancelled
    // after Cancel().
    absl::StatusOr<Reply> Wait(absl::Duration wait) {
      absl::MutexLock lock(&mu_);
      if (!mu_.AwaitWithTimeout(absl::Condition(&done_), wait)) {
        return absl::DeadlineExceededError("no reply from the GCS within " + absl::FormatDuration(wait));
      }
      if (!status_.ok()) return status_;
      return reply_;
    }
    // Ends every wait at once; the reply, when it comes, is dropped.
    void Cancel() { Set(absl::CancelledError("the call to the GCS was cancelled"), Reply()); }
    void Set(const absl::Status& s, Reply&& reply) {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      done_ = true;
      status_ = s;
      reply_ = std::move(reply);
    }

   private:
    absl::Mutex mu_;
    bool done_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status status_ ABSL_GUARDED_BY(mu_);
    Reply reply_ ABSL_GUARDED_BY(mu_);
  };

  // Over `client`, whose loop runs on another thread; `wait`: how long a
  // call is waited for by default (a little more than the client's timeout).
  SyncGcsClient(EventLoop* loop, GcsClient* client, absl::Duration wait);
  // A loop thread of its own and the gRPC client on it; `timeout`: each
  // call's deadline.
  static std::unique_ptr<SyncGcsClient> Connect(const std::string& address, std::string token, absl::Duration timeout);
  // Stops and joins an owned loop.
  ~SyncGcsClient();
  SyncGcsClient(const SyncGcsClient&) = delete;
  SyncGcsClient& operator=(const SyncGcsClient&) = delete;

  // Starts a call; its reply lands in the returned Pending.
  template <typename Reply>
  std::shared_ptr<Pending<Reply>> Begin(Start<Reply> start) {
    auto pending = std::make_shared<Pending<Reply>>();
    loop_->Post([client = client_, start = std::move(start), pending] {
      start(*client, [pending](const absl::Status& s, Reply&& reply) { pending->Set(s, std::move(reply)); });
    });
    return pending;
  }

  // Makes a call and waits for its reply (see the header comment).
  template <typename Reply>
  absl::StatusOr<Reply> Call(Start<Reply> start, CallOptions options = {}) {
    const absl::Duration wait = options.wait > absl::ZeroDuration() ? options.wait : wait_;
    const absl::Time give_up = absl::Now() + options.reconnect;
    absl::Duration backoff = absl::Milliseconds(100);
    while (true) {
      absl::StatusOr<Reply> reply = Begin<Reply>(start)->Wait(wait);
      if (reply.ok() || !absl::IsUnavailable(reply.status()) || absl::Now() + backoff > give_up) return reply;
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
    }
  }

  EventLoop* loop() const { return loop_; }
  GcsClient* client() const { return client_; }
  // Connect's address; empty over a borrowed client.
  const std::string& address() const { return address_; }

 private:
  SyncGcsClient(std::unique_ptr<EventLoop> loop, absl::Duration wait);

  std::unique_ptr<EventLoop> owned_loop_;  // Connect's
  std::unique_ptr<GcsClient> owned_client_;
  std::thread loop_thread_;
  EventLoop* loop_;
  GcsClient* client_;
  const absl::Duration wait_;
  std::string address_;
};

}  // namespace manta::gcs
