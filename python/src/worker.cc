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

#include <cstring>
#include <optional>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "manta/api.h"
#include "manta/internal/environment.h"
#include "manta/internal/function_registry.h"
#include "python/src/binding.h"
#include "python/src/frames.h"
#include "python/src/scalars.h"
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
  // With the GIL held: an interrupt injected but not raised (the task
  // ended first) is withdrawn, not left for this thread's next task.
  ~RunningTask() {
    if (context_ == nullptr) return;
    absl::MutexLock lock(&g_running_mu);
    auto it = g_running->find(context_->task_id);
    if (it != g_running->end() && it->second.interrupted) PyThreadState_SetAsyncExc(it->second.thread, nullptr);
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

// The returns' values from the executor's lists of parts, one per return.
internal::ReturnValues JoinReturns(const py::handle& returns) {
  internal::ReturnValues values;
  for (const py::handle& parts : returns) values.push_back(Join(py::reinterpret_borrow<py::list>(parts)));
  return values;
}

// The executor's answer as the invoker's result.
absl::StatusOr<internal::ReturnValues> FromAnswer(const py::tuple& answer) {
  if (answer[0].cast<bool>()) return JoinReturns(answer[1]);
  std::string message = answer[1].cast<std::string>();
  std::string data = answer[2].cast<std::string>();
  absl::Status error = core::MakeApplicationError(message, data);
  // The executor matched the error against the task's retry filter.
  if (answer.size() > 3 && answer[3].cast<bool>()) error = core::MarkRetryable(std::move(error));
  return error;
}

// The executor's own functions and state the fast path below uses
// (manta/_worker.py's install() hands them over).
struct Helpers {
  py::object sync_environ;  // copies the C environment into os.environ
  py::object failure;       // (exception, what) -> the executor's failure answer
  py::object returns;       // (result, num_returns) -> the returns' parts
  py::dict loaded;          // content hash -> function, as fetched and checked
  py::list named;           // [the task name this worker last announced]
  std::string no_args;      // the frame of a call with no arguments
};
Helpers* g_helpers = nullptr;
uint64_t g_fast_calls = 0;                     // calls FastExecute ran; GIL
uint64_t g_synced_environment = ~uint64_t{0};  // EnvironmentChanges at the last sync; GIL

// Copies the environment into os.environ when the core worker changed it
// since the last copy (a task's env_vars or chips, set or restored).
void SyncEnvironment() {
  const uint64_t changes = core::EnvironmentChanges();
  if (changes == g_synced_environment) return;
  g_helpers->sync_environ();
  g_synced_environment = changes;
}

// A name's Python string, made once (names are a job's functions and methods).
PyObject* Interned(std::string_view name) {
  static auto* names = new absl::flat_hash_map<std::string, PyObject*>();
  auto [it, inserted] = names->try_emplace(std::string(name), nullptr);
  if (inserted) it->second = PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
  if (it->second == nullptr) {
    names->erase(it);
    throw py::error_already_set();
  }
  return it->second;
}

// The call's positional and keyword arguments when its one view is a frame
// pickled in-band; false for anything else (refs passed as arguments,
// out-of-band buffers, a pickle that does not load here).
bool InBandArgs(const internal::ArgViews& views, py::tuple* args, py::object* kwargs) {
  if (views.size() != 1) return false;
  if (views[0] == g_helpers->no_args) {
    *args = py::tuple();
    return true;
  }
  std::optional<py::object> value = DecodeInBand(views[0]);
  if (!value || !PyTuple_CheckExact(value->ptr()) || PyTuple_GET_SIZE(value->ptr()) != 2) return false;
  PyObject* list = PyTuple_GET_ITEM(value->ptr(), 0);
  PyObject* dict = PyTuple_GET_ITEM(value->ptr(), 1);
  if (!PyList_CheckExact(list) || !PyDict_CheckExact(dict)) return false;
  *args = py::reinterpret_steal<py::tuple>(PyList_AsTuple(list));
  if (!*args) throw py::error_already_set();
  if (PyDict_GET_SIZE(dict) > 0) *kwargs = py::reinterpret_borrow<py::object>(dict);
  return true;
}

// Whether the error set may be left to the executor (which raises it
// again): an Exception is cleared; anything else (a cancel's
// KeyboardInterrupt, raised once) stays set for the failure path.
bool ClearedException() {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return false;
  PyErr_Clear();
  return true;
}

// Raises, as the executor's next bytecode would have, an exception another
// thread injected into this one (a cancel's) that nothing raised yet.
bool RaisePendingAsync() {
  PyObject* pending = PyThreadState_Get()->async_exc;
  if (pending == nullptr) return false;
  Py_INCREF(pending);
  PyThreadState_SetAsyncExc(PyThread_get_thread_ident(), nullptr);
  PyErr_SetNone(pending);
  Py_DECREF(pending);
  return true;
}

// The function a task or method call runs, and what names it in errors;
// false when the executor must run the call (a task not yet loaded in this
// worker, or not the one it last announced), or with an error set when the
// call fails here (ClearedException).
bool Callee(const char* kind, const std::string& name, const py::object& instance, py::object* fn, py::object* what) {
  const size_t colon = name.find(':', name.find(':') + 1);
  if (colon == std::string::npos) return false;
  PyObject* key = Interned(std::string_view(name).substr(colon + 1));
  if (std::strcmp(kind, "method") == 0) {
    *fn = py::reinterpret_steal<py::object>(PyObject_GetAttr(instance.ptr(), key));
    if (!*fn) {
      ClearedException();
      return false;
    }
    *what = py::reinterpret_borrow<py::object>(key);  // the method: its class is named on failure
    return true;
  }
  if (std::strcmp(kind, "task") != 0) return false;
  PyObject* loaded = PyDict_GetItemWithError(g_helpers->loaded.ptr(), key);
  if (loaded == nullptr) {
    if (PyErr_Occurred()) ClearedException();
    return false;
  }
  *fn = py::reinterpret_borrow<py::object>(loaded);
  *what = py::getattr(*fn, "__qualname__", py::str(name));
  PyObject* named = g_helpers->named.ptr();
  if (PyList_GET_SIZE(named) != 1) return false;
  const int same = PyObject_RichCompareBool(PyList_GET_ITEM(named, 0), what->ptr(), Py_EQ);
  if (same < 0) ClearedException();
  return same == 1;
}

// Copies the environment (SyncEnvironment), then runs the call as the
// executor would, without its Python frames, when its arguments are
// pickled in-band and its function is at hand; nullopt, with nothing run,
// for the executor to run it.
std::optional<absl::StatusOr<internal::ReturnValues>> FastExecute(const char* kind, const std::string& name,
                                                                  const py::object& instance,
                                                                  const internal::ArgViews& views) {
  py::tuple args;
  py::object kwargs, fn, what = py::str(name);
  PyObject* result = nullptr;
  try {
    SyncEnvironment();
    if (Callee(kind, name, instance, &fn, &what)) {
      if (!InBandArgs(views, &args, &kwargs)) return std::nullopt;
      ++g_fast_calls;
      result = PyObject_Call(fn.ptr(), args.ptr(), kwargs.ptr());
      if (result != nullptr && RaisePendingAsync()) Py_CLEAR(result);
    } else if (!PyErr_Occurred()) {
      return std::nullopt;
    }
  } catch (py::error_already_set& e) {  // a cancel's interrupt, raised before the call
    e.restore();
  }
  const core::TaskContext* context = core::CurrentTaskContext();
  const int num_returns = context == nullptr ? 1 : context->num_returns;
  if (result != nullptr && num_returns == 1) {
    std::string frame = FrameHead();
    const bool scalar = PickleScalar(result, &frame);
    if (scalar) {
      Py_DECREF(result);
      SetFrameLength(&frame);
      internal::ReturnValues values;
      values.push_back(std::move(frame));
      return values;
    }
  }
  if (result != nullptr) {
    py::object value = py::reinterpret_steal<py::object>(result);
    PyObject* parts =
        PyObject_CallFunctionObjArgs(g_helpers->returns.ptr(), value.ptr(), py::int_(num_returns).ptr(), nullptr);
    if (parts != nullptr) return JoinReturns(py::reinterpret_steal<py::object>(parts));
  }
  // What the call (or pickling its result) raised, with its traceback.
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value == nullptr)
    return absl::StatusOr<internal::ReturnValues>(absl::InternalError("a call failed with no error"));
  if (traceback != nullptr) PyException_SetTraceback(value, traceback);
  py::object error = py::reinterpret_steal<py::object>(value);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  if (fn && std::strcmp(kind, "method") == 0) {
    what = py::str("{}.{}").format(py::type::of(instance).attr("__qualname__"), what);
  }
  return FromAnswer(g_helpers->failure(error, what));
}

// Calls the executor and turns its answer into the invoker's result.
absl::StatusOr<internal::ReturnValues> Execute(const char* kind, const std::string& name, const py::object& instance,
                                               const internal::ArgViews& args) {
  KeepThreadState();
  py::gil_scoped_acquire gil;
  RunningTask running;
  try {
    if (auto done = FastExecute(kind, name, instance, args)) return *std::move(done);
    return FromAnswer((*g_executor)(kind, name, instance, Views(args)));
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
            SyncEnvironment();
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
  // set_executor(execute, helpers): helpers, a dict of Helpers' fields by
  // name, lets calls with in-band arguments run without execute's frames.
  m.def("set_executor", [](py::object executor, const py::dict& helpers) {
    if (g_executor != nullptr) throw py::value_error("the executor is already set");
    g_helpers = new Helpers{helpers["sync_environ"],
                            helpers["failure"],
                            helpers["returns"],
                            helpers["loaded"].cast<py::dict>(),
                            helpers["named"].cast<py::list>(),
                            helpers["no_args"].cast<std::string>()};
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
  // How many calls this process ran without the executor's frames.
  m.def("fast_calls", [] { return g_fast_calls; });
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
