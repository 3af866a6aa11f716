// What processes of one check --mpi send each other about a search, as text: a part's result
// (PartResult), and for dpor a branch given to another process (Donation) and what its search
// sends back (its result and its mail to the search that gave it). Every step's actor and
// footprint objects go by what they are, not by the sender's numbers for them
// (sim::FootprintIds::Portable): each process numbers them in the order it meets them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/explore.h"
#include "checker/reduction/dpor.h"
#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::checker {

// A part's result: its bugs as the schedules that lead to them, its totals and the fold of its
// hashes, not the per-execution series (the merge explores a part again where it needs them).
std::string part_json(const PartResult& part);
// The part back, each bug rebuilt by replaying its schedule; nullopt when the text is not a part
// or a schedule does not lead to the bug it names.
std::optional<PartResult> part_of(std::string_view text, const sim::Scenario& scenario, const CheckOptions& options);

// A branch, with the execution budget its process may spend on it and whether a state cache
// pays there (StateCache::useful in the process that gave it).
std::string donation_json(const Donation& donation, uint64_t budget, bool cache, sim::FootprintIds& ids);
struct ReceivedBranch {
  Donation donation;  // owner unset
  uint64_t budget = 0;
  bool cache = true;
};
std::optional<ReceivedBranch> donation_of(std::string_view text, sim::FootprintIds& ids);

// A branch's search's result and its mail, in the order posted (its DONE last).
std::string branch_result_json(const PartResult& part, const std::vector<BranchMail>& mail, sim::FootprintIds& ids);
struct BranchResult {
  PartResult part;
  std::vector<BranchMail> mail;
};
std::optional<BranchResult> branch_result_of(std::string_view text, const sim::Scenario& scenario,
                                             const CheckOptions& options, sim::FootprintIds& ids);

}  // namespace lockstep::checker
