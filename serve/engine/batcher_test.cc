// Continuous batching: requests batched together give what each gives
// alone, free slots are taken at the next step, and every request ends.
#include "serve/engine/batcher.h"

#include <map>
#include <random>

#include "gtest/gtest.h"
#include "serve/engine/tensor_group.h"
#include "serve/engine/test_util.h"

namespace manta::serve {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  absl::Status status = absl::UnknownError("not done");
  FinishReason reason = FinishReason::kError;
  bool done = false;
  int64_t first_token_step = -1;
};

GenerateRequest Request(std::vector<int32_t> prompt, int64_t max_tokens, Outcome* out, const Batcher* b = nullptr) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.on_token = [out, b](int32_t t) {
    if (out->tokens.empty() && b) out->first_token_step = b->steps();
    out->tokens.push_back(t);
  };
  r.on_done = [out](const absl::Status& s, FinishReason reason) {
    EXPECT_FALSE(out->done) << "on_done twice";
    out->status = s;
    out->reason = reason;
    out->done = true;
  };
  return r;
}

void Drain(Batcher& b) {
  for (int i = 0; i < 10000 && b.Step(); ++i) {
  }
}

std::vector<int32_t> Solo(const ServingWeights& w, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  Engine engine(w, {.slots = 1, .max_len = 96}, nullptr);
  Batcher b(&engine);
  Outcome out;
  b.Submit(Request(prompt, max_tokens, &out));
  Drain(b);
  EXPECT_TRUE(out.done && out.status.ok()) << out.status;
  return out.tokens;
}

TEST(BatcherTest, SixteenConcurrentRequestsEachGiveWhatTheyGiveAlone) {
  const ServingWeights w = TinyWeights(1, 0);
  std::mt19937 rng(4);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> lengths;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> p(1 + rng() % 40);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 256);
    prompts.push_back(p);
    lengths.push_back(1 + rng() % 30);
  }
  Engine engine(w, {.slots = 4, .max_len = 96}, nullptr);
  Batcher batcher(&engine);
  std::vector<Outcome> outs(16);
  for (int i = 0; i < 16; ++i) batcher.Submit(Request(prompts[i], lengths[i], &outs[i]));
  EXPECT_EQ(batcher.Backlog(), 16u);
  Drain(batcher);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(outs[i].done && outs[i].status.ok()) << i << ": " << outs[i].status;
    EXPECT_EQ(outs[i].reason, FinishReason::kLength);
    EXPECT_EQ(static_cast<int64_t>(outs[i].tokens.size()), lengths[i]);
    EXPECT_EQ(outs[i].tokens, Solo(w, prompts[i], lengths[i])) << "request " << i;
  }
  EXPECT_EQ(batcher.active(), 0);
  EXPECT_EQ(batcher.Backlog(), 0u);
}

TEST(BatcherTest, AFourRankGroupOnOneHostServesWhatOneEngineServes) {
  const ServingWeights one = TinyWeights(1, 0);
  std::vector<ServingWeights> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(TinyWeights(4, r));
  LocalTensorGroup group({&ranks[0], &ranks[1], &ranks[2], &ranks[3]}, {.slots = 3, .max_len = 64});
  Batcher batcher(&group);
  std::vector<Outcome> outs(6);
  for (int i = 0; i < 6; ++i) batcher.Submit(Request({int32_t(i), int32_t(2 * i + 1), 7}, 5 + i, &outs[i]));
  Drain(batcher);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status;
    EXPECT_EQ(outs[i].tokens, Solo(one, {int32_t(i), int32_t(2 * i + 1), 7}, 5 + i)) << i;
  }
}

TEST(BatcherTest, AFinishedSlotIsTakenAtTheNextStep) {
  const ServingWeights w = TinyWeights(1, 0);
  Engine engine(w, {.slots = 2, .max_len = 32}, nullptr);
  Batcher batcher(&engine, /*max_prefills_per_step=*/2);
  Outcome a, b, c;
  batcher.Submit(Request({1, 2}, 3, &a, &batcher));  // tokens at steps 1, 1, 2: done at step 2
  batcher.Submit(Request({3, 4}, 10, &b, &batcher));
  batcher.Submit(Request({5, 6}, 5, &c, &batcher));  // waits for a's slot
  for (int step = 1; step <= 2; ++step) ASSERT_TRUE(batcher.Step());
  EXPECT_TRUE(a.done);
  EXPECT_EQ(a.first_token_step, 1);
  EXPECT_EQ(b.first_token_step, 1);
  EXPECT_EQ(c.first_token_step, -1);
  EXPECT_EQ(batcher.active(), 1);
  ASSERT_TRUE(batcher.Step());
  EXPECT_EQ(c.first_token_step, 3);  // the step right after a finished
  EXPECT_EQ(batcher.active(), 2);
  Drain(batcher);
  EXPECT_TRUE(b.done && c.done);
}

