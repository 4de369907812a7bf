#include "raylet/log_forwarder.h"

#include <fcntl.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "raylet/raylet_log.h"
#include "common/utf8.h"

namespace manta::raylet {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

}  // namespace

// One file being followed. Owned by tails_ until closed; a tail closed while
// its open or a read is in flight is orphaned (owner null) and freed by that
// request's callback.
struct LogForwarder::Tail {
  LogForwarder* owner = nullptr;
  StreamKey key;
  JobId job;
  int pid = 0;
  std::string path;
  int fd = -1;  // -1 until the open is answered
  int64_t offset = 0;
  uint64_t reads = 0;   // reads started
  std::string partial;  // bytes after the last newline
  uv_fs_event_t* watch = nullptr;
  uv_fs_t req;
  char buf[kReadChunk];
  bool reading = false;  // req is in flight: the open, then a read
  bool dirty = false;    // changed while a read was in flight
  bool closing = false;  // the worker exited: read to the end, then close
};

LogForwarder::LogForwarder(LogForwarderOptions options, EventLoop* loop, Publish publish)
    : options_(std::move(options)), loop_(loop), publish_(std::move(publish)) {}

LogForwarder::~LogForwarder() {
  flush_timer_.reset();
  auto flushes = std::exchange(job_flushes_, {});
  while (!tails_.empty()) Close(tails_.begin()->second.get());
  for (auto& f : flushes) f.done();
}

void LogForwarder::AddWorker(const WorkerLogFiles& files) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (bool is_error : {false, true}) {
    auto tail = std::make_unique<Tail>();
    tail->owner = this;
    tail->key = {files.worker_id, is_error};
    tail->job = files.job_id;
    tail->pid = files.pid;
    tail->path = is_error ? files.err_path : files.out_path;
    tail->req.data = tail.get();
    // Opened on libuv's thread pool: a slow disk must not stall the loop.
    // Until the open is answered the tail counts as reading, so a read,
    // a flush or the worker's exit asked for meanwhile waits for it.
    tail->reading = true;
    int r = uv_fs_open(loop_->uv_loop(), &tail->req, tail->path.c_str(), O_RDONLY | O_CLOEXEC, 0, [](uv_fs_t* req) {
      auto* t = static_cast<Tail*>(req->data);
      const ssize_t result = req->result;
      uv_fs_req_cleanup(req);
      t->reading = false;
      if (result >= 0) t->fd = static_cast<int>(result);
      if (t->owner == nullptr) {  // closed while opening
        if (t->fd >= 0) ::close(t->fd);
        delete t;
        return;
      }
      t->owner->OnOpened(t, result);
    });
    if (r != 0) {
      Log()->warn("cannot follow worker log {}: {}", tail->path, uv_strerror(r));
      continue;
    }
    tails_[tail->key] = std::move(tail);
  }
}

void LogForwarder::OnOpened(Tail* tail, ssize_t result) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (result < 0) {
    Log()->warn("cannot follow worker log {}: {}", tail->path, uv_strerror(static_cast<int>(result)));
    Close(tail);  // which meets the flushes waiting for it
    return;
  }
  tail->watch = new uv_fs_event_t;
  uv_fs_event_init(loop_->uv_loop(), tail->watch);
  tail->watch->data = tail;
  int r = uv_fs_event_start(
      tail->watch,
      [](uv_fs_event_t* h, const char*, int, int) {
        auto* t = static_cast<Tail*>(h->data);
        if (t != nullptr && t->owner != nullptr) t->owner->Read(t);
      },
      tail->path.c_str(), 0);
  if (r != 0) Log()->warn("cannot watch worker log {}: {}", tail->path, uv_strerror(r));
  Read(tail);  // anything written before the watch started, and what was asked meanwhile
}

void LogForwarder::SetName(const WorkerId& worker, const std::string& name) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  names_[worker] = name;
}

void LogForwarder::RemoveWorker(const WorkerId& worker) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  for (bool is_error : {false, true}) {
    auto it = tails_.find({worker, is_error});
    if (it == tails_.end()) continue;
    it->second->closing = true;
    Read(it->second.get());
  }
}

