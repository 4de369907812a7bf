// Asynchronous unary calls whose callbacks run on an EventLoop.
//
//   rpc::UnaryCall<RegisterNodeReply>(loop_, token_, absl::Seconds(5), request,
//       [stub = stub_.get()](auto* ctx, auto* req, auto* reply, auto cb) {
//         stub->async()->RegisterNode(ctx, req, reply, std::move(cb));
//       },
//       [this](const absl::Status& s, RegisterNodeReply reply) { ... });
//
// RetryingUnaryCall is the same for idempotent methods: a call that fails
// UNAVAILABLE (the connection broke; the server may or may not have handled
// it) is made again with the same request.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include "common/event_loop.h"
#include "common/rpc/grpc_util.h"
#include "common/rpc/tsan_handoff.h"

namespace manta::rpc {

template <typename Reply>
using ReplyCallback = std::function<void(const absl::Status&, Reply&&)>;

// Starts a call through `start` and delivers its outcome to `callback` on
// `loop` (or on the gRPC thread when `loop` is null). Every call has a deadline.
template <typename Reply, typename Request, typename Start>
void UnaryCall(EventLoop* loop, const std::string& token, absl::Duration timeout, Request request, Start&& start,
               ReplyCallback<Reply> callback) {
  struct State {
    grpc::ClientContext ctx;
    Request request;
    Reply reply;
  };
  auto* state = new State;
  state->request = std::move(request);
  PrepareContext(&state->ctx, token, timeout);
  // The completion may come after the loop is gone (a call still in flight
  // when its owner's process exits): it posts through the mailbox, which
  // outlives the loop, and is dropped then.
  std::shared_ptr<EventLoop::Mailbox> mailbox = loop != nullptr ? loop->mailbox() : nullptr;
  MANTA_GRPC_HANDOFF_BEFORE();
  start(&state->ctx, &state->request, &state->reply,
        [state, mailbox = std::move(mailbox), callback = std::move(callback)](grpc::Status status) mutable {
          MANTA_GRPC_HANDOFF_AFTER();
          // Owns the state: a delivery dropped unrun frees it too.
          auto deliver = [owned = std::shared_ptr<State>(state), status, callback = std::move(callback)]() mutable {
            callback(ToAbslStatus(status), std::move(owned->reply));
            owned.reset();
          };
          if (mailbox != nullptr) {
            mailbox->Post(std::move(deliver));
          } else {
            deliver();
          }
        });
}

// How RetryingUnaryCall retries.
struct RetryPolicy {
  int max_attempts = 5;  // in all, the first included
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(1);
  // When set, called on the loop with each UNAVAILABLE outcome that is about
  // to be retried (the server may be gone: a caller can act before the
  // retries run out).
  std::function<void(const absl::Status&)> on_retry;

  // For calls whose loss costs something (a leaked lease or bundle, a failed
  // actor): twice the attempts, about 6 s of backoff in all.
  static RetryPolicy Patient() {
    RetryPolicy p;
    p.max_attempts = 10;
    return p;
  }
};

// Like UnaryCall, but while an attempt fails UNAVAILABLE and attempts are
// left, the same request is sent again after a backoff that doubles (each
// attempt with its own `timeout`). Only for methods whose handler is
// idempotent: the server may see the request more than once. `callback` gets
// the last attempt's outcome, once, on `loop`, which must not be null (the
// backoff waits on it). Safe from any thread.
template <typename Reply, typename Request, typename Start>
void RetryingUnaryCall(EventLoop* loop, const std::string& token, absl::Duration timeout, RetryPolicy policy,
                       Request request, Start start, ReplyCallback<Reply> callback) {
  struct State : std::enable_shared_from_this<State> {
    State(EventLoop* loop, std::string token, absl::Duration timeout, RetryPolicy policy, Request request, Start start,
          ReplyCallback<Reply> callback)
        : loop(loop),
          token(std::move(token)),
          timeout(timeout),
          policy(policy),
          request(std::move(request)),
          start(std::move(start)),
          callback(std::move(callback)),
          backoff(policy.initial_backoff) {}

    void Attempt() {
      ++attempt;
      UnaryCall<Reply>(loop, token, timeout, request, Start(start),
                       [self = this->shared_from_this()](const absl::Status& s, Reply&& reply) {
                         self->OnReply(s, std::move(reply));
                       });
    }
    void OnReply(const absl::Status& s, Reply&& reply) {
      if (s.code() != absl::StatusCode::kUnavailable || attempt >= policy.max_attempts) {
        return callback(s, std::move(reply));
      }
      if (policy.on_retry) policy.on_retry(s);
      // The loop owns the timer, and the timer this state: a loop destroyed
      // during the backoff (a process exiting) frees both, unrun.
      loop->RunOnce(backoff, [self = this->shared_from_this()] { self->Attempt(); });
      backoff = std::min(backoff * 2, policy.max_backoff);
    }

    EventLoop* const loop;
    const std::string token;
    const absl::Duration timeout;
    const RetryPolicy policy;
    const Request request;
    const Start start;
    ReplyCallback<Reply> callback;
    absl::Duration backoff;
    int attempt = 0;
  };
  std::make_shared<State>(loop, token, timeout, policy, std::move(request), std::move(start), std::move(callback))
      ->Attempt();
}

}  // namespace manta::rpc
