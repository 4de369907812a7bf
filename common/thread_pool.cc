#include "common/thread_pool.h"

#include <utility>

namespace manta {

ThreadPool::ThreadPool(int max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}

ThreadPool::~ThreadPool() { Stop(); }

bool ThreadPool::Submit(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(work));
  // Idle threads take queued work one piece each: a burst needs more threads
  // than are idle (an idle thread counts as idle until it wakes).
  if (static_cast<int>(queue_.size()) > idle_ && static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { Run(); });
  }
  return true;
}

void ThreadPool::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    mu_.Await(absl::Condition(this, &ThreadPool::HasWorkOrStopping));
    --idle_;
    if (queue_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    try {
      work();
    } catch (...) {
      mu_.Lock();  // the lock's guard releases it as the exception leaves
      throw;
    }
    work = nullptr;  // whatever it captured goes before the lock is taken again
    mu_.Lock();
  }
}

void ThreadPool::Stop(const std::function<void()>& before_join) {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    threads.swap(threads_);
  }
  if (before_join) before_join();
  for (std::thread& t : threads) t.join();
}

int ThreadPool::threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

}  // namespace manta
