#include "runtime/core_worker/task_receiver.h"

#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "grpcpp/support/status.h"
#include "common/tpu.h"
#include "runtime/core_worker/wire.h"
#include "manta/internal/environment.h"
#include "manta/internal/function_registry.h"

namespace manta::core {
namespace {

// setenv and unsetenv, counting the calls that change something
// (EnvironmentChanges): a reused worker usually sets what it had.
void SetVar(const char* name, const char* value) {
  const char* old = std::getenv(name);
  if (old != nullptr && std::strcmp(old, value) == 0) return;
  setenv(name, value, 1);
  NoteEnvironmentChange();
}

void UnsetVar(const char* name) {
  if (std::getenv(name) == nullptr) return;
  unsetenv(name);
  NoteEnvironmentChange();
}

void SetChipEnv(const rpc::PushTaskRequest& req) {
  // A reused worker: the chips an earlier task held are not this one's.
  std::map<std::string, std::string> env;
  if (req.tpu_chip_ids_size() > 0) {
    std::vector<int> chips(req.tpu_chip_ids().begin(), req.tpu_chip_ids().end());
    auto made = tpu::VisibleChipsEnv(chips, req.tpu_chips_per_host());
    if (made.ok()) env.insert(made->begin(), made->end());
  }
  for (const char* name : {tpu::kEnvVisibleChips, tpu::kEnvChipsPerHostBounds, tpu::kEnvHostBounds}) {
    if (!env.count(name)) UnsetVar(name);
  }
  for (const auto& [k, v] : env) SetVar(k.c_str(), v.c_str());
}

// What a variable was before ApplyTaskEnv changed it (nullopt: unset).
using SavedEnv = std::vector<std::pair<std::string, std::optional<std::string>>>;

// Applies the task's env_vars (after the chip variables, so they win): a
// name mapped to "" is removed. Returns what they replaced.
SavedEnv ApplyTaskEnv(const rpc::TaskSpec& spec) {
  SavedEnv saved;
  std::map<std::string, std::string> env(spec.env_vars().begin(), spec.env_vars().end());
  for (const auto& [name, value] : env) {
    if (name.empty() || name.find('=') != std::string::npos) continue;  // the submitter validates
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
    if (value.empty()) {
      UnsetVar(name.c_str());
    } else {
      SetVar(name.c_str(), value.c_str());
    }
  }
  return saved;
}

void RestoreEnv(const SavedEnv& saved) {
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
    if (it->second.has_value()) {
      SetVar(it->first.c_str(), it->second->c_str());
    } else {
      UnsetVar(it->first.c_str());
    }
  }
}

// The task failed: every return carries `error` (its type, message and the
// front end's bytes).
void SetError(rpc::PushTaskReply* reply, const rpc::TaskSpec& spec, const absl::Status& error, bool retryable = false) {
  ToErrorInfo(error, reply->mutable_error());
  reply->mutable_error()->set_retryable(retryable);
  reply->clear_returns();
  for (int i = 1; i <= NumReturns(spec); ++i) {
    rpc::ReturnObject* r = reply->add_returns();
    r->set_object_id(ReturnObjectId(spec.task_id(), i).Binary());
    *r->mutable_error() = reply->error();
  }
}

}  // namespace

TaskReceiver::~TaskReceiver() {
  Stop();
  for (std::thread& t : pool_) t.join();
}

void TaskReceiver::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  stop_requested_.store(true, std::memory_order_relaxed);
  main_cv_.SignalAll();
  pool_cv_.SignalAll();
}

grpc::Status TaskReceiver::Admit(const rpc::PushTaskRequest& req, const std::string& self_worker_id) const {
  if (req.intended_worker_id() != self_worker_id) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "the task was meant for another worker");
  }
  if (!TaskId::FromBinary(req.spec().task_id()).ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed task id");
  }
  if (req.spec().type() == rpc::TaskSpec::NORMAL_TASK && holds_actor()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "this worker holds an actor: it runs only the actor's calls");
  }
  return grpc::Status::OK;
}

