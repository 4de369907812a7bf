#include "serve/engine/batcher.h"

#include "absl/strings/str_cat.h"

namespace manta::serve {

Batcher::Batcher(StepRunner* runner, int max_prefills_per_step)
    : runner_(runner), max_prefills_(std::max(1, max_prefills_per_step)), slots_(runner->slots()) {
  logits_.resize(static_cast<size_t>(runner->slots()) * runner->vocab());
}

void Batcher::Submit(GenerateRequest request) {
  const int64_t n = static_cast<int64_t>(request.prompt.size());
  absl::Status bad;
  if (n == 0) {
    bad = absl::InvalidArgumentError("the prompt is empty");
  } else if (request.max_tokens < 1) {
    bad = absl::InvalidArgumentError(absl::StrCat("max_tokens must be at least 1, got ", request.max_tokens));
  } else if (request.max_tokens > runner_->max_len() - n) {
    bad = absl::InvalidArgumentError(absl::StrCat("the prompt (", n, " tokens) and max_tokens (", request.max_tokens,
                                                  ") exceed the ", runner_->max_len(), " tokens a sequence holds"));
  }
  if (!bad.ok()) {
    if (request.on_done) request.on_done(bad, FinishReason::kError);
    return;
  }
  absl::MutexLock lock(&mu_);
  waiting_.push_back(std::make_unique<GenerateRequest>(std::move(request)));
}

size_t Batcher::Backlog() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size() + static_cast<size_t>(in_flight_.load());
}

std::unique_ptr<GenerateRequest> Batcher::NextWaiting() {
  while (true) {
    std::unique_ptr<GenerateRequest> request;
    {
      absl::MutexLock lock(&mu_);
      if (waiting_.empty()) return nullptr;
      request = std::move(waiting_.front());
      waiting_.pop_front();
    }
    if (!request->cancelled || !request->cancelled()) return request;
    if (request->on_done) request->on_done(absl::CancelledError("the request was cancelled"), FinishReason::kError);
  }
}

void Batcher::Start(int s, std::unique_ptr<GenerateRequest> request, const float* logits, int32_t first) {
  Slot& slot = slots_[s];
  slot.request = std::move(request);
  slot.sampler = std::make_unique<Sampler>(slot.request->sampling);
  slot.emitted = 0;
  ++active_;
  if (logits != nullptr) {
    Advance(s, logits);
  } else {
    slot.sampler->Skip();  // the first draw was the prefill engine's
    Emit(s, first);
  }
}

void Batcher::AdmitRemote(RemotePrefill* remote) {
  while (static_cast<int>(prefilling_.size()) < remote->max_in_flight()) {
    std::unique_ptr<GenerateRequest> request = NextWaiting();
    if (!request) break;
    const int64_t id = next_id_++;
    absl::Status s = remote->StartPrefill(id, request->prompt, request->sampling);
    if (!s.ok()) {
      runner_error_ = s;
      if (request->on_done) request->on_done(s, FinishReason::kError);
      return;
    }
    prefilling_[id] = std::move(request);
    ++in_flight_;
  }
  std::vector<int> free;
  for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
    if (!slots_[s].request) free.push_back(s);
  }
  if (free.empty() || prefilling_.empty()) return;
  absl::StatusOr<std::vector<RemotePrefill::Arrival>> arrived = remote->ImportArrived(free, /*wait=*/active_ == 0);
  if (!arrived.ok()) {
    runner_error_ = arrived.status();
    return;
  }
  for (size_t i = 0; i < arrived->size(); ++i) {
    auto it = prefilling_.find((*arrived)[i].id);
    if (it == prefilling_.end()) {
      runner_error_ = absl::InternalError(absl::StrCat("a prefill arrived for unknown request ", (*arrived)[i].id));
      return;
    }
    std::unique_ptr<GenerateRequest> request = std::move(it->second);
    prefilling_.erase(it);
    --in_flight_;
    Start(free[i], std::move(request), nullptr, (*arrived)[i].first_token);
  }
}

void Batcher::Finish(int s, const absl::Status& status, FinishReason reason) {
  Slot& slot = slots_[s];
  std::unique_ptr<GenerateRequest> request = std::move(slot.request);
  slot.sampler.reset();
  runner_->Release(s);
  --active_;
  if (request->on_done) request->on_done(status, reason);
}

bool Batcher::Advance(int s, const float* logits) { return Emit(s, slots_[s].sampler->Next(logits, runner_->vocab())); }

bool Batcher::Emit(int s, int32_t token) {
  Slot& slot = slots_[s];
  if (token == slot.request->eos_id) {
    Finish(s, absl::OkStatus(), FinishReason::kEos);
    return false;
  }
  ++slot.emitted;
  if (slot.request->on_token) slot.request->on_token(token);
  if (slot.emitted >= slot.request->max_tokens) {
    Finish(s, absl::OkStatus(), FinishReason::kLength);
    return false;
  }
  slot.next = token;
  return true;
}

void Batcher::Admit() {
  if (RemotePrefill* remote = runner_->remote()) return AdmitRemote(remote);
  for (int admitted = 0; admitted < max_prefills_; ++admitted) {
    int free_slot = -1;
    for (int s = 0; s < static_cast<int>(slots_.size()) && free_slot < 0; ++s) {
      if (!slots_[s].request) free_slot = s;
    }
    if (free_slot < 0) return;
    std::unique_ptr<GenerateRequest> request = NextWaiting();
    if (!request) return;
    absl::Status s = runner_->Prefill(free_slot, request->prompt, logits_.data());
    if (!s.ok()) {
      if (s.code() != absl::StatusCode::kInvalidArgument) runner_error_ = s;
      runner_->Release(free_slot);
      if (request->on_done) request->on_done(s, FinishReason::kError);
      continue;
    }
    Start(free_slot, std::move(request), logits_.data());
  }
}

bool Batcher::Step() {
  const int before = active_;
  const size_t waiting = Backlog();
  if (before == 0 && waiting == 0) return false;
  ++steps_;
  for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
    const GenerateRequest* r = slots_[s].request.get();
    if (r && r->cancelled && r->cancelled()) {
      Finish(s, absl::CancelledError("the request was cancelled"), FinishReason::kError);
    }
  }
  Admit();
  std::vector<int> live;
  std::vector<int32_t> tokens;
  for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
    if (slots_[s].request) {
      live.push_back(s);
      tokens.push_back(slots_[s].next);
    }
  }
  if (live.empty()) return true;
  absl::Status s = runner_->Decode(live, tokens, logits_.data());
  if (!s.ok()) {
    runner_error_ = s;
    for (int slot : live) Finish(slot, s, FinishReason::kError);
    return true;
  }
  for (size_t i = 0; i < live.size(); ++i) Advance(live[i], logits_.data() + i * runner_->vocab());
  return true;
}

void Batcher::FailAll(const absl::Status& status) {
  std::deque<std::unique_ptr<GenerateRequest>> waiting;
  {
    absl::MutexLock lock(&mu_);
    waiting.swap(waiting_);
  }
  for (auto& r : waiting) {
    if (r->on_done) r->on_done(status, FinishReason::kError);
  }
  for (auto& [id, r] : prefilling_) {
    if (r->on_done) r->on_done(status, FinishReason::kError);
  }
  prefilling_.clear();
  in_flight_ = 0;
  for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
    if (slots_[s].request) Finish(s, status, FinishReason::kError);
  }
}

}  // namespace manta::serve
