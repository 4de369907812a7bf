#include "common/event_loop.h"

#include <uv.h>

#include "common/check.h"

namespace manta {
namespace {

void CloseAllHandles(uv_loop_t* loop) {
  uv_walk(
      loop,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, nullptr);
      },
      nullptr);
}

}  // namespace

class EventLoop::TimerImpl : public EventLoop::Timer {
 public:
  TimerImpl(uv_loop_t* loop, std::function<void()> fn) : fn_(std::move(fn)) {
    handle_ = new uv_timer_t;
    uv_timer_init(loop, handle_);
    handle_->data = this;
  }
  ~TimerImpl() override {
    uv_timer_stop(handle_);
    handle_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(handle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  }
  void Start(uint64_t delay_ms, uint64_t repeat_ms) {
    uv_timer_start(
        handle_,
        [](uv_timer_t* h) {
          auto* self = static_cast<TimerImpl*>(h->data);
          if (self == nullptr) return;
          // A copy: the callback may destroy its own timer.
          auto fn = self->fn_;
          fn();
        },
        delay_ms, repeat_ms);
  }

 private:
  uv_timer_t* handle_;
  std::function<void()> fn_;
};

struct EventLoop::SignalHandle {
  uv_signal_t handle;
  std::function<void()> fn;
};

EventLoop::EventLoop() {
  loop_ = new uv_loop_t;
  CHECK(uv_loop_init(loop_) == 0) << "uv_loop_init failed";
  async_ = new uv_async_t;
  uv_async_init(loop_, async_, &EventLoop::OnAsync);
  async_->data = this;
  mailbox_ = std::make_shared<Mailbox>();
  {
    absl::MutexLock lock(&mailbox_->mu_);
    mailbox_->async_ = async_;
  }
  thread_.BindToCurrentThread();
}

EventLoop::~EventLoop() {
  once_.clear();  // their handles close below
  // From here on a Post drops its closure. Those still queued are destroyed
  // unrun, outside the lock: their destructors may post.
  std::vector<std::function<void()>> unrun;
  {
    absl::MutexLock lock(&mailbox_->mu_);
    mailbox_->async_ = nullptr;
    unrun.swap(mailbox_->queue_);
  }
  unrun.clear();
  for (auto& s : signals_) {
    uv_signal_stop(&s->handle);
    uv_close(reinterpret_cast<uv_handle_t*>(&s->handle), nullptr);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(async_), nullptr);
  // No timer or watcher fires once the loop is being destroyed: a handle
  // still open (a timer whose owner never dropped it) is closed here, which
  // stops it. Its memory stays with its owner. Requests still in flight (a
  // worker log read on libuv's thread pool) are waited for, and their
  // callbacks run: they free what they own, and the thread pool must not
  // complete them into a freed loop. Every handle a callback opens meanwhile
  // is closed too. uv_loop_close then frees the loop's own allocations
  // (with a handle open or a request pending it fails with UV_EBUSY and
  // they leak).
  CloseAllHandles(loop_);
  while (uv_run(loop_, UV_RUN_ONCE) != 0) CloseAllHandles(loop_);
  uv_loop_close(loop_);
  delete async_;
  delete loop_;
}

void EventLoop::Mailbox::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (async_ == nullptr) return;
  queue_.push_back(std::move(fn));
  // Under the lock: the loop's destructor closes the handle only after
  // taking it, so it is open here.
  uv_async_send(async_);
}

bool EventLoop::IsInLoopThread() const { return thread_.CalledOnValidThread(); }

void EventLoop::OnAsync(uv_async_s* handle) { static_cast<EventLoop*>(handle->data)->Drain(); }

void EventLoop::Drain() {
  std::vector<std::function<void()>> batch;
  {
    absl::MutexLock lock(&mailbox_->mu_);
    batch.swap(mailbox_->queue_);
  }
  for (auto& fn : batch) fn();
}

std::unique_ptr<EventLoop::Timer> EventLoop::RunAfter(absl::Duration delay, std::function<void()> fn) {
  MANTA_CHECK_THREAD(thread_);
  auto t = std::make_unique<TimerImpl>(loop_, std::move(fn));
  t->Start(static_cast<uint64_t>(absl::ToInt64Milliseconds(delay)), 0);
  return t;
}

void EventLoop::RunOnce(absl::Duration delay, std::function<void()> fn) {
  MANTA_CHECK_THREAD(thread_);
  auto it = once_.emplace(once_.end());
  // The timer runs a copy of this closure, so erasing the timer first is safe.
  *it = RunAfter(delay, [this, it, fn = std::move(fn)] {
    once_.erase(it);
    fn();
  });
}

std::unique_ptr<EventLoop::Timer> EventLoop::RunEvery(absl::Duration period, std::function<void()> fn) {
  MANTA_CHECK_THREAD(thread_);
  auto ms = static_cast<uint64_t>(std::max<int64_t>(1, absl::ToInt64Milliseconds(period)));
  auto t = std::make_unique<TimerImpl>(loop_, std::move(fn));
  t->Start(ms, ms);
  return t;
}

void EventLoop::OnSignal(int signum, std::function<void()> fn) {
  MANTA_CHECK_THREAD(thread_);
  auto s = std::make_unique<SignalHandle>();
  s->fn = std::move(fn);
  uv_signal_init(loop_, &s->handle);
  s->handle.data = s.get();
  uv_signal_start(
      &s->handle, [](uv_signal_t* h, int) { static_cast<SignalHandle*>(h->data)->fn(); }, signum);
  signals_.push_back(std::move(s));
}

void EventLoop::Run() {
  thread_.BindToCurrentThread();
  uv_run(loop_, UV_RUN_DEFAULT);
}

void EventLoop::Stop() {
  Post([this] { uv_stop(loop_); });
}

}  // namespace manta
