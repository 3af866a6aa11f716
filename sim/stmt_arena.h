// Memory for a large recorded scenario's statements (StmtArena) and the allocator that takes
// from it (StmtAllocator): what sim/scenario.h's StmtList is built on.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>

namespace lockstep::sim {

// Memory for the statements of a large recorded scenario: one mapping, marked for transparent
// huge pages, handed out front to back and given back whole when its last user goes. A
// recorded op is a 200-byte Stmt, and backing a million of them by 4 KiB pages (allocating,
// charging and zeroing each page, then freeing it) would be most of a trace's load time; by 2 MiB
// pages it is a small part (docs/trace-format.md, "How a trace is read, and how fast").
class StmtArena {
 public:
  explicit StmtArena(size_t bytes);  // maps `bytes` rounded up to 2 MiB (no page backed yet)
  ~StmtArena();
  StmtArena(const StmtArena&) = delete;
  StmtArena& operator=(const StmtArena&) = delete;

  // `bytes` at `align`, or null when the arena is full (the caller allocates elsewhere). Safe
  // from several threads at once (recorded threads make their statements on first use).
  void* allocate(size_t bytes, size_t align);
  bool owns(const void* block) const {
    const auto* b = static_cast<const char*>(block);
    return b >= base_ && b < base_ + size_;
  }
  // Backs the whole arena on a thread of its own, front to back, a huge page at a time, while
  // the caller goes on writing it: the kernel's clearing of the pages (most of the system time
  // of a large trace's load) runs beside the caller's work instead of inside its first writes.
  // A page the caller reaches first it backs itself, as without. The destructor stops the
  // thread (after the page it is on) and joins it. Without MADV_POPULATE_WRITE the thread ends
  // at its first page (populate_pages).
  void populate_in_background();

 private:
  struct Populator;

  char* base_ = nullptr;  // 2 MiB aligned
  size_t size_ = 0;
  std::atomic<size_t> used_ = 0;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  std::unique_ptr<Populator> populator_;  // populate_in_background's thread, joined by the destructor
};

// Asks the kernel to back the whole pages of [data, data + bytes) now, in one call, instead of
// one page fault per page as they are first written (a hint; nothing changes where the kernel
// lacks MADV_POPULATE_WRITE, and then it returns false).
bool populate_pages(void* data, size_t bytes);

// The allocator of a thread's statements: from a StmtArena when it has one (the trace loader's
// threads), else from the heap. A copy of the vector (a copied scenario) takes the heap; what
// is freed inside the arena is given back with the arena.
template <typename T>
class StmtAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  StmtAllocator() = default;
  explicit StmtAllocator(std::shared_ptr<StmtArena> arena) : arena_(std::move(arena)) {}
  // Copied, never moved: an allocator keeps its value when moved from (the standard's rule).
  StmtAllocator(const StmtAllocator&) = default;
  StmtAllocator& operator=(const StmtAllocator&) = default;
  ~StmtAllocator() = default;
  template <typename U>
  StmtAllocator(const StmtAllocator<U>& other) : arena_(other.arena()) {}  // NOLINT(google-explicit-constructor)

  T* allocate(size_t n) {
    if (arena_ != nullptr) {
      if (void* block = arena_->allocate(n * sizeof(T), alignof(T))) return static_cast<T*>(block);
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* block, size_t n) {
    if (arena_ != nullptr && arena_->owns(block)) return;
    std::allocator<T>().deallocate(block, n);
  }
  StmtAllocator select_on_container_copy_construction() const { return StmtAllocator(); }
  const std::shared_ptr<StmtArena>& arena() const { return arena_; }
  friend bool operator==(const StmtAllocator& a, const StmtAllocator& b) { return a.arena_ == b.arena_; }

 private:
  std::shared_ptr<StmtArena> arena_;
};

}  // namespace lockstep::sim
