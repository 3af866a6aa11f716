// `check --jobs N` with dfs: the top of the search tree cut into parts that threads explore
// apart and the checker merges in depth-first order (docs/semantics.md, "Parallel exploration").
// (dpor gives work away as it goes instead: checker/work_pool.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/engine.h"

namespace lockstep::checker {

// One part: the executions whose schedule starts with `prefix` and, where `bound` is not empty,
// is not after `bound` in depth-first order (a part whose later executions were given to
// others; SearchOptions::bound).
struct Part {
  std::vector<uint32_t> prefix;
  std::vector<uint32_t> bound;
};

// Cuts the tree into at least `want` parts where it has that many within its first 6 choice
// points (fewer otherwise), in depth-first order, by probing executions of `engine` (not counted
// in any report). Every option of a choice point above the cut is a part of its own.
// Deterministic: the parts depend on the scenario and `want` only.
std::vector<Part> split_tree(sim::Engine& engine, size_t want);

}  // namespace lockstep::checker
