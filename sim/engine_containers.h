// The engine's containers: vectors that keep their memory across executions (Recycled,
// InlineVector), the huge-page arrays that hold an execution's kernels (ChunkedArray), and a
// cache prefetch hint. Private to the engine (sim/engine*.cc).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>

namespace lockstep::sim::engine_detail {

// A vector that keeps its first N elements in place and allocates only past them: the short
// lists each rank and thread has (a stream's pending waits, a thread's waits, a rank's named
// streams) hold one or two elements. As std::vectors, their first use in an execution was an
// allocation each: with the vector of a rank's streams (StreamList), six per rank, the most of
// the per-rank cost that a loop of a few thousand events per rank noticed at 16,384 ranks
// (docs/engine-performance.md, item 11). clear() keeps an allocated buffer.
template <typename T, size_t N>
using InlineVector = boost::container::small_vector<T, N>;

// A vector whose elements outlive clear(): add() hands back a used element, with the memory it
// owns, for the caller to re-initialise. The checker runs millions of executions of one engine,
// and freeing and allocating every container of every execution anew was a sixth of its time.
template <typename T>
class Recycled {
 public:
  T& add() {
    if (size_ == items_.size()) items_.emplace_back();
    return items_[size_++];
  }
  void clear() { size_ = 0; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T& back() { return items_[size_ - 1]; }
  const T& back() const { return items_[size_ - 1]; }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }

 private:
  std::vector<T> items_;
  size_t size_ = 0;
};

// A hint to the cache that `address` is read soon. GCC 12 at -O3 emitted none of the
// __builtin_prefetch calls of Impl::prefetch_progress (the disassembly had no prefetch from
// it), so on x86-64 the instruction is volatile assembly, which the compiler keeps.
inline void prefetch(const void* address) {
#if defined(__x86_64__) && defined(__GNUC__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
#else
  __builtin_prefetch(address);
#endif
}

// The allocator of the per-execution arrays that grow with every issued op (kernels and their
// dependencies): hundreds of MiB on a large scenario, where a host issues its whole program
// before its first collective completes. Blocks of 2 MiB and more are mapped directly and
// marked for transparent huge pages, so that first touches fault once per 2 MiB instead of once
// per 4 KiB (the page faults were a fifth of the engine's time on a 1,024-rank loop).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t HUGE_BYTES = size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < HUGE_BYTES) return std::allocator<T>().allocate(n);
    void* block = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) throw std::bad_alloc();
    ::madvise(block, bytes, MADV_HUGEPAGE);  // advice only: without THP it is plain pages
    return static_cast<T*>(block);
  }
  void deallocate(T* block, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < HUGE_BYTES) {
      std::allocator<T>().deallocate(block, n);
      return;
    }
    ::munmap(block, bytes);
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

template <typename T>
using BigVector = std::vector<T, HugePageAllocator<T>>;

// The kernels of an execution, in fixed chunks of huge pages: growing never moves or copies
// them (a doubling vector touched twice the memory and copied it all), and clear() keeps the
// chunks, so the checker's later executions fault nothing in.
template <typename T>
class ChunkedArray {
 public:
  static constexpr uint32_t CHUNK_BITS = 14;  // 16,384 elements, ~2 MiB for a kernel
  static constexpr uint32_t CHUNK = 1u << CHUNK_BITS;

  T& operator[](size_t i) { return chunks_[i >> CHUNK_BITS][i & (CHUNK - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> CHUNK_BITS][i & (CHUNK - 1)]; }
  size_t size() const { return size_; }
  void clear() {
    for (BigVector<T>& chunk : chunks_) chunk.clear();
    size_ = 0;
  }
  T& emplace_back() {
    if ((size_ >> CHUNK_BITS) == chunks_.size()) {
      chunks_.emplace_back();
      chunks_.back().reserve(CHUNK);
    }
    ++size_;
    return chunks_[(size_ - 1) >> CHUNK_BITS].emplace_back();
  }
  void push_back(T&& value) { emplace_back() = std::move(value); }

  // A copy (checkpoints) into chunks reserved to CHUNK like any other, so that later growth never
  // moves the elements; chunks past the copy's are kept, empty. A copy that never grows (a
  // checkpoint's, after keep_exact()) reserves only what it holds: a 2 MiB chunk per checkpoint was
  // a huge page to fault in each.
  ChunkedArray() = default;
  ChunkedArray(const ChunkedArray& other) : growable_(other.growable_) { *this = other; }
  ChunkedArray& operator=(const ChunkedArray& other) {
    if (this == &other) return *this;
    for (size_t i = 0; i < other.chunks_.size(); ++i) {
      if (i == chunks_.size()) {
        chunks_.emplace_back();
        chunks_.back().reserve(growable_ ? CHUNK : other.chunks_[i].size());
      }
      chunks_[i].assign(other.chunks_[i].begin(), other.chunks_[i].end());
    }
    for (size_t i = other.chunks_.size(); i < chunks_.size(); ++i) chunks_[i].clear();
    size_ = other.size_;
    return *this;
  }
  void keep_exact() { growable_ = false; }

 private:
  std::vector<BigVector<T>> chunks_;  // all full but the last; reserved to CHUNK each (growable_)
  bool growable_ = true;              // kept by assignment, copied by construction
  size_t size_ = 0;
};

}  // namespace lockstep::sim::engine_detail
