// The core worker's request handling in one process, at thousands of inputs
// a second: what its gRPC service does with PushTask, GetObjectStatus,
// GetObject, AddBorrower and RemoveBorrower once the token is checked, over
// its real rooms (TaskReceiver, ObjectService, ReferenceCounter, the
// MemoryStore) wired as CoreWorkerImpl wires them. Only the other processes
// and time are fakes: owners answer fetches from a table, a borrower is
// alive when its worker id's first byte is even, and timers run between
// records. core_worker_fuzz drives the same requests over real gRPC into a
// running driver and actor, far more slowly.
//
// Each input is a sequence of records (fuzz/handler_sequence.h). A
// request's one-byte ids become real ones: a function the registry knows,
// an object this process owns (small or large), one owned elsewhere, or an
// unknown one.
//
// Invariants: every push is finished at most once; a push that is not an
// actor call (whose order may make it wait for earlier calls) is finished
// within a second; a status request is answered exactly once by the end;
// and the objects this process owns keep their values.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/handler_sequence.h"
#include "grpcpp/support/status.h"
#include "manta/internal/function_registry.h"
#include "runtime/core_worker/memory_store.h"
#include "runtime/core_worker/object_service.h"
#include "runtime/core_worker/reference_counter.h"
#include "runtime/core_worker/task_receiver.h"
#include "runtime/core_worker/wire.h"

