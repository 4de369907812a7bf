#include "runtime/core_worker/submit_deps.h"

#include "runtime/core_worker/wire.h"

namespace manta::core {

void SubmitDeps::FailTask(const rpc::TaskSpec& spec, ErrorType type, const std::string& message) const {
  rpc::ErrorInfo err;
  err.set_type(ToProtoErrorType(type));
  err.set_message(message);
  host->RecordTaskEvent(spec, rpc::TaskEvent::FAILED, &err);
  for (int i = 1; i <= NumReturns(spec); ++i) store->Fail(ReturnObjectId(spec.task_id(), i), MakeError(type, message));
  refs->ReleaseHeld(spec.task_id());
}

bool DependencyResolver::IsOwnedRefArg(const rpc::TaskArg& a) const {
  return !a.object_id().empty() && a.owner().worker_id() == self_;
}

bool DependencyResolver::HasOwnedRefArgs(const rpc::TaskSpec& spec) const {
  for (const auto& a : spec.args()) {
    if (IsOwnedRefArg(a)) return true;
  }
  return false;
}

void DependencyResolver::Resolve(rpc::TaskSpec spec, Then then) {
  std::vector<int> owned;
  for (int i = 0; i < spec.args_size(); ++i) {
    if (IsOwnedRefArg(spec.args(i))) owned.push_back(i);
  }
  if (owned.empty()) return then(std::move(spec), absl::OkStatus());
  // The spec and how many arguments it still waits for (-1: failed).
  struct State {
    rpc::TaskSpec spec;
    int waiting;
    Then then;
  };
  auto state = std::make_shared<State>(State{std::move(spec), static_cast<int>(owned.size()), std::move(then)});
  for (int i : owned) {
    ObjectId id = *ObjectId::FromBinary(state->spec.args(i).object_id());
    store_->OnReady(id, [this, state, i](const absl::StatusOr<Value>& v) {
      loop_->Post([state, i, v] {
        if (state->waiting <= 0) return;  // failed already
        if (!v.ok()) {
          state->waiting = -1;
          return state->then(std::move(state->spec), v.status());
        }
        rpc::TaskArg* arg = state->spec.mutable_args(i);
        if ((*v)->size() <= kInlineLimit) {
          arg->set_data(**v);
          arg->clear_object_id();
          arg->clear_owner();
        }
        if (--state->waiting == 0) state->then(std::move(state->spec), absl::OkStatus());
      });
    });
  }
}

}  // namespace manta::core
