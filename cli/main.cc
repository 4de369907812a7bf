// The manta command: start, stop, status, drain-node, list nodes/actors/tasks/placement-groups/train-runs, job.
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "cli/cluster_address.h"
#include "cli/drain_node.h"
#include "cli/gcs_client.h"
#include "cli/list_actors_client.h"
#include "cli/job.h"
#include "cli/list_format.h"
#include "cli/list_placement_groups.h"
#include "cli/list_train_runs.h"
#include "cli/start.h"
#include "cli/status_format.h"
#include "cli/stop.h"
#include "common/status.h"

namespace manta::cli {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(5);

struct QueryOptions {
  std::string address;
  std::string temp_dir = kDefaultTempDir;
  std::string format = "table";
};

absl::StatusOr<ClusterView> Fetch(const QueryOptions& q) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  return FetchClusterView(address, token, kRpcTimeout);
}

absl::Status RunStatus(const QueryOptions& q) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  ASSIGN_OR_RETURN(ClusterView view, FetchClusterView(address, token, kRpcTimeout, /*summary=*/true));
  std::cout << FormatStatus(view, absl::Now(), absl::LocalTimeZone());
  return absl::OkStatus();
}

absl::Status RunListNodes(const QueryOptions& q) {
  ASSIGN_OR_RETURN(ClusterView view, Fetch(q));
  if (q.format == "json") {
    std::cout << FormatNodeListJson(view.nodes);
  } else {
    std::cout << FormatNodeList(view.nodes, absl::Now(), absl::LocalTimeZone());
  }
  return absl::OkStatus();
}

absl::Status RunListActors(const QueryOptions& q, int limit) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  ASSIGN_OR_RETURN(std::vector<ActorView> actors, FetchActors(address, token, kRpcTimeout, limit));
  if (q.format == "json") {
    std::cout << FormatActorListJson(actors);
  } else {
    std::cout << FormatActorList(actors, limit, absl::Now(), absl::LocalTimeZone());
  }
  return absl::OkStatus();
}

absl::Status RunListTasks(const QueryOptions& q, int limit) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  ASSIGN_OR_RETURN(TaskList tasks, FetchTasks(address, token, kRpcTimeout, limit));
  if (q.format == "json") {
    std::cout << FormatTaskListJson(tasks.tasks);
  } else {
    std::cout << FormatTaskList(tasks.tasks, tasks.num_dropped, limit, absl::Now(), absl::LocalTimeZone());
  }
  return absl::OkStatus();
}

absl::Status RunListPlacementGroups(const QueryOptions& q, int limit, bool detail) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  ASSIGN_OR_RETURN(std::vector<PlacementGroupView> groups, FetchPlacementGroups(address, token, kRpcTimeout, limit));
  if (q.format == "json") {
    std::cout << FormatPlacementGroupListJson(groups);
  } else {
    std::cout << FormatPlacementGroupList(groups, limit, detail, absl::Now(), absl::LocalTimeZone());
  }
  return absl::OkStatus();
}

absl::Status RunListTrainRuns(const QueryOptions& q, int limit, bool detail) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  ASSIGN_OR_RETURN(std::vector<TrainRunView> runs, FetchTrainRuns(address, token, kRpcTimeout, limit));
  if (q.format == "json") {
    std::cout << FormatTrainRunListJson(runs);
  } else {
    std::cout << FormatTrainRunList(runs, limit, detail, absl::Now(), absl::LocalTimeZone());
  }
  return absl::OkStatus();
}

struct DrainOptions {
  QueryOptions query;
  std::string node_id;
  std::string reason;
  std::string deadline = "0";
};