void TaskReceiver::Enqueue(PushedTask* push) {
  Work w = push;
  const rpc::PushTaskRequest* req = &push->request();
  Wake wake;
  std::vector<Work> stale, skipped, answered;
  {
    absl::MutexLock lock(&mu_);
    if (JoinSeenPush(w, &answered)) {
      // A retry: answered below, or when the first push finishes.
    } else if (req->spec().type() != rpc::TaskSpec::ACTOR_TASK) {
      main_queue_.push_back(w);
      wake.main = true;
    } else {
      // Actor calls run in each caller's order.
      auto [it, inserted] = callers_.try_emplace(req->spec().caller_worker_id());
      CallerState& c = it->second;
      // The caller has the replies of everything below its lowest unacked
      // call: nothing there is worth waiting for (a call that failed at the
      // caller leaves such a gap).
      c.next = std::max(c.next, req->caller_lowest_unacked());
      // In turn, a skipped call only counts: it ends with nothing run.
      auto run = [&](const Work& work) {
        mu_.AssertHeld();  // called below, under the lock
        if (work->request().skip()) {
          skipped.push_back(work);
        } else {
          Dispatch(work, &wake);
        }
      };
      int64_t seq = req->spec().sequence_number();
      if (seq < c.next) {
        run(w);  // a resend of something already run
      } else {
        auto [held, fresh] = c.buffered.try_emplace(seq, w);
        if (!fresh) {
          // Pushed again while the earlier push waits here: the caller
          // takes the latest push's reply; the earlier one ends now.
          stale.push_back(held->second);
          held->second = w;
        }
      }
      // Run the next calls in sequence; a held call the caller has since
      // had a reply for ends.
      while (!c.buffered.empty() && c.buffered.begin()->first <= c.next) {
        if (c.buffered.begin()->first < c.next) {
          stale.push_back(c.buffered.begin()->second);
        } else {
          run(c.buffered.begin()->second);
          ++c.next;
        }
        c.buffered.erase(c.buffered.begin());
      }
    }
  }
  for (Work s : skipped) s->Finish(grpc::Status::OK);
  for (Work a : answered) a->Finish(grpc::Status::OK);
  for (Work old : stale) {
    old->Finish(grpc::Status(grpc::StatusCode::ABORTED, "superseded by a later push of the same call"));
  }
  // Woken after the lock is released, so the woken thread does not block on it.
  if (wake.main) main_cv_.Signal();
  if (wake.pool == 1) pool_cv_.Signal();
  if (wake.pool > 1) pool_cv_.SignalAll();
}

std::string TaskReceiver::PushKey(Work w) {
  const rpc::TaskSpec& spec = w->request().spec();
  if (spec.type() == rpc::TaskSpec::ACTOR_TASK) return "";
  return spec.task_id() + "/" + std::to_string(spec.attempt());
}

bool TaskReceiver::JoinSeenPush(Work w, std::vector<Work>* answered) {
  std::string key = PushKey(w);
  if (key.empty()) return false;
  if (auto done = finished_.find(key); done != finished_.end()) {
    *w->reply() = done->second;
    answered->push_back(w);
    return true;
  }
  auto [it, fresh] = running_.try_emplace(key);
  if (fresh) return false;
  it->second.push_back(w);
  return true;
}

void TaskReceiver::Complete(Work w) {
  std::vector<Work> retries;
  std::string key = PushKey(w);
  if (!key.empty()) {
    absl::MutexLock lock(&mu_);
    if (auto it = running_.find(key); it != running_.end()) {
      retries = std::move(it->second);
      running_.erase(it);
    }
    if (finished_.emplace(key, *w->reply()).second) finished_order_.push_back(key);
    while (finished_order_.size() > kRememberedReplies) {
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
  }
  for (Work r : retries) *r->reply() = *w->reply();
  w->Finish(grpc::Status::OK);
  for (Work r : retries) r->Finish(grpc::Status::OK);
}

void TaskReceiver::Dispatch(Work w, Wake* wake) {
  if (max_concurrency_ > 1) {
    pool_queue_.push_back(w);
    ++wake->pool;
  } else {
    main_queue_.push_back(w);
    wake->main = true;
  }
}

bool TaskReceiver::WaitFor(absl::CondVar* cv, std::deque<Work>* queue) {
  while (queue->empty() && !stopping_) cv->Wait(&mu_);
  return !stopping_;
}

void TaskReceiver::RunMainLoop() {
  std::deque<Work> batch;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (!WaitFor(&main_cv_, &main_queue_)) return;
      // Everything queued, in order: one lock for a burst of tasks.
      batch.swap(main_queue_);
    }
    for (Work w : batch) {
      if (stop_requested_.load(std::memory_order_relaxed)) return;  // the rest stays unrun
      Execute(w);
    }
    batch.clear();
  }
}

