// The dashboard's HTTP handling: any bytes on a connection, parsed by the
// same HTTP server the dashboard runs, through its request guard (token,
// origin, sizes) to the Jobs API's routes, over a job store held in memory
// and a package folder on disk. Jobs that pass validation are started with a
// runner that does not exist, so they fail without running anything.
//
// Every input gets an HTTP answer or a closed connection; never a crash, a
// hang, nor a 500 (a handler that threw). After each input the jobs it made
// are stopped and deleted once finished, and its packages removed, so one
// input does not see what earlier ones left and the heap stays small (a
// growing heap makes every leak check libFuzzer runs slower).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <httplib.h>

#include "common/event_loop.h"
#include "common/logging.h"
#include "dashboard/dashboard_server.h"
#include "dashboard/job_manager.h"
#include "dashboard/job_store.h"
#include "dashboard/jobs_api.h"
#include "dashboard/package_store.h"
#include "dashboard/request_guard.h"
#include "fuzz/fuzz_check.h"

namespace manta::dashboard {
namespace {

// One connection's bytes: reads come from the input, writes are kept.
class InputStream : public httplib::Stream {
 public:
  explicit InputStream(std::string_view input) : input_(input) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size = std::min(size, input_.size());
    std::copy_n(input_.data(), size, ptr);
    input_.remove_prefix(size);
    return static_cast<ssize_t>(size);
  }
  ssize_t write(const char* ptr, size_t size) override {
    output_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8265;
  }
  socket_t socket() const override { return 0; }
  const std::string& output() const { return output_; }

 private:
  std::string_view input_;
  std::string output_;
};

class Server : public httplib::Server {
 public:
  std::string Answer(std::string_view input) {
    InputStream stream(input);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, nullptr);
    return stream.output();
  }
};

// The dashboard's parts, once per process: the loop runs on its own thread
// as in the daemon, requests arrive on the fuzzer's.
struct Dashboard {
  Dashboard() {
    LoggingOptions quiet;
    quiet.level = spdlog::level::off;  // refusals are logged; the fuzzer makes millions
    InitLogging(quiet);
    const std::string session = FuzzTempDir("manta_http_fuzz");
    std::filesystem::create_directories(session + "/logs");
    TarLimits limits;
    limits.max_unpacked_bytes = 1 << 20;
    packages = std::make_unique<PackageStore>(session + "/runtime_resources", limits);
    packages_dir = session + "/runtime_resources/packages";
    FUZZ_CHECK(packages->Init().ok());
    JobManagerOptions jm;
    jm.session_dir = session;
    jm.gcs_address = "127.0.0.1:1";
    jm.token = "fuzz-token";
    jm.runner_path = session + "/no_such_runner";
    jobs = std::make_unique<JobManager>(jm, &store, packages.get(), &loop);
    absl::Status started = absl::UnknownError("not run");
    loop.Post([&] {
      started = jobs->Start();
      loop.Stop();
    });
    loop.Run();
    FUZZ_CHECK(started.ok());
    thread = std::thread([this] { loop.Run(); });
    JobsApiOptions api_options;
    api_options.session_name = "session_fuzz";
    api_options.max_json_bytes = 1 << 16;
    api = std::make_unique<JobsApi>(jobs.get(), packages.get(), api_options);
    auto guard = std::make_shared<GuardConfig>();
    guard->token = "fuzz-token";
    guard->allowed_origins = {"http://127.0.0.1:8265"};
    guard->max_json_bytes = 1 << 16;
    guard->max_package_bytes = 1 << 20;
    server.set_payload_max_length(1 << 20);
    InstallRoutes(&server, guard, api.get());
  }

  // Stops what still runs, deletes what has finished, and removes the
  // uploaded packages. A job's runner fails on its own thread, so a job
  // stopped now is deleted after a later input.
  void Tidy() {
    for (const JobRecord& job : jobs->List()) {
      if (IsTerminal(job.status)) {
        jobs->Delete(job.submission_id).IgnoreError();
      } else {
        jobs->Stop(job.submission_id).IgnoreError();
      }
    }
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(packages_dir, ignored)) {
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }

  EventLoop loop;
  FakeJobStore store;
  std::unique_ptr<PackageStore> packages;
  std::string packages_dir;
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<JobsApi> api;
  Server server;
  std::thread thread;  // never joined: the process ends with the fuzzer
};

}  // namespace
}  // namespace manta::dashboard

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* dashboard = new manta::dashboard::Dashboard();
  const std::string answer = dashboard->server.Answer(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!answer.empty()) {
    FUZZ_CHECK(answer.rfind("HTTP/1.1 ", 0) == 0);
    FUZZ_CHECK(answer.rfind("HTTP/1.1 500", 0) != 0);
  }
  dashboard->Tidy();
  return 0;
}
