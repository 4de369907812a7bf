// PushTransport against an in-process worker end of PushTasks (one that
// answers each push, or one that holds them) and against an address that
// refuses connections. The host is a fake that records each settlement and
// takes its stubs from the core worker's ClientPool.
#include "runtime/core_worker/push_transport.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "runtime/core_worker/core_worker_impl.h"
#include "runtime/core_worker/task_submitter.h"

namespace manta::core {
namespace push_transport_test {

constexpr absl::Duration kWaitFor = absl::Seconds(10);

// Waits until `done` holds, up to kWaitFor.
bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kWaitFor;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// A call as the host saw it when it was settled.
struct Settled {
  std::string task_id;
  absl::Status status;
  int resends = 0;
  std::string returned;  // the object id of the reply's first return
};

// The transport's host: the core worker's stubs over real channels, and a
// record of every settlement. Each settlement starts the next follow-up
// call, if any, as a submitter's next queued call would.
class RecordingPushHost : public PushTransport::Host {
 public:
  std::shared_ptr<rpc::CoreWorkerService::Stub> Worker(const std::string& address,
                                                       const std::string& worker_id) override {
    return pool_.WorkerProcess(address, worker_id);
  }

  void Settle(PushCall* call, std::vector<PushCall*>* to_start) override {
    Settled s;
    s.task_id = call->request.spec().task_id();
    s.status = call->status;
    s.resends = call->resends;
    if (call->reply.returns_size() > 0) s.returned = call->reply.returns(0).object_id();
    absl::MutexLock lock(&mu_);
    settled_.push_back(std::move(s));
    if (!follow_ups_.empty()) {
      to_start->push_back(follow_ups_.front());
      follow_ups_.erase(follow_ups_.begin());
    }
  }

  // `call` goes out from the next settlement.
  void AddFollowUp(PushCall* call) {
    absl::MutexLock lock(&mu_);
    follow_ups_.push_back(call);
  }
  bool AwaitSettled(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return settled_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWaitFor);
  }
  std::vector<Settled> settled() {
    absl::MutexLock lock(&mu_);
    return settled_;
  }

 private:
  ClientPool pool_;
  absl::Mutex mu_;
  std::vector<Settled> settled_ ABSL_GUARDED_BY(mu_);
  std::vector<PushCall*> follow_ups_ ABSL_GUARDED_BY(mu_);
};

// A worker's end of PushTasks: answers each push with a reply whose one
// return is named after the push's task, or (holding) answers none.
class FakeWorkerService final : public rpc::CoreWorkerService::CallbackService {
 public:
  explicit FakeWorkerService(bool answer) : answer_(answer) {}

  grpc::ServerBidiReactor<rpc::PushTasksRequest, rpc::PushTasksReply>* PushTasks(
      grpc::CallbackServerContext* ctx) override {
    ++streams_;
    return new Stream(this);
  }
  int received() const { return received_.load(); }
  int streams() const { return streams_.load(); }

 private:
  // One caller's stream: a read, then (answering) a write of its results,
  // then the next read; never two operations at once.
  class Stream final : public grpc::ServerBidiReactor<rpc::PushTasksRequest, rpc::PushTasksReply> {
   public:
    explicit Stream(FakeWorkerService* service) : service_(service) { StartRead(&in_); }

    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      service_->received_ += in_.tags_size();
      if (!service_->answer_) {
        in_.Clear();
        StartRead(&in_);
        return;
      }
      out_.Clear();
      for (int i = 0; i < in_.tags_size(); ++i) {
        rpc::PushTaskRequest request;
        rpc::PushTaskReply reply;
        if (request.ParseFromString(in_.pushes(i))) reply.add_returns()->set_object_id(request.spec().task_id());
        rpc::PushResult* result = out_.add_results();
        result->set_tag(in_.tags(i));
        reply.SerializeToString(result->mutable_reply());
      }
      in_.Clear();
      StartWrite(&out_);
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the caller went away"));
        return;
      }
      StartRead(&in_);
    }
    void OnDone() override { delete this; }

