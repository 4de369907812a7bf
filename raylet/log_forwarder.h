// LogForwarder: streams workers' stdout and stderr files to the GCS.
//
// Owns one tail per worker log file. Each file is opened on libuv's thread
// pool (the loop never waits on the disk) and then watched with inotify
// (uv_fs_event); a change triggers an asynchronous read (libuv's thread
// pool) from the last offset. Complete lines are batched per worker and
// stream and published at most once per flush interval while output
// arrives; when the worker exits the rest of its files, including a last
// unterminated line, is sent and the tails are closed. An idle forwarder
// arms no timer and reads nothing. Output beyond max_pending_bytes per
// stream between two flushes is dropped and counted in a note line.
// FlushJob is the barrier a driver needs before it exits: every file of the
// job is read to its end and forwarded at once, and the answer comes when
// the GCS has taken all of it.
// Thread: the raylet's loop thread.
//
//   LogForwarder logs({.node_ip = ip}, &loop,
//                     [&](rpc::LogBatch b, std::function<void()> answered) { gcs.PublishLogs(...); });
//   logs.AddWorker(files);          // when the pool spawns a worker
//   logs.SetName(worker, "Counter"); // when it becomes an actor
//   logs.RemoveWorker(worker);      // when it exits
//   logs.FlushJob(job, [] { ... }); // a driver is about to exit
#pragma once

#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/id.h"
#include "proto/common.pb.h"
#include "raylet/worker_pool.h"

namespace manta::raylet {

struct LogForwarderOptions {
  std::string node_ip = "127.0.0.1";
  absl::Duration flush_interval = absl::Milliseconds(100);
  size_t max_batch_bytes = 256 * 1024;
  size_t max_pending_bytes = 4 * 1024 * 1024;
  size_t max_line_bytes = 64 * 1024;  // longer lines are split
};

class LogForwarder {
 public:
  // Sends a batch on; `answered` runs once the send has succeeded or failed
  // (it may run at once).
  using Publish = std::function<void(rpc::LogBatch, std::function<void()> answered)>;

  LogForwarder(LogForwarderOptions options, EventLoop* loop, Publish publish);
  ~LogForwarder();

  // Starts tailing both files of a worker from their beginning: the pool
  // calls this right after creating them.
  void AddWorker(const WorkerLogFiles& files);
  // The name used in the driver's prefix ("Counter").
  void SetName(const WorkerId& worker, const std::string& name);
  // The worker exited: sends what is left and closes its tails.
  void RemoveWorker(const WorkerId& worker);
  // Reads the files of `job`'s workers to their current end, forwards every
  // line held, and calls `done` once each batch forwarded so far has been
  // answered. A line the file ends with unterminated is forwarded too.
  // Calls still waiting when the forwarder is destroyed are done then.
  // `done` may run from within any call of the forwarder and must not call
  // into it.
  void FlushJob(const JobId& job, std::function<void()> done);

  size_t num_tails() const { return tails_.size(); }
  bool flush_armed() const { return flush_timer_ != nullptr; }
  size_t num_job_flushes() const { return job_flushes_.size(); }

 private:
  struct Tail;
  struct Pending {
    JobId job;
    int pid = 0;
    bool is_error = false;
    std::vector<std::string> lines;
    size_t bytes = 0;
    int64_t dropped = 0;
  };
  using StreamKey = std::pair<WorkerId, bool>;  // worker, is_error
  struct JobFlush {
    // Tails still to read to their end, each with the first read that
    // counts: one started after the flush was asked for.
    std::map<StreamKey, uint64_t> unread;
    bool forwarded = false;  // its lines are on the wire, or were
    std::function<void()> done;
  };

  void OnOpened(Tail* tail, ssize_t result);
  void Read(Tail* tail);
  void OnRead(Tail* tail, ssize_t result);
  void TakeLines(Tail* tail, bool final);
  void Close(Tail* tail);
  // A read of a tail (`reads`: its number) found the end of the file, or
  // (`stuck`) no read will follow: closed, or the file cannot be read.
  // Takes the tail off the flushes this meets; true if there were any.
  bool MeetFlushes(const StreamKey& key, uint64_t reads, bool stuck);
  void ScheduleFlush();
  // Turns the pending lines into batches and starts sending them; false
  // (and nothing done) while the previous flush is still being sent.
  bool Flush();
  void SendFront();
  void OnAnswer();
  // Forwards the flushes whose tails are read, and answers those whose
  // batches have all been answered.
  void CheckJobFlushes();

  const LogForwarderOptions options_;
  EventLoop* const loop_;
  const Publish publish_;
  std::map<StreamKey, std::unique_ptr<Tail>> tails_;
  std::map<StreamKey, Pending> pending_;
  std::map<WorkerId, std::string> names_;
  std::unique_ptr<EventLoop::Timer> flush_timer_;
  absl::Time last_flush_ = absl::InfinitePast();
  std::list<JobFlush> job_flushes_;
  // The batches of the last flush not yet answered; the first is on the wire.
  std::deque<rpc::LogBatch> outbox_;
  // Answers that come after the forwarder is gone find this expired.
  std::shared_ptr<LogForwarder*> self_ = std::make_shared<LogForwarder*>(this);
};

}  // namespace manta::raylet
