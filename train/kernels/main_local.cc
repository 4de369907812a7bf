// manta_train_local: runs N manta_train processes on this machine, as if
// jax.distributed.initialize were called on N hosts, without the runtime.
//
//   manta_train_local --num_processes=2 --chips_per_host=2 [--num_slices=2]
//       -- train/kernels/configs/base.yml model_name=tiny steps=20
//
// Process 0 hosts the coordinator on a free port below the ephemeral range. If any process
// fails, the others are stopped and the launcher exits non-zero.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "train/kernels/rendezvous.h"

namespace {

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  return path.substr(0, path.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  // A write to a peer process that died is an error of the collective, not
  // the end of this one.
  std::signal(SIGPIPE, SIG_IGN);
  int num_processes = 1, chips_per_host = 1, num_slices = 1, port = 0;
  std::vector<std::string> pass_flags, config_args;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    auto value = [&](const char* name, int* out) {
      std::string prefix = std::string("--") + name + "=";
      if (arg.rfind(prefix, 0) != 0) return false;
      if (!absl::SimpleAtoi(arg.substr(prefix.size()), out)) {
        std::cerr << "manta_train_local: " << prefix << " needs an integer\n";
        std::exit(2);
      }
      return true;
    };
    if (value("num_processes", &num_processes) || value("chips_per_host", &chips_per_host) ||
        value("num_slices", &num_slices) || value("port", &port)) {
      continue;
    }
    if (arg.rfind("--", 0) == 0) {
      pass_flags.push_back(arg);  // e.g. --blas_threads, handed to every process
      continue;
    }
    break;
  }
  for (; i < argc; ++i) config_args.push_back(argv[i]);
  if (num_processes < 1 || num_slices < 1 || num_processes % num_slices != 0) {
    std::cerr << "manta_train_local: --num_slices must divide --num_processes\n";
    return 2;
  }
  if (port == 0) {
    auto picked = manta::train::PickCoordinatorPort();
    if (!picked.ok()) {
      std::cerr << "manta_train_local: " << picked.status().message() << "\n";
      return 1;
    }
    port = *picked;
  }
  const std::string binary = SelfDir() + "/manta_train";
  const std::string coordinator = "127.0.0.1:" + std::to_string(port);
  std::vector<pid_t> children;
  for (int p = 0; p < num_processes; ++p) {
    std::vector<std::string> args = {binary,
                                     "--coordinator_address=" + coordinator,
                                     "--process_id=" + std::to_string(p),
                                     "--num_processes=" + std::to_string(num_processes),
                                     "--slice_id=" + std::to_string(p / (num_processes / num_slices)),
                                     "--num_slices=" + std::to_string(num_slices),
                                     "--chips_per_host=" + std::to_string(chips_per_host)};
    args.insert(args.end(), pass_flags.begin(), pass_flags.end());
    args.push_back("--");
    args.insert(args.end(), config_args.begin(), config_args.end());
    pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> cargs;
      for (auto& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      ::execv(binary.c_str(), cargs.data());
      std::cerr << "manta_train_local: cannot exec " << binary << ": " << std::strerror(errno) << "\n";
      ::_exit(127);
    }
    if (pid < 0) {
      std::cerr << "manta_train_local: fork failed: " << std::strerror(errno) << "\n";
      for (pid_t c : children) ::kill(c, SIGTERM);
      return 1;
    }
    children.push_back(pid);
  }
  int exit_code = 0;
  size_t remaining = children.size();
  while (remaining > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --remaining;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && exit_code == 0) {
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::cerr << "manta_train_local: process pid " << pid << " failed (" << exit_code << "); stopping the others\n";
      for (pid_t c : children) {
        if (c != pid) ::kill(c, SIGTERM);
      }
    }
  }
  return exit_code;
}
