#include "sim/stmt_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

namespace lockstep::sim {

namespace {
constexpr size_t HUGE_PAGE_BYTES = size_t{2} << 20;
}  // namespace

StmtArena::StmtArena(size_t bytes) {
  if (bytes == 0) return;
  size_ = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
  // One huge page more, to start on a 2 MiB boundary: a huge page backs only an aligned 2 MiB.
  mapping_bytes_ = size_ + HUGE_PAGE_BYTES;
  mapping_ = ::mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping_ == MAP_FAILED) {  // no arena: every allocation goes to the heap
    mapping_ = nullptr;
    size_ = 0;
    return;
  }
  const auto start = reinterpret_cast<uintptr_t>(mapping_);
  base_ = reinterpret_cast<char*>((start + HUGE_PAGE_BYTES - 1) & ~(uintptr_t{HUGE_PAGE_BYTES} - 1));
#ifdef MADV_HUGEPAGE
  ::madvise(base_, size_, MADV_HUGEPAGE);  // advice only: without THP it is plain pages
#endif
}

struct StmtArena::Populator {
  std::atomic<bool> stop = false;
  std::thread thread;
};

StmtArena::~StmtArena() {
  if (populator_ != nullptr) {
    populator_->stop.store(true, std::memory_order_relaxed);
    populator_->thread.join();
  }
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

void StmtArena::populate_in_background() {
  if (base_ == nullptr || populator_ != nullptr) return;
  populator_ = std::make_unique<Populator>();
  populator_->thread = std::thread([base = base_, size = size_, populator = populator_.get()] {
    for (size_t done = 0; done < size && !populator->stop.load(std::memory_order_relaxed);
         done += HUGE_PAGE_BYTES) {
      if (!populate_pages(base + done, HUGE_PAGE_BYTES)) return;
    }
  });
}

void* StmtArena::allocate(size_t bytes, size_t align) {
  size_t used = used_.load(std::memory_order_relaxed);
  size_t start = 0;
  do {
    start = (used + align - 1) / align * align;
    if (start > size_ || size_ - start < bytes) return nullptr;
  } while (!used_.compare_exchange_weak(used, start + bytes, std::memory_order_relaxed));
  return base_ + start;
}

bool populate_pages(void* data, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(page - 1);
  return end <= begin || ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
#else
  static_cast<void>(data);
  static_cast<void>(bytes);
  return false;
#endif
}

}  // namespace lockstep::sim
