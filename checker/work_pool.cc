#include "checker/work_pool.h"

#include "checker/reduction/dpor.h"

namespace lockstep::checker {

bool WorkPool::wants_work() const {
  return waiting_.load(std::memory_order_relaxed) + remote_waiting_.load(std::memory_order_relaxed) >
             queued_.load(std::memory_order_relaxed) &&
         open_();
}

void WorkPool::set_remote_waiting(size_t n) { remote_waiting_.store(n, std::memory_order_relaxed); }

std::unique_ptr<Donation> WorkPool::take() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty()) return nullptr;
  std::unique_ptr<Donation> branch = std::move(queue_.front());
  queue_.pop_front();
  queued_ = queue_.size();
  return branch;
}

void WorkPool::give(std::unique_ptr<Donation> donation) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(donation));
    queued_ = queue_.size();
    ++generation_;
  }
  wake_.notify_all();
}

void WorkPool::notify() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
  }
  wake_.notify_all();
}

void WorkPool::wait_until(const std::function<bool()>& ready, int level) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // What ready() sees is at least as new as `seen`: a notify() after it wakes the wait below.
    const uint64_t seen = generation_;
    lock.unlock();
    if (ready()) return;
    lock.lock();
    if (!queue_.empty()) {
      std::unique_ptr<Donation> branch = std::move(queue_.front());
      queue_.pop_front();
      queued_ = queue_.size();
      lock.unlock();
      run_(std::move(branch), level + 1);
      lock.lock();
      continue;
    }
    ++waiting_;
    wake_.wait(lock, [&] { return generation_ != seen || !queue_.empty(); });
    --waiting_;
  }
}

void WorkPool::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (!queue_.empty()) {
      std::unique_ptr<Donation> branch = std::move(queue_.front());
      queue_.pop_front();
      queued_ = queue_.size();
      lock.unlock();
      run_(std::move(branch), 1);
      lock.lock();
      continue;
    }
    if (finished_) return;
    ++waiting_;
    wake_.wait(lock, [&] { return finished_ || !queue_.empty(); });
    --waiting_;
  }
}

void WorkPool::finish() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  wake_.notify_all();
}

}  // namespace lockstep::checker