// Resolves the id (a unique prefix will do), asks the GCS, and prints what
// it answered. A dead node's rejection is an error.
absl::Status RunDrainNode(const DrainOptions& o) {
  if (o.reason.empty()) return absl::InvalidArgumentError("--reason is required (e.g. --reason=preemption)");
  RETURN_IF_ERROR(CheckNodeIdArg(o.node_id));
  ASSIGN_OR_RETURN(absl::Duration deadline, ParseDrainDeadline(o.deadline));
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(o.query.address, o.query.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", o.query.temp_dir));
  ASSIGN_OR_RETURN(ClusterView view, FetchClusterView(address, token, kRpcTimeout));
  ASSIGN_OR_RETURN(NodeView node, ResolveNodeId(view.nodes, o.node_id));
  int64_t deadline_ms = deadline == absl::ZeroDuration() ? 0 : absl::ToUnixMillis(absl::Now() + deadline);
  ASSIGN_OR_RETURN(DrainNodeResult result, DrainNode(address, token, kRpcTimeout, node.node_id, o.reason, deadline_ms));
  if (!result.accepted) {
    return absl::FailedPreconditionError("node " + node.node_id + " cannot drain: " + result.rejection_reason);
  }
  std::cout << FormatDrainAccepted(node.node_id, o.reason, deadline) << std::endl;
  return absl::OkStatus();
}

int Fail(const std::string& message) {
  std::string line = absl::StrReplaceAll(message, {{"\n", " "}, {"\r", " "}});
  std::cerr << "manta: error: " << line << std::endl;
  return 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"Manta: a distributed actor runtime for multi-host TPU training.", "manta"};
  app.require_subcommand(1);

  StartOptions start;
  CLI::App* start_cmd = app.add_subcommand("start", "Start Manta processes on this host.");
  start_cmd->add_flag("--head", start.head, "Start the head: the GCS and this host's raylet.");
  start_cmd->add_option("--address", start.address, "Join the cluster whose GCS is at HOST:PORT.");
  start_cmd->add_option("--port", start.port, "The GCS port (head only).")->capture_default_str();
  start_cmd->add_option("--node-ip-address", start.node_ip, "This host's address; daemons bind to it.")
      ->capture_default_str();
  start_cmd->add_option("--num-cpus", start.node.num_cpus, "CPUs this node offers (default: detected).");
  start_cmd->add_option("--memory", start.node.memory, "Memory in bytes this node offers (default: detected).");
  start_cmd->add_option("--resources", start.node.resources, "Custom resources as JSON, e.g. '{\"custom\": 2}'.");
  start_cmd->add_option("--labels", start.node.labels, "Node labels as k=v,k2=v2.");
  start_cmd->add_option("--node-name", start.node.node_name, "A name for this node (default: its IP).");
  start_cmd->add_option("--temp-dir", start.temp_dir, "Root of the session directories.")->capture_default_str();
  start_cmd->add_flag("--block", start.block, "Stay in the foreground; stop the daemons on a signal.");
  start_cmd->add_option("--auth", start.auth, "token (default) or none: whether calls need the cluster token.")
      ->capture_default_str();
  start_cmd->add_option("--include-dashboard", start.include_dashboard,
                        "Head: start the dashboard with the Jobs REST API.")
      ->capture_default_str();
  start_cmd->add_option("--dashboard-host", start.dashboard_host, "Head: the dashboard's HTTP address.")
      ->capture_default_str();
  start_cmd->add_option("--dashboard-port", start.dashboard_port,
                        "Head: the dashboard's HTTP port (default: 8265, or a free port when 8265 is taken).");
  start_cmd->add_option("--gcs-storage", start.gcs_storage,
                        "Head: where the GCS keeps its tables: sqlite (default), memory, "
                        "redis://[:PASSWORD@]HOST:PORT, or redis ($RAY_REDIS_ADDRESS; the password may also come "
                        "from $RAY_REDIS_PASSWORD).");
  start_cmd->add_option("--gcs-storage-namespace", start.gcs_storage_namespace,
                        "Head, Redis: the namespace of this cluster's tables (default: manta). A head started "
                        "again with the same Redis and namespace, on any machine, recovers the cluster.");
  start_cmd->add_option("--token-file", start.token_file,
                        "Join: a file holding the cluster token (default: $MANTA_TOKEN, else the local session's).");
  start_cmd->add_option("--drain-grace-s", start.node.drain_grace_s,
                        "On SIGTERM, drain the node (no new work; exit once idle) for at most this many seconds "
                        "before stopping (default 0: stop at once). `manta stop` always stops at once.");

  StopOptions stop;
  stop.temp_dir = kDefaultTempDir;
  int grace_s = 10;
  CLI::App* stop_cmd = app.add_subcommand("stop", "Stop the Manta processes this host started.");
  stop_cmd->add_flag("-f,--force", stop.force, "Kill with SIGKILL at once.");
  stop_cmd->add_option("--temp-dir", stop.temp_dir, "Root of the session directories.")->capture_default_str();
  stop_cmd->add_option("-g,--grace-period", grace_s, "Seconds to wait after SIGTERM before SIGKILL.")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));

  QueryOptions status;
  CLI::App* status_cmd = app.add_subcommand("status", "Show the cluster's nodes and resource usage.");
  status_cmd->add_option("--address", status.address, "GCS HOST:PORT (default: $MANTA_ADDRESS, else this host's).");
  status_cmd->add_option("--temp-dir", status.temp_dir, "Root of the session directories.")->capture_default_str();

  DrainOptions drain;
  CLI::App* drain_cmd =
      app.add_subcommand("drain-node", "Drain a node: it takes no new work and leaves once idle or at the deadline.");
  drain_cmd->add_option("node_id", drain.node_id, "The node's hex id, or a unique prefix of 8+ hex digits.")
      ->required();
  // A value may be empty ("--reason="), so that RunDrainNode reports it.
  drain_cmd->add_option("--reason", drain.reason, "Why, e.g. preemption, idle, maintenance (required).")
      ->expected(0, 1);
  drain_cmd->add_option("--deadline", drain.deadline, "When the node goes away at the latest: 30s, 2m, ... (0: none).")
      ->capture_default_str();
  drain_cmd->add_option("--address", drain.query.address,
                        "GCS HOST:PORT (default: $MANTA_ADDRESS, else this host's).");
  drain_cmd->add_option("--temp-dir", drain.query.temp_dir, "Root of the session directories.")
      ->capture_default_str();

  QueryOptions list;
  CLI::App* list_cmd = app.add_subcommand("list", "List cluster state.");
  list_cmd->require_subcommand(1);
  CLI::App* list_nodes = list_cmd->add_subcommand("nodes", "List the nodes of the cluster.");
  CLI::App* list_actors = list_cmd->add_subcommand("actors", "List the actors of the cluster.");
  CLI::App* list_tasks = list_cmd->add_subcommand("tasks", "List the latest state of recent tasks.");
  CLI::App* list_pgs = list_cmd->add_subcommand("placement-groups", "List the placement groups of the cluster.");
  CLI::App* list_train_runs = list_cmd->add_subcommand("train-runs", "List the training runs of the cluster.");
  bool list_detail = false;
  list_pgs->add_flag("--detail", list_detail, "Every bundle with its node, and more columns.");
  list_train_runs->add_flag("--detail", list_detail, "Every attempt, and every worker of the latest attempt.");
  int list_limit = 100;
  for (CLI::App* cmd : {list_actors, list_tasks, list_pgs, list_train_runs}) {
    cmd->add_option("--limit", list_limit, "At most this many entries (0: all).")
        ->capture_default_str()
        ->check(CLI::Range(0, 1000000));
  }
  for (CLI::App* cmd : {list_cmd, list_nodes, list_actors, list_tasks, list_pgs, list_train_runs}) {
    cmd->add_option("--address", list.address, "GCS HOST:PORT (default: $MANTA_ADDRESS, else this host's).");
    cmd->add_option("--temp-dir", list.temp_dir, "Root of the session directories.")->capture_default_str();
    cmd->add_option("--format", list.format, "table or json.")
        ->capture_default_str()
        ->check(CLI::IsMember({"table", "json"}));
  }

  JobSubmitOptions job_submit;
  JobCommonOptions job_common;
  std::string job_id;
  bool job_follow = false, job_no_wait = false;
  CLI::App* job_cmd = app.add_subcommand("job", "Submit and manage jobs through the dashboard's Jobs API.");
  job_cmd->require_subcommand(1);
  auto add_common = [](CLI::App* cmd, JobCommonOptions* common) {
    cmd->add_option("--address", common->address,
                    "The dashboard, http://HOST:8265 (default: $MANTA_DASHBOARD_ADDRESS, else this host's).");
    cmd->add_option("--temp-dir", common->temp_dir, "Root of the session directories.")->capture_default_str();
  };
  CLI::App* job_submit_cmd = job_cmd->add_subcommand("submit", "Submit a job; follows its logs until it ends.");
  add_common(job_submit_cmd, &job_submit.common);
  job_submit_cmd->add_option("--submission-id", job_submit.submission_id, "The job's id (default: generated).");
  job_submit_cmd->add_option("--working-dir", job_submit.working_dir, "A directory to upload and run the job in.");
  job_submit_cmd->add_option("--runtime-env-json", job_submit.runtime_env_json,
                             "Runtime environment as JSON: {\"working_dir\": ..., \"env_vars\": {...}}.");
  job_submit_cmd->add_option("--entrypoint-num-cpus", job_submit.entrypoint_num_cpus, "CPUs for the entrypoint.");
  job_submit_cmd->add_option("--entrypoint-num-gpus", job_submit.entrypoint_num_gpus, "GPUs for the entrypoint.");
  job_submit_cmd->add_option("--entrypoint-memory", job_submit.entrypoint_memory, "Memory (bytes) for the entrypoint.");
  job_submit_cmd->add_option("--entrypoint-resources", job_submit.entrypoint_resources,
                             "Custom resources for the entrypoint as JSON, e.g. '{\"TPU\": 4}'.");
  job_submit_cmd->add_option("--metadata-json", job_submit.metadata_json, "Metadata as a JSON object of strings.");
  job_submit_cmd->add_flag("--no-wait", job_submit.no_wait, "Do not follow the logs; return once submitted.");
  job_submit_cmd->add_option("entrypoint", job_submit.entrypoint, "The command to run, after --.")->required();
  CLI::App* job_status_cmd = job_cmd->add_subcommand("status", "Show a job's status.");
  CLI::App* job_logs_cmd = job_cmd->add_subcommand("logs", "Print a job's logs.");
  job_logs_cmd->add_flag("-f,--follow", job_follow, "Follow the logs until the job ends.");
  CLI::App* job_stop_cmd = job_cmd->add_subcommand("stop", "Stop a job (SIGTERM, then SIGKILL).");
  job_stop_cmd->add_flag("--no-wait", job_no_wait, "Do not wait for the job to exit.");
  CLI::App* job_delete_cmd = job_cmd->add_subcommand("delete", "Delete a job that has ended, with its logs.");
  for (CLI::App* cmd : {job_status_cmd, job_logs_cmd, job_stop_cmd, job_delete_cmd}) {
    add_common(cmd, &job_common);
    cmd->add_option("submission_id", job_id, "The job's submission id.")->required();
  }
  CLI::App* job_list_cmd = job_cmd->add_subcommand("list", "List the jobs of the cluster.");
  add_common(job_list_cmd, &job_common);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    Fail(e.what());
    return 2;
  }

  absl::Status s;
  if (*start_cmd) {
    s = RunStart(start, std::cout, std::cerr);
  } else if (*stop_cmd) {
    stop.grace = absl::Seconds(grace_s);
    s = RunStop(stop, std::cout);
  } else if (*status_cmd) {
    s = RunStatus(status);
  } else if (*drain_cmd) {
    s = RunDrainNode(drain);
  } else if (*list_nodes) {
    s = RunListNodes(list);
  } else if (*list_actors) {
    s = RunListActors(list, list_limit);
  } else if (*list_tasks) {
    s = RunListTasks(list, list_limit);
  } else if (*list_pgs) {
    s = RunListPlacementGroups(list, list_limit, list_detail);
  } else if (*list_train_runs) {
    s = RunListTrainRuns(list, list_limit, list_detail);
  } else if (*job_submit_cmd) {
    auto code = RunJobSubmit(job_submit, std::cout);
    if (!code.ok()) return Fail(std::string(code.status().message()));
    return *code;
  } else if (*job_status_cmd) {
    s = RunJobStatus(job_common, job_id, std::cout);
  } else if (*job_logs_cmd) {
    s = RunJobLogs(job_common, job_id, job_follow, std::cout);
  } else if (*job_stop_cmd) {
    s = RunJobStop(job_common, job_id, job_no_wait, std::cout);
  } else if (*job_list_cmd) {
    s = RunJobList(job_common, std::cout);
  } else if (*job_delete_cmd) {
    s = RunJobDelete(job_common, job_id, std::cout);
  }
  if (!s.ok()) return Fail(std::string(s.message()));
  return 0;
}

}  // namespace
}  // namespace manta::cli

int main(int argc, char** argv) { return manta::cli::Main(argc, argv); }
