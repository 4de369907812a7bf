#include "raylet/lease_queue.h"

#include "gtest/gtest.h"
#include "raylet/test_util.h"

namespace manta::raylet {
namespace {

using testing::Set;
using Verdict = LeaseQueue::Verdict;

class LeaseQueueTest : public ::testing::Test {
 protected:
  LeaseQueue::Handle Push(const std::string& key, const std::map<std::string, double>& demand, const std::string& id) {
    LeaseQueue::Handle h = queue_.Push({key, Set(demand), "worker"}, next_seq_++, id);
    handles_[id] = h;
    return h;
  }
  // Parks every ready shape as blocked; their heads, in the order Front()
  // gave them.
  std::vector<std::string> ParkReady() {
    std::vector<std::string> heads;
    while (LeaseQueue::Shape* s = queue_.Front()) {
      heads.push_back(s->head().id);
      queue_.Park(s, Verdict::kBlocked);
    }
    return heads;
  }
  std::function<bool(const ResourceSet&)> FitsIn(const std::map<std::string, double>& available) {
    return [a = Set(available)](const ResourceSet& d) { return a.Contains(d); };
  }

  LeaseQueue queue_;
  uint64_t next_seq_ = 1;
  std::map<std::string, LeaseQueue::Handle> handles_;
};

TEST_F(LeaseQueueTest, HeadsComeInArrivalOrderAcrossShapes) {
  Push("cpu2", {{"CPU", 2}}, "a1");
  Push("tpu", {{"TPU", 1}}, "b1");
  Push("cpu2", {{"CPU", 2}}, "a2");
  EXPECT_EQ(queue_.size(), 3u);
  EXPECT_EQ(queue_.num_shapes(), 2u);
  EXPECT_EQ(ParkReady(), std::vector<std::string>({"a1", "b1"}));
  // a1 leaves: its shape's next lease (a2) now comes after b1.
  queue_.Remove(handles_["a1"]);
  EXPECT_EQ(queue_.Front(), nullptr) << "leaving wakes nothing";
  queue_.WakeAll();
  EXPECT_EQ(ParkReady(), std::vector<std::string>({"b1", "a2"}));
}

TEST_F(LeaseQueueTest, FifoWithinAShapeWhateverLeavesFirst) {
  for (const char* id : {"l1", "l2", "l3", "l4"}) Push("cpu", {{"CPU", 1}}, id);
  queue_.Remove(handles_["l3"]);  // cancelled from the middle
  std::vector<std::string> order;
  while (LeaseQueue::Shape* s = queue_.Front()) {
    order.push_back(s->head().id);
    queue_.Remove(handles_[s->head().id]);
  }
  EXPECT_EQ(order, std::vector<std::string>({"l1", "l2", "l4"}));
  EXPECT_EQ(queue_.size(), 0u);
  EXPECT_EQ(queue_.num_shapes(), 0u) << "an empty shape is forgotten";
}

TEST_F(LeaseQueueTest, ALeaseJoiningAParkedShapeDoesNotWakeIt) {
  Push("cpu", {{"CPU", 4}}, "a");
  ParkReady();
  Push("cpu", {{"CPU", 4}}, "b");
  EXPECT_EQ(queue_.Front(), nullptr);
  Push("new", {{"CPU", 1}}, "c");
  ASSERT_NE(queue_.Front(), nullptr);
  EXPECT_EQ(queue_.Front()->head().id, "c") << "a new shape starts ready";
}

TEST_F(LeaseQueueTest, AFreedResourceWakesExactlyTheBlockedShapesThatFitAndUseIt) {
  Push("cpu1", {{"CPU", 1}}, "cpu1");
  Push("cpu3", {{"CPU", 3}}, "cpu3");
  Push("tpu", {{"TPU", 1}}, "tpu");
  Push("cpu_mem", {{"CPU", 1}, {"memory", 100}}, "cpu_mem");
  Push("never", {{"GPU", 1}}, "never");
  while (LeaseQueue::Shape* s = queue_.Front()) {
    queue_.Park(s, s->spec().key == "never" ? Verdict::kInfeasible : Verdict::kBlocked);
  }
  // One CPU comes back: the TPU shape does not use it, the 3-CPU shape does
  // not fit, and an infeasible shape is not woken by room.
  EXPECT_EQ(queue_.WakeFreed(Set({{"CPU", 1}}), FitsIn({{"CPU", 1}, {"memory", 1000}})), 2u);
  EXPECT_EQ(ParkReady(), std::vector<std::string>({"cpu1", "cpu_mem"}));
  // Memory alone: only the shape that demands it, and only while it fits.
  EXPECT_EQ(queue_.WakeFreed(Set({{"memory", 50}}), FitsIn({{"memory", 50}})), 0u);
  EXPECT_EQ(queue_.WakeFreed(Set({{"memory", 50}}), FitsIn({{"CPU", 1}, {"memory", 100}})), 1u);
  EXPECT_EQ(ParkReady(), std::vector<std::string>({"cpu_mem"}));
  // Both names at once wake a shape once; WakeAll wakes the rest.
  EXPECT_EQ(queue_.WakeFreed(Set({{"CPU", 1}, {"memory", 100}}), FitsIn({{"CPU", 1}, {"memory", 100}})), 2u);
  ParkReady();
  queue_.WakeAll();
  EXPECT_EQ(ParkReady(), std::vector<std::string>({"cpu1", "cpu3", "tpu", "cpu_mem", "never"}));
}

TEST_F(LeaseQueueTest, CountsDemandsAndTellsOnlyRealChanges) {
  EXPECT_FALSE(queue_.TakeDemandsChanged());
  Push("a", {{"CPU", 1}}, "a1");
  Push("a_other_job", {{"CPU", 1}}, "a2");  // same demand, another shape
  Push("g", {{"GPU", 1}}, "g1");
  while (LeaseQueue::Shape* s = queue_.Front()) {
    queue_.Park(s, s->spec().key == "g" ? Verdict::kInfeasible : Verdict::kBlocked);
  }
  EXPECT_TRUE(queue_.TakeDemandsChanged());
  LeaseQueue::DemandCounts counts = queue_.Demands();
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts.at({{"CPU", 1}}), std::make_pair(int64_t{2}, int64_t{0}));
  EXPECT_EQ(counts.at({{"GPU", 1}}), std::make_pair(int64_t{0}, int64_t{1}));
  // A lease that comes and goes between two looks is no change.
  LeaseQueue::Handle h = Push("g", {{"GPU", 1}}, "g2");
  queue_.Remove(h);
  EXPECT_FALSE(queue_.TakeDemandsChanged());
  // Nor is a shape woken and parked again the same way.
  queue_.WakeAll();
  while (LeaseQueue::Shape* s = queue_.Front()) {
    queue_.Park(s, s->spec().key == "g" ? Verdict::kInfeasible : Verdict::kBlocked);
  }
  EXPECT_FALSE(queue_.TakeDemandsChanged());
  queue_.Remove(handles_["g1"]);
  EXPECT_TRUE(queue_.TakeDemandsChanged());
  EXPECT_EQ(queue_.Demands().size(), 1u);
}

}  // namespace
}  // namespace manta::raylet