void LogForwarder::Read(Tail* tail) {
  if (tail->reading) {
    tail->dirty = true;
    return;
  }
  tail->reading = true;
  tail->dirty = false;
  ++tail->reads;
  uv_buf_t b = uv_buf_init(tail->buf, sizeof(tail->buf));
  int r = uv_fs_read(loop_->uv_loop(), &tail->req, tail->fd, &b, 1, tail->offset, [](uv_fs_t* req) {
    auto* t = static_cast<Tail*>(req->data);
    ssize_t result = req->result;
    uv_fs_req_cleanup(req);
    t->reading = false;
    if (t->owner == nullptr) {
      if (t->fd >= 0) ::close(t->fd);
      delete t;
      return;
    }
    t->owner->OnRead(t, result);
  });
  if (r != 0) {
    tail->reading = false;
    Log()->warn("cannot read worker log {}: {}", tail->path, uv_strerror(r));
    if (MeetFlushes(tail->key, tail->reads, /*stuck=*/true)) CheckJobFlushes();
    if (tail->closing) Close(tail);
  }
}

void LogForwarder::OnRead(Tail* tail, ssize_t result) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  if (result < 0) {
    Log()->warn("cannot read worker log {}: {}", tail->path, uv_strerror(static_cast<int>(result)));
    if (MeetFlushes(tail->key, tail->reads, /*stuck=*/true)) CheckJobFlushes();
    if (tail->closing) Close(tail);
    return;
  }
  tail->offset += result;
  tail->partial.append(tail->buf, static_cast<size_t>(result));
  TakeLines(tail, false);
  // A short read found the end of the file as it was then.
  const bool at_end = static_cast<size_t>(result) < sizeof(tail->buf);
  if (at_end && !tail->closing && MeetFlushes(tail->key, tail->reads, /*stuck=*/false)) {
    TakeLines(tail, /*final=*/true);  // a driver is exiting: its unterminated last line too
    CheckJobFlushes();
  }
  if (!at_end || tail->dirty) return Read(tail);
  if (tail->closing) {
    TakeLines(tail, true);
    Close(tail);  // which meets the flushes waiting for it
  }
}

void LogForwarder::FlushJob(const JobId& job, std::function<void()> done) {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  JobFlush& f = job_flushes_.emplace_back();
  f.done = std::move(done);
  std::vector<Tail*> tails;
  for (auto& [key, tail] : tails_) {
    if (tail->job != job) continue;
    f.unread[key] = tail->reads + 1;  // the next read, or the one a busy tail starts after
    tails.push_back(tail.get());
  }
  for (Tail* tail : tails) Read(tail);
  CheckJobFlushes();
}

bool LogForwarder::MeetFlushes(const StreamKey& key, uint64_t reads, bool stuck) {
  bool any = false;
  for (auto& f : job_flushes_) {
    auto it = f.unread.find(key);
    if (it == f.unread.end()) continue;
    // The read that found the end began after the flush was asked for, or
    // no read will follow.
    if (!stuck && reads < it->second) continue;
    f.unread.erase(it);
    any = true;
  }
  return any;
}

void LogForwarder::CheckJobFlushes() {
  std::vector<std::function<void()>> done;
  // No flush starts before the last one is answered: with nothing on the
  // wire, every batch of a forwarded flush has been answered.
  auto answer_forwarded = [&] {
    if (!outbox_.empty()) return;
    for (auto it = job_flushes_.begin(); it != job_flushes_.end();) {
      if (!it->forwarded) {
        ++it;
        continue;
      }
      done.push_back(std::move(it->done));
      it = job_flushes_.erase(it);
    }
  };
  answer_forwarded();
  auto read = [](const JobFlush& f) { return !f.forwarded && f.unread.empty(); };
  if (std::any_of(job_flushes_.begin(), job_flushes_.end(), read) && Flush()) {
    for (auto& f : job_flushes_) f.forwarded |= read(f);
    answer_forwarded();  // nothing was held
  }
  for (auto& d : done) d();
}

