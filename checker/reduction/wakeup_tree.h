// Wakeup trees (Abdulla et al., "Source Sets: A Foundation for Optimal Dynamic Partial Order
// Reduction", JACM 2017): at each state of the search, the sequences of steps still to explore
// from it, as a tree whose branches start with different steps. A race found later inserts the
// sequence that reverses it unless a branch already leads to an equivalent execution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/strategy.h"

namespace lockstep::checker {

// A step as the reduction compares it with others: its identity (Option::key), its footprint,
// and whether it is dependent with every step (an option never taken, whose footprint is not
// known; or one that aborts a rank with unfinished kernels).
struct StepRef {
  sim::Option option;
  std::span<const sim::Touch> footprint;
  bool universal = false;
};

// Whether two steps of different actors may not commute.
bool dependent(const StepRef& a, const StepRef& b);

// A step of a sequence about to be inserted: a step of one execution, with its index there and
// what the engine says it happened after (its (actor, index) pairs), so that the order within
// the sequence is known (a step that made a later one possible must stay before it).
struct SequenceStep {
  StepRef step;
  uint32_t index = 0;
  std::span<const uint32_t> after;
};

// Whether `step` (asleep at the state where `w` would start) is a weak initial of `w`: some
// execution equivalent to w, or extending it, starts with it (so w needs no exploring there).
bool weak_initial(const StepRef& step, std::span<const SequenceStep> w);

// Whether `step` is an initial of `w`: a step of w that no earlier step of w must come before.
// Every execution that extends w has an equivalent that starts with it (so, asleep where w
// would start, it covers them all), which a weak initial that is not in w need not have.
bool initial(const StepRef& step, std::span<const SequenceStep> w);

class WakeupTrees {
 public:
  using NodeId = uint32_t;
  static constexpr NodeId NONE = UINT32_MAX;

  // A tree is the list of its roots' ids (the branches, in order).
  using Roots = std::vector<NodeId>;

  const sim::Option& option(NodeId n) const { return nodes_[n].option; }
  StepRef step(NodeId n) const { return {nodes_[n].option, nodes_[n].footprint, nodes_[n].universal}; }
  const std::vector<NodeId>& children(NodeId n) const { return nodes_[n].children; }

  // A new root (a branch of one step) at the end of `roots`.
  NodeId add_root(Roots& roots, const StepRef& step);
  // A new child of `parent`, after its others.
  NodeId add_child(NodeId parent, const StepRef& step);
  // Inserts `w` below `roots` (ODPOR's insert): leaves the tree as it is when a branch already
  // leads to an execution equivalent to w or extending it.
  void insert(Roots& roots, std::vector<SequenceStep> w);
  // Removes root `n` from `roots` and hands back its children (the subtree below it) in `out`;
  // frees n.
  void take(Roots& roots, NodeId n, Roots& out);
  // Frees every node of the trees in `roots`, and empties it.
  void release(Roots& roots);

  size_t live_nodes() const { return nodes_.size() - free_.size(); }

 private:
  struct Node {
    sim::Option option;
    std::vector<sim::Touch> footprint;
    bool universal = false;
    std::vector<NodeId> children;
  };
  NodeId make(const StepRef& step);
  void append_chain(Roots& roots, NodeId parent, std::span<const SequenceStep> w);

  std::vector<Node> nodes_;
  std::vector<NodeId> free_;
};

}  // namespace lockstep::checker
