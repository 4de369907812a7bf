#include "runtime/core_worker/child_tasks.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "manta/internal/core_worker.h"

namespace manta::core {
namespace {

ChildTasks::Child Normal() { return ChildTasks::Child{TaskId::FromRandom(), ActorId()}; }

class ChildTasksTest : public ::testing::Test {
 protected:
  std::set<TaskId> ended_;
  ChildTasks children_{[this](const ChildTasks::Child& c) { return ended_.count(c.task) == 0; }};
};

TEST_F(ChildTasksTest, AChildSubmittedFromATasksThreadIsItsUntilTheTaskEnds) {
  TaskId parent = TaskId::FromRandom();
  TaskId other = TaskId::FromRandom();
  children_.Begin(parent);
  children_.Begin(other);
  TaskContext context;
  context.task_id = parent;
  ChildTasks::Child child = Normal();
  ChildTasks::Child call{TaskId::FromRandom(), ActorId::FromRandom()};
  {
    ScopedTaskContext scope(&context);
    std::optional<ChildTasks::Added> added = children_.AddFromCurrent(child);
    ASSERT_TRUE(added.has_value());
    EXPECT_EQ(added->parent, parent);
    EXPECT_FALSE(added->cancel);
    ASSERT_TRUE(children_.AddFromCurrent(call).has_value());
  }
  EXPECT_EQ(children_.NumChildren(parent), 2u);
  EXPECT_EQ(children_.NumChildren(other), 0u);
  children_.End(parent);
  EXPECT_EQ(children_.NumChildren(parent), 0u);
  EXPECT_FALSE(children_.Add(parent, Normal()).has_value());
  EXPECT_TRUE(children_.Take(parent, false).empty());
  // A task that does not run here has no children.
  ScopedTaskContext scope(&context);
  EXPECT_FALSE(children_.AddFromCurrent(Normal()).has_value());
}

TEST_F(ChildTasksTest, ARecursiveCancelTakesTheChildrenAndCancelsTheOnesAfter) {
  TaskId parent = TaskId::FromRandom();
  children_.Begin(parent);
  ChildTasks::Child child = Normal();
  ChildTasks::Child call{TaskId::FromRandom(), ActorId::FromRandom()};
  ASSERT_TRUE(children_.Add(parent, child).has_value());
  ASSERT_TRUE(children_.Add(parent, call).has_value());
  std::vector<ChildTasks::Child> taken = children_.Take(parent, /*force=*/true);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].task, child.task);
  EXPECT_TRUE(taken[0].actor.IsNil());
  EXPECT_EQ(taken[1].actor, call.actor);
  // Submitted after (or while) the cancel ran: to be cancelled at once, as
  // forced as the parent's was.
  std::optional<ChildTasks::Added> late = children_.Add(parent, Normal());
  ASSERT_TRUE(late.has_value());
  EXPECT_TRUE(late->cancel);
  EXPECT_TRUE(late->force);
  EXPECT_EQ(children_.NumChildren(parent), 0u);
  EXPECT_TRUE(children_.Take(parent, false).empty());
}

TEST_F(ChildTasksTest, AThreadRunningNoTaskSubmitsForTheOnlyTaskRunning) {
  EXPECT_FALSE(children_.AddFromCurrent(Normal()).has_value());  // a driver: none runs
  TaskId only = TaskId::FromRandom();
  children_.Begin(only);
  std::optional<TaskId> parent;
  std::thread([&] { parent = children_.CurrentParent(); }).join();
  EXPECT_EQ(parent, only);
  children_.Begin(TaskId::FromRandom());  // two run: whose it is is unknown
  std::thread([&] { parent = children_.CurrentParent(); }).join();
  EXPECT_EQ(parent, std::nullopt);
}

TEST_F(ChildTasksTest, ALongListShedsTheChildrenThatEndedEachTimeItDoubles) {
  TaskId parent = TaskId::FromRandom();
  children_.Begin(parent);
  std::vector<ChildTasks::Child> first;
  for (size_t i = 0; i + 1 < ChildTasks::kFirstCompaction; ++i) {
    first.push_back(Normal());
    ASSERT_TRUE(children_.Add(parent, first.back()).has_value());
  }
  for (size_t i = 0; i + 10 < first.size(); ++i) ended_.insert(first[i].task);
  EXPECT_EQ(children_.NumChildren(parent), ChildTasks::kFirstCompaction - 1);
  ASSERT_TRUE(children_.Add(parent, Normal()).has_value());  // reaches the threshold
  EXPECT_EQ(children_.NumChildren(parent), 11u);             // ten still pending, and the new one
  std::vector<ChildTasks::Child> taken = children_.Take(parent, false);
  EXPECT_EQ(taken.front().task, first[first.size() - 10].task);
}

}  // namespace
}  // namespace manta::core