void LogForwarder::TakeLines(Tail* tail, bool final) {
  Pending& p = pending_[tail->key];
  p.job = tail->job;
  p.pid = tail->pid;
  p.is_error = tail->key.second;
  size_t before = p.lines.size() + static_cast<size_t>(p.dropped);
  // Workers print any bytes; lines travel as protobuf strings, which must
  // be UTF-8 or the GCS refuses the whole batch.
  auto add = [&](std::string_view raw) {
    std::string line = ValidUtf8(raw);
    if (p.bytes + line.size() > options_.max_pending_bytes) {
      ++p.dropped;
      return;
    }
    p.bytes += line.size();
    p.lines.push_back(std::move(line));
  };
  const std::string_view text = tail->partial;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    add(text.substr(start, nl - start));
  }
  tail->partial.erase(0, start);
  while (tail->partial.size() > options_.max_line_bytes) {
    // Split between characters where there is a boundary to split at.
    size_t cut = Utf8Prefix(tail->partial, options_.max_line_bytes).size();
    if (cut == 0) cut = options_.max_line_bytes;
    add(std::string_view(tail->partial).substr(0, cut));
    tail->partial.erase(0, cut);
  }
  if (final && !tail->partial.empty()) add(std::exchange(tail->partial, ""));
  if (p.lines.size() + static_cast<size_t>(p.dropped) > before) {
    ScheduleFlush();
  } else if (p.lines.empty() && p.dropped == 0) {
    pending_.erase(tail->key);
  }
}

void LogForwarder::Close(Tail* tail) {
  auto it = tails_.find(tail->key);
  if (it == tails_.end()) return;
  const StreamKey key = tail->key;
  std::unique_ptr<Tail> owned = std::move(it->second);
  tails_.erase(it);
  if (tail->watch != nullptr) {
    uv_fs_event_stop(tail->watch);
    tail->watch->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(tail->watch),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_fs_event_t*>(h); });
    tail->watch = nullptr;
  }
  if (tail->reading) {
    tail->owner = nullptr;
    owned.release();  // freed by the read's callback
  } else {
    if (tail->fd >= 0) ::close(tail->fd);
    owned.reset();
  }
  // Last, with the tail gone: the flushes this meets may finish.
  if (MeetFlushes(key, 0, /*stuck=*/true)) CheckJobFlushes();
}

void LogForwarder::ScheduleFlush() {
  if (flush_timer_) return;
  absl::Duration wait = std::max(absl::ZeroDuration(), last_flush_ + options_.flush_interval - absl::Now());
  flush_timer_ = loop_->RunAfter(wait, [this] { Flush(); });
}

void LogForwarder::SendFront() {
  // The answer is taken on the loop, never from within publish_.
  publish_(std::move(outbox_.front()), [self = std::weak_ptr<LogForwarder*>(self_), loop = loop_] {
    loop->Post([self] {
      if (auto alive = self.lock()) (*alive)->OnAnswer();
    });
  });
}

void LogForwarder::OnAnswer() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  outbox_.pop_front();
  if (!outbox_.empty()) return SendFront();
  // Lines that came while the flush was on the wire.
  if (!pending_.empty()) ScheduleFlush();
  CheckJobFlushes();
}

bool LogForwarder::Flush() {
  MANTA_CHECK_THREAD(loop_->thread_checker());
  flush_timer_.reset();
  // One flush on the wire at a time, its batches one by one: the GCS takes
  // them in order, and while it is slow, lines wait in pending_ (where
  // max_pending_bytes bounds them).
  if (!outbox_.empty()) return false;
  last_flush_ = absl::Now();
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& entry : pending) {
    const auto& key = entry.first;
    auto& p = entry.second;  // a plain reference: lambdas below capture it (C++17)
    if (p.dropped > 0) {
      p.lines.push_back(
          absl::StrCat("[manta: ", p.dropped, " lines dropped: output came faster than it could be forwarded]"));
    }
    auto name = names_.find(key.first);
    rpc::LogBatch batch;
    size_t bytes = 0;
    auto start = [&] {
      batch.Clear();
      bytes = 0;
      batch.set_job_id(p.job.Binary());
      batch.set_ip(options_.node_ip);
      batch.set_pid(p.pid);
      batch.set_is_error(p.is_error);
      if (name != names_.end()) batch.set_actor_name(name->second);
    };
    start();
    for (std::string& line : p.lines) {
      if (bytes > 0 && bytes + line.size() > options_.max_batch_bytes) {
        outbox_.push_back(std::move(batch));
        start();
      }
      bytes += line.size() + 1;
      batch.add_lines(std::move(line));
    }
    if (batch.lines_size() > 0) outbox_.push_back(std::move(batch));
  }
  for (auto it = names_.begin(); it != names_.end();) {
    bool live = tails_.count({it->first, false}) || tails_.count({it->first, true});
    it = live ? std::next(it) : names_.erase(it);
  }
  if (!outbox_.empty()) SendFront();
  return true;
}

}  // namespace manta::raylet
