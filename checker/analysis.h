// From an execution that did not finish to a bug: the wait-for graph (Boost.Graph, used here
// only), the verdict, and the explanation a report prints (docs/semantics.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/describe.h"
#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::checker {

struct Bug {
  sim::Verdict kind = sim::Verdict::DEADLOCK;
  std::string summary;                   // one line
  std::vector<std::string> explanation;  // the full text, one line each
  std::vector<sim::StuckOp> stuck;
  std::vector<int32_t> cycle;            // closed, from its lowest rank: {0, 1, 0}; empty if none
  std::optional<sim::MismatchInfo> mismatch;
  std::vector<sim::RankStatus> rank_status;
  std::string signature;                 // two executions with the same signature are one bug
  std::string class_key;                 // bugs with the same key are one failure (bug_class.h)
  std::vector<uint32_t> schedule;        // the choices that lead to it (option indices)
  std::vector<sim::Option> choices;      // the same choices as options (replayable)
  uint64_t execution = 0;                // 1-based index of the execution that found it
};

// The bug of an execution that ended STUCK or MISMATCH; nullopt for one that completed.
std::optional<Bug> analyze(const sim::Scenario& scenario, const sim::ExecutionResult& result);

// The rank-level wait-for cycle among stuck ops, closed and rotated to start at its lowest
// rank ({} when the waits end at ranks that are not waiting, i.e. a hang).
std::vector<int32_t> find_wait_cycle(int32_t world, const std::vector<sim::StuckOp>& stuck);

// The rank wait-for graph of a bug, ranks in identical states folded into one node (the same
// status; stuck: the same op; waited for, or a bystander), ranks on the cycle a node each.
struct WaitForGraph {
  struct Node {
    std::vector<int32_t> ranks;
    std::string state;  // "finished", "waits in allreduce #3 on dp\nFILE:72:9", ...
    bool cycle = false;
  };
  struct Edge {
    size_t from = 0, to = 0;  // node indices
    std::string label;        // the op waited in, or "differs in FIELD"
    size_t count = 1;         // how many rank-to-rank waits it stands for
    bool mismatch = false;    // the two ops of a mismatch (no direction)
  };
  std::vector<Node> nodes;  // in the order of their first rank
  std::vector<Edge> edges;
};
WaitForGraph fold_wait_for(const sim::Scenario& scenario, const Bug& bug);

// "ranks 0-62 (63 ranks)", "rank 4".
std::string node_label(const WaitForGraph::Node& node);

// The folded wait-for graph in Graphviz DOT: an edge per wait, labelled with the op.
std::string wait_for_dot(const sim::Scenario& scenario, const Bug& bug);

// "10min", "1.500s", "20.000ms", "5.000us", "12ns".
std::string format_duration(int64_t ns);

// "100MiB", "1GiB", "1000B".
std::string format_size(int64_t bytes);

}  // namespace lockstep::checker
