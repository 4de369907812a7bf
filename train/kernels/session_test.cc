// The training session: steps decided by a commit, a group left and joined
// again with the state kept, and the same model at every size.
#include "train/kernels/session.h"

#include <thread>

#include "gtest/gtest.h"
#include "train/kernels/training_test_util.h"

namespace manta::train {
namespace {

std::vector<double> LossesOf(const std::vector<StepMetrics>& steps) {
  std::vector<double> out;
  for (const StepMetrics& m : steps) out.push_back(m.loss);
  return out;
}

JoinSpec Join(int chips, int ici_data, StateSource source = StateSource::kInit, int64_t step = 0) {
  JoinSpec spec;
  spec.env = LocalEnv(chips);
  spec.parallelism.ici_data = ici_data;
  spec.parallelism.ici_fsdp = -1;
  spec.parallelism.dcn_data = -1;
  spec.source = source;
  spec.step = step;
  return spec;
}

TEST(TrainSessionTest, CommitDecidesEveryStepAndAKeptGroupGoesOnAsIfNothingHappened) {
  const Config c = TinyConfig({"steps=12", "per_device_batch_size=2"});
  auto whole = TrainingSession::Create(c);
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE((*whole)->Join(Join(4, 1), RunOptions{}).ok());
  auto reference = (*whole)->Run(RunOptions{});
  ASSERT_TRUE(reference.ok());
  ASSERT_EQ(reference->end, SessionRun::kFinished);

  auto s = TrainingSession::Create(c);
  ASSERT_TRUE(s.ok());
  RunOptions options;
  int calls = 0;
  options.commit = [&](const StepMetrics& m) {
    ++calls;
    if (m.step == 4) return StepDecision::kApplyThenPause;
    if (m.step == 7 && calls < 20) return StepDecision::kDiscard;  // once: the step is redone
    return StepDecision::kApply;
  };
  ASSERT_TRUE((*s)->Join(Join(4, 1), options).ok());
  auto first = (*s)->Run(options);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->end, SessionRun::kStopped);
  EXPECT_EQ(first->next_step, 5) << "the paused step is applied";
  // The same mesh, re-joined keeping the state.
  ASSERT_TRUE((*s)->Join(Join(4, 1, StateSource::kKeep, 5), options).ok());
  auto second = (*s)->Run(options);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->end, SessionRun::kDiscarded);
  EXPECT_EQ(second->next_step, 7) << "a discarded step changes nothing";
  calls = 100;
  ASSERT_TRUE((*s)->Join(Join(4, 1, StateSource::kKeep, 7), options).ok());
  auto third = (*s)->Run(options);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->end, SessionRun::kFinished);
  std::vector<double> all = LossesOf(first->steps);
  for (const auto* r : {&second->steps, &third->steps}) {
    for (const StepMetrics& m : *r) all.push_back(m.loss);
  }
  ExpectLossesMatch(LossesOf(reference->steps), all);
}

TEST(TrainSessionTest, KeepingNeedsTheSameShards) {
  const Config c = TinyConfig({"steps=2", "per_device_batch_size=2"});
  auto s = TrainingSession::Create(c);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Join(Join(4, 1), RunOptions{}).ok());
  ASSERT_TRUE((*s)->Run(RunOptions{}).ok());
  // fsdp 4 -> 2: the shards change; the state must come from elsewhere.
  EXPECT_EQ((*s)->Join(Join(4, 2, StateSource::kKeep, 2), RunOptions{}).code(), absl::StatusCode::kFailedPrecondition);
}

// A run of 15 steps on a global batch of 8 rows over `chips` devices (data
// `ici_data` x fsdp the rest), a row a micro-batch: 8 devices (data 2 x
// fsdp 4) take a row each, 4 (fsdp 4) two micro-batches, 1 eight micro-
// batches with nothing to reduce.
void RunOnEightRows(int chips, int ici_data, bool exact, SessionRun* out) {
  const Config c = TinyConfig(
      {"steps=15", "per_device_batch_size=1", exact ? "exact_gradient_sums=true" : "exact_gradient_sums=false"});
  auto session = TrainingSession::Create(c, 8);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Join(Join(chips, ici_data), RunOptions{}).ok());
  auto run = (*session)->Run(RunOptions{});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->steps.size(), 15u);
  *out = *run;
}

// Runs 8, 4 and 1 devices on the same 8 rows and expects the 4- and
// 1-device runs' grad norms and losses within `grad_rel` and `loss_rel`
// (relative) of the 8-device run's at every step; 0 is to the bit.
void ExpectOneModelAtEverySize(bool exact, double grad_rel, double loss_rel) {
  SessionRun eight, four, one;
  ASSERT_NO_FATAL_FAILURE(RunOnEightRows(8, 2, exact, &eight));
  ASSERT_NO_FATAL_FAILURE(RunOnEightRows(4, 1, exact, &four));
  ASSERT_NO_FATAL_FAILURE(RunOnEightRows(1, 1, exact, &one));
  for (const SessionRun* other : {&four, &one}) {
    for (size_t i = 0; i < eight.steps.size(); ++i) {
      const StepMetrics &want = eight.steps[i], &got = other->steps[i];
      EXPECT_NEAR(want.grad_norm, got.grad_norm, grad_rel * want.grad_norm) << "step " << i;
      EXPECT_NEAR(want.loss, got.loss, loss_rel * want.loss) << "step " << i;
    }
  }
}

