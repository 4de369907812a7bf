// bench_gcs_sim_workers READY_FILE: the workers of bench_gcs_load's
// simulated raylets, in a process of their own so that the GCS's
// connection to each actor's worker (it keeps one per worker) is held here
// and not in the simulator's descriptor budget. Serves CoreWorkerService on
// 127.0.0.1: every creation task returns at once (the actor is ALIVE), kill
// and exit requests succeed. Checks the token in $MANTA_TOKEN when set.
// Writes its port to READY_FILE once serving; runs until SIGTERM or SIGINT.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/file_util.h"
#include "common/rpc/grpc_util.h"
#include "proto/core_worker.grpc.pb.h"

namespace {

class Workers : public manta::rpc::CoreWorkerService::CallbackService {
 public:
  explicit Workers(std::string token) : token_(std::move(token)) {}
  grpc::ServerUnaryReactor* PushTask(grpc::CallbackServerContext* ctx, const manta::rpc::PushTaskRequest*,
                                     manta::rpc::PushTaskReply*) override {
    return Finish(ctx);
  }
  grpc::ServerUnaryReactor* KillActor(grpc::CallbackServerContext* ctx, const manta::rpc::KillActorOnWorkerRequest*,
                                      manta::rpc::KillActorOnWorkerReply*) override {
    return Finish(ctx);
  }
  grpc::ServerUnaryReactor* Exit(grpc::CallbackServerContext* ctx, const manta::rpc::ExitRequest*,
                                 manta::rpc::ExitReply*) override {
    return Finish(ctx);
  }

 private:
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(manta::rpc::CheckAuth(*ctx, token_));
    return reactor;
  }
  const std::string token_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s READY_FILE\n", argv[0]);
    return 2;
  }
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Signals are taken by sigwait below, in this thread, before gRPC starts its own.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const char* token = std::getenv("MANTA_TOKEN");
  Workers workers(token == nullptr ? "" : token);
  grpc::ServerBuilder builder;
  manta::rpc::ConfigureServerBuilder(&builder);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&workers);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port <= 0) {
    std::fprintf(stderr, "bench_gcs_sim_workers: cannot listen on 127.0.0.1\n");
    return 1;
  }
  if (auto s = manta::WriteFileAtomic(argv[1], std::to_string(port) + "\n"); !s.ok()) {
    std::fprintf(stderr, "bench_gcs_sim_workers: %s\n", s.ToString().c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
