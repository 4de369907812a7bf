// The worker side: the "py:" resolver through which a Python worker's core
// worker finds the functions, classes and methods of Python tasks, and the
// task loop (run_worker), which never returns.
//
// A task's invoker runs on a core worker thread: it takes the GIL, hands the
// arguments to the executor (manta._worker's execute) as read-only views of
// the request's bytes, valid only during the call, and returns the values
// the executor returns (one per return the task declares). The executor reports a user failure as
// (False, message, data): the message is the error text the caller sees and
// `data` the pickled exception it re-raises.
#include <unistd.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "manta/api.h"
#include "manta/internal/function_registry.h"
#include "python/src/binding.h"
#include "runtime/core_worker/log_printer.h"

extern char** environ;

namespace manta::python {
namespace {

// The executor, set once per process; never destroyed (a worker exits
// without tearing Python down under it).
py::object* g_executor = nullptr;

py::list Views(const internal::ArgViews& args) {
  py::list views;
  for (std::string_view a : args) {
    views.append(py::memoryview::from_memory(const_cast<char*>(a.data()), static_cast<py::ssize_t>(a.size()),
                                             /*readonly=*/true));
  }
  return views;
}

// Makes this core worker thread's Python thread state once and keeps it:
// without it every acquisition of the GIL from the thread would create a
// thread state and destroy it again on release.
void KeepThreadState() {
  thread_local bool kept = false;
  if (kept) return;
  kept = true;
  // A Python thread (the fake core worker runs tasks on the submitter's)
  // has its state already.
  if (PyGILState_GetThisThreadState() != nullptr) return;
  PyGILState_Ensure();  // this thread's state, with the GIL
  PyEval_SaveThread();  // the GIL released, the state kept
}

// The Python thread running each task of this worker, so a cancel can
// interrupt it (KeyboardInterrupt raised in that thread, between two
// bytecodes: a task blocked in get or wait raises it from there, see
// TakeTaskInterrupt; in another call, when that returns). Taken with the
// GIL held.
struct RunningThread {
  unsigned long thread = 0;
  bool interrupted = false;  // KeyboardInterrupt injected or raised
};
absl::Mutex g_running_mu;
absl::flat_hash_map<TaskId, RunningThread>* g_running = new absl::flat_hash_map<TaskId, RunningThread>();

class RunningTask {
 public:
  RunningTask() : context_(core::CurrentTaskContext()) {
    if (context_ == nullptr) return;
    absl::MutexLock lock(&g_running_mu);
    (*g_running)[context_->task_id] = RunningThread{PyThread_get_thread_ident()};
  }
  ~RunningTask() {
    if (context_ == nullptr) return;
    absl::MutexLock lock(&g_running_mu);
    g_running->erase(context_->task_id);
  }
  RunningTask(const RunningTask&) = delete;
  RunningTask& operator=(const RunningTask&) = delete;