void TaskReceiver::StartPool(int threads) {
  for (int i = 0; i < threads; ++i) {
    pool_.emplace_back([this] {
      while (true) {
        Work w;
        {
          absl::MutexLock lock(&mu_);
          if (!WaitFor(&pool_cv_, &pool_queue_)) return;
          w = pool_queue_.front();
          pool_queue_.pop_front();
        }
        Execute(w);
      }
    });
  }
}

absl::Status TaskReceiver::ResolveArgs(const rpc::TaskSpec& spec, std::vector<Value>* held, internal::ArgViews* views) {
  held->reserve(spec.args_size());
  for (const auto& arg : spec.args()) {
    if (arg.object_id().empty()) {
      // Inline: read in place (the request outlives the call).
      views->emplace_back(arg.data());
      continue;
    }
    auto v = host_->ResolveArg(arg);
    if (!v.ok()) return v.status();
    held->push_back(*v);
    views->emplace_back(held->back()->data(), held->back()->size());
  }
  return absl::OkStatus();
}

absl::StatusOr<internal::ReturnValues> TaskReceiver::CreateActor(const rpc::TaskSpec& spec,
                                                                 const internal::ArgViews& views) {
  const auto* f = internal::FunctionRegistry::Instance().FindActorFactory(spec.function_name());
  if (f == nullptr) return absl::NotFoundError("no actor factory '" + spec.function_name() + "' in this program");
  auto instance = (*f)(views);
  if (!instance.ok()) return instance.status();
  actor_ = *instance;
  actor_class_ = spec.actor_creation().class_name();
  actor_resources_.insert(spec.resources().begin(), spec.resources().end());
  holds_actor_.store(true, std::memory_order_release);
  int concurrency = std::max(1, spec.actor_creation().max_concurrency());
  if (concurrency > 1) {
    StartPool(concurrency);
    absl::MutexLock lock(&mu_);
    max_concurrency_ = concurrency;
  }
  return internal::ReturnValues{std::string()};
}

TaskContext TaskReceiver::ContextOf(const rpc::TaskSpec& spec) const {
  TaskContext c;
  if (auto id = TaskId::FromBinary(spec.task_id()); id.ok()) c.task_id = *id;
  if (auto id = ActorId::FromBinary(spec.actor_id()); id.ok()) c.actor_id = *id;
  c.attempt = spec.attempt();
  c.num_returns = NumReturns(spec);
  c.retry_exceptions = spec.retry_exceptions();
  c.retry_exception_filter = spec.retry_exception_filter();
  if (spec.type() == rpc::TaskSpec::ACTOR_TASK) {
    c.resources = actor_resources_;
  } else {
    c.resources.insert(spec.resources().begin(), spec.resources().end());
  }
  return c;
}

