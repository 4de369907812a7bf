// A driver for the runtime env integration test (tests/runtime_env_test.cc).
// Its tasks need the "other_node" resource, which only the second node of
// the test cluster has, so they run on a node the driver is not on.
//
//   runtime_env_driver [WORKING_DIR]
//     Joins the cluster (WORKING_DIR: as InitOptions::runtime_env_working_dir
//     with JOB_VAR=local-value; without it the runtime env the Jobs API
//     gave). Runs ReadCwd and prints "RESULT <what it saw>", then ReadCwd
//     with the task's own JOB_VAR and prints "OVERRIDE <what it saw>". A
//     failed task prints "ERROR <its error>". Exits 0 once it printed them.
//
// ReadCwd sees "<cwd's basename>|<data/input.txt>|<$JOB_VAR>".
#include <manta/api.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

namespace {

std::string ReadCwd() {
  char cwd[PATH_MAX] = {};
  std::string dir = getcwd(cwd, sizeof(cwd)) ? cwd : "?";
  std::ifstream f("data/input.txt");
  std::stringstream text;
  text << f.rdbuf();
  const char* var = std::getenv("JOB_VAR");
  return dir.substr(dir.rfind('/') + 1) + "|" + text.str() + "|" + (var ? var : "unset");
}

MANTA_REMOTE(ReadCwd);

const std::map<std::string, double> kOtherNode = {{"CPU", 1}, {"other_node", 1}};

void Print(const char* label, const manta::ObjectRef<std::string>& ref) {
  auto value = manta::TryGet(ref, absl::Seconds(60));
  if (value.ok()) {
    std::cout << label << " " << **value << std::endl;
  } else {
    std::cout << "ERROR " << value.status().message() << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  manta::InitOptions options;
  if (argc > 1) {
    options.runtime_env_working_dir = argv[1];
    options.runtime_env_env_vars = {{"JOB_VAR", "local-value"}};
  }
  if (absl::Status s = manta::TryInit(options); !s.ok()) {
    std::cout << "INIT ERROR " << s.message() << std::endl;
    return 1;
  }
  Print("RESULT", manta::Task(ReadCwd).SetResources(kOtherNode).Remote());
  Print("OVERRIDE", manta::Task(ReadCwd).SetResources(kOtherNode).SetEnv({{"JOB_VAR", "task-wins"}}).Remote());
  manta::Shutdown();
  return 0;
}
