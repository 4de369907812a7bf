// The manta command: start, stop, up, down, status, drain-node, list nodes/actors/tasks/placement-groups/train-runs,
// job.
#include <unistd.h>

#include <functional>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "cli/cluster_address.h"
#include "cli/drain_node.h"
#include "cli/job.h"
#include "cli/start.h"
#include "cli/stop.h"
#include "cli/up.h"
#include "common/status.h"
#include "state/gcs_reads.h"
#include "state/list_actors.h"
#include "state/list_format.h"
#include "state/list_placement_groups.h"
#include "state/list_train_runs.h"
#include "state/status_format.h"

namespace manta::cli {
namespace {

using state::ClusterView;
using state::NodeView;

constexpr absl::Duration kRpcTimeout = absl::Seconds(5);

struct QueryOptions {
  std::string address;
  std::string temp_dir = kDefaultTempDir;
  std::string format = "table";
};

// With `watch_s` > 0, prints the status again every `watch_s` seconds until
// interrupted (on a terminal, in place), and a GCS that cannot be reached
// meanwhile is a line, not the end.
absl::Status RunStatus(const QueryOptions& q, double watch_s) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  if (watch_s <= 0) {
    ASSIGN_OR_RETURN(ClusterView view, state::FetchClusterView(address, token, kRpcTimeout, /*summary=*/true));
    std::cout << state::FormatStatus(view, absl::Now(), absl::LocalTimeZone());
    return absl::OkStatus();
  }
  const bool terminal = isatty(STDOUT_FILENO) == 1;
  while (true) {
    auto view = state::FetchClusterView(address, token, kRpcTimeout, /*summary=*/true);
    if (terminal) std::cout << "\033[H\033[2J";  // home, clear
    if (view.ok()) {
      std::cout << state::FormatStatus(*view, absl::Now(), absl::LocalTimeZone());
    } else {
      std::cout << "manta: " << view.status().message() << " (trying again every " << watch_s << " s)\n";
    }
    if (!terminal) std::cout << "\n";
    std::cout.flush();
    absl::SleepFor(absl::Seconds(watch_s));
  }
}

// What `manta list` lists: one subcommand each.
enum class ListKind { kNodes, kActors, kTasks, kPlacementGroups, kTrainRuns };

// `manta list <kind>`: reads the entries from the GCS, at most `limit` (0:
// all; nodes are always all), and prints them as `q.format` says: a table
// (with `detail`, the long form of placement groups and training runs) or
// JSON.
absl::Status RunList(const QueryOptions& q, ListKind kind, int limit, bool detail) {
  ASSIGN_OR_RETURN(std::string address, ResolveAddress(q.address, q.temp_dir));
  ASSIGN_OR_RETURN(std::string token, ResolveToken(address, "", q.temp_dir));
  const bool json = q.format == "json";
  const absl::TimeZone tz = absl::LocalTimeZone();
  std::string out;
  switch (kind) {
    case ListKind::kNodes: {
      ASSIGN_OR_RETURN(ClusterView view, state::FetchClusterView(address, token, kRpcTimeout));
      out = json ? state::FormatNodeListJson(view.nodes) : state::FormatNodeList(view.nodes, absl::Now(), tz);
      break;
    }
    case ListKind::kActors: {
      ASSIGN_OR_RETURN(auto actors, state::FetchActors(address, token, kRpcTimeout, limit));
      out = json ? state::FormatActorListJson(actors) : state::FormatActorList(actors, limit, absl::Now(), tz);
      break;
    }
    case ListKind::kTasks: {
      ASSIGN_OR_RETURN(state::TaskList tasks, state::FetchTasks(address, token, kRpcTimeout, limit));
      out = json ? state::FormatTaskListJson(tasks.tasks)
                 : state::FormatTaskList(tasks.tasks, tasks.num_dropped, limit, absl::Now(), tz);
      break;
    }
    case ListKind::kPlacementGroups: {
      ASSIGN_OR_RETURN(auto groups, state::FetchPlacementGroups(address, token, kRpcTimeout, limit));
      out = json ? state::FormatPlacementGroupListJson(groups)
                 : state::FormatPlacementGroupList(groups, limit, detail, absl::Now(), tz);
      break;
    }
    case ListKind::kTrainRuns: {
      ASSIGN_OR_RETURN(auto runs, state::FetchTrainRuns(address, token, kRpcTimeout, limit));
      out =
          json ? state::FormatTrainRunListJson(runs) : state::FormatTrainRunList(runs, limit, detail, absl::Now(), tz);
      break;
    }
  }
  std::cout << out;
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
  ASSIGN_OR_RETURN(ClusterView view, state::FetchClusterView(address, token, kRpcTimeout));
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

// What the command line fills as CLI11 parses it.
struct Options {
  StartOptions start;
  StopOptions stop;
  UpOptions up;
  int up_timeout_s = 120;
  std::string down_temp_dir = kDefaultTempDir;
  int grace_s = 10;
  QueryOptions status;
  double status_watch_s = 0;
  DrainOptions drain;
  QueryOptions list;
  bool list_detail = false;
  int list_limit = 100;
  JobSubmitOptions job_submit;
  JobCommonOptions job_common;
  std::string job_id;
  bool job_follow = false, job_no_wait = false;
};

CLI::App* AddStart(CLI::App& app, StartOptions& start) {
  CLI::App* cmd = app.add_subcommand("start", "Start Manta processes on this host.");
  cmd->add_flag("--head", start.head, "Start the head: the GCS and this host's raylet.");
  cmd->add_option("--address", start.address, "Join the cluster whose GCS is at HOST:PORT.");
  cmd->add_option("--port", start.port, "The GCS port (head only).")->capture_default_str();
  cmd->add_option("--node-ip-address", start.node_ip, "This host's address; daemons bind to it.")
      ->capture_default_str();
  cmd->add_option("--num-cpus", start.node.num_cpus, "CPUs this node offers (default: detected).");
  cmd->add_option("--memory", start.node.memory, "Memory in bytes this node offers (default: detected).");
  cmd->add_option("--resources", start.node.resources, "Custom resources as JSON, e.g. '{\"custom\": 2}'.");
  cmd->add_option("--labels", start.node.labels, "Node labels as k=v,k2=v2.");
  cmd->add_option("--node-name", start.node.node_name, "A name for this node (default: its IP).");
  cmd->add_option("--temp-dir", start.temp_dir, "Root of the session directories.")->capture_default_str();
  cmd->add_flag("--block", start.block, "Stay in the foreground; stop the daemons on a signal.");
  cmd->add_option("--auth", start.auth, "token (default) or none: whether calls need the cluster token.")
      ->capture_default_str();
  cmd->add_option("--include-dashboard", start.include_dashboard, "Head: start the dashboard with the Jobs REST API.")
      ->capture_default_str();
  cmd->add_option("--dashboard-host", start.dashboard_host, "Head: the dashboard's HTTP address.")
      ->capture_default_str();
  cmd->add_option("--dashboard-port", start.dashboard_port,
                  "Head: the dashboard's HTTP port (default: 8265, or a free port when 8265 is taken).");
  cmd->add_option("--gcs-storage", start.gcs_storage,
                  "Head: where the GCS keeps its tables: sqlite (default), memory, "
                  "redis://[:PASSWORD@]HOST:PORT, or redis ($RAY_REDIS_ADDRESS; the password may also come "
                  "from $RAY_REDIS_PASSWORD).");
  cmd->add_option("--gcs-storage-namespace", start.gcs_storage_namespace,
                  "Head, Redis: the namespace of this cluster's tables (default: manta). A head started "
                  "again with the same Redis and namespace, on any machine, recovers the cluster.");
  cmd->add_option("--token-file", start.token_file,
                  "A file holding the cluster token. Head: enforce it instead of a new one. Join: present it "
                  "(default: $MANTA_TOKEN, else the local session's).");
  cmd->add_option("--metrics-export-port", start.metrics_export_port,
                  "Prometheus port: the GCS's on the head (default 8080, or a free port when 8080 is taken), this "
                  "raylet's on a joining node (default: a free port). Every daemon serves /metrics; the head lists "
                  "them in <session>/prom_metrics_service_discovery.json.");
  cmd->add_option("--metrics-auth", start.metrics_auth,
                  "token (default): a scrape must send the cluster token (Prometheus' authorization "
                  "credentials_file); none: metrics are open to anyone who can reach the port.")
      ->capture_default_str();
  cmd->add_option("--drain-grace-s", start.node.drain_grace_s,
                  "On SIGTERM, drain the node (no new work; exit once idle) for at most this many seconds "
                  "before stopping (default 0: stop at once). `manta stop` always stops at once.");
  return cmd;
}

CLI::App* AddUp(CLI::App& app, Options& o) {
  CLI::App* cmd = app.add_subcommand("up", "Start a simulated cluster on this machine: the head and TPU hosts.");
  cmd->add_option("--tpu", o.up.tpu, "Pod type of each slice, e.g. v6e-16 (default: no TPU hosts).");
  cmd->add_option("--topology", o.up.topology, "Topology of each slice (default: the squarest valid one).");
  cmd->add_option("--slices", o.up.slices, "Slices of --tpu.")->capture_default_str();
  cmd->add_option("--cpu-hosts", o.up.cpu_hosts, "Plain hosts besides the slices.")->capture_default_str();
  cmd->add_option("--host-cpus", o.up.host_cpus, "CPUs each simulated host offers.")->capture_default_str();
  cmd->add_option("--temp-dir", o.up.temp_dir, "Root of the session directories.")->capture_default_str();
  cmd->add_option("--port", o.up.port, "The GCS port.")->capture_default_str();
  cmd->add_option("--dashboard-port", o.up.dashboard_port,
                  "The dashboard's HTTP port (default: 8265, or a free port when 8265 is taken).");
  cmd->add_option("--metrics-export-port", o.up.metrics_export_port,
                  "The GCS's Prometheus port (default: 8080, or a free port when 8080 is taken); every host's "
                  "is listed in <session>/prom_metrics_service_discovery.json.");
  cmd->add_option("--timeout", o.up_timeout_s, "Seconds to wait for every host to join.")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  return cmd;
}

CLI::App* AddDown(CLI::App& app, Options& o) {
  CLI::App* cmd = app.add_subcommand("down", "Stop the cluster `manta up` started.");
  cmd->add_option("--temp-dir", o.down_temp_dir, "Root of the session directories.")->capture_default_str();
  return cmd;
}

CLI::App* AddStop(CLI::App& app, Options& o) {
  o.stop.temp_dir = kDefaultTempDir;
  CLI::App* cmd = app.add_subcommand("stop", "Stop the Manta processes this host started.");
  cmd->add_flag("-f,--force", o.stop.force, "Kill with SIGKILL at once.");
  cmd->add_option("--temp-dir", o.stop.temp_dir, "Root of the session directories.")->capture_default_str();
  cmd->add_option("-g,--grace-period", o.grace_s, "Seconds to wait after SIGTERM before SIGKILL.")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  return cmd;
}

constexpr char kAddressHelp[] = "GCS HOST:PORT (default: $MANTA_ADDRESS, else this host's).";

CLI::App* AddStatus(CLI::App& app, QueryOptions& status, double& watch_s) {
  CLI::App* cmd = app.add_subcommand("status", "Show the cluster's nodes and resource usage.");
  cmd->add_option("--address", status.address, kAddressHelp);
  cmd->add_option("--temp-dir", status.temp_dir, "Root of the session directories.")->capture_default_str();
  cmd->add_option("--watch", watch_s, "Show it again every this many seconds (at least 0.1) until interrupted.")
      ->check(CLI::Range(0.1, 3600.0));
  return cmd;
}

CLI::App* AddDrainNode(CLI::App& app, DrainOptions& drain) {
  CLI::App* cmd =
      app.add_subcommand("drain-node", "Drain a node: it takes no new work and leaves once idle or at the deadline.");
  cmd->add_option("node_id", drain.node_id, "The node's hex id, or a unique prefix of 8+ hex digits.")->required();
  // A value may be empty ("--reason="), so that RunDrainNode reports it.
  cmd->add_option("--reason", drain.reason, "Why, e.g. preemption, idle, maintenance (required).")->expected(0, 1);
  cmd->add_option("--deadline", drain.deadline, "When the node goes away at the latest: 30s, 2m, ... (0: none).")
      ->capture_default_str();
  cmd->add_option("--address", drain.query.address, kAddressHelp);
  cmd->add_option("--temp-dir", drain.query.temp_dir, "Root of the session directories.")->capture_default_str();
  return cmd;
}

struct ListCommands {
  CLI::App *nodes, *actors, *tasks, *placement_groups, *train_runs;
};

ListCommands AddList(CLI::App& app, Options& o) {
  CLI::App* cmd = app.add_subcommand("list", "List cluster state.");
  cmd->require_subcommand(1);
  ListCommands l;
  l.nodes = cmd->add_subcommand("nodes", "List the nodes of the cluster.");
  l.actors = cmd->add_subcommand("actors", "List the actors of the cluster.");
  l.tasks = cmd->add_subcommand("tasks", "List the latest state of recent tasks.");
  l.placement_groups = cmd->add_subcommand("placement-groups", "List the placement groups of the cluster.");
  l.train_runs = cmd->add_subcommand("train-runs", "List the training runs of the cluster.");
  l.placement_groups->add_flag("--detail", o.list_detail, "Every bundle with its node, and more columns.");
  l.train_runs->add_flag("--detail", o.list_detail, "Every attempt, and every worker of the latest attempt.");
  for (CLI::App* sub : {l.actors, l.tasks, l.placement_groups, l.train_runs}) {
    sub->add_option("--limit", o.list_limit, "At most this many entries (0: all).")
        ->capture_default_str()
        ->check(CLI::Range(0, 1000000));
  }
  for (CLI::App* sub : {cmd, l.nodes, l.actors, l.tasks, l.placement_groups, l.train_runs}) {
    sub->add_option("--address", o.list.address, kAddressHelp);
    sub->add_option("--temp-dir", o.list.temp_dir, "Root of the session directories.")->capture_default_str();
    sub->add_option("--format", o.list.format, "table or json.")
        ->capture_default_str()
        ->check(CLI::IsMember({"table", "json"}));
  }
  return l;
}

struct JobCommands {
  CLI::App *submit, *status, *logs, *stop, *del, *list;
};

void AddJobCommon(CLI::App* cmd, JobCommonOptions* common) {
  cmd->add_option("--address", common->address,
                  "The dashboard, http://HOST:8265 (default: $MANTA_DASHBOARD_ADDRESS, else this host's).");
  cmd->add_option("--temp-dir", common->temp_dir, "Root of the session directories.")->capture_default_str();
}

CLI::App* AddJobSubmit(CLI::App* job, JobSubmitOptions& o) {
  CLI::App* cmd = job->add_subcommand("submit", "Submit a job; follows its logs until it ends.");
  AddJobCommon(cmd, &o.common);
  cmd->add_option("--submission-id", o.submission_id, "The job's id (default: generated).");
  cmd->add_option("--working-dir", o.working_dir, "A directory to upload and run the job in.");
  cmd->add_option("--runtime-env-json", o.runtime_env_json,
                  "Runtime environment as JSON: {\"working_dir\": ..., \"env_vars\": {...}}.");
  cmd->add_option("--entrypoint-num-cpus", o.entrypoint_num_cpus, "CPUs for the entrypoint.");
  cmd->add_option("--entrypoint-num-gpus", o.entrypoint_num_gpus, "GPUs for the entrypoint.");
  cmd->add_option("--entrypoint-memory", o.entrypoint_memory, "Memory (bytes) for the entrypoint.");
  cmd->add_option("--entrypoint-resources", o.entrypoint_resources,
                  "Custom resources for the entrypoint as JSON, e.g. '{\"TPU\": 4}'.");
  cmd->add_option("--metadata-json", o.metadata_json, "Metadata as a JSON object of strings.");
  cmd->add_flag("--no-wait", o.no_wait, "Do not follow the logs; return once submitted.");
  cmd->add_option("entrypoint", o.entrypoint, "The command to run, after --.")->required();
  return cmd;
}

JobCommands AddJob(CLI::App& app, Options& o) {
  CLI::App* cmd = app.add_subcommand("job", "Submit and manage jobs through the dashboard's Jobs API.");
  cmd->require_subcommand(1);
  JobCommands j;
  j.submit = AddJobSubmit(cmd, o.job_submit);
  j.status = cmd->add_subcommand("status", "Show a job's status.");
  j.logs = cmd->add_subcommand("logs", "Print a job's logs.");
  j.logs->add_flag("-f,--follow", o.job_follow, "Follow the logs until the job ends.");
  j.stop = cmd->add_subcommand("stop", "Stop a job (SIGTERM, then SIGKILL).");
  j.stop->add_flag("--no-wait", o.job_no_wait, "Do not wait for the job to exit.");
  j.del = cmd->add_subcommand("delete", "Delete a job that has ended, with its logs.");
  for (CLI::App* sub : {j.status, j.logs, j.stop, j.del}) {
    AddJobCommon(sub, &o.job_common);
    sub->add_option("submission_id", o.job_id, "The job's submission id.")->required();
  }
  j.list = cmd->add_subcommand("list", "List the jobs of the cluster.");
  AddJobCommon(j.list, &o.job_common);
  return j;
}

int Main(int argc, char** argv) {
  CLI::App app{"Manta: a distributed actor runtime for multi-host TPU training.", "manta"};
  app.require_subcommand(1);
  Options o;
  CLI::App* start = AddStart(app, o.start);
  CLI::App* stop = AddStop(app, o);
  CLI::App* up = AddUp(app, o);
  CLI::App* down = AddDown(app, o);
  CLI::App* status = AddStatus(app, o.status, o.status_watch_s);
  CLI::App* drain = AddDrainNode(app, o.drain);
  ListCommands list = AddList(app, o);
  JobCommands job = AddJob(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    Fail(e.what());
    return 2;
  }

  if (*job.submit) {  // the only command whose exit code is the job's
    auto code = RunJobSubmit(o.job_submit, std::cout);
    if (!code.ok()) return Fail(std::string(code.status().message()));
    return *code;
  }
  const std::pair<CLI::App*, std::function<absl::Status()>> commands[] = {
      {start, [&] { return RunStart(o.start, std::cout, std::cerr); }},
      {stop,
       [&] {
         o.stop.grace = absl::Seconds(o.grace_s);
         return RunStop(o.stop, std::cout);
       }},
      {up,
       [&] {
         o.up.timeout = absl::Seconds(o.up_timeout_s);
         return RunUp(o.up, std::cout, std::cerr);
       }},
      {down, [&] { return RunDown(o.down_temp_dir, std::cout); }},
      {status, [&] { return RunStatus(o.status, o.status_watch_s); }},
      {drain, [&] { return RunDrainNode(o.drain); }},
      {list.nodes, [&] { return RunList(o.list, ListKind::kNodes, o.list_limit, o.list_detail); }},
      {list.actors, [&] { return RunList(o.list, ListKind::kActors, o.list_limit, o.list_detail); }},
      {list.tasks, [&] { return RunList(o.list, ListKind::kTasks, o.list_limit, o.list_detail); }},
      {list.placement_groups, [&] { return RunList(o.list, ListKind::kPlacementGroups, o.list_limit, o.list_detail); }},
      {list.train_runs, [&] { return RunList(o.list, ListKind::kTrainRuns, o.list_limit, o.list_detail); }},
      {job.status, [&] { return RunJobStatus(o.job_common, o.job_id, std::cout); }},
      {job.logs, [&] { return RunJobLogs(o.job_common, o.job_id, o.job_follow, std::cout); }},
      {job.stop, [&] { return RunJobStop(o.job_common, o.job_id, o.job_no_wait, std::cout); }},
      {job.list, [&] { return RunJobList(o.job_common, std::cout); }},
      {job.del, [&] { return RunJobDelete(o.job_common, o.job_id, std::cout); }},
  };
  for (const auto& [cmd, run] : commands) {
    if (!*cmd) continue;
    absl::Status s = run();
    if (!s.ok()) return Fail(std::string(s.message()));
    return 0;
  }
  return 0;
}

}  // namespace
}  // namespace manta::cli

int main(int argc, char** argv) { return manta::cli::Main(argc, argv); }
