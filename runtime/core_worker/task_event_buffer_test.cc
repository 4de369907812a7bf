#include "runtime/core_worker/task_event_buffer.h"

#include <random>

#include "gtest/gtest.h"

namespace manta::core {
namespace {

rpc::TaskSpec Spec(const TaskId& id, int attempt = 0) {
  rpc::TaskSpec spec;
  spec.set_task_id(id.Binary());
  spec.set_job_id(JobId::FromRandom().Binary());
  spec.set_function_name("Add");
  spec.set_attempt(attempt);
  return spec;
}

// What the GCS does with events of one attempt, one at a time: later fields
// win, and the state only moves forward (an end is final unless a later end
// corrects it).
bool Terminal(rpc::TaskEvent::State s) { return s == rpc::TaskEvent::FINISHED || s == rpc::TaskEvent::FAILED; }
void GcsMerge(rpc::TaskEvent* held, const rpc::TaskEvent& event) {
  rpc::TaskEvent::State state = held->state();
  const bool advance = Terminal(event.state()) || (!Terminal(state) && event.state() >= state);
  if (!advance) {
    rpc::TaskEvent extra = event;
    extra.clear_state();
    extra.clear_timestamp_ms();
    held->MergeFrom(extra);
    held->set_state(state);
    return;
  }
  held->MergeFrom(event);
  held->set_state(event.state());
}

TEST(TaskEventBufferTest, AWithdrawnRecordIsNotSent) {
  google::protobuf::Arena arena;
  TaskEventBuffer buffer;
  TaskId done = TaskId::FromRandom(), still_running = TaskId::FromRandom();
  TaskEventBuffer::Ticket done_ticket, running_ticket;
  EXPECT_TRUE(buffer.Record(Spec(done), rpc::TaskEvent::RUNNING, nullptr, nullptr, nullptr, &done_ticket));
  EXPECT_FALSE(buffer.Record(Spec(still_running), rpc::TaskEvent::RUNNING, nullptr, nullptr, nullptr, &running_ticket));
  buffer.Withdraw(done_ticket);
  auto requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0]->events_size(), 1);
  EXPECT_EQ(requests[0]->events(0).task_id(), still_running.Binary());
  EXPECT_EQ(requests[0]->events(0).state(), rpc::TaskEvent::RUNNING);

  // Taken already: withdrawing it now drops nothing, not even the record
  // that took its place in the buffer.
  TaskId next = TaskId::FromRandom();
  EXPECT_TRUE(buffer.Record(Spec(next), rpc::TaskEvent::RUNNING, nullptr, nullptr, nullptr));
  buffer.Withdraw(running_ticket);
  requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0]->events_size(), 1);
  EXPECT_EQ(requests[0]->events(0).task_id(), next.Binary());

  // Only everything withdrawn: nothing to send.
  TaskEventBuffer::Ticket last;
  buffer.Record(Spec(TaskId::FromRandom()), rpc::TaskEvent::RUNNING, nullptr, nullptr, nullptr, &last);
  buffer.Withdraw(last);
  EXPECT_TRUE(buffer.Take(&arena).empty());
}

TEST(TaskEventBufferTest, AWithdrawnRecordLeavesTheAttemptsOtherRecords) {
  google::protobuf::Arena arena;
  TaskEventBuffer buffer;
  TaskId id = TaskId::FromRandom();
  TaskEventBuffer::Ticket ticket;
  buffer.Record(Spec(id), rpc::TaskEvent::RUNNING, nullptr, nullptr, nullptr, &ticket);
  rpc::ErrorInfo error;
  error.set_type(rpc::ErrorInfo::APPLICATION_ERROR);
  error.set_message("boom");
  buffer.Record(Spec(id), rpc::TaskEvent::FAILED, &error, nullptr, nullptr);
  buffer.Withdraw(ticket);
  auto requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0]->events_size(), 1);
  EXPECT_EQ(requests[0]->events(0).state(), rpc::TaskEvent::FAILED);
  EXPECT_EQ(requests[0]->events(0).error().message(), "boom");
}

