#include "serve/engine/group_engine.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "serve/engine/group_wire.h"

namespace manta::serve {
namespace {

using wire::Encoder;
using wire::kDecode;
using wire::kImport;
using wire::kNoop;
using wire::kPrefill;
using wire::kPrefillOut;
using wire::kQuiet;
using wire::kRelease;
using wire::kStop;

// Sums over the tensor group through the communicator.
class GroupSum : public TensorSum {
 public:
  GroupSum(train::Communicator* comm, int device) : comm_(comm), device_(device) {}
  void Sum(float* data, int64_t n) override { comm_->AllReduce(train::kTensorAxis, device_, data, n); }

 private:
  train::Communicator* comm_;
  int device_;
};

}  // namespace

class GroupEngine::Leader : public StepRunner {
 public:
  explicit Leader(GroupEngine* group) : group_(group) {}

  absl::Status Prefill(int slot, const std::vector<int32_t>& prompt, float* logits) override {
    const int64_t n = static_cast<int64_t>(prompt.size());
    if (n + 3 > group_->command_floats_) {
      return absl::InvalidArgumentError(absl::StrCat("a prompt of ", n, " tokens does not fit ", max_len()));
    }
    Encoder cmd(kPrefill);
    cmd.AddInt(n, "a prompt's length").AddInt(slot, "a slot");
    for (int32_t t : prompt) cmd.AddToken(t);
    absl::StatusOr<std::vector<float>> floats = std::move(cmd).Finish();
    if (!floats.ok()) return floats.status();
    return group_->Call(*std::move(floats), logits);
  }
  absl::Status Decode(const std::vector<int>& slots, const std::vector<int32_t>& tokens, float* logits) override {
    const int64_t n = static_cast<int64_t>(slots.size());
    if (tokens.size() != slots.size() || 2 * n + 2 > group_->command_floats_) {
      return absl::InvalidArgumentError("a decode step names more slots than the group has");
    }
    Encoder cmd(kDecode);
    cmd.AddInt(n, "a decode step's slot count");
    for (int s : slots) cmd.AddInt(s, "a slot");
    for (int32_t t : tokens) cmd.AddToken(t);
    absl::StatusOr<std::vector<float>> floats = std::move(cmd).Finish();
    if (!floats.ok()) return floats.status();
    return group_->Call(*std::move(floats), logits);
  }
  void Release(int slot) override {
    Encoder cmd(kRelease);
    cmd.AddInt(1, "a count").AddInt(slot, "a slot");
    absl::StatusOr<std::vector<float>> floats = std::move(cmd).Finish();
    // A slot out of range was never prefilled: there is nothing to release.
    if (floats.ok()) group_->Call(*std::move(floats), nullptr).IgnoreError();
  }
  int slots() const override { return group_->engines_[0]->slots(); }
  int64_t max_len() const override { return group_->engines_[0]->max_len(); }
  int64_t vocab() const override { return group_->engines_[0]->vocab(); }
  RemotePrefill* remote() override;

 private:
  GroupEngine* group_;
};

class GroupEngine::Remote : public RemotePrefill {
 public:
  explicit Remote(GroupEngine* group) : group_(group) {}

  absl::Status StartPrefill(int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& sampling) override {
    if (group_->broken()) return absl::UnavailableError("the serving group is broken");
    return group_->role_.send_prompt(id, prompt, sampling);
  }
  absl::StatusOr<std::vector<Arrival>> ImportArrived(const std::vector<int>& free_slots, bool wait) override {
    std::vector<const KvTransfer*> arrived =
        group_->queues_[0]->Peek(free_slots.size(), wait ? absl::Milliseconds(10) : absl::ZeroDuration());
    if (arrived.empty()) return std::vector<Arrival>();
    const int64_t k = static_cast<int64_t>(arrived.size());
    std::vector<Arrival> out;
    Encoder cmd(kImport);
    cmd.AddInt(k, "an import's count");
    for (int64_t i = 0; i < k; ++i) cmd.AddInt(free_slots[i], "a slot");
    for (int64_t i = 0; i < k; ++i) cmd.AddIdHigh(arrived[i]->id);
    for (int64_t i = 0; i < k; ++i) cmd.AddIdLow(arrived[i]->id);
    for (int64_t i = 0; i < k; ++i) out.push_back({arrived[i]->id, arrived[i]->first_token});
    absl::StatusOr<std::vector<float>> floats = std::move(cmd).Finish();
    if (!floats.ok()) return floats.status();
    absl::Status s = group_->Call(*std::move(floats), nullptr);
    if (!s.ok()) return s;
    return out;
  }
  int max_in_flight() const override { return group_->role_.transfer_backlog; }

