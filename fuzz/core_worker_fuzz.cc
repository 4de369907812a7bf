// The core worker's gRPC service (CoreWorkerService), fuzzed over real gRPC
// with the cluster's token: in a driver (this process, which owns a small
// and a large object) and in an actor's worker (this same executable,
// started by the raylet). A one-node cluster (gcs_server and raylet from
// $MANTA_BIN_DIR, default build/bin) is started on the first input and
// stopped at exit; its daemons die with this process if it crashes.
//
// Each input is a sequence of records (fuzz/handler_sequence.h) whose
// requests go to PushTask, the PushTasks stream, GetObjectStatus,
// GetObject, AddBorrower, RemoveBorrower and CheckWorker of either process.
// So that mutated bytes reach past the first checks, a request's ids that
// are one byte long become real ones (an object the driver owns, the
// worker's id, a registered function's name), and every address a task
// names is the driver's, so a fetch it starts is answered at once. Exit and
// KillActor are left out: with a valid token they end the worker, as they
// should.
//
// After each input both processes must still answer CheckWorker as
// themselves, the actor's worker must be the same process, and a real call
// on the actor must return its right answer.
#include <manta/api.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/id.h"
#include "common/rpc/grpc_util.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/handler_sequence.h"
#include "proto/core_worker.grpc.pb.h"
#include "proto/gcs_service.grpc.pb.h"
#include "tests/cluster_fixture.h"

namespace {

class Sink {
 public:
  static Sink* Create() { return new Sink(); }
  int64_t Take(std::string bytes) {
    taken_ += static_cast<int64_t>(bytes.size());
    return taken_;
  }
  int64_t Pid() { return getpid(); }

 private:
  int64_t taken_ = 0;
};

std::string Echo(std::string s) { return s; }

MANTA_REMOTE(Sink::Create, &Sink::Take, &Sink::Pid, Echo);

}  // namespace

namespace manta::fuzz {
namespace {

constexpr absl::Duration kCallDeadline = absl::Milliseconds(300);
constexpr absl::Duration kCheckDeadline = absl::Seconds(10);

// One core worker this target calls.
struct Peer {
  rpc::Address address;
  std::unique_ptr<rpc::CoreWorkerService::Stub> stub;
};

class World {
 public:
  static World& Get() {
    static World* world = [] {
      auto* w = new World();
      std::atexit([] { Get().Stop(); });
      return w;
    }();
    return *world;
  }
  // At exit: disconnects the driver, stops the cluster and ends the process
  // at once (exit code 0: libFuzzer reports crashes with _Exit, not exit),
  // so no gRPC thread is still winding down while exit() tears down the
  // allocator and the other statics under it.
  [[noreturn]] void Stop() {
    std::fprintf(stderr, "core_worker_fuzz: %ld calls: %ld OK, %ld refused, %ld timed out, %ld other\n", calls_,
                 answered_[0], answered_[1], answered_[2], answered_[3]);
    held_.clear();
    manta::Shutdown();
    cluster_.reset();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }

  void Run(std::string_view input) {
    std::vector<Call> calls;
    for (Peer* peer : {&driver_, &worker_}) {
      calls.push_back([this, peer](std::string_view b) { PushTask(*peer, b); });
      calls.push_back([this, peer](std::string_view b) { PushTasks(*peer, b); });
      calls.push_back([this, peer](std::string_view b) { GetObjectStatus(*peer, b); });
      calls.push_back([this, peer](std::string_view b) { GetObject(*peer, b); });
      calls.push_back([this, peer](std::string_view b) { AddBorrower(*peer, b); });
      calls.push_back([this, peer](std::string_view b) { RemoveBorrower(*peer, b); });
      calls.push_back([this, peer](std::string_view b) { CheckWorker(*peer, b); });
    }
    RunRecords(
        input, calls, [] {}, 16);
    CheckAlive();
  }

 private:
  World();