absl::StatusOr<internal::ReturnValues> TaskReceiver::Invoke(const rpc::TaskSpec& spec, const internal::ArgViews& views,
                                                            RefCollector* returned_refs) {
  auto& registry = internal::FunctionRegistry::Instance();
  switch (spec.type()) {
    case rpc::TaskSpec::NORMAL_TASK: {
      const auto* f = registry.FindFunction(spec.function_name());
      if (f == nullptr) return absl::NotFoundError("no remote function '" + spec.function_name() + "' in this program");
      CollectRefs collect(returned_refs);
      return (*f)(views);
    }
    case rpc::TaskSpec::ACTOR_CREATION_TASK:
      return CreateActor(spec, views);
    case rpc::TaskSpec::ACTOR_TASK: {
      const auto* f = registry.FindActorMethod(spec.function_name());
      if (!actor_) return absl::FailedPreconditionError("this worker holds no actor");
      if (f == nullptr) return absl::NotFoundError("no actor method '" + spec.function_name() + "' in this program");
      CollectRefs collect(returned_refs);
      return (*f)(actor_.get(), views);
    }
    default:
      return absl::InvalidArgumentError("unknown task type");
  }
}

void TaskReceiver::SetResult(const rpc::TaskSpec& spec, absl::StatusOr<internal::ReturnValues> result,
                             RefCollector* returned_refs, rpc::PushTaskReply* reply) {
  const int n = NumReturns(spec);
  if (result.ok() && result->size() != static_cast<size_t>(n)) {
    result =
        MakeError(ErrorType::kApplicationError, "returned " + std::to_string(result->size()) +
                                                    " values, but the task declares num_returns=" + std::to_string(n));
  }
  if (!result.ok()) {
    // The message names the function; the type, when the invoker gave none,
    // is an application error's.
    absl::Status error = result.status();
    ErrorType type = GetErrorType(error);
    if (type == ErrorType::kNone) type = ErrorType::kApplicationError;
    absl::Status named = WithErrorData(MakeError(type, spec.function_name() + ": " + std::string(error.message())),
                                       ErrorData(error).value_or(""));
    // retry_exceptions: every application error, or those the invoker
    // marked after reading the filter.
    const bool retryable = spec.type() == rpc::TaskSpec::NORMAL_TASK && spec.retry_exceptions() &&
                           type == ErrorType::kApplicationError &&
                           (spec.retry_exception_filter().empty() || IsMarkedRetryable(error));
    return SetError(reply, spec, named, retryable);
  }
  // Each return holds every ref the call serialized: one reference each,
  // the first return taking the collector's.
  std::vector<ObjectRefInfo> refs = std::move(returned_refs->refs);
  returned_refs->refs.clear();
  for (int i = 0; i < n; ++i) {
    if (i + 1 < n) {
      for (const auto& ref : refs) host_->AddRef(ref.id);
    }
    SetReturn(spec, i + 1, std::move((*result)[i]), i + 1 < n ? refs : std::move(refs), reply);
  }
}

void TaskReceiver::SetReturn(const rpc::TaskSpec& spec, int index, std::string value, std::vector<ObjectRefInfo> refs,
                             rpc::PushTaskReply* reply) {
  ObjectId id = ReturnObjectId(spec.task_id(), index);
  rpc::ReturnObject* r = reply->add_returns();
  r->set_object_id(id.Binary());
  if (!refs.empty()) host_->HandOverRefs(spec, std::move(refs), r);
  r->set_size(static_cast<int64_t>(value.size()));
  if (value.size() <= kInlineLimit) {
    r->set_data(std::move(value));
  } else {
    // Large: kept here until the owner pulls it.
    host_->HoldForOwner(id, std::make_shared<const std::string>(std::move(value)), r->mutable_location());
    r->set_stored_remotely(true);
  }
}

bool TaskReceiver::Cancel(const std::string& task_id, bool interrupt) {
  std::vector<Work> dropped;
  std::shared_ptr<std::atomic<bool>> flag;
  {
    absl::MutexLock lock(&mu_);
    for (std::deque<Work>* queue : {&main_queue_, &pool_queue_}) {
      for (auto it = queue->begin(); it != queue->end();) {
        if ((*it)->request().spec().task_id() == task_id) {
          dropped.push_back(*it);
          it = queue->erase(it);
        } else {
          ++it;
        }
      }
    }
    if (auto it = running_flags_.find(task_id); it != running_flags_.end()) flag = it->second;
    if (dropped.empty() && flag == nullptr) {
      cancelled_early_.push_back(task_id);
      if (cancelled_early_.size() > kRememberedReplies) cancelled_early_.pop_front();
    }
  }
  for (Work w : dropped) FinishCancelled(w, "the task was cancelled before it ran");
  if (flag != nullptr) {
    flag->store(true, std::memory_order_release);
    if (auto id = TaskId::FromBinary(task_id); id.ok() && interrupt) InterruptTask(*id);
  }
  return !dropped.empty() || flag != nullptr;
}