TEST(BatcherTest, EndOfTextEndsTheOutputWithoutBeingEmitted) {
  const ServingWeights w = TinyWeights(1, 0);
  const std::vector<int32_t> prompt = {10, 20, 30};
  const std::vector<int32_t> full = Solo(w, prompt, 12);
  const int32_t eos = full[5];
  size_t cut = 0;
  while (full[cut] != eos) ++cut;
  Engine engine(w, {.slots = 2, .max_len = 96}, nullptr);
  Batcher batcher(&engine);
  Outcome out;
  GenerateRequest r = Request(prompt, 12, &out);
  r.eos_id = eos;
  batcher.Submit(std::move(r));
  Drain(batcher);
  ASSERT_TRUE(out.done && out.status.ok());
  EXPECT_EQ(out.reason, FinishReason::kEos);
  EXPECT_EQ(out.tokens, std::vector<int32_t>(full.begin(), full.begin() + cut));
}

TEST(BatcherTest, RequestsThatCannotFitEndAtOnce) {
  const ServingWeights w = TinyWeights(1, 0);
  Engine engine(w, {.slots = 1, .max_len = 8}, nullptr);
  Batcher batcher(&engine);
  std::map<std::string, Outcome> outs;
  batcher.Submit(Request({}, 2, &outs["empty"]));
  batcher.Submit(Request({1}, 0, &outs["zero"]));
  batcher.Submit(Request({1}, -5, &outs["negative"]));
  batcher.Submit(Request({1, 2, 3, 4, 5}, 4, &outs["too long"]));
  batcher.Submit(Request({1, 999}, 2, &outs["bad token"]));  // refused by the engine's prefill
  Drain(batcher);
  for (const auto& [name, out] : outs) {
    EXPECT_TRUE(out.done) << name;
    EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument) << name << ": " << out.status;
    EXPECT_TRUE(out.tokens.empty()) << name;
  }
  Outcome fine;
  batcher.Submit(Request({1, 2, 3, 4}, 4, &fine));  // exactly fills the 8 tokens
  Drain(batcher);
  EXPECT_TRUE(fine.status.ok()) << fine.status;
  EXPECT_EQ(fine.tokens.size(), 4u);
}

TEST(BatcherTest, FailAllEndsWaitingAndActiveRequestsAndFreesTheSlots) {
  const ServingWeights w = TinyWeights(1, 0);
  Engine engine(w, {.slots = 1, .max_len = 64}, nullptr);
  Batcher batcher(&engine);
  Outcome running, waiting;
  batcher.Submit(Request({1, 2}, 40, &running));
  batcher.Submit(Request({3}, 40, &waiting));
  ASSERT_TRUE(batcher.Step());
  batcher.FailAll(absl::UnavailableError("a worker died"));
  for (const Outcome* o : {&running, &waiting}) {
    EXPECT_TRUE(o->done);
    EXPECT_EQ(o->status.code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_FALSE(running.tokens.empty());
  EXPECT_EQ(batcher.active(), 0);
  EXPECT_FALSE(batcher.Step());
  Outcome after;
  batcher.Submit(Request({5}, 3, &after));
  Drain(batcher);
  EXPECT_TRUE(after.status.ok());
}

TEST(BatcherTest, ACancelledRequestEndsAndItsSlotIsTaken) {
  const ServingWeights w = TinyWeights(1, 0);
  Engine engine(w, {.slots = 1, .max_len = 64}, nullptr);
  Batcher batcher(&engine);
  bool gone = false;
  Outcome cancelled, next;
  GenerateRequest r = Request({1, 2}, 50, &cancelled);
  r.cancelled = [&gone] { return gone; };
  batcher.Submit(std::move(r));
  batcher.Submit(Request({3}, 2, &next));
  ASSERT_TRUE(batcher.Step());
  ASSERT_TRUE(batcher.Step());
  EXPECT_FALSE(cancelled.done);
  gone = true;
  Drain(batcher);
  EXPECT_EQ(cancelled.status.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(cancelled.tokens.size(), 50u);
  EXPECT_TRUE(next.status.ok());
  EXPECT_EQ(next.tokens.size(), 2u);
}

}  // namespace
}  // namespace manta::serve
