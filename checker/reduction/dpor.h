// `dpor` and `odpor`: DPOR (Abdulla et al., "Source Sets", JACM 2017) over the engine's steps
// and their footprints, with sleep sets and a state cache (docs/semantics.md, "Exploration").
//
// The search walks one execution at a time, depth first. At every step it keeps a node: the
// options offered there, the steps asleep (their futures are explored elsewhere) and the wakeup
// tree (what is still to explore from there). After an execution, each race in it (two dependent
// steps of different actors not ordered by anything else) adds, at the state before the first,
// the sequence that reverses it (the steps after it that do not depend on it, to the end of the
// execution for odpor and up to the second for dpor, but kernel starts and wildcard matches that
// none of the later ones needs, then the second), unless a step asleep there or a branch of the
// tree already leads to an equivalent execution. `odpor` adds the whole sequence, again under
// each new ending of the execution (Optimal-DPOR: in theory no execution ends with every option
// asleep); `dpor` its first step (a source set), and the whole only where the first is not
// enough (a wildcard match's race, a race through a step that aborts a rank's kernels). After a
// source set's step the search takes its usual order, and a branch's exploration does not depend
// on what its siblings find: --jobs explores the same tree as one thread. Options that exclude
// each other (the branches of one choose, the senders one wildcard receive may take, kernels
// waiting for one free slot, the steps of a rank that exits) are all explored where the first
// is. A state met again, whose future was explored under a sleep set no larger, ends the
// execution (pruned) when every step before it that may race with that future (a summary the
// cache keeps) has its every option explored already.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "checker/reduction/execution.h"
#include "checker/reduction/state_cache.h"
#include "checker/reduction/wakeup_tree.h"
#include "checker/search.h"

namespace lockstep::checker {

class WorkPool;

// What the search of a given branch (below) tells the search that gave it: a race to reverse at
// a node above the branch, an option to explore there, or that the branch is done.
struct BranchMail {
  enum class Kind : uint8_t { RACE, OPTION, DONE };
  Kind kind = Kind::DONE;
  size_t node = 0;
  sim::Option option;  // OPTION: to explore at the node
  // RACE: the sequence to insert at the node, owned (SequenceStep's spans point into these).
  struct Step {
    sim::Option option;
    std::vector<sim::Touch> footprint;
    bool universal = false;
    uint32_t index = 0;
    std::vector<uint32_t> after;
  };
  std::vector<Step> sequence;
  bool cut_short = false;  // RACE: found in an execution pruned at a cached state
};

// Where a branch's search posts its mail: the search that gave the branch, or (check --mpi)
// what carries it back to that search in another process.
class MailSink {
 public:
  virtual void post(BranchMail mail) = 0;

 protected:
  ~MailSink() = default;
};

// A branch of one search's wakeup tree handed to another thread (check --jobs) or process
// (check --mpi): the executions below one node that start with the branch's steps. The search
// that explores it owns only the nodes below that node; what it finds about the nodes above
// (races to reverse there, options to explore there) it posts to the search that gave it, which
// waits for it before it leaves the node.
struct Donation {
  struct Branch {
    sim::Option option;
    std::vector<sim::Touch> footprint;
    bool universal = false;
    std::vector<Branch> children;
  };
  std::vector<uint32_t> prefix;        // the choices down to the node
  size_t node = 0;                     // the node's step index
  Branch branch;                       // the branch's steps (a wakeup tree with one root)
  std::vector<SleepingOption> sleep;   // asleep at the node
  MailSink* owner = nullptr;
};

// What a race adds to the wakeup tree (above).
enum class Reversals : uint8_t { FIRST_STEP, WHOLE };

class DporSearch final : public Search, public MailSink {
 public:
  DporSearch(const SearchOptions& options, Reversals reversals);
  // The search of a branch another search gave (check --jobs); `pool` as that search's.
  DporSearch(const SearchOptions& options, Reversals reversals, const Donation& donation);
  ~DporSearch() override;

  size_t choose(const sim::ChoicePoint& point) override;
  bool forced(const sim::Option& option) override;
  void taken(const sim::Step& step) override;
  uint64_t resume_depth() const override;
  bool wants_state() const override { return caching(); }
  bool revisits(uint64_t index) const override;
  void resumed(uint64_t index, uint64_t steps) override;
  bool next(const sim::ExecutionResult& result) override;
  std::vector<uint32_t> schedule() const override;
  SearchStats stats() const override;

  // Wakeup-tree steps that were not offered where the tree said (the engine's happens-before
  // missed an edge); each makes the search explore every option there. 0 unless the engine's
  // clocks outgrow their bound.
  uint64_t wakeup_misses() const { return misses_; }

  // check --jobs: the branches this search gave away (parts of its work others explored).
  uint64_t donations() const override { return donations_; }
  // Waits for every branch this search gave to be explored; then, for a search of a branch,
  // tells the search that gave it that it is done. Called once the search has ended, whether
  // it ran to its end or was stopped.
  void finish() override;
  // Mail from the search of a branch this one gave.
  void post(BranchMail mail) override;

