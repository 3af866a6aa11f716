// Bug classes: bugs that are the same failure (same kind, same stuck ops up to which ranks play
// which role, same cycle shape) are one class, shown by its smallest member with a count of the
// others (docs/report-format.md, "Bug classes").
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "checker/analysis.h"
#include "sim/scenario.h"

namespace lockstep::checker {

// What every member of a bug's class shares: its kind, and per stuck op the op's kind, group,
// thread and source with the roles of the ranks it waits for (never issued it and exited, ...),
// not their numbers; for a deadlock the cycle's ops, rotated; for a mismatch the field and the
// two ops' kinds and sources.
std::string bug_class_key(const sim::Scenario& scenario, const Bug& bug);

struct BugClass {
  sim::Verdict kind = sim::Verdict::DEADLOCK;
  std::vector<size_t> members;  // indices into the bugs, in the order found
  size_t representative = 0;    // the smallest member (an index into the bugs)
};

// The classes of `bugs` (their class_key set), in the order their first member was found.
// The representative involves the fewest ranks that never issued what others wait for, then
// the fewest stuck ranks, then was found first.
std::vector<BugClass> group_bugs(const std::vector<Bug>& bugs);

// The choices that led to a bug, in words, ranks that took the same branch of the same choose
// together: "rank 3 took branch 1 (`stop`) of the choose at job.yaml:14:9". Thread, match and
// kernel-start choices are left out (the schedule string has them).
std::vector<std::string> describe_choices(const sim::Scenario& scenario, const Bug& bug);

}  // namespace lockstep::checker