TEST(TaskEventBufferTest, RecordsOfOneAttemptMergeIntoOneEvent) {
  google::protobuf::Arena arena;
  TaskEventBuffer buffer;
  TaskId id = TaskId::FromRandom();
  rpc::TaskSpec spec = Spec(id);
  (*spec.mutable_resources())["CPU"] = 1;
  WorkerId worker = WorkerId::FromRandom();
  NodeId node = NodeId::FromRandom();
  std::string worker_bin = worker.Binary(), node_bin = node.Binary();
  TaskEventBuffer::Location where{worker_bin, node_bin, 42};
  EXPECT_TRUE(
      buffer.Record(spec, rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, &where, TaskEventBuffer::ResourcesOf(spec)));
  EXPECT_FALSE(buffer.Record(spec, rpc::TaskEvent::FINISHED, nullptr, nullptr, nullptr));

  auto requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0]->events_size(), 1);
  const rpc::TaskEvent& e = requests[0]->events(0);
  EXPECT_EQ(e.task_id(), id.Binary());
  EXPECT_EQ(e.state(), rpc::TaskEvent::FINISHED);
  EXPECT_EQ(e.name(), "Add");
  EXPECT_EQ(e.worker_id(), worker_bin);
  EXPECT_EQ(e.node_id(), node_bin);
  EXPECT_EQ(e.worker_pid(), 42);
  EXPECT_EQ(e.resources().at("CPU"), 1);
  EXPECT_TRUE(buffer.Take(&arena).empty());
}

TEST(TaskEventBufferTest, ALateEarlierStateDoesNotUndoAFinishedOne) {
  google::protobuf::Arena arena;
  TaskEventBuffer buffer;
  rpc::TaskSpec spec = Spec(TaskId::FromRandom());
  rpc::ErrorInfo error;
  error.set_type(rpc::ErrorInfo::APPLICATION_ERROR);
  error.set_message("boom");
  std::string worker = WorkerId::FromRandom().Binary();
  TaskEventBuffer::Location where{worker, "", 7};
  buffer.Record(spec, rpc::TaskEvent::FAILED, &error, nullptr, nullptr);
  buffer.Record(spec, rpc::TaskEvent::RUNNING, nullptr, &where, nullptr);
  auto requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0]->events_size(), 1);
  const rpc::TaskEvent& e = requests[0]->events(0);
  EXPECT_EQ(e.state(), rpc::TaskEvent::FAILED);
  EXPECT_EQ(e.error().message(), "boom");
  EXPECT_EQ(e.worker_id(), worker);
  EXPECT_EQ(e.worker_pid(), 7);
  EXPECT_TRUE(e.node_id().empty());  // malformed ids are left out
}

TEST(TaskEventBufferTest, AttemptsStaySeparateInOrderOfFirstRecord) {
  google::protobuf::Arena arena;
  TaskEventBuffer buffer;
  TaskId a = TaskId::FromRandom(), b = TaskId::FromRandom();
  buffer.Record(Spec(a, 0), rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, nullptr, nullptr);
  buffer.Record(Spec(b, 0), rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, nullptr, nullptr);
  buffer.Record(Spec(a, 1), rpc::TaskEvent::SUBMITTED_TO_WORKER, nullptr, nullptr, nullptr);
  buffer.Record(Spec(a, 0), rpc::TaskEvent::FAILED, nullptr, nullptr, nullptr);
  auto requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0]->events_size(), 3);
  EXPECT_EQ(requests[0]->events(0).task_id(), a.Binary());
  EXPECT_EQ(requests[0]->events(0).attempt(), 0);
  EXPECT_EQ(requests[0]->events(0).state(), rpc::TaskEvent::FAILED);
  EXPECT_EQ(requests[0]->events(1).task_id(), b.Binary());
  EXPECT_EQ(requests[0]->events(2).task_id(), a.Binary());
  EXPECT_EQ(requests[0]->events(2).attempt(), 1);
  EXPECT_EQ(requests[0]->events(2).state(), rpc::TaskEvent::SUBMITTED_TO_WORKER);
}

