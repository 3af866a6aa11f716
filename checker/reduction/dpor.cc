#include "checker/reduction/dpor.h"

#include <algorithm>
#include <cassert>

#include "checker/work_pool.h"

namespace lockstep::checker {

DporSearch::DporSearch(const SearchOptions& options, Reversals reversals)
    : options_(options),
      reversals_(reversals),
      own_cache_(options.shared_cache != nullptr ? 1024 : StateCache::DEFAULT_MAX_STATES),
      cache_(options.shared_cache != nullptr ? *options.shared_cache : own_cache_), pool_(options.pool),
      level_(options.level) {}

DporSearch::DporSearch(const SearchOptions& options, Reversals reversals, const Donation& donation)
    : DporSearch(options, reversals) {
  options_.prefix = donation.prefix;
  owner_ = donation.owner;
  boundary_ = donation.node;
  start_branch_ = donation.branch;
  for (const SleepingOption& q : donation.sleep) start_sleep_.push_back(Sleeper{q.option, q.footprint, q.universal});
}

DporSearch::~DporSearch() = default;

bool DporSearch::asleep(const Node& node, uint64_t key) const {
  return std::any_of(node.sleep.begin(), node.sleep.end(), [&](const Sleeper& q) { return q.option.key() == key; });
}

bool DporSearch::in_tree(const Node& node, uint64_t key) const {
  return std::any_of(node.wut.begin(), node.wut.end(),
                     [&](WakeupTrees::NodeId root) { return trees_.option(root).key() == key; });
}

size_t DporSearch::choose(const sim::ChoicePoint& point) {
  symmetry_ = point.symmetry;
  return arrive(point.options, true, point.index, point.state);
}

bool DporSearch::forced(const sim::Option& option) {
  return arrive(std::span<const sim::Option>(&option, 1), false, 0, 0) != sim::Strategy::PRUNE;
}

size_t DporSearch::arrive(std::span<const sim::Option> options, bool choice, uint64_t choice_index, uint64_t state) {
  const size_t d = depth_;
  if (d < nodes_.size()) {
    // Where this execution takes the next branch of the wakeup tree (next()).
    if (!nodes_[d].has_taken) return pick(d);
    // On the last execution's path (the engine is deterministic: the same point comes back).
    const uint64_t key = nodes_[d].taken.key();
    for (size_t i = 0; i < options.size(); ++i) {
      if (options[i].key() == key) return i;
    }
    assert(false && "nondeterministic engine: a step of the path is not offered again");
    return 0;
  }
  assert(d == nodes_.size());
  const uint64_t choices_before = d == 0 ? 0 : nodes_[d - 1].choice_index + (nodes_[d - 1].choice ? 1 : 0);
  assert(!choice || choice_index == choices_before);
  (void)choice_index;
  Node& n = nodes_.emplace_back();
  n.options.assign(options.begin(), options.end());
  n.choice = choice;
  n.choice_index = choices_before;
  n.state = state;
  if (choice) {
    if (choice_nodes_.size() <= choices_before) choice_nodes_.resize(choices_before + 1);
    choice_nodes_[choices_before] = static_cast<uint32_t>(d);
  }
  n.sleep.swap(pending_sleep_);
  pending_sleep_.clear();
  n.wut.swap(pending_wut_);
  trees_.release(pending_wut_);
  if (boundary_ != SIZE_MAX && d < boundary_) {
    // Above the branch this search was given: the search that gave it explores the rest here.
    n.frozen = true;
    trees_.release(n.wut);
    n.sleep.clear();
    const size_t i = choice ? options_.prefix[prefix_used_++] : 0;
    assert(i < options.size() && "prefix does not fit the scenario");
    n.has_taken = true;
    n.taken = options[i];
    n.taken_index = static_cast<uint32_t>(i);
    return i;
  }
  if (d == boundary_) {
    // Where the branch starts: its steps, under what was asleep here when it was given.
    trees_.release(n.wut);
    n.sleep = start_sleep_;
    const auto add = [&](auto&& self, WakeupTrees::NodeId parent, const Donation::Branch& b) -> void {
      const StepRef step{b.option, b.footprint, b.universal};
      const WakeupTrees::NodeId id = parent == WakeupTrees::NONE ? trees_.add_root(n.wut, step) : trees_.add_child(parent, step);
      for (const Donation::Branch& child : b.children) self(self, id, child);
    };
    add(add, WakeupTrees::NONE, start_branch_);
    return pick(d);
  }
  if (state != 0 && caching()) {
    std::vector<uint64_t> keys;
    keys.reserve(n.sleep.size());
    for (const Sleeper& q : n.sleep) {
      keys.push_back(symmetry_ != nullptr ? symmetry_->canonical_key(q.option.key()) : q.option.key());
    }
    std::sort(keys.begin(), keys.end());
    if (!cache_.visit(state, keys)) {
      // Explored from here before: that future is this path's too. A step before it that may
      // race with that future (its footprint conflicts with the cache's summary of it) needs
      // every option at its point explored, which the execution can stop here for only when
      // they all are already (asleep, or in the wakeup tree): a wildcard's senders. Otherwise
      // the state is explored again, which the races below then steer.
      bool covered = false;
      if (symmetry_ != nullptr) {  // kept in the canonical names: read in this state's
        FutureSet future = renamed(cache_.future_set(state), symmetry_->inverse_names());
        if (!needs_more(future, d)) {
          n.future_set = std::move(future);
          covered = true;
        }
      } else {
        const Summary future = cache_.future(state);
        if (!needs_more(future, d)) {
          n.future = future;
          covered = true;
        }
      }
      if (covered) {
        trees_.release(n.wut);
        ++pruned_;
        cut_short_ = true;
        return sim::Strategy::PRUNE;
      }
    }
    n.cached = true;
    if (symmetry_ != nullptr) {
      const std::span<const uint32_t> names = symmetry_->names();
      n.names.assign(names.begin(), names.end());
    }
  }
  return pick(d);
}

size_t DporSearch::pick(size_t d) {
  Node& n = nodes_[d];
  while (!n.wut.empty()) {
    const WakeupTrees::NodeId root = n.wut.front();
    const uint64_t key = trees_.option(root).key();
    size_t i = 0;
    while (i < n.options.size() && n.options[i].key() != key) ++i;
    if (i < n.options.size() && !asleep(n, key)) {
      take_branch(d, root, i);
      return i;
    }
    WakeupTrees::Roots below;
    trees_.take(n.wut, root, below);
    trees_.release(below);
    if (i == n.options.size()) {
      // Not offered where the race said it would be: explore everything here instead.
      ++misses_;
      for (const sim::Option& o : n.options) add_alternative(d, o);
    }
  }
  for (size_t i = 0; i < n.options.size(); ++i) {
    if (asleep(n, n.options[i].key())) continue;
    const WakeupTrees::NodeId root = trees_.add_root(n.wut, StepRef{n.options[i], {}, true});
    take_branch(d, root, i);
    return i;
  }
  ++sleep_blocked_;  // every option's future is covered
  return sim::Strategy::PRUNE;
}

void DporSearch::take_branch(size_t d, WakeupTrees::NodeId root, size_t i) {
  Node& n = nodes_[d];
  trees_.release(pending_wut_);
  trees_.take(n.wut, root, pending_wut_);
  n.has_taken = true;
  n.taken = n.options[i];
  n.taken_index = static_cast<uint32_t>(i);
  add_alternatives(d);
}

void DporSearch::add_alternative(size_t d, const sim::Option& option) {
  Node& n = nodes_[d];
  const uint64_t key = option.key();
  if ((n.has_taken && n.taken.key() == key) || asleep(n, key) || in_tree(n, key)) return;
  trees_.add_root(n.wut, StepRef{option, {}, true});
}

// Options that exclude the one taken: a race can never show their order, since the one taken
// disables them (the other branches of a choose, the other senders one wildcard receive may
// take, the other kernels waiting for a free slot). All are explored here.
void DporSearch::add_alternatives(size_t d) {
  const sim::Option p = nodes_[d].taken;
  for (size_t i = 0; i < nodes_[d].options.size(); ++i) {
    const sim::Option o = nodes_[d].options[i];  // (add_alternative adds to the tree, not to these)
    bool excluded = false;
    switch (p.kind) {
      case sim::ChoiceKind::BRANCH: excluded = o.actor == p.actor; break;
      case sim::ChoiceKind::MATCH: excluded = o.kind == sim::ChoiceKind::MATCH && o.rank == p.rank && o.thread == p.thread; break;
      case sim::ChoiceKind::START: excluded = o.kind == sim::ChoiceKind::START && o.rank == p.rank; break;
      case sim::ChoiceKind::THREAD: break;
    }
    if (excluded) add_alternative(d, o);
  }
}

void DporSearch::taken(const sim::Step& step) {
  const size_t d = static_cast<size_t>(step.index);
  assert(d == execution_.size() && d < nodes_.size());
  execution_.push(step);
  depth_ = d + 1;
  Node& n = nodes_[d];
  if (d < target_ || n.frozen) return;  // the last execution's path: known
  n.taken_footprint.assign(step.footprint.begin(), step.footprint.end());
  n.taken_universal = aborts_pending(step.footprint);
  symmetry_ = step.symmetry;
  if (symmetry_ != nullptr) n.future_set.add(step.footprint, n.taken_universal);
  else n.future.add_footprint(step.footprint, n.taken_universal);
  // A rank that exits or crashes disables its other steps here: they are explored here too.
  // (When another rank's step set the exit off, the rank was single-threaded: a branch it was
  // waiting at is one this step took for it, an agreed choice, not a step it lost.)
  for (const sim::Touch& t : step.footprint) {
    if (t.access != sim::Access::WRITE || sim::object_kind(t.object) != sim::ObjectKind::ALIVE) continue;
    const int32_t rank = sim::object_rank(t.object);
    for (const sim::Option& o : std::vector<sim::Option>(n.options)) {
      if (o.kind == sim::ChoiceKind::BRANCH && rank != step.option.rank) continue;
      if (o.rank == rank || (o.kind == sim::ChoiceKind::MATCH && o.detail == rank)) add_alternative(d, o);
    }
  }
  // Asleep after it: what was asleep here (and the options explored here before) that commute
  // with it.
  pending_sleep_.clear();
  if (!options_.sleep_sets || n.taken_universal) return;
  const StepRef p{step.option, step.footprint, false};
  for (const Sleeper& q : n.sleep) {
    if (!dependent(q.ref(), p)) pending_sleep_.push_back(q);
  }
}

void DporSearch::resumed(uint64_t index, uint64_t steps) {
  (void)index;
  execution_.truncate(steps);
  depth_ = steps;
  pending_sleep_.clear();
  trees_.release(pending_wut_);
}

uint64_t DporSearch::resume_depth() const { return target_ < nodes_.size() ? nodes_[target_].choice_index : 0; }

bool DporSearch::revisits(uint64_t index) const {
  if (index >= choice_nodes_.size()) return false;
  if (!owns(choice_nodes_[index])) return false;
  const Node& n = nodes_[choice_nodes_[index]];
  if (!n.wut.empty()) return true;
  return std::any_of(n.options.begin(), n.options.end(),
                     [&](const sim::Option& o) { return o.key() != n.taken.key() && !asleep(n, o.key()); });
}

bool DporSearch::excludes_others(size_t k) const {
  const sim::Option& o = execution_[k].option;
  return o.kind == sim::ChoiceKind::START || o.kind == sim::ChoiceKind::MATCH;
}

void DporSearch::reverse(size_t e, size_t j) {
  auto step_of = [&](size_t k) {
    return SequenceStep{StepRef{execution_[k].option, execution_.footprint(k), execution_[k].aborts_pending},
                        static_cast<uint32_t>(k), execution_.after(k)};
  };
  // The steps after e that do not depend on it, then j: for odpor those up to the end of the
  // execution (a wakeup tree's sequence), for dpor those before j (source-set DPOR's notdep).
  // dpor takes the sequence's first step and its usual order after it, so a later step first in
  // it could lead the search where the reversal does not (another rank's sync, below which that
  // rank exits before its other thread issues what the race needs; checker/explore_test.cc,
  // "dpor reverses a race with the steps between its two steps, not those after"). Without the
  // steps that exclude others (a kernel's start, a wildcard match) that no later step of v
  // needs. The executions below such a step never take what it excluded (another kernel in the
  // slot, another sender): first in v and asleep at e, it would count as covering the reversal,
  // whose executions may need just that (checker/explore_test.cc, "a step that excludes others,
  // asleep at a race, does not cover its reversal").
  const size_t end = reversals_ == Reversals::WHOLE ? execution_.size() : j + 1;
  std::vector<SequenceStep> v;
  for (size_t k = e + 1; k < end; ++k) {
    if (k == j || execution_.happens_before(e, k)) continue;
    if (excludes_others(k)) {
      bool needed = false;
      for (size_t l = k + 1; l < end && !needed; ++l) {
        needed = (l == j || !execution_.happens_before(e, l)) && execution_.happens_before(k, l);
      }
      if (!needed) continue;
    }
    v.push_back(step_of(k));
  }
  v.push_back(step_of(j));
  if (!owns(e)) {
    // Above the branch: the search that gave it inserts it.
    BranchMail mail{BranchMail::Kind::RACE, e, {}, {}, cut_short_};
    for (const SequenceStep& s : v) {
      mail.sequence.push_back(BranchMail::Step{s.step.option, {s.step.footprint.begin(), s.step.footprint.end()}, s.step.universal,
                                         s.index, {s.after.begin(), s.after.end()}});
    }
    owner_->post(std::move(mail));
    return;
  }
  insert_race(e, std::move(v), cut_short_);
}

void DporSearch::insert_race(size_t e, std::vector<SequenceStep> v, bool cut_short) {
  Node& n = nodes_[e];
  // A step asleep here that begins v (odpor: a weak initial of it, one that commutes with all of
  // v; dpor: an initial, a step of v that none before it in v must precede, but a weak initial
  // for a branch given to another search, whose search is under way: docs/semantics.md,
  // "Parallel exploration", has what testing it as an initial costs) has a subtree holding an
  // execution that extends v: the reversal is covered there. dpor's v stops at the race's second
  // step, and what follows it may conflict with a weak initial that is not in v: such a step's
  // subtree need not hold the outcome (checker/explore_test.cc, "dpor: a step asleep where a
  // reversal starts covers it only as one of its initials"). Not when e is a wildcard match: a
  // match excludes the receive's other senders (it disables their matches), which the argument
  // does not allow for, and the asleep step's subtree may never let the sender that v makes
  // available meet the receive along with the others the execution needs (an asleep barrier
  // ahead of a rank's send on its stream keeps that send from starting there; see
  // checker/explore_test.cc, "a wildcard gather whose sends can queue behind a barrier"). Nor,
  // in odpor, when the execution was cut short at a state whose future was explored from another
  // path: its v, which runs to the end of the execution, then lacks the steps that would follow,
  // and the asleep step's subtree extends the short v but not the v of the execution this one
  // stands for (with symmetric ranks: a rank's other order, explored from the renamed state,
  // never meets this rank's reversed one; see tests/property_test.cc's symmetric scenarios).
  // dpor's v ends at the race's second step, which the execution took.
  const bool asleep_may_miss =
      execution_[e].option.kind == sim::ChoiceKind::MATCH || (cut_short && reversals_ == Reversals::WHOLE);
  if (!asleep_may_miss) {
    for (const Sleeper& q : n.sleep) {
      const bool weak = reversals_ == Reversals::WHOLE || q.given;
      if (weak ? weak_initial(q.ref(), v) : initial(q.ref(), v)) return;
    }
  }
  // A source set: v's first step, unless a branch here already starts with one of v's initials
  // (as source-set DPOR asks; the step taken here never is one: it is the race's first, which v
  // leaves out and its last depends on). The whole of v where the first step alone misses
  // executions (the property test finds them): a wildcard match's race, as above, and a race
  // with a step that aborts a rank's kernels, whose footprint holds only in the state it was
  // taken in.
  const auto aborts = [](const SequenceStep& s) { return s.step.universal; };
  if (reversals_ == Reversals::FIRST_STEP && !asleep_may_miss && !execution_[e].aborts_pending &&
      std::none_of(v.begin(), v.end(), aborts)) {
    for (const WakeupTrees::NodeId root : n.wut) {
      if (initial(trees_.step(root), v)) return;
    }
    trees_.add_root(n.wut, v.front().step);
    return;
  }
  trees_.insert(n.wut, std::move(v));
}

FutureSet DporSearch::renamed(FutureSet future, std::span<const uint32_t> names) {
  for (sim::Touch& t : future.touches) t.object = symmetry_->rename_object(t.object, names);
  std::sort(future.touches.begin(), future.touches.end(),
            [](const sim::Touch& a, const sim::Touch& b) { return a.object < b.object; });
  return future;
}

template <typename Future>
bool DporSearch::needs_more(const Future& future, size_t d) {
  for (size_t e = 0; e < d && e < execution_.size(); ++e) {
    Node& n = nodes_[e];
    if (!future.conflicts(execution_.footprint(e), execution_[e].aborts_pending)) continue;
    if (!owns(e)) {
      // Above the branch: the search that gave it explores every option there instead (what
      // the race with this future needs is among them).
      if (n.choice && !n.expansion_posted) {
        for (const sim::Option& o : n.options) owner_->post(BranchMail{BranchMail::Kind::OPTION, e, o, {}});
        n.expansion_posted = true;
      }
      continue;
    }
    for (const sim::Option& o : n.options) {
      const uint64_t key = o.key();
      if (key != n.taken.key() && !asleep(n, key) && !in_tree(n, key)) return true;
    }
  }
  return false;
}

bool DporSearch::next(const sim::ExecutionResult& result) {
  (void)result;  // the execution's steps came through taken()
  trees_.release(pending_wut_);
  pending_sleep_.clear();
  // dpor reverses the races of the steps new in this execution, each race once, as source-set
  // DPOR does as it runs. odpor's whole sequence holds every step after the race's first that
  // does not depend on it, to the end of the execution, so each race is reversed again under
  // every new ending (ODPOR as published; the tree and the sleep sets drop what an earlier
  // reversal covers): reversing only new races misses executions (checker/explore_test.cc,
  // "odpor reverses every race of each execution").
  for (size_t j = reversals_ == Reversals::WHOLE ? 0 : races_done_; j < execution_.size(); ++j) {
    for (const uint32_t e : execution_.races(j)) reverse(e, j);
  }
  cut_short_ = false;
  races_done_ = execution_.size();
  read_mail();
  // Back up to the deepest node with something left to explore.
  while (!nodes_.empty()) {
    const size_t d = nodes_.size() - 1;
    Node& n = nodes_[d];
    if (n.frozen) break;
    if (n.has_taken) {
      n.sleep.push_back(Sleeper{n.taken, std::move(n.taken_footprint), n.taken_universal});
      n.has_taken = false;
    }
    if (n.given > 0) {
      // Branches given here are explored first: what they find may add to the tree here.
      wait_for_given([&] {
        read_mail();
        return nodes_[d].given == 0;
      });
    }
    if (d == boundary_) {
      // The other branches here are the giving search's: what this one found to explore here
      // goes to it.
      for (const WakeupTrees::NodeId root : n.wut) owner_->post(BranchMail{BranchMail::Kind::OPTION, d, trees_.option(root), {}});
      trees_.release(n.wut);
      break;
    }
    if (!n.wut.empty() && !n.choice) {
      // A race reversed at a step that was the only option: its sequence cannot start here
      // (the engine's happens-before missed an edge). Nothing else can be run here.
      misses_ += n.wut.size();
      trees_.release(n.wut);
    }
    if (!n.wut.empty()) {
      target_ = d;
      races_done_ = std::min(races_done_, d);
      if (pool_ != nullptr && pool_->wants_work()) give_branch();
      return true;
    }
    if (symmetry_ != nullptr) {
      if (n.cached) cache_.add_future(n.state, renamed(n.future_set, n.names));
      if (d > 0) nodes_[d - 1].future_set.merge(n.future_set);
    } else {
      if (n.cached) cache_.add_future(n.state, n.future);
      if (d > 0) nodes_[d - 1].future.merge(n.future);
    }
    nodes_.pop_back();
  }
  nodes_.clear();
  return false;
}

void DporSearch::give_branch() {
  // The shallowest node of the path with a branch left, the most work in one piece; its next
  // branch, explored as if right after the one this search is in there: that one sleeps in it,
  // and it sleeps in the branches after it here.
  for (size_t d = boundary_ == SIZE_MAX ? 0 : boundary_ + 1; d < target_ && d < nodes_.size(); ++d) {
    Node& n = nodes_[d];
    if (!n.choice || n.wut.empty() || !n.has_taken) continue;
    const WakeupTrees::NodeId root = n.wut.front();
    // Not one whose footprint is not known yet (an option added to be explored, not a race's
    // step): asleep with no footprint, it would wake at once in the branches after it here,
    // which would explore its executions again.
    if (trees_.step(root).universal) continue;
    auto donation = std::make_unique<Donation>();
    for (size_t k = 0; k < d; ++k) {
      if (nodes_[k].choice) donation->prefix.push_back(nodes_[k].taken_index);
    }
    donation->node = d;
    const auto copy = [&](auto&& self, WakeupTrees::NodeId id, Donation::Branch& out) -> void {
      const StepRef step = trees_.step(id);
      out.option = step.option;
      out.footprint.assign(step.footprint.begin(), step.footprint.end());
      out.universal = step.universal;
      out.children.resize(trees_.children(id).size());
      for (size_t c = 0; c < out.children.size(); ++c) self(self, trees_.children(id)[c], out.children[c]);
    };
    copy(copy, root, donation->branch);
    for (const Sleeper& q : n.sleep) donation->sleep.push_back(SleepingOption{q.option, *q.footprint, q.universal});
    donation->sleep.push_back(SleepingOption{n.taken, n.taken_footprint, n.taken_universal});
    donation->owner = this;
    // Its future is explored elsewhere: asleep here for the branches after it.
    n.sleep.push_back(Sleeper{donation->branch.option, donation->branch.footprint, donation->branch.universal, true});
    WakeupTrees::Roots below;
    trees_.take(n.wut, root, below);
    trees_.release(below);
    ++n.given;
    ++given_;
    ++donations_;
    pool_->give(std::move(donation));
    return;
  }
}

void DporSearch::post(BranchMail mail) {
  // Once the mail is in, this search may end and be destroyed at any moment (a DONE is what it
  // waits for before it ends): nothing of it is read after the lock is let go. The pool
  // outlives every search.
  // Only a DONE can end a wait (for the branches given: wait_for_given); other mail is read
  // between executions, and with the DONE at the latest, so it wakes nobody.
  WorkPool* const pool = pool_;
  const bool done = mail.kind == BranchMail::Kind::DONE;
  {
    const std::lock_guard<std::mutex> lock(mail_mutex_);
    mail_.push_back(std::move(mail));
    has_mail_.store(true, std::memory_order_release);
  }
  if (pool != nullptr && done) pool->notify();
}

void DporSearch::read_mail() {
  if (!has_mail_.load(std::memory_order_acquire)) return;
  std::vector<BranchMail> mail;
  {
    const std::lock_guard<std::mutex> lock(mail_mutex_);
    mail.swap(mail_);
    has_mail_.store(false, std::memory_order_relaxed);
  }
  for (BranchMail& m : mail) {
    if (m.kind == BranchMail::Kind::DONE) {
      --nodes_[m.node].given;
      --given_;
      continue;
    }
    if (!owns(m.node)) {
      owner_->post(std::move(m));  // above this search's branch too
      continue;
    }
    if (m.node >= nodes_.size()) continue;  // the search has ended (stopped early)
    if (m.kind == BranchMail::Kind::OPTION) {
      add_alternative(m.node, m.option);
      continue;
    }
    std::vector<SequenceStep> v;
    for (const BranchMail::Step& step : m.sequence) v.push_back(SequenceStep{StepRef{step.option, step.footprint, step.universal}, step.index, step.after});
    insert_race(m.node, std::move(v), m.cut_short);
  }
}

void DporSearch::wait_for_given(const std::function<bool()>& done) { pool_->wait_until(done, level_); }

void DporSearch::finish() {
  if (given_ > 0) {
    wait_for_given([&] {
      read_mail();
      return given_ == 0;
    });
  }
  if (owner_ != nullptr) owner_->post(BranchMail{BranchMail::Kind::DONE, boundary_, {}, {}});
}

std::vector<uint32_t> DporSearch::schedule() const {
  std::vector<uint32_t> out;
  for (size_t d = 0; d < nodes_.size() && d < depth_; ++d) {
    if (nodes_[d].choice && nodes_[d].has_taken) out.push_back(nodes_[d].taken_index);
  }
  return out;
}

SearchStats DporSearch::stats() const {
  return SearchStats{pruned_, sleep_blocked_, cache_.size(), cache_.full()};
}

}  // namespace lockstep::checker
