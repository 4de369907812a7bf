#include "gcs/task_event_manager.h"

#include <map>

#include "common/id.h"
#include "gcs/test_util.h"
#include "gtest/gtest.h"

namespace manta::gcs {
namespace {

rpc::TaskEvent Event(const std::string& task, rpc::TaskEvent::State state, int64_t ts, int attempt = 0) {
  rpc::TaskEvent e;
  e.set_task_id(task);
  e.set_job_id(std::string("\0\0\0\1", 4));
  e.set_state(state);
  e.set_timestamp_ms(ts);
  e.set_attempt(attempt);
  return e;
}

absl::Status AddEvents(TaskEventManager& m, std::vector<rpc::TaskEvent> events) {
  rpc::AddTaskEventsRequest req;
  for (auto& e : events) *req.add_events() = e;
  rpc::AddTaskEventsReply reply;
  absl::Status result = absl::UnknownError("no reply");
  m.HandleAddTaskEvents(req, &reply, [&](const absl::Status& s) { result = s; });
  return result;
}

rpc::ListTasksReply List(TaskEventManager& m, const std::string& job = "", int limit = 0) {
  rpc::ListTasksRequest req;
  req.set_job_id(job);
  req.set_limit(limit);
  rpc::ListTasksReply reply;
  m.HandleListTasks(req, &reply, [](const absl::Status&) {});
  return reply;
}

class TaskEventManagerTest : public ::testing::Test {
 protected:
  EventLoop loop_;
  Publisher pub_{&loop_, "inc"};
};

TEST_F(TaskEventManagerTest, KeepsTheLatestStateAndMergesFields) {
  TaskEventManager m(&pub_);
  std::string t = TaskId::FromRandom().Binary();
  auto first = Event(t, rpc::TaskEvent::PENDING_NODE_ASSIGNMENT, 1);
  first.set_name("Add");
  (*first.mutable_resources())["CPU"] = 1;
  auto running = Event(t, rpc::TaskEvent::RUNNING, 2);
  running.set_worker_pid(42);
  ASSERT_TRUE(AddEvents(m, {first, running}).ok());
  ASSERT_TRUE(AddEvents(m, {Event(t, rpc::TaskEvent::FINISHED, 3)}).ok());
  // A late RUNNING must not undo FINISHED.
  ASSERT_TRUE(AddEvents(m, {Event(t, rpc::TaskEvent::RUNNING, 2)}).ok());
  auto reply = List(m);
  ASSERT_EQ(reply.tasks_size(), 1);
  EXPECT_EQ(reply.tasks(0).state(), rpc::TaskEvent::FINISHED);
  EXPECT_EQ(reply.tasks(0).name(), "Add");
  EXPECT_EQ(reply.tasks(0).worker_pid(), 42);
  EXPECT_EQ(reply.tasks(0).resources().at("CPU"), 1);
  // A retry is its own row.
  ASSERT_TRUE(AddEvents(m, {Event(t, rpc::TaskEvent::RUNNING, 4, 1)}).ok());
  EXPECT_EQ(List(m).tasks_size(), 2);
}

TEST_F(TaskEventManagerTest, ALateEventOnlyFillsWhatAnEndedRecordLacks) {
  TaskEventManager m(&pub_);
  std::string t = TaskId::FromRandom().Binary();
  auto finished = Event(t, rpc::TaskEvent::FINISHED, 5);
  finished.set_worker_pid(42);
  finished.set_node_id(std::string(NodeId::kSize, 'a'));
  m.Record(finished);
  // A stale worker's record of the same attempt (one a restarted GCS had
  // pushed to before): it names where it ran, and has the name.
  auto stale = Event(t, rpc::TaskEvent::RUNNING, 3);
  stale.set_worker_pid(7);
  stale.set_node_id(std::string(NodeId::kSize, 'b'));
  stale.set_name("Counter::Create");
  ASSERT_TRUE(AddEvents(m, {stale}).ok());
  auto reply = List(m);
  ASSERT_EQ(reply.tasks_size(), 1);
  EXPECT_EQ(reply.tasks(0).state(), rpc::TaskEvent::FINISHED);
  EXPECT_EQ(reply.tasks(0).worker_pid(), 42);
  EXPECT_EQ(reply.tasks(0).node_id(), std::string(NodeId::kSize, 'a'));
  EXPECT_EQ(reply.tasks(0).timestamp_ms(), 5);
  EXPECT_EQ(reply.tasks(0).name(), "Counter::Create");
}

TEST_F(TaskEventManagerTest, AnOwnersLateFlushDoesNotMoveARunningAttemptBack) {
  TaskEventManager m(&pub_);
  std::string t = TaskId::FromRandom().Binary();
  // The executor's flush of RUNNING lands first; the owner's, of the push
  // before it, second.
  auto running = Event(t, rpc::TaskEvent::RUNNING, 4);
  running.set_worker_pid(42);
  ASSERT_TRUE(AddEvents(m, {running}).ok());
  auto submitted = Event(t, rpc::TaskEvent::SUBMITTED_TO_WORKER, 3);
  submitted.set_name("Actor.call");
  submitted.set_worker_pid(7);
  (*submitted.mutable_resources())["CPU"] = 1;
  ASSERT_TRUE(AddEvents(m, {submitted, Event(t, rpc::TaskEvent::PENDING_ARGS_AVAIL, 1)}).ok());
  auto reply = List(m);
  ASSERT_EQ(reply.tasks_size(), 1);
  EXPECT_EQ(reply.tasks(0).state(), rpc::TaskEvent::RUNNING);
  EXPECT_EQ(reply.tasks(0).timestamp_ms(), 4);
  EXPECT_EQ(reply.tasks(0).worker_pid(), 42);
  EXPECT_EQ(reply.tasks(0).name(), "Actor.call");
  EXPECT_EQ(reply.tasks(0).resources().at("CPU"), 1);
  // The end still comes through.
  ASSERT_TRUE(AddEvents(m, {Event(t, rpc::TaskEvent::FINISHED, 5)}).ok());
  EXPECT_EQ(List(m).tasks(0).state(), rpc::TaskEvent::FINISHED);
}

TEST_F(TaskEventManagerTest, EvictsOldestFirstAndCountsDrops) {
  TaskEventManager m(&pub_, /*max_tasks=*/3);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(TaskId::FromRandom().Binary());
    ASSERT_TRUE(AddEvents(m, {Event(ids.back(), rpc::TaskEvent::RUNNING, i)}).ok());
  }
  auto reply = List(m);
  ASSERT_EQ(reply.tasks_size(), 3);
  EXPECT_EQ(reply.tasks(0).task_id(), ids[2]);
  EXPECT_EQ(reply.tasks(2).task_id(), ids[4]);
  EXPECT_EQ(reply.num_dropped(), 2);
  EXPECT_EQ(List(m, "", 2).tasks_size(), 2);
  EXPECT_EQ(List(m, "", 2).total(), 3);  // what is retained, before the limit
}

TEST_F(TaskEventManagerTest, FiltersByJob) {
  TaskEventManager m(&pub_);
  auto other = Event(TaskId::FromRandom().Binary(), rpc::TaskEvent::RUNNING, 1);
  other.set_job_id(std::string("\0\0\0\2", 4));
  ASSERT_TRUE(AddEvents(m, {Event(TaskId::FromRandom().Binary(), rpc::TaskEvent::RUNNING, 1), other}).ok());
  EXPECT_EQ(List(m, std::string("\0\0\0\2", 4)).tasks_size(), 1);
  EXPECT_EQ(List(m, std::string("\0\0\0\2", 4)).total(), 1);
  EXPECT_EQ(List(m).tasks_size(), 2);
  EXPECT_EQ(List(m, "", 1).total(), 2);
}

TEST_F(TaskEventManagerTest, WhatRanOnAGoneProcessEndsFailedUntilItsRealEndArrives) {
  TaskEventManager m(&pub_);
  auto on_actor = [](const std::string& task, rpc::TaskEvent::State state, const std::string& actor) {
    rpc::TaskEvent e = Event(task, state, 1);
    e.set_type(rpc::TaskSpec::ACTOR_TASK);
    e.set_actor_id(actor);
    return e;
  };
  const std::string a1 = ActorId::FromRandom().Binary(), a2 = ActorId::FromRandom().Binary();
  const std::string running = TaskId::FromRandom().Binary(), done = TaskId::FromRandom().Binary(),
                    other = TaskId::FromRandom().Binary();
  ASSERT_TRUE(AddEvents(m, {on_actor(running, rpc::TaskEvent::RUNNING, a1),
                            on_actor(done, rpc::TaskEvent::FINISHED, a1), on_actor(other, rpc::TaskEvent::RUNNING, a2)})
                  .ok());
  rpc::ErrorInfo died;
  died.set_type(rpc::ErrorInfo::ACTOR_DIED);
  died.set_message("killed");
  auto of_a1 = [&](const rpc::TaskEvent& t) { return t.actor_id() == a1; };
  EXPECT_EQ(m.FailUnfinished(of_a1, died), 1);
  EXPECT_EQ(m.FailUnfinished(of_a1, died), 0) << "an ended attempt is not ended again";
  std::map<std::string, rpc::TaskEvent> by_id;
  const rpc::ListTasksReply listed = List(m);
  for (const auto& t : listed.tasks()) by_id[t.task_id()] = t;
  EXPECT_EQ(by_id[running].state(), rpc::TaskEvent::FAILED);
  EXPECT_EQ(by_id[running].error().type(), rpc::ErrorInfo::ACTOR_DIED);
  EXPECT_EQ(by_id[done].state(), rpc::TaskEvent::FINISHED);
  EXPECT_FALSE(by_id[done].has_error());
  EXPECT_EQ(by_id[other].state(), rpc::TaskEvent::RUNNING);
  // The task's own end, late, is the truth.
  ASSERT_TRUE(AddEvents(m, {on_actor(running, rpc::TaskEvent::FINISHED, a1)}).ok());
  const rpc::ListTasksReply after = List(m);
  for (const auto& t : after.tasks()) {
    if (t.task_id() == running) {
      EXPECT_EQ(t.state(), rpc::TaskEvent::FINISHED);
    }
  }
}

TEST_F(TaskEventManagerTest, RejectsMalformedBatchesWhole) {
  TaskEventManager m(&pub_);
  auto bad = Event("short", rpc::TaskEvent::RUNNING, 1);
  EXPECT_EQ(AddEvents(m, {Event(TaskId::FromRandom().Binary(), rpc::TaskEvent::RUNNING, 1), bad}).code(),
            absl::StatusCode::kInvalidArgument);
  auto neg = Event(TaskId::FromRandom().Binary(), rpc::TaskEvent::RUNNING, 1);
  (*neg.mutable_resources())["CPU"] = -1;
  EXPECT_EQ(AddEvents(m, {neg}).code(), absl::StatusCode::kInvalidArgument);
  auto state = Event(TaskId::FromRandom().Binary(), static_cast<rpc::TaskEvent::State>(99), 1);
  EXPECT_EQ(AddEvents(m, {state}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.num_tasks(), 0u);
}

TEST_F(TaskEventManagerTest, PublishesLogsKeyedByJobWithinLimits) {
  TaskEventManager m(&pub_);
  rpc::PublishLogsRequest req;
  req.mutable_batch()->set_job_id(std::string("\0\0\0\7", 4));
  req.mutable_batch()->add_lines("hello");
  rpc::PublishLogsReply reply;
  absl::Status result = absl::UnknownError("");
  m.HandlePublishLogs(req, &reply, [&](const absl::Status& s) { result = s; });
  ASSERT_TRUE(result.ok());
  rpc::PollRequest poll;
  poll.add_keys(std::string("\0\0\0\7", 4));
  rpc::PollReply got;
  pub_.HandlePoll(poll, &got, [](const absl::Status&) {});
  got = AsReceived(got);
  ASSERT_EQ(got.messages_size(), 1);
  EXPECT_EQ(got.messages(0).channel(), rpc::PubMessage::LOGS);
  EXPECT_EQ(got.messages(0).log_batch().lines(0), "hello");

  req.mutable_batch()->add_lines(std::string(TaskEventManager::kMaxLogBatchBytes, 'x'));
  m.HandlePublishLogs(req, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
  req.mutable_batch()->set_job_id("bad");
  m.HandlePublishLogs(req, &reply, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pub_.last_sequence(), 1);
}

}  // namespace
}  // namespace manta::gcs
