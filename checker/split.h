// `check --jobs N`: the top of the search tree cut into parts that threads explore apart and
// the checker merges in depth-first order (docs/semantics.md, "Parallel exploration").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "checker/search.h"
#include "sim/engine.h"

namespace lockstep::checker {

// One part: the executions whose schedule starts with `prefix`, without those that start, after
// it, with a step asleep in `sleep` (explored by an earlier part).
struct Part {
  std::vector<uint32_t> prefix;
  std::vector<SleepingOption> sleep;  // in the ids of EngineOptions::ids, shared by the engines
};

// Cuts the tree into at least `want` parts where it has that many within its first 6 choice
// points (fewer otherwise), in depth-first order, by probing executions of `engine` (not counted
// in any report). Every option of a choice point above the cut is a part of its own (the tree is
// expanded in full there); with `sleep_sets` (the engine reports footprints), an option asleep
// there, because an earlier part's first steps commute with it and start the same executions,
// is left out, and what is asleep where a part starts goes with it. Deterministic: the parts
// depend on the scenario and `want` only.
std::vector<Part> split_tree(sim::Engine& engine, size_t want, bool sleep_sets);

}  // namespace lockstep::checker