TEST(TaskEventBufferTest, RequestsStayWithinTheGcsLimitAndMalformedTasksAreSkipped) {
  google::protobuf::Arena arena;
  TaskEventBuffer buffer;
  rpc::TaskSpec bad;
  bad.set_task_id("short");
  EXPECT_FALSE(buffer.Record(bad, rpc::TaskEvent::RUNNING, nullptr, nullptr, nullptr));
  const int n = TaskEventBuffer::kMaxEventsPerRequest * 2 + 5;
  for (int i = 0; i < n; ++i)
    buffer.Record(Spec(TaskId::FromRandom()), rpc::TaskEvent::RUNNING, nullptr, nullptr, nullptr);
  auto requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0]->events_size(), TaskEventBuffer::kMaxEventsPerRequest);
  EXPECT_EQ(requests[1]->events_size(), TaskEventBuffer::kMaxEventsPerRequest);
  EXPECT_EQ(requests[2]->events_size(), 5);
}

TEST(TaskEventBufferTest, LongNamesAndMessagesAreCutToWhatTheGcsTakes) {
  google::protobuf::Arena arena;
  TaskEventBuffer buffer;
  rpc::TaskSpec spec = Spec(TaskId::FromRandom());
  spec.set_function_name(std::string(5000, 'f'));
  rpc::ErrorInfo error;
  error.set_message(std::string(100 * 1024, 'm'));
  buffer.Record(spec, rpc::TaskEvent::FAILED, &error, nullptr, nullptr);
  auto requests = buffer.Take(&arena);
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]->events(0).name().size(), TaskEventBuffer::kMaxNameBytes);
  EXPECT_EQ(requests[0]->events(0).error().message().size(), TaskEventBuffer::kMaxErrorMessageBytes);
}

// Whatever the records and however they are split into batches, the GCS
// ends with the same event as it would from every record one by one.
TEST(TaskEventBufferTest, MergedBatchesLeaveTheGcsWithWhatSingleRecordsWould) {
  std::mt19937 rng(7);
  const rpc::TaskEvent::State states[] = {rpc::TaskEvent::SUBMITTED_TO_WORKER, rpc::TaskEvent::RUNNING,
                                          rpc::TaskEvent::FINISHED, rpc::TaskEvent::FAILED};
  std::string workers[] = {WorkerId::FromRandom().Binary(), WorkerId::FromRandom().Binary()};
  for (int round = 0; round < 200; ++round) {
    rpc::TaskSpec spec = Spec(TaskId::FromRandom());
    google::protobuf::Arena arena;
    TaskEventBuffer one_by_one, batched;
    rpc::TaskEvent expected, got;
    bool have_expected = false, have_got = false;
    auto fold = [](rpc::TaskEvent* held, bool* have, const rpc::TaskEvent& e) {
      if (!*have) {
        *held = e;
        *have = true;
      } else {
        GcsMerge(held, e);
      }
    };
    int records = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < records; ++i) {
      rpc::TaskEvent::State state = states[rng() % 4];
      TaskEventBuffer::Location where{workers[rng() % 2], "", static_cast<int>(rng() % 3)};
      rpc::ErrorInfo error;
      error.set_message("e" + std::to_string(i));
      const rpc::ErrorInfo* err = state == rpc::TaskEvent::FAILED ? &error : nullptr;
      const TaskEventBuffer::Location* at = rng() % 2 ? &where : nullptr;
      one_by_one.Record(spec, state, err, at, nullptr);
      for (auto* r : one_by_one.Take(&arena)) fold(&expected, &have_expected, r->events(0));
      batched.Record(spec, state, err, at, nullptr);
      if (rng() % 3 == 0) {
        for (auto* r : batched.Take(&arena)) fold(&got, &have_got, r->events(0));
      }
    }
    for (auto* r : batched.Take(&arena)) fold(&got, &have_got, r->events(0));
    // Timestamps differ between the two buffers by when they were taken.
    expected.clear_timestamp_ms();
    got.clear_timestamp_ms();
    EXPECT_EQ(expected.SerializeAsString(), got.SerializeAsString()) << "round " << round;
  }
}

}  // namespace
}  // namespace manta::core
