// `check --jobs N` with dpor: branches of one search handed, as they are found, to threads that
// have nothing to do (docs/semantics.md, "Parallel exploration"). A search that has work to
// spare gives a branch when a thread waits for one; a search that must wait for the branches it
// gave runs queued ones meanwhile.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace lockstep::checker {

struct Donation;

class WorkPool {
 public:
  // `run(donation, level)` explores a branch on the calling thread; `level` counts the searches
  // the thread is inside of (0: none), so that each level has an engine of its own.
  using Runner = std::function<void(std::unique_ptr<Donation>, int level)>;
  // Branches are given only once `open()` holds (it is asked often: make it cheap).
  WorkPool(Runner run, std::function<bool()> open) : run_(std::move(run)), open_(std::move(open)) {}

  // Whether a thread waits for a branch and none is queued.
  bool wants_work() const;
  void give(std::unique_ptr<Donation> donation);

  // A search inside `level` searches waits until `ready()` (called on this thread, without the
  // pool's lock), running queued branches meanwhile. Woken by give() and notify().
  void wait_until(const std::function<bool()>& ready, int level);
  // Something a waiting search may be waiting for has happened (a message was posted to it).
  void notify();

  // A thread with no search of its own: runs branches until finish().
  void serve();
  void finish();

  // check --mpi: `n` other processes wait for a branch (they count as waiting threads), and a
  // queued branch taken for one of them (null: none queued), or put back when its process was
  // lost.
  void set_remote_waiting(size_t n);
  std::unique_ptr<Donation> take();
  void put_back(std::unique_ptr<Donation> donation) { give(std::move(donation)); }

 private:
  Runner run_;
  std::function<bool()> open_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Donation>> queue_;
  // Threads in wake_.wait, and branches queued: written under the lock, read without it.
  std::atomic<size_t> waiting_{0};
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> remote_waiting_{0};
  uint64_t generation_ = 0;  // notify() calls
  bool finished_ = false;
};

}  // namespace lockstep::checker