 private:
  const core::TaskContext* context_;
};

void InterruptRunning(const TaskId& task) {
  {
    absl::MutexLock lock(&g_running_mu);
    if (!g_running->contains(task)) return;
  }
  KeepThreadState();
  py::gil_scoped_acquire gil;
  absl::MutexLock lock(&g_running_mu);
  auto it = g_running->find(task);
  if (it == g_running->end() || it->second.interrupted) return;
  it->second.interrupted = true;
  PyThreadState_SetAsyncExc(it->second.thread, PyExc_KeyboardInterrupt);
}

// Calls the executor and turns its answer into the invoker's result.
absl::StatusOr<internal::ReturnValues> Execute(const char* kind, const std::string& name, const py::object& instance,
                                               const internal::ArgViews& args) {
  KeepThreadState();
  py::gil_scoped_acquire gil;
  RunningTask running;
  try {
    py::tuple answer = (*g_executor)(kind, name, instance, Views(args));
    if (answer[0].cast<bool>()) {
      internal::ReturnValues values;
      for (const py::handle& parts : answer[1]) values.push_back(Join(py::reinterpret_borrow<py::list>(parts)));
      return values;
    }
    std::string message = answer[1].cast<std::string>();
    std::string data = answer[2].cast<std::string>();
    absl::Status error = core::MakeApplicationError(message, data);
    // The executor matched the error against the task's retry filter.
    if (answer.size() > 3 && answer[3].cast<bool>()) error = core::MarkRetryable(std::move(error));
    return error;
  } catch (py::error_already_set& e) {
    // The executor catches what user code raises; this is its own failure.
    return absl::InternalError(absl::StrCat("the Python executor failed: ", e.what()));
  }
}

// An actor instance: a Python object whose last reference is dropped with
// the GIL held.
std::shared_ptr<void> HoldInstance(py::object instance) {
  auto* held = new py::object(std::move(instance));
  return std::shared_ptr<void>(held, [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
}

internal::FunctionRegistry::Resolver PythonResolver() {
  internal::FunctionRegistry::Resolver r;
  r.function = [](const std::string& name) -> std::optional<internal::FunctionInvoker> {
    return internal::FunctionInvoker(
        [name](const internal::ArgViews& args) { return Execute("task", name, py::none(), args); });
  };
  r.factory = [](const std::string& name) -> std::optional<internal::ActorFactoryInvoker> {
    return internal::ActorFactoryInvoker(
        [name](const internal::ArgViews& args) -> absl::StatusOr<std::shared_ptr<void>> {
          KeepThreadState();
          py::gil_scoped_acquire gil;
          try {
            py::tuple answer = (*g_executor)("actor", name, py::none(), Views(args));
            if (answer[0].cast<bool>()) return HoldInstance(answer[1]);
            return core::MakeApplicationError(answer[1].cast<std::string>(), answer[2].cast<std::string>());
          } catch (py::error_already_set& e) {
            return absl::InternalError(absl::StrCat("the Python executor failed: ", e.what()));
          }
        });
  };
  r.method = [](const std::string& name) -> std::optional<internal::ActorMethodInvoker> {
    return internal::ActorMethodInvoker([name](void* instance, const internal::ArgViews& args) {
      KeepThreadState();
      py::gil_scoped_acquire gil;
      py::object self = *static_cast<py::object*>(instance);
      return Execute("method", name, self, args);
    });
  };
  return r;
}

}  // namespace

bool TakeTaskInterrupt() {
  const core::TaskContext* t = core::CurrentTaskContext();
  if (t == nullptr || t->cancelled == nullptr || !t->cancelled->load(std::memory_order_acquire)) return false;
  absl::MutexLock lock(&g_running_mu);
  auto it = g_running->find(t->task_id);
  if (it != g_running->end()) {
    // Raised by the caller instead: one injected is withdrawn (a no-op once
    // it was raised), and none is injected after.
    if (it->second.interrupted) PyThreadState_SetAsyncExc(it->second.thread, nullptr);
    it->second.interrupted = true;
  }
  return true;
}

void DefineWorker(py::module_& m) {
  m.attr("TASK_NAME_MARKER") = core::kTaskNameMarker;
  m.def("set_executor", [](py::object executor) {
    if (g_executor != nullptr) throw py::value_error("the executor is already set");
    g_executor = new py::object(std::move(executor));
    internal::FunctionRegistry::Instance().SetResolver("py:", PythonResolver());
    core::SetTaskInterruptHook(&InterruptRunning);
  });
  m.def("run_worker", [](const std::string& executable, const std::vector<std::string>& args) {
    InitOptions o;
    o.worker_executable = executable;
    o.worker_args = args;
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = TryInit(o);  // runs the task loop and exits the process
    }
    Check(status);
  });
  // The task this thread runs (None on a thread that runs none).
  m.def("task_context", []() -> py::object {
    const core::TaskContext* t = core::CurrentTaskContext();
    if (t == nullptr) return py::none();
    py::dict d;
    d["task_id"] = t->task_id.Hex();
    d["actor_id"] = t->actor_id.IsNil() ? std::string() : t->actor_id.Hex();
    d["attempt"] = t->attempt;
    d["num_returns"] = t->num_returns;
    d["retry_exceptions"] = t->retry_exceptions;
    d["retry_exception_filter"] = Bytes(t->retry_exception_filter);
    d["resources"] = ToDict(t->resources);
    return d;
  });
  // How many values the running task returns (1 off a task's thread).
  m.def("num_returns", [] {
    const core::TaskContext* t = core::CurrentTaskContext();
    return t == nullptr ? 1 : t->num_returns;
  });
  // A fingerprint of the process's C environment: the executor copies the
  // environment into os.environ only when it changed.
  m.def("environ_fingerprint", [] {
    size_t h = 0;
    for (char** e = environ; *e != nullptr; ++e) h = h * 1000003u ^ std::hash<std::string_view>()(*e);
    return h;
  });
  // The process's C environment: a task's variables are set there by the
  // core worker; the executor copies them into os.environ.
  m.def("environ", [] {
    py::dict env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string_view kv(*e);
      size_t eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      env[py::str(std::string(kv.substr(0, eq)))] = py::str(std::string(kv.substr(eq + 1)));
    }
    return env;
  });
}

}  // namespace manta::python
