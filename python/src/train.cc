// The trainer for manta.train, over the C++ one (manta/train.h): Fit, which
// runs the C++ controller with a Python loop, and the in-loop calls a
// Python loop makes (report, context, checkpoint), plus the kernels' MaxText
// loop. A Python loop is a function exported by content hash ("py:f:<hash>")
// whose config travels as its pickled arguments; the controller and worker
// actors are the C++ ones, hosted by Python worker processes (this module
// links the trainer, whose MANTA_REMOTE registrations come with Fit).
//
// The GIL: Fit, report and the MaxText loop block, and run without it; the
// in-loop calls may be made from any thread of a worker while its loop runs.
// Errors: the C++ calls' manta::Error becomes the Python exception for its
// status (RuntimeError naming the code, ValueError for InvalidArgument).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "manta/errors.h"
#include "manta/maxtext.h"
#include "manta/train.h"
#include "python/src/binding.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "train/worker_session.h"

namespace manta::python {
namespace {

// Runs `f` without the GIL, turning the manta::Error the C++ API throws into
// the Python exception for its status (once the GIL is held again).
template <typename F>
auto TrainCall(F f) {
  std::optional<absl::Status> error;
  std::optional<std::decay_t<decltype(f())>> value;
  {
    py::gil_scoped_release release;
    try {
      value.emplace(f());
    } catch (const Error& e) {
      error = e.status();
    }
  }
  if (error) Raise(*error);
  return std::move(*value);
}

template <typename T>
T TrainGet(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
}

train::ScalingConfig ScalingOf(const py::dict& d) {
  train::ScalingConfig s;
  s.use_tpu = TrainGet<bool>(d, "use_tpu", false);
  s.num_workers = train::WorkerCount(TrainGet<int>(d, "min_workers", 1), TrainGet<int>(d, "max_workers", 1));
  s.topology = TrainGet<std::string>(d, "topology", "");
  s.accelerator_type = TrainGet<std::string>(d, "accelerator_type", "");
  s.resources_per_worker = TrainGet<std::map<std::string, double>>(d, "resources_per_worker", {});
  s.placement_strategy = TrainGet<std::string>(d, "placement_strategy", "PACK");
  s.label_selector = TrainGet<std::map<std::string, std::string>>(d, "label_selector", {});
  return s;
}

train::RunConfig RunOf(const py::dict& d) {
  train::RunConfig r;
  r.name = TrainGet<std::string>(d, "name", "");
  r.storage_path = TrainGet<std::string>(d, "storage_path", "");
  r.failure_config.max_failures = TrainGet<int>(d, "max_failures", 0);
  r.checkpoint_config.num_to_keep = TrainGet<int>(d, "num_to_keep", 0);
  r.worker_env = TrainGet<std::map<std::string, std::string>>(d, "worker_env", {});
  if (d.contains("scheduling_timeout_s"))
    r.scheduling_timeout = absl::Seconds(d["scheduling_timeout_s"].cast<double>());
  if (d.contains("worker_start_timeout_s")) {
    r.worker_start_timeout = absl::Seconds(d["worker_start_timeout_s"].cast<double>());
  }
  return r;
}

py::dict ResultDict(const train::Result& r) {
  py::dict d;
  d["metrics"] = ToDict(r.metrics);
  d["checkpoint"] = r.checkpoint ? py::object(py::str(r.checkpoint->path)) : py::object(py::none());
  d["code"] = static_cast<int>(r.error.code());
  d["code_name"] = absl::StatusCodeToString(r.error.code());
  d["message"] = std::string(r.error.message());
  d["path"] = r.path;
  d["run_id"] = r.run_id;
  d["num_failures"] = r.num_failures;
  d["num_attempts"] = r.num_attempts;
  py::list failures;
  for (const train::WorkerFailure& f : r.worker_failures) {
    py::dict fd;
    fd["rank"] = f.rank;
    fd["where"] = f.where;
    fd["message"] = f.message;
    fd["data"] = Bytes(f.data);
    failures.append(fd);
  }
  d["worker_failures"] = failures;
  return d;
}

py::dict ContextDict(const train::TrainContext& c) {
  py::dict d;
  d["world_rank"] = c.world_rank;
  d["world_size"] = c.world_size;
  d["local_rank"] = c.local_rank;
  d["local_world_size"] = c.local_world_size;
  d["node_rank"] = c.node_rank;
  d["slice_id"] = c.slice_id;
  d["num_slices"] = c.num_slices;
  d["worker_id"] = c.worker_id;
  d["chips"] = c.chips;
  d["coordinator_address"] = c.coordinator_address;
  d["run_name"] = c.run_name;
  d["run_id"] = c.run_id;
  d["attempt_id"] = c.attempt_id;
  d["attempt_number"] = c.attempt_number;
  d["storage_path"] = c.storage_path;
  d["epoch"] = c.epoch;
  d["max_world_size"] = c.max_world_size;
  return d;
}

py::dict JoinDict(const train::JoinInstruction& j) {
  py::dict d;
  d["source"] = j.source;
  d["restore_from"] = j.restore_from;
  d["step"] = j.step;
  return d;
}

std::optional<train::Checkpoint> CheckpointAt(const std::optional<std::string>& path) {
  if (!path) return std::nullopt;
  return train::Checkpoint{*path};
}

// The calls of a loop whose workers outlive their group (an elastic run):
// see train/worker_session.h.
void DefineElasticSession(py::module_& m) {
  m.attr("TRAIN_JOIN_RESTORE") = static_cast<int>(train::JoinInstruction::kRestore);
  m.attr("TRAIN_JOIN_INIT") = static_cast<int>(train::JoinInstruction::kInit);
  // (commit, pause, latest committed checkpoint or None).
  m.def("train_commit_step",
        [](const std::map<std::string, double>& metrics, const std::optional<std::string>& path, bool replicated) {
          std::optional<train::Checkpoint> checkpoint = CheckpointAt(path);
          train::internal::CommitReply c =
              TrainCall([&] { return train::internal::CommitStep(metrics, checkpoint, replicated); });
          py::object committed = c.committed ? py::object(py::str(c.committed->path)) : py::object(py::none());
          return py::make_tuple(c.commit, c.pause, committed);
        });
  // None: this worker is not in the next group. Else the new group's join.
  m.def("train_await_next_group",
        [](int64_t next_step, const std::string& why, const std::optional<std::string>& path) -> py::object {
          std::optional<train::Checkpoint> checkpoint = CheckpointAt(path);
          auto join = TrainCall([&] { return train::internal::AwaitNextGroup(next_step, why, checkpoint); });
          if (!join) return py::none();
          return JoinDict(*join);
        });
  m.def("train_current_join", [] { return JoinDict(TrainCall([] { return train::internal::CurrentJoin(); })); });
}

// A C++ loop that reports `reports` times, for bench/python/train_report.py
// to compare report() of a Python loop against: rank 0 writes the seconds
// per call to `out`.
struct ReportBenchConfig {
  int reports = 0;
  std::string out;
  MSGPACK_DEFINE(reports, out);
};

void ReportBenchLoop(ReportBenchConfig c) {
  train::Report({{"step", -1}});  // every rank is up
  const absl::Time start = absl::Now();
  for (int i = 0; i < c.reports; ++i) train::Report({{"step", static_cast<double>(i)}});
  const double per_call = absl::ToDoubleSeconds(absl::Now() - start) / std::max(c.reports, 1);
  if (train::GetContext().world_rank == 0) {
    if (FILE* f = std::fopen(c.out.c_str(), "w")) {
      std::fprintf(f, "%.9f\n", per_call);
      std::fclose(f);
    }
  }
}
MANTA_REMOTE(ReportBenchLoop);

}  // namespace

void DefineTrain(py::module_& m) {
  // Runs a training run of the exported loop `loop_name` with `loop_args`
  // (its pickled arguments) to its end; a dict of the Result. A bad config
  // is the result's InvalidArgument, not an exception.
  m.def("train_fit",
        [](const std::string& loop_name, const py::bytes& loop_args, const py::dict& scaling, const py::dict& run) {
          train::internal::FitRequest request;
          request.loop_name = loop_name;
          request.loop_args = std::string(loop_args);
          request.loop_takes_config = true;
          request.scaling = ScalingOf(scaling);
          request.run = RunOf(run);
          train::Result result = TrainCall([&] { return train::internal::Fit(request); });
          return ResultDict(result);
        });
  // The in-loop calls: see manta/train.h.
  m.def("train_report", [](const std::map<std::string, double>& metrics, const std::optional<std::string>& path) {
    std::optional<train::Checkpoint> checkpoint;
    if (path) checkpoint = train::Checkpoint{*path};
    return TrainCall([&] {
      train::Report(metrics, checkpoint);
      return true;
    });
  });
  m.def("train_get_context", [] { return ContextDict(TrainCall([] { return train::GetContext(); })); });
  // None, or {deadline_ms, ranks, node_ids, reason}.
  m.def("train_get_preemption_info", []() -> py::object {
    std::optional<train::PreemptionInfo> p = train::GetPreemptionInfo();
    if (!p) return py::none();
    py::dict d;
    d["deadline_ms"] = p->deadline_ms;
    d["ranks"] = p->ranks;
    d["node_ids"] = p->node_ids;
    d["reason"] = p->reason;
    return d;
  });
  m.def("train_get_checkpoint", []() -> std::optional<std::string> {
    std::optional<train::Checkpoint> c = train::GetCheckpoint();
    if (!c) return std::nullopt;
    return c->path;
  });
  // The kernels' MaxText loop with MaxText's argv, in a worker while its
  // loop runs; raises for the status it returns.
  m.def("train_run_maxtext", [](const std::vector<std::string>& argv) {
    // The step lines, bare, on stdout (as maxtext_trainer's workers print them).
    if (!spdlog::get("train")) spdlog::stdout_logger_mt("train")->set_pattern("%v");
    absl::Status s = TrainCall([&] { return train::RunMaxText(argv); });
    Check(s);
  });
  m.def("train_check_maxtext_config",
        [](const std::vector<std::string>& argv) { Check(train::CheckMaxTextConfig(argv)); });
  DefineElasticSession(m);
  // For the benchmark: Fit of the C++ ReportBenchLoop.
  m.def("_train_fit_report_bench",
        [](int reports, const std::string& out, const py::dict& scaling, const py::dict& run) {
          train::internal::FitRequest request;
          request.loop_name =
              train::internal::LoopName(manta::internal::FunctionKey(&ReportBenchLoop), typeid(&ReportBenchLoop));
          request.loop_args = Take(Serialize(ReportBenchConfig{reports, out}));
          request.loop_takes_config = true;
          request.scaling = ScalingOf(scaling);
          request.run = RunOf(run);
          return ResultDict(TrainCall([&] { return train::internal::Fit(request); }));
        });
}

}  // namespace manta::python