 private:
  GroupEngine* group_;
};

RemotePrefill* GroupEngine::Leader::remote() { return group_->remote_.get(); }

GroupEngine::GroupEngine(train::Communicator* comm, int first_device, std::vector<const ServingWeights*> weights,
                         const EngineOptions& options, GroupRole role)
    : comm_(comm),
      first_device_(first_device),
      root_device_(comm->mesh().GroupMembers(train::kTensorAxis, first_device)[0]),
      role_(std::move(role)),
      command_floats_(4 + std::max<int64_t>(options.max_len, 3 * static_cast<int64_t>(options.slots))),
      scratch_(weights.size()) {
  const bool alone = comm->GroupSize(train::kTensorAxis) == 1;
  for (size_t i = 0; i < weights.size(); ++i) {
    sums_.push_back(std::make_unique<GroupSum>(comm, first_device_ + static_cast<int>(i)));
    engines_.push_back(std::make_unique<Engine>(*weights[i], options, alone ? nullptr : sums_[i].get()));
    scratch_[i].resize(static_cast<size_t>(options.slots) * engines_[i]->vocab());
  }
  if (first_device_ == root_device_) leader_ = std::make_unique<Leader>(this);
  if (role_.kind == GroupRole::kGenerate) remote_ = std::make_unique<Remote>(this);
  const bool transfers = role_.kind != GroupRole::kInterleaved;
  {
    absl::MutexLock lock(&mu_);
    running_ = static_cast<int>(weights.size());
    transferring_ = transfers ? static_cast<int>(weights.size()) : 0;
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    queues_.push_back(std::make_unique<TransferQueue>(static_cast<size_t>(std::max(1, role_.transfer_backlog))));
  }
  for (size_t i = 0; i < weights.size(); ++i) threads_.emplace_back([this, i] { RankLoop(static_cast<int>(i)); });
  if (transfers) {
    for (size_t i = 0; i < weights.size(); ++i) {
      threads_.emplace_back([this, i] { TransferLoop(static_cast<int>(i)); });
    }
  }
}

StepRunner* GroupEngine::leader() { return leader_.get(); }

GroupEngine::~GroupEngine() {
  bool abort = false;
  {
    absl::MutexLock lock(&mu_);
    if (leader_) stop_requested_ = true;
    // Nobody is left to tell a worker's ranks to stop; transfers end when
    // the prefill side says so, and are not waited for long.
    auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0 && transferring_ == 0; };
    // A group that stopped cleanly (or is being stopped by this leader)
    // gets a moment for its transfers to say so to the other slice.
    const absl::Duration patience = leader_ || running_ == 0 ? absl::Seconds(5) : absl::ZeroDuration();
    abort = !mu_.AwaitWithTimeout(absl::Condition(&ended), patience);
  }
  if (abort) {
    comm_->Abort("the serving process is stopping");
    for (auto& q : queues_) q->Close();
  }
  for (std::thread& t : threads_) t.join();
}

bool GroupEngine::broken() {
  absl::MutexLock lock(&mu_);
  return !broken_.ok();
}

absl::Status GroupEngine::EnqueuePrefill(int64_t id, const std::vector<int32_t>& prompt,
                                         const SamplingParams& sampling) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n + 4 > command_floats_) return absl::InvalidArgumentError("the prompt does not fit the prefill engine");
  Encoder encoder(kPrefillOut);
  encoder.AddInt(n, "a prompt's length").AddIdHigh(id).AddIdLow(id);
  for (int32_t t : prompt) encoder.AddToken(t);
  absl::StatusOr<std::vector<float>> floats = std::move(encoder).Finish();
  if (!floats.ok()) return floats.status();
  std::vector<float> cmd = *std::move(floats);
  cmd.resize(command_floats_, 0.0f);
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  if (stop_requested_ || !leader_) return absl::UnavailableError("the prefill group is stopping");
  queued_.push_back(std::move(cmd));
  sampling_[id] = sampling;
  return absl::OkStatus();
}

size_t GroupEngine::transfer_backlog() const {
  size_t n = 0;
  for (const auto& q : queues_) n += q->size();
  return n;
}