namespace manta::core {
namespace {

// A task that never finishes fails the input all the same; the bound only has
// to outlast a starved process (a fuzzer run at low priority on a busy
// machine once waited more than a second for the receiver's thread).
constexpr absl::Duration kFinishWait = absl::Seconds(60);

// Functions and an actor class, registered once for the process.
void RegisterFunctions() {
  static const bool once = [] {
    auto& r = internal::FunctionRegistry::Instance();
    static const char keys[4] = {};
    r.RegisterFunction("echo", &keys[0], [](const internal::ArgViews& args) -> absl::StatusOr<internal::ReturnValues> {
      std::string out;
      for (std::string_view a : args) out.append(a.substr(0, 64));
      return internal::ReturnValues{out};
    });
    r.RegisterFunction("big", &keys[1], [](const internal::ArgViews&) -> absl::StatusOr<internal::ReturnValues> {
      return internal::ReturnValues{std::string(kInlineLimit + 1, 'b')};
    });
    r.RegisterFunction("fail", &keys[2], [](const internal::ArgViews&) -> absl::StatusOr<internal::ReturnValues> {
      return absl::InvalidArgumentError("fails on purpose");
    });
    struct Acc {
      std::string log;
    };
    r.RegisterActorFactory("Acc", &keys[3], [](const internal::ArgViews&) -> absl::StatusOr<std::shared_ptr<void>> {
      return std::static_pointer_cast<void>(std::make_shared<Acc>());
    });
    r.RegisterActorMethod("Acc.add", "Acc.add",
                          [](void* self, const internal::ArgViews& args) -> absl::StatusOr<internal::ReturnValues> {
                            auto* acc = static_cast<Acc*>(self);
                            if (!args.empty() && acc->log.size() < 4096) acc->log.append(args[0].substr(0, 16));
                            return internal::ReturnValues{acc->log};
                          });
    return true;
  }();
  (void)once;
}

Value V(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

rpc::Address Address(const std::string& ip, int port, const std::string& worker) {
  rpc::Address a;
  a.set_ip(ip);
  a.set_port(port);
  a.set_worker_id(worker);
  return a;
}

// Timers of both fakes, run between records: those due when the run
// starts, as a loop would after their delay.
class Timers {
 public:
  void Add(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    due_.push_back(std::move(fn));
  }
  void RunDue() {
    std::deque<std::function<void()>> now;
    {
      absl::MutexLock lock(&mu_);
      now.swap(due_);
    }
    for (auto& fn : now) fn();
  }

 private:
  absl::Mutex mu_;
  std::deque<std::function<void()>> due_ ABSL_GUARDED_BY(mu_);
};

class Owners final : public OwnerClient {
 public:
  explicit Owners(Timers* timers) : timers_(timers) {}
  absl::StatusOr<Value> Fetch(const std::string& owner, const ObjectId& id, absl::Duration) override {
    if (id == remote_) return V("remote value");
    return MakeError(ErrorType::kOwnerDied, "cannot reach " + owner);
  }
  // Answered when the timers run, as a reply would come later.
  void Watch(const std::string& owner, const ObjectId& id, absl::Duration wait, bool fetch, Watched done) override {
    timers_->Add([this, owner, id, wait, fetch, done = std::move(done)] {
      absl::StatusOr<Value> v = Fetch(owner, id, wait);
      if (!v.ok()) return done(v.status());
      done(fetch ? std::optional<Value>(*v) : std::nullopt);
    });
  }
  void RunAfter(absl::Duration, std::function<void()> fn) override { timers_->Add(std::move(fn)); }
  void set_remote(const ObjectId& id) { remote_ = id; }

 private:
  Timers* const timers_;
  ObjectId remote_;
};

class Peers final : public BorrowPeers {
 public:
  explicit Peers(Timers* timers) : timers_(timers) {}
  bool AddBorrower(const std::string&, const ObjectId&, const rpc::Address&) override { return true; }
  void RemoveBorrower(const std::string&, const ObjectId&, const std::string&, int) override {}
  void CheckWorker(const rpc::Address&, const std::string& worker_id,
                   std::function<void(const absl::Status&, bool)> done) override {
    const bool alive = !worker_id.empty() && (static_cast<uint8_t>(worker_id[0]) % 2) == 0;
    done(alive ? absl::OkStatus() : absl::UnavailableError("gone"), alive);
  }
  void RunAfter(absl::Duration, std::function<void()> fn) override { timers_->Add(std::move(fn)); }

 private:
  Timers* const timers_;
};

class Push final : public PushedTask {
 public:
  explicit Push(rpc::PushTaskRequest request) : request_(std::move(request)) {}
  const rpc::PushTaskRequest& request() const override { return request_; }
  rpc::PushTaskReply* reply() override { return &reply_; }
  void Finish(const grpc::Status&) override {
    FUZZ_CHECK(finishes_.fetch_add(1) == 0);
    done_.Notify();
  }
  bool actor_call() const { return request_.spec().type() == rpc::TaskSpec::ACTOR_TASK; }
  bool Done(absl::Duration wait) { return done_.WaitForNotificationWithTimeout(wait); }

 private:
  rpc::PushTaskRequest request_;
  rpc::PushTaskReply reply_;
  std::atomic<int> finishes_{0};
  absl::Notification done_;
};

// One worker's rooms, as CoreWorkerImpl wires them (ReceiverHost).
class World final : public TaskHost {
 public:
  World() : owners_(&timers_), peers_(&timers_) {
    objects_.set_self(self_);
    refs_.set_self(self_);
    owners_.set_remote(remote_);
    store_.Put(small_, V("small"));
    store_.AddReference(small_);
    store_.Put(large_, V(std::string(kInlineLimit * 3, 'x')));
    store_.AddReference(large_);
    main_ = std::thread([this] { receiver_.RunMainLoop(); });
  }
  ~World() override {
    receiver_.Stop();
    main_.join();
    refs_.Stop();
  }

  void Run(std::string_view input) {
    const std::vector<fuzz::Call> calls = {
        [this](std::string_view b) { PushTask(b); },       [this](std::string_view b) { GetObjectStatus(b); },
        [this](std::string_view b) { GetObject(b); },      [this](std::string_view b) { AddBorrower(b); },
        [this](std::string_view b) { RemoveBorrower(b); },
    };
    fuzz::RunRecords(
        input, calls, [this] { timers_.RunDue(); }, 32);
    for (auto& p : pushes_) {
      if (!p->actor_call()) FUZZ_CHECK(p->Done(kFinishWait));
    }
    timers_.RunDue();  // every status request's wait passes
    FUZZ_CHECK(status_answers_.load() == status_calls_);
    auto small = store_.TryGet(small_);
    FUZZ_CHECK(small.has_value() && small->ok() && ***small == "small");
  }

  // ---- TaskHost, as the core worker's ----
  absl::StatusOr<Value> ResolveArg(const rpc::TaskArg& arg) override { return objects_.ResolveArg(arg); }
  void HandOverRefs(const rpc::TaskSpec& spec, std::vector<ObjectRefInfo> refs, rpc::ReturnObject* ret) override {
    refs_.HandOverNested(spec, std::move(refs), ret);
  }
  void DropRef(const ObjectId& id) override { refs_.RemoveLocalReference(id); }
  void AddRef(const ObjectId& id) override { refs_.AddLocalReference(id); }
  void HoldForOwner(const ObjectId& id, Value value, rpc::Address* location) override {
    objects_.HoldForOwner(id, std::move(value));
    *location = self_;
  }
  void TaskRunning(const rpc::TaskSpec&, TaskEventBuffer::Ticket*) override {}
  void TaskEnded(const rpc::TaskSpec&, const TaskEventBuffer::Ticket&) override {}

 private:
  template <typename Request>
  static bool Parse(std::string_view bytes, Request* request) {
    return request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  // A one-byte id picks a real one.
  void FixObjectId(std::string* id) const {
    const ObjectId ids[] = {small_, large_, remote_, ObjectId::FromRandom()};
    if (id->size() == 1) *id = ids[static_cast<uint8_t>((*id)[0]) % 4].Binary();
  }
  void FixTask(rpc::PushTaskRequest* req) const;
  // The id check every object handler makes first.
  static bool ParseObjectId(const std::string& bytes, ObjectId* id) {
    auto parsed = ObjectId::FromBinary(bytes);
    if (parsed.ok()) *id = *parsed;
    return parsed.ok();
  }

  void PushTask(std::string_view bytes) {
    rpc::PushTaskRequest req;
    if (!Parse(bytes, &req)) return;
    FixTask(&req);
    if (!receiver_.Admit(req, self_.worker_id()).ok()) return;
    pushes_.push_back(std::make_unique<Push>(std::move(req)));
    receiver_.Enqueue(pushes_.back().get());
  }
  void GetObjectStatus(std::string_view bytes) {
    rpc::GetObjectStatusRequest req;
    ObjectId id;
    if (!Parse(bytes, &req) || (FixObjectId(req.mutable_object_id()), !ParseObjectId(req.object_id(), &id))) return;
    replies_.push_back(std::make_unique<rpc::GetObjectStatusReply>());
    ++status_calls_;
    objects_.AnswerStatus(id, absl::Milliseconds(std::max(0, req.wait_ms())), replies_.back().get(),
                          [this] { status_answers_.fetch_add(1); });
  }
  void GetObject(std::string_view bytes) {
    rpc::GetObjectRequest req;
    ObjectId id;
    if (!Parse(bytes, &req) || (FixObjectId(req.mutable_object_id()), !ParseObjectId(req.object_id(), &id))) return;
    auto v = objects_.ValueToSend(id);
    if (v.ok()) objects_.Sent(id);  // streamed whole
  }
  void AddBorrower(std::string_view bytes) {
    rpc::AddBorrowerRequest req;
    ObjectId id;
    if (!Parse(bytes, &req) || (FixObjectId(req.mutable_object_id()), !ParseObjectId(req.object_id(), &id))) return;
    if (req.borrower().worker_id().empty()) return;  // refused: malformed borrower
    refs_.RecordBorrower(id, req.borrower());
  }
  void RemoveBorrower(std::string_view bytes) {
    rpc::RemoveBorrowerRequest req;
    ObjectId id;
    if (!Parse(bytes, &req) || (FixObjectId(req.mutable_object_id()), !ParseObjectId(req.object_id(), &id))) return;
    refs_.RemoveBorrower(id, req.borrower_worker_id(), req.count());
  }

  const rpc::Address self_ = Address("10.0.0.1", 1000, WorkerId::FromRandom().Binary());
  const ObjectId small_ = ObjectId::FromRandom();
  const ObjectId large_ = ObjectId::FromRandom();
  const ObjectId remote_ = ObjectId::FromRandom();
  Timers timers_;
  Owners owners_;
  Peers peers_;
  std::vector<std::unique_ptr<Push>> pushes_;  // outlive the receiver
  std::vector<std::unique_ptr<rpc::GetObjectStatusReply>> replies_;
  int status_calls_ = 0;
  std::atomic<int> status_answers_{0};
  MemoryStore store_;
  ReferenceCounter refs_{&store_, &peers_};
  ObjectService objects_{&store_, &owners_};
  TaskReceiver receiver_{this};
  std::thread main_;
};

void World::FixTask(rpc::PushTaskRequest* req) const {
  static const char* const kFunctions[] = {"echo", "big", "fail", "Acc", "Acc.add"};
  if (req->intended_worker_id().size() <= 1) req->set_intended_worker_id(self_.worker_id());
  rpc::TaskSpec* spec = req->mutable_spec();
  if (spec->task_id().size() <= 1) spec->set_task_id(TaskId::FromRandom().Binary());
  if (spec->function_name().size() == 1) {
    spec->set_function_name(kFunctions[static_cast<uint8_t>(spec->function_name()[0]) % 5]);
  }
  for (auto& arg : *spec->mutable_args()) {
    FixObjectId(arg.mutable_object_id());
    if (arg.has_owner() && arg.owner().worker_id().size() <= 1) {
      *arg.mutable_owner() = arg.object_id() == remote_.Binary() ? Address("10.0.0.2", 2000, "owner") : self_;
    }
  }
}

}  // namespace
}  // namespace manta::core

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  manta::fuzz::SilenceLogs();
  manta::core::RegisterFunctions();
  manta::core::World world;
  world.Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