TEST(TrainSessionTest, AFixedGlobalBatchSummedExactlyTrainsTheSameModelAtEverySize) {
  // The gradients are the same to the bit; only the reported loss is
  // summed in float, in another order.
  ExpectOneModelAtEverySize(/*exact=*/true, /*grad_rel=*/0, /*loss_rel=*/1e-6);
}

TEST(TrainSessionTest, MicroBatchesSummedInFloatTrainTheSameModelAsMoreDevices) {
  // Float sums in other orders: the same model within rounding. A
  // micro-batch left out of a block's sum, or a padded tail not zeroed,
  // moves the gradient by far more.
  ExpectOneModelAtEverySize(/*exact=*/false, /*grad_rel=*/1e-4, /*loss_rel=*/1e-4);
}

TEST(TrainSessionTest, InterruptEndsTheRunBrokenWithTheStateOfTheLastStep) {
  const Config c = TinyConfig({"steps=50", "per_device_batch_size=2"});
  auto s = TrainingSession::Create(c);
  ASSERT_TRUE(s.ok());
  RunOptions options;
  TrainingSession* session = s->get();
  options.commit = [&](const StepMetrics& m) {
    if (m.step == 3) session->Interrupt("test");
    return StepDecision::kApply;
  };
  ASSERT_TRUE(session->Join(Join(4, 1), options).ok());
  auto run = session->Run(options);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->end, SessionRun::kBroken);
  EXPECT_NE(run->error.find("test"), std::string::npos) << run->error;
  EXPECT_EQ(run->next_step, 4) << "step 3 was committed before the break showed";
  // Re-joined, it goes on from there.
  ASSERT_TRUE(session->Join(Join(4, 1, StateSource::kKeep, run->next_step), RunOptions{}).ok());
  auto rest = session->Run(RunOptions{});
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->end, SessionRun::kFinished);
  EXPECT_EQ(rest->steps.front().step, 4);
}

// Runs `procs` processes (threads with sessions of their own) of `chips`
// devices in `slices` slices; the grad norms of process 0.
std::vector<double> GradNorms(const Config& c, int procs, int slices, int chips, int port, int fsdp = 2, int tensor = 2,
                              int64_t gb = 8) {
  std::vector<std::unique_ptr<TrainingSession>> sessions;
  for (int p = 0; p < procs; ++p) sessions.push_back(*TrainingSession::Create(c, gb));
  std::vector<double> out;
  std::vector<std::thread> threads;
  for (int p = 0; p < procs; ++p) {
    threads.emplace_back([&, p] {
      JoinSpec j;
      j.env.coordinator_address = "127.0.0.1:" + std::to_string(port);
      j.env.process_id = p;
      j.env.num_processes = procs;
      j.env.slice_id = p / (procs / slices);
      j.env.num_slices = slices;
      j.env.chips_per_host = chips;
      j.parallelism.dcn_data = slices;
      j.parallelism.ici_fsdp = fsdp;
      j.parallelism.ici_tensor = tensor;
      EXPECT_TRUE(sessions[p]->Join(j, RunOptions{}).ok());
      auto r = sessions[p]->Run(RunOptions{});
      if (p == 0) {
        for (auto& m : r->steps) out.push_back(m.grad_norm);
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(TrainSessionTest, TwoSlicesAndOneTrainTheSameModel) {
  const Config c = TinyConfig({"steps=6", "per_device_batch_size=1", "exact_gradient_sums=true"});
  // fsdp across processes, tensor inside them; 2 slices against 1.
  std::vector<double> two = GradNorms(c, 4, 2, 2, 29411);
  std::vector<double> one = GradNorms(c, 2, 1, 2, 29412);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], two[i]) << "step " << i;
}

// fsdp over four processes (gloo reorders the parts it reduces there), one
// process of four devices, and two slices of four processes: one model.
TEST(TrainSessionTest, FsdpOverFourProcessesTrainsAsOneProcess) {
  const Config c = TinyConfig({"steps=4", "per_device_batch_size=1", "exact_gradient_sums=true"});
  std::vector<double> four = GradNorms(c, 4, 1, 1, 29415, 4, 1, 8);
  std::vector<double> one = GradNorms(c, 1, 1, 4, 29416, 4, 1, 8);
  std::vector<double> two_slices = GradNorms(c, 8, 2, 1, 29417, 4, 1, 8);
  ASSERT_EQ(four.size(), 4u);
  EXPECT_EQ(four, one);
  EXPECT_EQ(two_slices, one);
}
}  // namespace
}  // namespace manta::train