   private:
    FakeWorkerService* const service_;
    rpc::PushTasksRequest in_;
    rpc::PushTasksReply out_;
  };

  const bool answer_;
  std::atomic<int> received_{0};
  std::atomic<int> streams_{0};
};

// An address that refuses connections: a port bound and not listened on.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    port_ = ntohs(addr.sin_port);
  }
  ~RefusingPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  bool ok_ = false;
};

class PushTransportTest : public ::testing::Test {
 protected:
  ~PushTransportTest() override {
    pushes_.Stop();
    EXPECT_TRUE(pushes_.CancelAll()) << "a call or stream did not end once cancelled";
    pushes_.FreeEnded();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // Starts a worker end (at `at`, by default on a free port); returns its
  // "ip:port".
  std::string StartWorker(bool answer, const std::string& at = "127.0.0.1:0") {
    service_ = std::make_unique<FakeWorkerService>(answer);
    grpc::ServerBuilder builder;
    rpc::ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort(at, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    return "127.0.0.1:" + std::to_string(port);
  }

  // A call of a new task to `address`: an actor call, or with `queue` a
  // normal task's. The transport owns it once started.
  static PushCall* NewCall(const std::string& address, TaskQueue* queue = nullptr) {
    auto* call = new PushCall();
    call->address = address;
    call->queue = queue;
    call->request.mutable_spec()->set_task_id(TaskId::FromRandom().Binary());
    return call;
  }

  RecordingPushHost host_;
  TaskQueue queue_;  // names a call a normal task's; the transport never reads it
  std::unique_ptr<FakeWorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  PushTransport pushes_{&host_, "token"};
};

TEST_F(PushTransportTest, CallsSettleWithTheirWorkersReplies) {
  const std::string worker = StartWorker(/*answer=*/true);
  ASSERT_TRUE(server_ != nullptr);
  std::vector<PushCall*> calls = {NewCall(worker), NewCall(worker, &queue_), NewCall(worker)};
  std::map<std::string, bool> sent;
  for (PushCall* c : calls) sent[c->request.spec().task_id()] = false;
  pushes_.Start(calls);
  ASSERT_TRUE(host_.AwaitSettled(3));
  for (const Settled& s : host_.settled()) {
    EXPECT_TRUE(s.status.ok()) << s.status;
    EXPECT_EQ(s.returned, s.task_id) << "the reply settles the call it answers";
    EXPECT_EQ(s.resends, 0);
    ASSERT_EQ(sent.count(s.task_id), 1u);
    EXPECT_FALSE(sent[s.task_id]) << "settled twice";
    sent[s.task_id] = true;
  }
  EXPECT_EQ(service_->received(), 3);
}

TEST_F(PushTransportTest, CallsMadeDueBySettlingGoOutFromTheCompletion) {
  const std::string worker = StartWorker(/*answer=*/true);
  PushCall* next = NewCall(worker);
  const std::string next_task = next->request.spec().task_id();
  host_.AddFollowUp(next);
  pushes_.Start({NewCall(worker)});
  ASSERT_TRUE(host_.AwaitSettled(2));
  std::vector<Settled> settled = host_.settled();
  EXPECT_TRUE(settled[1].status.ok()) << settled[1].status;
  EXPECT_EQ(settled[1].task_id, next_task);
  EXPECT_EQ(settled[1].returned, next_task);
}

TEST_F(PushTransportTest, NormalTaskToARefusingWorkerIsSentAgainThenFails) {
  RefusingPort port;
  ASSERT_TRUE(port.ok());
  pushes_.Start({NewCall(port.address(), &queue_)});
  ASSERT_TRUE(host_.AwaitSettled(1));
  std::vector<Settled> settled = host_.settled();
  EXPECT_EQ(settled[0].status.code(), absl::StatusCode::kUnavailable) << settled[0].status;
  EXPECT_EQ(settled[0].resends, PushTransport::kMaxResends);
}

TEST_F(PushTransportTest, ActorCallToARefusingWorkerFailsWithoutBeingSentAgain) {
  RefusingPort port;
  ASSERT_TRUE(port.ok());
  pushes_.Start({NewCall(port.address())});
  ASSERT_TRUE(host_.AwaitSettled(1));
  std::vector<Settled> settled = host_.settled();
  EXPECT_EQ(settled[0].status.code(), absl::StatusCode::kUnavailable) << settled[0].status;
  EXPECT_EQ(settled[0].resends, 0);
}

TEST_F(PushTransportTest, AWorkerAtAnAddressAnEarlierOneUsedGetsAChannelOfItsOwn) {
  // The first worker's process is gone: its port refuses, and the call to
  // it fails (its channel now backs off, remembering that).
  auto gone = std::make_unique<RefusingPort>();
  ASSERT_TRUE(gone->ok());
  const std::string address = gone->address();
  PushCall* to_gone = NewCall(address);
  to_gone->worker_id = "first worker";
  pushes_.Start({to_gone});
  ASSERT_TRUE(host_.AwaitSettled(1));
  ASSERT_EQ(host_.settled()[0].status.code(), absl::StatusCode::kUnavailable) << host_.settled()[0].status;
  // A new worker process is given the same port, and is called at once.
  gone.reset();
  ASSERT_EQ(StartWorker(/*answer=*/true, address), address);
  ASSERT_TRUE(server_ != nullptr);
  PushCall* to_new = NewCall(address);
  to_new->worker_id = "second worker";
  const std::string task = to_new->request.spec().task_id();
  pushes_.Start({to_new});
  ASSERT_TRUE(host_.AwaitSettled(2));
  const Settled s = host_.settled()[1];
  EXPECT_TRUE(s.status.ok()) << "the new worker was not reached: " << s.status;
  EXPECT_EQ(s.returned, task);
  EXPECT_EQ(service_->received(), 1);
}

TEST_F(PushTransportTest, EachWorkerProcessAtAnAddressHasAStreamOfItsOwn) {
  const std::string address = StartWorker(/*answer=*/false);
  PushCall* first = NewCall(address);
  first->worker_id = "first worker";
  pushes_.Start({first});
  ASSERT_TRUE(WaitUntil([&] { return service_->received() == 1; }));
  // The first worker's stream is still open; a call for another process at
  // that address never goes out on it.
  PushCall* second = NewCall(address);
  second->worker_id = "second worker";
  pushes_.Start({second});
  ASSERT_TRUE(WaitUntil([&] { return service_->received() == 2; }));
  EXPECT_EQ(service_->streams(), 2);
  // A call for the first worker again takes its stream.
  PushCall* again = NewCall(address);
  again->worker_id = "first worker";
  pushes_.Start({again});
  ASSERT_TRUE(WaitUntil([&] { return service_->received() == 3; }));
  EXPECT_EQ(service_->streams(), 2);
}

TEST_F(PushTransportTest, CallLargerThanAMessageFailsAloneAndTheStreamGoesOn) {
  const std::string worker = StartWorker(/*answer=*/true);
  PushCall* huge = NewCall(worker);
  huge->request.mutable_spec()->add_args()->set_data(std::string(rpc::kMaxMessageBytes, 'x'));
  pushes_.Start({huge});
  ASSERT_TRUE(host_.AwaitSettled(1));
  EXPECT_EQ(host_.settled()[0].status.code(), absl::StatusCode::kResourceExhausted);
  pushes_.Start({NewCall(worker)});
  ASSERT_TRUE(host_.AwaitSettled(2));
  EXPECT_TRUE(host_.settled()[1].status.ok()) << host_.settled()[1].status;
  EXPECT_EQ(service_->received(), 1);
}

TEST_F(PushTransportTest, StopKeepsNewCallsAndCancelAllEndsTheOnesInFlight) {
  const std::string worker = StartWorker(/*answer=*/false);
  pushes_.Start({NewCall(worker, &queue_)});
  ASSERT_TRUE(WaitUntil([&] { return service_->received() == 1; }));
  pushes_.Stop();
  pushes_.Start({NewCall(worker)});  // kept, not sent
  EXPECT_TRUE(pushes_.CancelAll());
  EXPECT_TRUE(host_.settled().empty()) << "once stopping, calls are let go, not settled";
  EXPECT_EQ(service_->received(), 1);
  pushes_.FreeEnded();
}

}  // namespace push_transport_test
}  // namespace manta::core
