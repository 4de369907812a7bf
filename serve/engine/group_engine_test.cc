// A tensor group across processes (here threads of the test process, each
// with its own communicator and gloo connections): the leader's output
// against one engine holding the whole model, a group left idle past the
// collectives' timeout, and a rank lost mid-call.
#include "serve/engine/group_engine.h"

#include <atomic>
#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "serve/engine/batcher.h"
#include "serve/engine/test_util.h"
#include "train/kernels/rendezvous.h"

namespace manta::serve {
namespace {

struct Process {
  train::DistributedEnv env;
  std::vector<ServingWeights> weights;
  std::unique_ptr<train::Communicator> comm;
  std::unique_ptr<GroupEngine> group;
};

// Starts `processes` processes of `tensor / processes` chips each; each
// thread joins, builds its GroupEngine, then runs `body(process)`.
void RunGroup(int processes, int tensor, const EngineOptions& options, absl::Duration timeout,
              const std::function<void(Process&)>& body) {
  auto port = train::PickCoordinatorPort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = "127.0.0.1:" + std::to_string(*port);
  std::vector<std::thread> threads;
  for (int p = 0; p < processes; ++p) {
    threads.emplace_back([&, p] {
      Process proc;
      proc.env.coordinator_address = address;
      proc.env.process_id = p;
      proc.env.num_processes = processes;
      proc.env.chips_per_host = tensor / processes;
      train::ParallelismConfig par;
      par.dcn_data = 1;
      par.ici_fsdp = 1;
      par.ici_tensor = tensor;
      auto mesh = train::Mesh::Create(par, proc.env);
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      auto comm = train::Communicator::Create(*mesh, proc.env, timeout);
      ASSERT_TRUE(comm.ok()) << comm.status();
      proc.comm = *std::move(comm);
      std::vector<const ServingWeights*> mine;
      for (int c = 0; c < proc.env.chips_per_host; ++c) {
        proc.weights.push_back(TinyWeights(tensor, proc.env.first_device() + c));
      }
      for (const auto& w : proc.weights) mine.push_back(&w);
      proc.group = std::make_unique<GroupEngine>(proc.comm.get(), proc.env.first_device(), mine, options);
      body(proc);
    });
  }
  for (auto& t : threads) t.join();
}

// Greedy decoding through a StepRunner: n tokens, and their logits.
std::vector<int32_t> GreedyThrough(StepRunner& runner, int slot, const std::vector<int32_t>& prompt, int n,
                                   std::vector<std::vector<float>>* logits) {
  const int64_t V = runner.vocab();
  std::vector<float> out(V);
  std::vector<int32_t> tokens;
  const absl::Status prefilled = runner.Prefill(slot, prompt, out.data());
  EXPECT_TRUE(prefilled.ok()) << prefilled;
  for (int i = 0; i < n; ++i) {
    logits->push_back(out);
    tokens.push_back(static_cast<int32_t>(std::max_element(out.begin(), out.end()) - out.begin()));
    if (i + 1 < n) {
      const absl::Status s = runner.Decode({slot}, {tokens.back()}, out.data());
      EXPECT_TRUE(s.ok()) << s;
    }
  }
  return tokens;
}

void ExpectTheGroupEqualsOneEngine(int processes, int tensor) {
  const EngineOptions options{.slots = 2, .max_len = 48};
  const std::vector<int32_t> prompt = {9, 8, 7, 6, 5, 4, 3};
  const ServingWeights one = TinyWeights(1, 0);
  Engine single(one, options, nullptr);
  std::vector<std::vector<float>> want_logits;
  const std::vector<int32_t> want = GreedyRun(single, 0, prompt, 10, &want_logits);
  RunGroup(processes, tensor, options, absl::Seconds(30), [&](Process& p) {
    if (p.group->leader() != nullptr) {
      std::vector<std::vector<float>> got_logits;
      EXPECT_EQ(GreedyThrough(*p.group->leader(), 1, prompt, 10, &got_logits), want);
      ASSERT_EQ(got_logits.size(), want_logits.size());
      for (size_t i = 0; i < got_logits.size(); ++i) ExpectClose(got_logits[i], want_logits[i], 1e-4f);
      p.group->leader()->Release(1);
      p.group->Stop();
    }
    EXPECT_TRUE(p.group->Wait().ok()) << p.group->Wait();
  });
}

TEST(GroupEngineTest, FourProcessesOfOneChipEqualOneEngine) { ExpectTheGroupEqualsOneEngine(4, 4); }

TEST(GroupEngineTest, TwoProcessesOfTwoChipsEqualOneEngine) { ExpectTheGroupEqualsOneEngine(2, 4); }

// The leader's no-ops keep an idle group inside the collectives' timeout.
TEST(GroupEngineTest, AnIdleGroupOutlivesTheCollectivesTimeout) {
  RunGroup(2, 2, {.slots = 1, .max_len = 16}, absl::Seconds(3), [&](Process& p) {
    if (p.group->leader() != nullptr) {
      absl::SleepFor(absl::Seconds(5));  // idle past the timeout: what is under test
      std::vector<float> logits(p.group->leader()->vocab());
      EXPECT_TRUE(p.group->leader()->Prefill(0, {1, 2, 3}, logits.data()).ok());
      p.group->Stop();
    }
    EXPECT_TRUE(p.group->Wait().ok()) << p.group->Wait();
  });
}

// A rank whose process goes away (its connections closed) fails the
// leader's next call at once with Unavailable, and every process's Wait
// says why.
TEST(GroupEngineTest, ALostRankFailsTheCallsAndBreaksTheGroup) {
  absl::Notification first_call_done, rank_gone;
  RunGroup(2, 2, {.slots = 1, .max_len = 16}, absl::Seconds(30), [&](Process& p) {
    if (p.group->leader() != nullptr) {
      std::vector<float> logits(p.group->leader()->vocab());
      EXPECT_TRUE(p.group->leader()->Prefill(0, {1, 2, 3}, logits.data()).ok());
      first_call_done.Notify();
      rank_gone.WaitForNotification();
      const absl::Status s = p.group->leader()->Decode({0}, {4}, logits.data());
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
      EXPECT_EQ(p.group->leader()->Prefill(0, {1}, logits.data()).code(), absl::StatusCode::kUnavailable);
    } else {
      first_call_done.WaitForNotification();
      p.comm->Abort("the host was killed");
      rank_gone.Notify();
    }
    EXPECT_FALSE(p.group->Wait().ok());
  });
}

// A token or id that the wire's floats cannot carry exactly is refused
// before anything is sent, so the group stays whole and serves on.
TEST(GroupEngineTest, ATokenOrIdTheWireCannotCarryIsRefusedAndTheGroupServesOn) {
  RunGroup(2, 2, {.slots = 1, .max_len = 16}, absl::Seconds(30), [&](Process& p) {
    if (p.group->leader() != nullptr) {
      StepRunner* leader = p.group->leader();
      std::vector<float> logits(leader->vocab());
      const int32_t too_big = int32_t{1} << 24;
      absl::Status s = leader->Prefill(0, {1, too_big, 3}, logits.data());
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      s = p.group->EnqueuePrefill(int64_t{1} << 44, {1, 2}, SamplingParams());
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      s = leader->Prefill(0, {1, 2, 3}, logits.data());
      EXPECT_TRUE(s.ok()) << s;
      s = leader->Decode({0}, {too_big + 1}, logits.data());
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      s = leader->Decode({0}, {4}, logits.data());
      EXPECT_TRUE(s.ok()) << s;
      leader->Release(0);
      p.group->Stop();
    }
    EXPECT_TRUE(p.group->Wait().ok()) << p.group->Wait();
  });
}

// Runs the prompts through a batcher over `runner` until all are done (every
// other one sampled with its own seed, the rest greedy); each one's tokens.
std::vector<std::vector<int32_t>> Serve(StepRunner* runner, const std::vector<std::vector<int32_t>>& prompts,
                                        const std::vector<int>& max_tokens) {
  std::vector<SamplingParams> sampling(prompts.size());
  for (size_t i = 0; i < prompts.size(); i += 2) sampling[i] = {.temperature = 0.9f, .top_k = 20, .seed = 100 + i};
  Batcher batcher(runner);
  std::vector<std::vector<int32_t>> out(prompts.size());
  int done = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateRequest r;
    r.prompt = prompts[i];
    r.max_tokens = max_tokens[i];
    r.sampling = sampling[i];
    r.on_token = [&out, i](int32_t t) { out[i].push_back(t); };
    r.on_done = [&done](const absl::Status& s, FinishReason) {
      EXPECT_TRUE(s.ok()) << s;
      ++done;
    };
    batcher.Submit(std::move(r));
  }
  while (done < static_cast<int>(prompts.size()) && batcher.Step()) {
  }
  EXPECT_EQ(done, static_cast<int>(prompts.size()));
  EXPECT_TRUE(batcher.runner_error().ok()) << batcher.runner_error();
  return out;
}

// Prefill on one slice, generate on the other (two processes of one chip
// each, tensor 2): each request gets what one engine serving them
// interleaved gives (sampled ones too: the prefill side draws the first
// token, the generate side the rest, with one seed), and the K/V bytes
// moved are the cache's formula for the prompts' true lengths.
TEST(GroupEngineTest, DisaggregatedServesWhatInterleavedServesAndMovesTheKvFormulaBytes) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int> max_tokens;
  int64_t prompt_tokens = 0;
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 3 + 4 * (i % 5); ++k) p.push_back((i * 37 + k * 11) % 250 + 1);
    prompt_tokens += static_cast<int64_t>(p.size());
    prompts.push_back(p);
    max_tokens.push_back(4 + 3 * (i % 4));
  }
  const ServingWeights one = TinyWeights(1, 0);
  Engine single(one, {.slots = 4, .max_len = 48}, nullptr);
  const std::vector<std::vector<int32_t>> want = Serve(&single, prompts, max_tokens);

  auto port = train::PickCoordinatorPort();
  ASSERT_TRUE(port.ok());
  const std::string address = "127.0.0.1:" + std::to_string(*port);
  std::atomic<GroupEngine*> prefill_leader{nullptr};
  absl::Notification prefill_ready, generate_done, prefill_stopped;
  std::atomic<int64_t> generate_bytes{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < 4; ++p) {
    threads.emplace_back([&, p] {
      train::DistributedEnv env;
      env.coordinator_address = address;
      env.process_id = p;
      env.num_processes = 4;
      env.num_slices = 2;
      env.slice_id = p / 2;
      env.chips_per_host = 1;
      train::ParallelismConfig par;
      par.dcn_data = 2;
      par.ici_fsdp = 1;
      par.ici_tensor = 2;
      auto mesh = train::Mesh::Create(par, env);
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      auto comm = train::Communicator::Create(*mesh, env, absl::Seconds(30));
      ASSERT_TRUE(comm.ok()) << comm.status();
      const ServingWeights w = TinyWeights(2, p % 2);
      GroupRole role;
      role.transfer_backlog = 2;
      const bool prefill = p < 2;
      role.kind = prefill ? GroupRole::kPrefill : GroupRole::kGenerate;
      role.send_prompt = [&](int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& sampling) {
        prefill_ready.WaitForNotification();
        return prefill_leader.load()->EnqueuePrefill(id, prompt, sampling);
      };
      EngineOptions options{.slots = prefill ? 1 : 4, .max_len = 48};
      GroupEngine group(comm->get(), env.first_device(), {&w}, options, role);
      if (p == 0) {
        prefill_leader = &group;
        prefill_ready.Notify();
      }
      if (p == 2) {
        EXPECT_EQ(Serve(group.leader(), prompts, max_tokens), want);
        generate_done.Notify();
      }
      if (p == 0) {
        generate_done.WaitForNotification();
        group.Stop();
        prefill_stopped.Notify();
      }
      if (p == 2) {
        prefill_stopped.WaitForNotification();
        group.Stop();
      }
      EXPECT_TRUE(group.Wait().ok()) << group.Wait();
      if (!prefill) generate_bytes += group.kv_bytes_moved();
      if (p == 0) {
        generate_done.WaitForNotification();
      }
    });
  }
  for (auto& t : threads) t.join();
  const train::ModelShape& m = one.shape();
  EXPECT_EQ(generate_bytes.load(),
            2 * m.num_layers * m.num_kv_heads * m.head_dim * prompt_tokens * static_cast<int64_t>(sizeof(float)));
}

}  // namespace
}  // namespace manta::serve