void TaskReceiver::FinishCancelled(Work w, const std::string& why) {
  SetError(w->reply(), w->request().spec(), MakeError(ErrorType::kTaskCancelled, why));
  Complete(w);
}

bool TaskReceiver::StartRunning(Work w, std::shared_ptr<std::atomic<bool>>* flag) {
  const std::string& task_id = w->request().spec().task_id();
  {
    absl::MutexLock lock(&mu_);
    auto early = std::find(cancelled_early_.begin(), cancelled_early_.end(), task_id);
    if (early == cancelled_early_.end()) {
      *flag = std::make_shared<std::atomic<bool>>(false);
      running_flags_[task_id] = *flag;
      return true;
    }
    cancelled_early_.erase(early);
  }
  FinishCancelled(w, "the task was cancelled before it ran");
  return false;
}

void TaskReceiver::Execute(Work w) {
  const rpc::TaskSpec& spec = w->request().spec();
  rpc::PushTaskReply* reply = w->reply();
  std::shared_ptr<std::atomic<bool>> cancelled;
  if (!StartRunning(w, &cancelled)) return;
  // Unregistered at the end (the push, and its spec, may be gone by then).
  struct Unregister {
    TaskReceiver* self;
    std::string id;
    ~Unregister() {
      absl::MutexLock lock(&self->mu_);
      self->running_flags_.erase(id);
    }
  } unregister{this, spec.task_id()};
  // Whoever pushed the task (its caller, or the GCS for an actor's
  // creation) reports how it ended: a task done before the next flush needs
  // no report from here.
  TaskEventBuffer::Ticket running;
  host_->TaskRunning(spec, &running);
  if (spec.type() != rpc::TaskSpec::ACTOR_TASK) SetChipEnv(w->request());
  // A normal task's variables last while it runs (the worker is reused); an
  // actor's, for the life of its process.
  SavedEnv saved_env;
  if (spec.type() != rpc::TaskSpec::ACTOR_TASK) saved_env = ApplyTaskEnv(spec);
  struct RestoreOnExit {
    const SavedEnv* saved;
    bool restore;
    ~RestoreOnExit() {
      if (restore) RestoreEnv(*saved);
    }
  } restore_env{&saved_env, spec.type() == rpc::TaskSpec::NORMAL_TASK};

  // Arguments: values inline, or fetched from their owners.
  std::vector<Value> held;
  internal::ArgViews views;
  if (absl::Status resolved = ResolveArgs(spec, &held, &views); !resolved.ok()) {
    SetError(reply, spec, resolved);
    host_->TaskEnded(spec, running);  // its pusher reports the failure
    Complete(w);
    return;
  }
  // The refs serialized into the result, each held until handed over.
  RefCollector returned_refs;
  returned_refs.hold = true;
  TaskContext context = ContextOf(spec);
  context.cancelled = cancelled.get();
  absl::StatusOr<internal::ReturnValues> result;
  {
    ScopedTaskContext scope(&context);
    result = Invoke(spec, views, &returned_refs);
  }
  // Cancelled while it ran: it ends cancelled, whatever it returned.
  if (cancelled->load(std::memory_order_acquire)) {
    result = MakeError(ErrorType::kTaskCancelled, "the task was cancelled while it ran");
  }
  std::fflush(stdout);
  std::fflush(stderr);
  SetResult(spec, std::move(result), &returned_refs, reply);
  // The task failed: its result's refs go with it.
  for (const auto& ref : returned_refs.refs) host_->DropRef(ref.id);
  host_->TaskEnded(spec, running);
  Complete(w);
}

void TaskReceiver::ExitSoon(int code) {
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }).detach();
}

}  // namespace manta::core