absl::Status GroupEngine::Call(std::vector<float> cmd, float* out) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  if (stop_requested_) return absl::UnavailableError("the serving group is stopping");
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !has_pending_ || !broken_.ok(); };
  mu_.Await(absl::Condition(&idle));
  if (!broken_.ok()) return broken_;
  pending_ = std::move(cmd);
  pending_.resize(command_floats_, 0.0f);
  pending_out_ = out;
  has_pending_ = true;
  pending_taken_ = false;
  pending_done_ = false;
  mu_.Await(absl::Condition(&pending_done_));
  has_pending_ = false;
  return pending_status_;
}

float* GroupEngine::NextCommand(std::vector<float>* buf) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (has_pending_ && !pending_taken_) || !queued_.empty() || stop_requested_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), kQuiet);
  std::fill(buf->begin(), buf->end(), 0.0f);
  if (has_pending_ && !pending_taken_) {
    pending_taken_ = true;
    *buf = pending_;
    return pending_out_;
  }
  if (!queued_.empty() && !stop_requested_) {
    *buf = std::move(queued_.front());
    queued_.pop_front();
    return nullptr;
  }
  (*buf)[0] = stop_requested_ ? kStop : kNoop;
  return nullptr;
}

void GroupEngine::Finish(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!has_pending_ || pending_done_) return;
  pending_status_ = status;
  pending_done_ = true;
}

void GroupEngine::Break(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return;
    broken_ = why;
    if (has_pending_ && !pending_done_) {
      pending_status_ = why;
      pending_done_ = true;
    }
  }
  for (auto& q : queues_) q->Close();
  comm_->Abort(std::string(why.message()));  // the other chips and processes fail now too
}

absl::Status GroupEngine::Execute(int local, const std::vector<float>& cmd, float* out) {
  Engine& engine = *engines_[local];
  const int64_t n = static_cast<int64_t>(cmd[1]);
  switch (static_cast<int>(cmd[0])) {
    case kPrefill: {
      std::vector<int32_t> prompt(n);
      for (int64_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>(cmd[3 + i]);
      return engine.Prefill(static_cast<int>(cmd[2]), prompt, out);
    }
    case kDecode: {
      std::vector<int> slots(n);
      std::vector<int32_t> tokens(n);
      for (int64_t i = 0; i < n; ++i) {
        slots[i] = static_cast<int>(cmd[2 + i]);
        tokens[i] = static_cast<int32_t>(cmd[2 + n + i]);
      }
      return engine.Decode(slots, tokens, out);
    }
    case kRelease:
      engine.Release(static_cast<int>(cmd[2]));
      return absl::OkStatus();
    case kPrefillOut:
    case kImport:
      return ExecuteTransferOp(local, cmd);
    default:
      return absl::InternalError(absl::StrCat("unknown serving command ", cmd[0]));
  }
}

void GroupEngine::RankLoop(int local) {
  const int device = first_device_ + local;
  const bool root = device == root_device_;
  std::vector<float> buf(command_floats_);
  while (true) {
    float* out = root ? NextCommand(&buf) : nullptr;
    const bool call = root && (static_cast<int>(buf[0]) != kPrefillOut);
    try {
      comm_->Broadcast(train::kTensorAxis, device, buf.data(), command_floats_, 0);
    } catch (const std::exception& e) {
      Break(absl::UnavailableError(absl::StrCat("the serving group lost a rank: ", e.what())));
      break;
    }
    const int op = static_cast<int>(buf[0]);
    if (op == kStop) break;
    if (op == kNoop) continue;
    absl::Status s;
    try {
      s = Execute(local, buf, root ? out : scratch_[local].data());
    } catch (const std::exception& e) {
      s = absl::UnavailableError(absl::StrCat("the serving group lost a rank: ", e.what()));
      Break(s);
    }
    if (call) Finish(s);
    if (!s.ok() && !call) Break(absl::UnavailableError(absl::StrCat("a prefill to move failed: ", s.message())));
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) break;
  }
  absl::MutexLock lock(&mu_);
  --running_;
}

void GroupEngine::Stop() {
  absl::MutexLock lock(&mu_);
  if (leader_) stop_requested_ = true;
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; };
  mu_.Await(absl::Condition(&ended));
}

absl::Status GroupEngine::Wait() {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; };
  mu_.Await(absl::Condition(&ended));
  return broken_;
}

}  // namespace manta::serve
