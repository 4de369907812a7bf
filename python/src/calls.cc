// Tasks, actors and objects: the module's calls over the core worker's
// byte-level seam. Values arrive as lists of buffers (a frame's header,
// its pickle and its out-of-band buffers) joined here in one copy; refs
// arrive as ObjectRefs.
#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_set.h"
#include "common/id_hash.h"
#include "python/src/binding.h"
#include "python/src/frames.h"
#include "python/src/large_values.h"

namespace manta::python {

std::string Join(const py::list& parts) {
  std::vector<py::buffer_info> infos;
  size_t total = 0;
  for (const py::handle& part : parts) {
    infos.push_back(py::reinterpret_borrow<py::buffer>(part).request());
    total += static_cast<size_t>(infos.back().size * infos.back().itemsize);
  }
  std::string out = LargeValues::Get().Take(total);
  for (const py::buffer_info& b : infos) out.append(static_cast<const char*>(b.ptr), b.size * b.itemsize);
  return out;
}

namespace {

// The refs of a Python sequence of ObjectRefs.
std::vector<core::ObjectRefInfo> Infos(const py::handle& refs) {
  std::vector<core::ObjectRefInfo> out;
  if (PyList_Check(refs.ptr())) {
    const Py_ssize_t n = PyList_GET_SIZE(refs.ptr());
    out.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i) out.push_back(RefOf(PyList_GET_ITEM(refs.ptr(), i))->info());
  } else {
    for (const py::handle& h : refs) out.push_back(RefOf(h)->info());
  }
  return out;
}

// The refs a value's pickling collected (None: none). Taken as an object:
// a None for a pointer parameter makes pybind11 convert every argument
// twice.
std::vector<core::ObjectRefInfo> Contained(const py::handle& c) {
  return c.is_none() ? std::vector<core::ObjectRefInfo>() : c.cast<const RefCollection&>().refs();
}

// The arguments of a call to another language's function: each a value
// serialized by the caller (bytes) or a ref whose value the callee gets.
std::vector<core::Arg> RawArgs(const py::list& values) {
  std::vector<core::Arg> args;
  args.reserve(values.size());
  for (const py::handle& v : values) {
    if (const ObjectRef* ref = AsRef(v.ptr())) {
      args.push_back(core::Arg::Ref(ref->info()));
    } else {
      args.push_back(core::Arg::Value(std::string(v.cast<py::bytes>())));
    }
  }
  return args;
}

// A call's arguments: the pickled value (with the refs inside it), then
// each top-level ref, resolved to its value before the callee runs.
std::vector<core::Arg> Args(const py::list& value, const py::object& contained, const py::list& ref_args) {
  std::vector<core::Arg> args;
  args.reserve(1 + ref_args.size());
  args.push_back(core::Arg::Value(Join(value), Contained(contained)));
  for (const py::handle& h : ref_args) args.push_back(core::Arg::Ref(RefOf(h)->info()));
  return args;
}

template <typename T>
T Option(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

// Every key of `options` must be one of `known`: an option is never
// accepted and ignored.
void CheckKeys(const py::dict& options, std::initializer_list<const char*> known) {
  for (const auto& [k, v] : options) {
    std::string key = py::str(k);
    if (std::none_of(known.begin(), known.end(), [&](const char* n) { return key == n; })) {
      throw py::value_error("unknown option '" + key + "'");
    }
  }
}

// "strategy": 0 default, 1 SPREAD, 2 node affinity on "strategy_node_id"
// (hex), soft when "strategy_soft".
core::SchedulingStrategy StrategyFrom(const py::dict& d) {
  core::SchedulingStrategy s;
  int kind = Option(d, "strategy", 0);
  if (kind < 0 || kind > 2) throw py::value_error("unknown scheduling strategy");
  s.kind = static_cast<core::SchedulingStrategy::Kind>(kind);
  if (s.kind == core::SchedulingStrategy::Kind::kNodeAffinity) {
    std::string hex = Option(d, "strategy_node_id", std::string());
    absl::StatusOr<NodeId> id = NodeId::FromHex(hex);
    if (!id.ok()) throw py::value_error("NodeAffinitySchedulingStrategy: '" + hex + "' is not a node id");
    s.node_id = *id;
    s.soft = Option(d, "strategy_soft", false);
  }
  return s;
}

core::TaskOptions TaskOptionsFrom(const py::dict& d) {
  CheckKeys(d, {"resources", "label_selector", "max_retries", "name", "placement_group_id", "bundle_index", "env_vars",
                "num_returns", "retry_exceptions", "retry_exception_filter", "strategy", "strategy_node_id",
                "strategy_soft", "worker_executable", "worker_args"});
  core::TaskOptions o;
  o.resources = Option(d, "resources", o.resources);
  o.label_selector = Option(d, "label_selector", o.label_selector);
  o.max_retries = Option(d, "max_retries", o.max_retries);
  o.name = Option(d, "name", o.name);
  o.placement_group_id = Option(d, "placement_group_id", o.placement_group_id);
  o.bundle_index = Option(d, "bundle_index", o.bundle_index);
  o.env_vars = Option(d, "env_vars", o.env_vars);
  o.num_returns = Option(d, "num_returns", o.num_returns);
  o.retry_exceptions = Option(d, "retry_exceptions", o.retry_exceptions);
  o.scheduling_strategy = StrategyFrom(d);
  o.worker_executable = Option(d, "worker_executable", o.worker_executable);
  o.worker_args = Option(d, "worker_args", o.worker_args);
  if (d.contains("retry_exception_filter"))
    o.retry_exception_filter = std::string(d["retry_exception_filter"].cast<py::bytes>());
  return o;
}

core::ActorOptions ActorOptionsFrom(const py::dict& d) {
  CheckKeys(d, {"resources", "label_selector", "max_restarts", "max_task_retries", "name", "namespace", "detached",
                "max_concurrency", "class_name", "placement_group_id", "bundle_index", "env_vars", "get_if_exists",
                "strategy", "strategy_node_id", "strategy_soft", "worker_executable", "worker_args"});
  core::ActorOptions o;
  o.resources = Option(d, "resources", o.resources);
  o.label_selector = Option(d, "label_selector", o.label_selector);
  o.max_restarts = Option(d, "max_restarts", o.max_restarts);
  o.max_task_retries = Option(d, "max_task_retries", o.max_task_retries);
  o.name = Option(d, "name", o.name);
  o.ray_namespace = Option(d, "namespace", o.ray_namespace);
  o.detached = Option(d, "detached", o.detached);
  o.max_concurrency = Option(d, "max_concurrency", o.max_concurrency);
  o.class_name = Option(d, "class_name", o.class_name);
  o.placement_group_id = Option(d, "placement_group_id", o.placement_group_id);
  o.bundle_index = Option(d, "bundle_index", o.bundle_index);
  o.env_vars = Option(d, "env_vars", o.env_vars);
  o.get_if_exists = Option(d, "get_if_exists", o.get_if_exists);
  o.scheduling_strategy = StrategyFrom(d);
  o.worker_executable = Option(d, "worker_executable", o.worker_executable);
  o.worker_args = Option(d, "worker_args", o.worker_args);
  return o;
}

// The refs a submit returned, as Python ObjectRefs (the core worker
// counted each for the caller).
py::list Refs(std::vector<core::ObjectRefInfo> infos) {
  py::list out;
  for (auto& info : infos) out.append(NewRef(std::move(info), /*counted=*/true));
  return out;
}

// Runs `step(slice)` with the GIL released in slices of at most a second
// until it reports done or `timeout_s` (negative: none) passes, letting
// Ctrl-C, and the cancel of the task the thread runs, through between
// slices (as KeyboardInterrupt). `step` returns whether it is done.
template <typename Step>
void Sliced(double timeout_s, Step step) {
  const bool forever = timeout_s < 0;
  const absl::Time deadline = forever ? absl::InfiniteFuture() : absl::Now() + absl::Seconds(timeout_s);
  while (true) {
    absl::Duration slice = std::min(absl::Seconds(1), std::max(absl::ZeroDuration(), deadline - absl::Now()));
    bool last = !forever && absl::Now() + slice >= deadline;
    bool done;
    {
      py::gil_scoped_release release;
      done = step(slice, last);
    }
    if (done || last) return;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (TakeTaskInterrupt()) {  // this worker's task was cancelled
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
  }
}

using HeldValue = std::shared_ptr<const std::string>;

// The values of `refs`, waiting up to `timeout_s` (< 0: for ever) with the
// GIL released; per ref the value, or a timeout error.
std::vector<absl::StatusOr<HeldValue>> Fetch(const std::vector<core::ObjectRefInfo>& infos, double timeout_s) {
  core::CoreWorker& core = Core();
  // Values this process owns and has ready: no wait, no hand-off of the GIL.
  const bool all_owned = std::all_of(infos.begin(), infos.end(), [](const auto& r) { return r.owner_address.empty(); });
  std::vector<absl::StatusOr<HeldValue>> results;
  std::vector<size_t> pending;
  if (all_owned) {
    results = core.Get(infos, absl::ZeroDuration());
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok() && core::GetErrorType(results[i].status()) == core::ErrorType::kTimeout)
        pending.push_back(i);
    }
    if (pending.empty()) return results;
  } else {
    results.resize(infos.size(), core::MakeError(core::ErrorType::kTimeout, "not fetched"));
    pending.resize(infos.size());
    for (size_t i = 0; i < pending.size(); ++i) pending[i] = i;
  }
  Sliced(timeout_s, [&](absl::Duration slice, bool last) {
    std::vector<core::ObjectRefInfo> ask;
    for (size_t i : pending) ask.push_back(infos[i]);
    auto got = core.Get(ask, slice);
    std::vector<size_t> still;
    for (size_t j = 0; j < pending.size(); ++j) {
      if (!got[j].ok() && core::GetErrorType(got[j].status()) == core::ErrorType::kTimeout) {
        still.push_back(pending[j]);
      }
      results[pending[j]] = std::move(got[j]);
    }
    pending = std::move(still);
    return pending.empty();
  });
  return results;
}

// (values, rest): each ref's value where it is a frame pickled in-band
// (None in its place otherwise), and, in order, (index, HeldBytes) for
// the values the Python side decodes and (index, (error type, message,
// data)) for errors and values not ready by the deadline (type 100);
// `data` is the front end's form of the error (b"" when none).
py::tuple Get(const py::object& refs, double timeout_s) {
  std::vector<absl::StatusOr<HeldValue>> results = Fetch(Infos(refs), timeout_s);
  py::list values(results.size());
  py::list rest;
  for (size_t i = 0; i < results.size(); ++i) {
    const absl::StatusOr<HeldValue>& r = results[i];
    std::optional<py::object> decoded;
    if (r.ok() && (decoded = DecodeInBand(*r))) {
      PyList_SET_ITEM(values.ptr(), i, decoded->release().ptr());
      continue;
    }
    PyList_SET_ITEM(values.ptr(), i, py::none().release().ptr());
    if (r.ok()) {
      rest.append(py::make_tuple(i, HeldBytes{*r}));
    } else {
      std::optional<std::string> data = core::ErrorData(r.status());
      rest.append(
          py::make_tuple(i, py::make_tuple(static_cast<int>(core::GetErrorType(r.status())),
                                           std::string(r.status().message()), Bytes(data.value_or(std::string())))));
    }
  }
  return py::make_tuple(values, rest);
}

// Which refs are ready once `num_returns` are or the timeout passes
// (`fetch_local`: as CoreWorker::Wait's).
std::vector<bool> Wait(std::vector<core::ObjectRefInfo> infos, int num_returns, double timeout_s, bool fetch_local) {
  core::CoreWorker& core = Core();
  std::vector<bool> ready(infos.size(), false);
  Sliced(timeout_s, [&](absl::Duration slice, bool) {
    ready = core.Wait(infos, num_returns, slice, fetch_local);
    return std::count(ready.begin(), ready.end(), true) >= num_returns;
  });
  return ready;
}

// The ids, in order, of the last not_ready list wait_split returned, which
// holds no id twice; the usual loop (`_, refs = wait(refs)`) passes it
// back, and comparing ids in order costs less than hashing each again.
// Read and written with the GIL held.
std::vector<ObjectId>* const g_unique = new std::vector<ObjectId>();

// Raises ValueError when `refs` (ObjectRefs) holds an id twice.
void CheckUnique(const py::list& refs) {
  const size_t n = static_cast<size_t>(PyList_GET_SIZE(refs.ptr()));
  bool known = n == g_unique->size();
  for (size_t i = 0; known && i < n; ++i) known = RefOf(PyList_GET_ITEM(refs.ptr(), i))->info().id == (*g_unique)[i];
  if (known) return;
  absl::flat_hash_set<ObjectId, IdHash, IdEq> seen;
  seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!seen.insert(RefOf(PyList_GET_ITEM(refs.ptr(), i))->info().id).second) {
      throw py::value_error("Wait requires a list of unique object refs.");
    }
  }
}