  template <typename Request>
  static bool Parse(std::string_view bytes, Request* request) {
    return request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  void Prepare(grpc::ClientContext* ctx, absl::Duration deadline) const {
    rpc::PrepareContext(ctx, cluster_->token(), deadline);
  }

  // A one-byte id picks a real one.
  void FixObjectId(std::string* id) const {
    if (id->size() == 1) *id = objects_[static_cast<uint8_t>((*id)[0]) % objects_.size()];
  }
  void FixTask(rpc::TaskSpec* spec) const;
  bool ParsePush(std::string_view bytes, rpc::PushTaskRequest* request) const;

  void PushTask(Peer& peer, std::string_view bytes);
  void PushTasks(Peer& peer, std::string_view bytes);
  void GetObjectStatus(Peer& peer, std::string_view bytes);
  void GetObject(Peer& peer, std::string_view bytes);
  void AddBorrower(Peer& peer, std::string_view bytes);
  void RemoveBorrower(Peer& peer, std::string_view bytes);
  void CheckWorker(Peer& peer, std::string_view bytes);
  void CheckAlive();

  std::unique_ptr<testing::Cluster> cluster_;
  Peer driver_;
  Peer worker_;
  int64_t worker_pid_ = 0;
  ActorHandle<Sink> sink_;
  std::vector<ObjectRef<std::string>> held_;  // keeps the driver's objects alive
  std::vector<std::string> objects_;          // their ids, and an unknown one
  std::vector<std::string> functions_;
  // Calls made, and their answers: OK, refused (INVALID_ARGUMENT,
  // FAILED_PRECONDITION, NOT_FOUND, ...), DEADLINE_EXCEEDED, other.
  long calls_ = 0;
  long answered_[4] = {0, 0, 0, 0};
  void Count(const grpc::Status& s) {
    ++calls_;
    switch (s.error_code()) {
      case grpc::StatusCode::OK:
        ++answered_[0];
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        ++answered_[2];
        break;
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::FAILED_PRECONDITION:
      case grpc::StatusCode::NOT_FOUND:
      case grpc::StatusCode::OUT_OF_RANGE:
        ++answered_[1];
        break;
      default:
        if (++answered_[3] <= 5)
          std::fprintf(stderr, "core_worker_fuzz: answer %d: %s\n", s.error_code(), s.error_message().c_str());
    }
  }
};

// Connects `peer` to the core worker at `address`.
void Connect(Peer* peer, const rpc::Address& address) {
  peer->address = address;
  peer->stub = rpc::CoreWorkerService::NewStub(rpc::MakeChannel(address.ip() + ":" + std::to_string(address.port())));
}

World::World() {
  SilenceLogs();
  cluster_ = std::make_unique<testing::Cluster>();
  absl::Status started = cluster_->StartHead();
  if (!started.ok()) {
    std::fprintf(stderr, "core_worker_fuzz: cannot start a cluster (set MANTA_BIN_DIR): %s\n",
                 started.ToString().c_str());
    std::exit(1);
  }
  InitOptions init;
  init.address = cluster_->gcs_address();
  init.temp_dir = cluster_->temp_dir();
  // This executable, by its own path: the raylet would read /proc/self/exe
  // as itself.
  init.worker_executable = std::filesystem::read_symlink("/proc/self/exe").string();
  if (absl::Status s = manta::TryInit(init); !s.ok()) {
    std::fprintf(stderr, "core_worker_fuzz: Init: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  held_.push_back(manta::Put(std::string("small")));
  held_.push_back(manta::Put(std::string(3 << 20, 'x')));  // fetched in chunks
  for (const auto& ref : held_) objects_.push_back(ref.ID().Binary());
  objects_.push_back(ObjectId::FromRandom().Binary());
  functions_ = {internal::RemoteFunctionName(internal::FunctionKey(Echo), typeid(&Echo)),
                internal::RemoteMethodName(internal::MemberKey(&Sink::Take), typeid(&Sink::Take)),
                internal::RemoteMethodName(internal::MemberKey(&Sink::Pid), typeid(&Sink::Pid)),
                internal::RemoteFactoryName(internal::FunctionKey(Sink::Create), typeid(&Sink::Create))};

  sink_ = manta::Actor(Sink::Create).Remote();
  worker_pid_ = *manta::Get(sink_.Task(&Sink::Pid).Remote());
  auto gcs = rpc::ActorGcsService::NewStub(rpc::MakeChannel(cluster_->gcs_address()));
  grpc::ClientContext ctx;
  Prepare(&ctx, kCheckDeadline);
  rpc::GetActorInfoRequest request;
  request.set_actor_id(sink_.ID().Binary());
  rpc::GetActorInfoReply reply;
  FUZZ_CHECK(gcs->GetActorInfo(&ctx, request, &reply).ok());
  Connect(&worker_, reply.actor().address());

  auto jobs = rpc::JobGcsService::NewStub(rpc::MakeChannel(cluster_->gcs_address()));
  grpc::ClientContext job_ctx;
  Prepare(&job_ctx, kCheckDeadline);
  rpc::GetAllJobInfoReply all;
  FUZZ_CHECK(jobs->GetAllJobInfo(&job_ctx, rpc::GetAllJobInfoRequest(), &all).ok());
  for (const auto& job : all.jobs()) {
    if (job.driver_pid() == getpid()) Connect(&driver_, job.driver_address());
  }
  FUZZ_CHECK(driver_.stub != nullptr);
}

void World::FixTask(rpc::TaskSpec* spec) const {
  if (spec->task_id().size() <= 1) spec->set_task_id(TaskId::FromRandom().Binary());
  if (spec->function_name().size() == 1) {
    spec->set_function_name(functions_[static_cast<uint8_t>(spec->function_name()[0]) % functions_.size()]);
  }
  if (spec->actor_id().size() == 1) spec->set_actor_id(sink_.ID().Binary());
  *spec->mutable_caller_address() = driver_.address;
  for (auto& arg : *spec->mutable_args()) {
    FixObjectId(arg.mutable_object_id());
    if (arg.has_owner()) *arg.mutable_owner() = driver_.address;
  }
}

bool World::ParsePush(std::string_view bytes, rpc::PushTaskRequest* request) const {
  if (!Parse(bytes, request)) return false;
  if (request->intended_worker_id().size() <= 1) request->set_intended_worker_id(worker_.address.worker_id());
  FixTask(request->mutable_spec());
  return true;
}

void World::PushTask(Peer& peer, std::string_view bytes) {
  rpc::PushTaskRequest request;
  if (!ParsePush(bytes, &request)) return;
  grpc::ClientContext ctx;
  Prepare(&ctx, kCallDeadline);
  rpc::PushTaskReply reply;
  Count(peer.stub->PushTask(&ctx, request, &reply));  // any answer, or none within the deadline
}

void World::PushTasks(Peer& peer, std::string_view bytes) {
  // The bytes are one push; the stream carries it under tag 1, as a
  // caller's stream does.
  rpc::PushTaskRequest push;
  if (!ParsePush(bytes, &push)) return;
  rpc::PushTasksRequest request;
  request.add_tags(1);
  request.add_pushes(push.SerializeAsString());
  grpc::ClientContext ctx;
  Prepare(&ctx, kCallDeadline);
  auto stream = peer.stub->PushTasks(&ctx);
  rpc::PushTasksReply reply;
  const bool answered = stream->Write(request) && stream->Read(&reply);
  ctx.TryCancel();  // the stream stays open for more pushes: end it
  grpc::Status finished = stream->Finish();
  Count(answered ? grpc::Status::OK : finished);
}

void World::GetObjectStatus(Peer& peer, std::string_view bytes) {
  rpc::GetObjectStatusRequest request;
  if (!Parse(bytes, &request)) return;
  FixObjectId(request.mutable_object_id());
  request.set_wait_ms(std::min(request.wait_ms(), 100));
  grpc::ClientContext ctx;
  Prepare(&ctx, kCallDeadline);
  rpc::GetObjectStatusReply reply;
  Count(peer.stub->GetObjectStatus(&ctx, request, &reply));
}

void World::GetObject(Peer& peer, std::string_view bytes) {
  rpc::GetObjectRequest request;
  if (!Parse(bytes, &request)) return;
  FixObjectId(request.mutable_object_id());
  request.set_wait_ms(std::min(request.wait_ms(), 100));
  grpc::ClientContext ctx;
  Prepare(&ctx, kCallDeadline);
  auto reader = peer.stub->GetObject(&ctx, request);
  rpc::ObjectChunk chunk;
  int64_t received = 0;
  while (reader->Read(&chunk)) {
    FUZZ_CHECK(chunk.offset() == received);  // chunks arrive whole and in order
    received += static_cast<int64_t>(chunk.data().size());
    FUZZ_CHECK(received <= chunk.total_size() || chunk.has_error());
  }
  Count(reader->Finish());
}

void World::AddBorrower(Peer& peer, std::string_view bytes) {
  rpc::AddBorrowerRequest request;
  if (!Parse(bytes, &request)) return;
  FixObjectId(request.mutable_object_id());
  grpc::ClientContext ctx;
  Prepare(&ctx, kCallDeadline);
  rpc::AddBorrowerReply reply;
  Count(peer.stub->AddBorrower(&ctx, request, &reply));
}

void World::RemoveBorrower(Peer& peer, std::string_view bytes) {
  rpc::RemoveBorrowerRequest request;
  if (!Parse(bytes, &request)) return;
  FixObjectId(request.mutable_object_id());
  grpc::ClientContext ctx;
  Prepare(&ctx, kCallDeadline);
  rpc::RemoveBorrowerReply reply;
  Count(peer.stub->RemoveBorrower(&ctx, request, &reply));
}

void World::CheckWorker(Peer& peer, std::string_view bytes) {
  rpc::CheckWorkerRequest request;
  if (!Parse(bytes, &request)) return;
  if (request.worker_id().size() == 1) request.set_worker_id(peer.address.worker_id());
  grpc::ClientContext ctx;
  Prepare(&ctx, kCallDeadline);
  rpc::CheckWorkerReply reply;
  grpc::Status s = peer.stub->CheckWorker(&ctx, request, &reply);
  Count(s);
  if (s.ok()) {
    FUZZ_CHECK(reply.same() == (request.worker_id() == peer.address.worker_id()));
  }
}

void World::CheckAlive() {
  for (Peer* peer : {&driver_, &worker_}) {
    grpc::ClientContext ctx;
    Prepare(&ctx, kCheckDeadline);
    rpc::CheckWorkerRequest request;
    request.set_worker_id(peer->address.worker_id());
    rpc::CheckWorkerReply reply;
    grpc::Status s = peer->stub->CheckWorker(&ctx, request, &reply);
    if (!s.ok()) std::fprintf(stderr, "CheckWorker %s: %s\n", peer->address.ip().c_str(), s.error_message().c_str());
    FUZZ_CHECK(s.ok() && reply.same());
  }
  // The actor still answers, from the same process, with its right state.
  auto pid = manta::TryGet(sink_.Task(&Sink::Pid).Remote(), kCheckDeadline);
  FUZZ_CHECK(pid.ok() && **pid == worker_pid_);
  auto before = manta::TryGet(sink_.Task(&Sink::Take).Remote(std::string()), kCheckDeadline);
  auto after = manta::TryGet(sink_.Task(&Sink::Take).Remote(std::string("abc")), kCheckDeadline);
  FUZZ_CHECK(before.ok() && after.ok() && **after == **before + 3);
}

}  // namespace
}  // namespace manta::fuzz

// In the actor's worker (started by the raylet as this executable) this
// runs the task loop and never returns.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (std::getenv("MANTA_WORKER_ID") != nullptr) manta::Init(*argc, *argv);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  manta::fuzz::World::Get().Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
