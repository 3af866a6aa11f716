#include "checker/reduction/wakeup_tree.h"

#include <algorithm>

#include "checker/reduction/execution.h"

namespace lockstep::checker {

bool dependent(const StepRef& a, const StepRef& b) {
  if (a.option.actor == b.option.actor) return true;
  if (a.universal || b.universal) return true;
  return footprints_conflict(a.footprint, b.footprint);
}

namespace {

// Whether the earlier step x of a sequence must stay before the later y: they conflict, or the
// engine says y happened after x (x made it possible).
bool ordered(const SequenceStep& x, const SequenceStep& y) {
  if (dependent(x.step, y.step)) return true;
  const uint32_t actor = x.step.option.actor;
  for (size_t i = 0; i + 1 < y.after.size(); i += 2) {
    if (y.after[i] == actor) return y.after[i + 1] >= x.index;
    if (y.after[i] > actor) break;
  }
  return false;
}

// The position in w of the step of `step`'s actor when it is an initial of w (no earlier step
// of w must come before it) and it is that very step; w.size() otherwise.
size_t initial_position(const StepRef& step, std::span<const SequenceStep> w) {
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i].step.option.actor != step.option.actor) continue;
    if (w[i].step.option.key() != step.option.key()) return w.size();  // another branch of a choose
    for (size_t k = 0; k < i; ++k) {
      if (ordered(w[k], w[i])) return w.size();
    }
    return i;
  }
  return w.size();
}

// Whether the step commutes with every step of w (its actor takes no step in w).
bool independent_of_all(const StepRef& step, std::span<const SequenceStep> w) {
  return std::none_of(w.begin(), w.end(), [&](const SequenceStep& s) { return dependent(step, s.step); });
}

}  // namespace

bool weak_initial(const StepRef& step, std::span<const SequenceStep> w) {
  for (const SequenceStep& s : w) {
    if (s.step.option.actor == step.option.actor) return s.step.option.key() == step.option.key();
    if (dependent(step, s.step)) return false;
  }
  return true;
}

bool initial(const StepRef& step, std::span<const SequenceStep> w) { return initial_position(step, w) < w.size(); }

WakeupTrees::NodeId WakeupTrees::make(const StepRef& step) {
  NodeId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& node = nodes_[id];
  node.option = step.option;
  node.footprint.assign(step.footprint.begin(), step.footprint.end());
  node.universal = step.universal;
  node.children.clear();
  return id;
}

WakeupTrees::NodeId WakeupTrees::add_root(Roots& roots, const StepRef& step) {
  const NodeId id = make(step);
  roots.push_back(id);
  return id;
}

WakeupTrees::NodeId WakeupTrees::add_child(NodeId parent, const StepRef& step) {
  const NodeId id = make(step);  // before the push: make() may move every node's children
  nodes_[parent].children.push_back(id);
  return id;
}

void WakeupTrees::append_chain(Roots& roots, NodeId parent, std::span<const SequenceStep> w) {
  if (w.empty()) return;
  // Made first, linked after: make() may grow nodes_, which moves every node's children.
  std::vector<NodeId> chain;
  for (const SequenceStep& s : w) chain.push_back(make(s.step));
  for (size_t i = 0; i + 1 < chain.size(); ++i) nodes_[chain[i]].children.push_back(chain[i + 1]);
  (parent == NONE ? roots : nodes_[parent].children).push_back(chain.front());
}

void WakeupTrees::insert(Roots& roots, std::vector<SequenceStep> w) {
  NodeId parent = NONE;
  while (true) {
    // A leaf below the root: its exploration will reach what w would.
    if (parent != NONE && nodes_[parent].children.empty()) return;
    const std::vector<NodeId>& level = parent == NONE ? roots : nodes_[parent].children;
    NodeId next = NONE;
    for (const NodeId child : level) {
      const StepRef step = this->step(child);
      const size_t at = initial_position(step, w);
      if (at < w.size()) {
        w.erase(w.begin() + static_cast<std::ptrdiff_t>(at));
        next = child;
        break;
      }
      if (independent_of_all(step, w)) {
        next = child;
        break;
      }
    }
    if (next == NONE) {
      append_chain(roots, parent, w);
      return;
    }
    parent = next;
  }
}

void WakeupTrees::take(Roots& roots, NodeId n, Roots& out) {
  roots.erase(std::find(roots.begin(), roots.end(), n));
  out.swap(nodes_[n].children);
  nodes_[n].children.clear();
  free_.push_back(n);
}

void WakeupTrees::release(Roots& roots) {
  std::vector<NodeId> stack(roots.begin(), roots.end());
  roots.clear();
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    stack.insert(stack.end(), nodes_[n].children.begin(), nodes_[n].children.end());
    nodes_[n].children.clear();
    free_.push_back(n);
  }
}

}  // namespace lockstep::checker
