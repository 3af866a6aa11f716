#include "sim/stmt_arena.h"

#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "sim/scenario.h"  // StmtList

namespace lockstep::sim {
namespace {

TEST_CASE("StmtArena: blocks front to back, aligned, none past its end") {
  StmtArena arena(100);  // rounded up to 2 MiB
  void* first = arena.allocate(10, 1);
  void* second = arena.allocate(16, 8);
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(first) % (uintptr_t{2} << 20) == 0);  // the huge page's start
  CHECK(static_cast<char*>(second) == static_cast<char*>(first) + 16);   // 10 bytes, aligned to 8
  CHECK(arena.owns(first));
  CHECK(arena.owns(static_cast<char*>(first) + (size_t{2} << 20) - 1));
  CHECK_FALSE(arena.owns(static_cast<char*>(first) + (size_t{2} << 20)));
  CHECK(arena.allocate(size_t{2} << 20, 8) == nullptr);  // full: the caller takes the heap
  CHECK(arena.allocate((size_t{2} << 20) - 32, 8) != nullptr);  // what is left still fits
  CHECK(arena.allocate(1, 1) == nullptr);
}

TEST_CASE("StmtArena: pages backed in the background while the arena is written, stopped by its end") {
  constexpr size_t bytes = size_t{16} << 20;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto resident_bytes = [&](char* start) {  // of the arena's first `bytes`
    std::vector<unsigned char> pages(bytes / page);
    if (::mincore(start, bytes, pages.data()) != 0) return size_t{0};
    return page * static_cast<size_t>(std::count_if(pages.begin(), pages.end(), [](unsigned char p) { return p & 1; }));
  };
  {
    StmtArena arena(bytes);
    auto* start = static_cast<char*>(arena.allocate(1, 1));
    REQUIRE(start != nullptr);
    CHECK(resident_bytes(start) == 0);  // nothing backed yet
    arena.populate_in_background();
    // Written at the front while the other thread backs pages: the writes land.
    for (int i = 1; i <= 4; ++i) static_cast<char*>(arena.allocate(4096, 4096))[0] = 7;
#ifdef MADV_POPULATE_WRITE
    // Every page is backed in the end, those far past the writes too: waited for by polling
    // (for up to 10 s), as nothing else says when the thread is done. (A kernel before 5.14
    // has no MADV_POPULATE_WRITE: there the thread does nothing, and neither does the check.)
    void* probe = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(probe != MAP_FAILED);
    const bool kernel_populates = ::madvise(probe, page, MADV_POPULATE_WRITE) == 0;
    ::munmap(probe, page);
    size_t backed = 0;
    for (int i = 0; kernel_populates && i < 2000 && backed < bytes; ++i) {
      backed = resident_bytes(start);
      if (backed < bytes) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK((backed == bytes || !kernel_populates));
#endif
    CHECK(start[4096] == 7);
    CHECK(start[4 * 4096] == 7);
    CHECK(start[bytes - 1] == 0);
  }
  {
    // Destroyed at once: the thread is stopped and joined before the memory goes.
    StmtArena arena(size_t{64} << 20);
    arena.populate_in_background();
  }
}

TEST_CASE("StmtList: an arena's vector grows past it into the heap, copies take the heap, moves keep the arena") {
  auto arena = std::make_shared<StmtArena>(sizeof(Stmt) * 4);  // one huge page: about 10,000
  StmtList body{StmtAllocator<Stmt>(arena)};
  body.reserve(8);
  CHECK(arena->owns(body.data()));
  for (int i = 0; i < 20'000; ++i) body.emplace_back().loc = {static_cast<uint32_t>(i + 1), 1};
  CHECK_FALSE(arena->owns(body.data()));  // grown past the arena's 2 MiB
  CHECK(body.back().loc.line == 20'000);

  StmtList small{StmtAllocator<Stmt>(arena)};
  small.emplace_back().loc = {7, 3};
  CHECK(arena->owns(small.data()));
  const StmtList copy = small;  // a copied scenario's thread
  CHECK(copy.get_allocator().arena() == nullptr);
  CHECK_FALSE(arena->owns(copy.data()));
  CHECK(copy.front().loc == SourceLoc{7, 3});
  StmtList moved = std::move(small);
  CHECK(moved.get_allocator().arena() == arena);
  CHECK(arena->owns(moved.data()));
  CHECK(moved.front().loc == SourceLoc{7, 3});
  // Every user holds the arena: it goes with the last of them.
  const std::weak_ptr<StmtArena> watch = arena;
  arena.reset();
  body = StmtList();
  moved = StmtList();
  small = StmtList();
  CHECK(watch.expired());
}

}  // namespace
}  // namespace lockstep::sim