// When the first `num_returns` ready refs are among the list's first few
// (the common case of a loop waiting on refs in the order it made them),
// the flags of the whole list, found without looking at the rest of it;
// empty otherwise.
std::vector<bool> ReadyInPrefix(const py::list& refs, int num_returns, bool fetch_local) {
  constexpr int kPrefix = 64;
  const size_t n = static_cast<size_t>(PyList_GET_SIZE(refs.ptr()));
  if (num_returns > kPrefix || n <= static_cast<size_t>(kPrefix)) return {};
  std::vector<core::ObjectRefInfo> prefix;
  prefix.reserve(kPrefix);
  for (int i = 0; i < kPrefix; ++i) prefix.push_back(RefOf(PyList_GET_ITEM(refs.ptr(), i))->info());
  core::CoreWorker& core = Core();
  std::vector<bool> flags;
  {
    py::gil_scoped_release release;  // as every wait: a borrowed ref's owner may be asked
    flags = core.Wait(prefix, num_returns, absl::ZeroDuration(), fetch_local);
  }
  if (std::count(flags.begin(), flags.end(), true) < num_returns) return {};
  flags.resize(n, false);
  return flags;
}

}  // namespace

void DefineCalls(py::module_& m) {
  // A task's options, checked and converted once (a remote function keeps
  // its own for its life).
  py::class_<core::TaskOptions>(m, "TaskOptions").def(py::init(&TaskOptionsFrom));
  m.def("submit_task", [](const std::string& name, const py::list& value, const py::object& contained,
                          const py::list& ref_args, const core::TaskOptions& options) {
    std::vector<core::Arg> args = Args(value, contained, ref_args);
    return Refs(Take(Core().SubmitTask(name, std::move(args), options)));
  });
  m.def("create_actor", [](const std::string& factory, const py::list& value, const py::object& contained,
                           const py::list& ref_args, const py::dict& options) {
    core::ActorOptions o = ActorOptionsFrom(options);
    std::vector<core::Arg> args = Args(value, contained, ref_args);
    core::CoreWorker& core = Core();
    absl::StatusOr<ActorId> id;
    {
      py::gil_scoped_release release;  // a named actor waits for the GCS
      id = core.CreateActor(factory, std::move(args), o);
    }
    return Bytes(Take(std::move(id)).Binary());
  });
  m.def("submit_actor_task", [](const py::bytes& actor, const std::string& method, const py::list& value,
                                const py::object& contained, const py::list& ref_args, int num_returns) {
    core::ActorTaskOptions o;
    o.num_returns = num_returns;
    ActorId id = Take(ActorId::FromBinary(std::string(actor)));
    std::vector<core::Arg> args = Args(value, contained, ref_args);
    return Refs(Take(Core().SubmitActorTask(id, method, std::move(args), o)));
  });
  // Calls into another language (a C++ program's MANTA_REMOTE functions):
  // each argument is its own serialized value (msgpack) or a ref.
  m.def("submit_task_raw", [](const std::string& name, const py::list& values, const core::TaskOptions& options) {
    return Refs(Take(Core().SubmitTask(name, RawArgs(values), options)));
  });
  m.def("create_actor_raw", [](const std::string& factory, const py::list& values, const py::dict& options) {
    core::ActorOptions o = ActorOptionsFrom(options);
    std::vector<core::Arg> args = RawArgs(values);
    core::CoreWorker& core = Core();
    absl::StatusOr<ActorId> id;
    {
      py::gil_scoped_release release;
      id = core.CreateActor(factory, std::move(args), o);
    }
    return Bytes(Take(std::move(id)).Binary());
  });
  m.def("submit_actor_task_raw", [](const py::bytes& actor, const std::string& method, const py::list& values) {
    ActorId id = Take(ActorId::FromBinary(std::string(actor)));
    return Refs(Take(Core().SubmitActorTask(id, method, RawArgs(values), core::ActorTaskOptions())));
  });
  m.def("get_named_actor", [](const std::string& name, const std::string& ns) {
    core::CoreWorker& core = Core();
    absl::StatusOr<ActorId> id;
    {
      py::gil_scoped_release release;
      id = core.GetNamedActor(name, ns);
    }
    return Bytes(Take(std::move(id)).Binary());
  });
  m.def("kill_actor", [](const py::bytes& actor, bool no_restart) {
    ActorId id = Take(ActorId::FromBinary(std::string(actor)));
    core::CoreWorker& core = Core();
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = core.KillActor(id, no_restart);
    }
    Check(status);
  });
  // A value pickled in-band here (no refs inside: the caller checked).
  m.def("put_plain", [](const py::handle& value) {
    std::shared_ptr<const std::string> data = LargeValues::Get().Share(EncodePlain(value));
    auto ref = Take(Core().PutWithRefs(std::move(data), {}));
    return NewRef(std::move(ref), /*counted=*/true);
  });
  m.def("put", [](const py::list& value, const py::object& contained) {
    std::shared_ptr<const std::string> data = LargeValues::Get().Share(Join(value));
    auto ref = Take(Core().PutWithRefs(std::move(data), Contained(contained)));
    return NewRef(std::move(ref), /*counted=*/true);
  });
  m.def("cancel", [](const py::handle& ref, bool force, bool recursive) {
    core::CoreWorker& core = Core();
    const core::ObjectRefInfo info = RefOf(ref)->info();
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = core.CancelTask(info, force, recursive);
    }
    Check(status);
  });
  m.def("get", &Get, py::arg("refs"), py::arg("timeout") = -1.0);
  m.def(
      "wait",
      [](const py::object& refs, int num_returns, double timeout_s, bool fetch_local) {
        return Wait(Infos(refs), num_returns, timeout_s, fetch_local);
      },
      py::arg("refs"), py::arg("num_returns"), py::arg("timeout") = -1.0, py::arg("fetch_local") = true);
  // Ray's wait: (ready, not_ready), the first num_returns ready refs in the
  // order given, the rest after; ValueError for a ref given twice.
  m.def(
      "wait_split",
      [](const py::list& refs, int num_returns, double timeout_s, bool fetch_local) {
        CheckUnique(refs);
        std::vector<bool> flags = ReadyInPrefix(refs, num_returns, fetch_local);
        if (flags.empty()) flags = Wait(Infos(refs), num_returns, timeout_s, fetch_local);
        if (static_cast<size_t>(PyList_GET_SIZE(refs.ptr())) != flags.size()) {
          throw std::runtime_error("the list of refs changed during wait");  // another thread's
        }
        size_t n_ready = 0;
        for (size_t i = 0; i < flags.size() && n_ready < static_cast<size_t>(num_returns); ++i) n_ready += flags[i];
        py::list ready(n_ready), not_ready(flags.size() - n_ready);
        size_t r = 0, w = 0;
        g_unique->clear();
        for (size_t i = 0; i < flags.size(); ++i) {
          PyObject* item = PyList_GET_ITEM(refs.ptr(), i);
          Py_INCREF(item);
          if (flags[i] && r < n_ready) {
            PyList_SET_ITEM(ready.ptr(), r++, item);
          } else {
            PyList_SET_ITEM(not_ready.ptr(), w++, item);
            g_unique->push_back(AsRef(item)->info().id);
          }
        }
        return py::make_tuple(ready, not_ready);
      },
      py::arg("refs"), py::arg("num_returns"), py::arg("timeout") = -1.0, py::arg("fetch_local") = true);
}

}  // namespace manta::python