 private:
  // A step asleep at a node, and at the nodes below it that it commutes with: its footprint is
  // shared by every copy (one allocation a step, not one a node it sleeps at).
  struct Sleeper {
    sim::Option option;
    std::shared_ptr<const std::vector<sim::Touch>> footprint;
    bool universal = false;
    bool given = false;  // a branch given to another search (check --jobs), not explored here
    Sleeper(const sim::Option& o, std::vector<sim::Touch> f, bool u, bool g = false)
        : option(o), footprint(std::make_shared<const std::vector<sim::Touch>>(std::move(f))), universal(u), given(g) {}
    StepRef ref() const { return {option, *footprint, universal}; }
  };
  struct Node {
    std::vector<sim::Option> options;
    bool choice = false;        // a choice point (two options or more)
    uint64_t choice_index = 0;  // its index among the execution's choice points
    uint64_t state = 0;         // fingerprint (0: none)
    bool cached = false;        // visited in the state cache: its future goes there when done
    bool frozen = false;        // part of the prefix (SearchOptions::prefix)
    WakeupTrees::Roots wut;     // what is left to explore from here
    std::vector<Sleeper> sleep;
    bool has_taken = false;     // the step this execution took here
    sim::Option taken;
    uint32_t taken_index = 0;
    std::vector<sim::Touch> taken_footprint;
    bool taken_universal = false;
    Summary future;             // what the steps from here on touched, in every execution so far
    FutureSet future_set;       // the same exactly, with symmetric ranks
    std::vector<uint32_t> names;  // with symmetric ranks: the renaming of a cached state
    uint32_t given = 0;         // branches given to other threads and not yet explored
    bool expansion_posted = false;  // a node of the search above: its every option was asked for
  };

  bool caching() const {
    return options_.state_cache && cache_.useful() && (!options_.cache_once_decided || cache_.decided());
  }
  // Whether node d is this search's to explore (not above the branch it was given).
  bool owns(size_t d) const { return boundary_ == SIZE_MAX || d > boundary_; }
  void read_mail();
  void insert_race(size_t e, std::vector<SequenceStep> v, bool cut_short);
  void give_branch();
  void wait_for_given(const std::function<bool()>& done);

  size_t arrive(std::span<const sim::Option> options, bool choice, uint64_t choice_index, uint64_t state);
  size_t pick(size_t d);
  void take_branch(size_t d, WakeupTrees::NodeId root, size_t i);
  void add_alternative(size_t d, const sim::Option& option);
  void add_alternatives(size_t d);
  bool asleep(const Node& node, uint64_t key) const;
  bool in_tree(const Node& node, uint64_t key) const;
  void reverse(size_t e, size_t j);
  // Whether step k of the execution excludes steps that were possible beside it: a kernel's
  // start (the rank's other kernels waiting for its slot), a wildcard match (the receive's other
  // senders).
  bool excludes_others(size_t k) const;
  // Whether a step before node d may race with `future` (a summary of what the steps of a
  // state's explored future touched) at a point where some option is neither asleep nor in the
  // wakeup tree: what pruning at the state would leave unexplored.
  template <typename Future>
  bool needs_more(const Future& future, size_t d);
  // Symmetric ranks (check --symmetry): futures are kept exactly (future_set), and the cache
  // holds them in the names of each state's canonical renaming. A future under the renaming
  // `names` (rank -> name), sorted again.
  FutureSet renamed(FutureSet future, std::span<const uint32_t> names);
  sim::Symmetry* symmetry_ = nullptr;

  SearchOptions options_;
  Reversals reversals_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> choice_nodes_;  // node index of each choice point on the path
  size_t depth_ = 0;                    // the next step's index
  size_t target_ = 0;                   // where the next execution takes a new branch
  Execution execution_;
  WakeupTrees trees_;
  WakeupTrees::Roots pending_wut_;  // the subtree below the branch just taken: the next node's
  std::vector<Sleeper> pending_sleep_;
  StateCache own_cache_;
  StateCache& cache_;  // own_cache_, or SearchOptions::shared_cache
  size_t races_done_ = 0;  // events of the execution whose races were reversed already
  size_t prefix_used_ = 0;
  uint64_t pruned_ = 0;
  bool cut_short_ = false;  // the execution under way was pruned at a cached state
  uint64_t sleep_blocked_ = 0;
  uint64_t misses_ = 0;

  // check --jobs
  WorkPool* pool_ = nullptr;
  int level_ = 0;                 // searches this thread is inside of (WorkPool::Runner)
  MailSink* owner_ = nullptr;     // the search that gave this one its branch
  size_t boundary_ = SIZE_MAX;    // the node the branch starts at (SIZE_MAX: every node is ours)
  Donation::Branch start_branch_;
  std::vector<Sleeper> start_sleep_;
  uint64_t donations_ = 0;
  uint64_t given_ = 0;            // branches given and not yet explored, over every node
  std::mutex mail_mutex_;
  std::vector<BranchMail> mail_;
  std::atomic<bool> has_mail_{false};
};

}  // namespace lockstep::checker
