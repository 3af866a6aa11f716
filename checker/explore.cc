#include "checker/explore.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <set>

#include <fmt/format.h>

#include "checker/reduction/dpor.h"
#include "checker/reduction/state_cache.h"
#include "checker/replay.h"
#include "checker/search.h"
#include "checker/split.h"
#include "checker/wire.h"
#include "checker/work_pool.h"
#include "sim/hash.h"

namespace lockstep::checker {

namespace {

constexpr uint64_t FNV_OFFSET = FNV1A_OFFSET;

void fnv_mix(uint64_t& hash, uint64_t value) { hash = fnv1a_u64(value, hash); }

void fnv_mix(uint64_t& hash, const std::string& text) {
  hash = fnv1a(text, hash);
  fnv_mix(hash, text.size());
}

}  // namespace

sim::EngineOptions engine_options_for(const CheckOptions& options) {
  sim::EngineOptions engine = options.engine;
  engine.record_ops = false;
  const StrategyInfo* info = find_strategy(options.strategy);
  if (info != nullptr && info->configure != nullptr) info->configure(engine);
  if (options.dfs_state_cache) engine.track_state = true;
  engine.checkpoints = options.checkpoints && info != nullptr && info->exhaustive && engine.log == nullptr;
  return engine;
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  for (const StrategyInfo& info : strategies()) names.emplace_back(info.name);
  return names;
}

bool is_sampling(const std::string& strategy) {
  const StrategyInfo* info = find_strategy(strategy);
  return info != nullptr && !info->exhaustive;
}

uint64_t execution_budget(const CheckOptions& options) {
  if (options.max_executions > 0) return options.max_executions;
  return is_sampling(options.strategy) ? DEFAULT_SAMPLES : DEFAULT_MAX_EXECUTIONS;
}

namespace {

// What one part of the search found: the whole space (one thread), or the subtree under one
// schedule prefix (--jobs, --mpi). Parts are merged in DFS order, so the result does not depend
// on how many threads or processes ran them.
using Slice = PartResult;

// FOLD_BASE to the n-th power (mod 2^64): what a fold is multiplied by to make room for n more.
uint64_t fold_power(uint64_t n) {
  uint64_t result = 1, base = FOLD_BASE;
  for (; n > 0; n >>= 1, base *= base) {
    if ((n & 1) != 0) result *= base;
  }
  return result;
}

using Clock = std::chrono::steady_clock;

// --jobs: the parts the tree is cut into (split_tree), whatever the number of threads, so that
// every --jobs N > 1 explores the same parts and gives the same report.
constexpr size_t PARTS = 64;

struct Exploration {
  const sim::Scenario& scenario;
  const CheckOptions& options;
  const StrategyInfo& info;
  sim::EngineOptions engine_options;
  Clock::time_point started;
  uint64_t budget;
  StateCache* shared_cache = nullptr;  // --jobs with dpor: one for every part
  // For the progress line: every part's executions and bugs so far.
  mutable std::atomic<uint64_t> executions_so_far{0};
  mutable std::atomic<uint64_t> bugs_so_far{0};
  mutable double last_progress = 0;  // read and written by the calling thread only
  // --jobs with branches given to idle threads (StrategyInfo::make_branch): every search counts
  // against one execution budget and one list of bugs.
  bool shared_budget = false;
  mutable std::mutex bugs_mutex{};
  mutable std::set<std::string> bugs_found{};  // every search's
  mutable std::atomic<bool> enough_bugs{false};
  mutable std::atomic<bool> failed{false};  // an execution ended in an error or a limit
  // A process exploring branches for another (BranchHost): that search has stopped early, so
  // this one stops too (what stopped it is that search's to report).
  std::atomic<bool> halted{false};

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - started).count(); }

  // With a shared budget: a bug some search found, counted once over every search (--max-bugs).
  void count_shared_bug(const std::string& signature) const {
    const std::lock_guard<std::mutex> lock(bugs_mutex);
    if (bugs_found.insert(signature).second) bugs_so_far.fetch_add(1, std::memory_order_relaxed);
    if (options.max_bugs > 0 && bugs_found.size() >= options.max_bugs) enough_bugs = true;
  }

  SearchOptions search_options(std::vector<uint32_t> prefix = {}, std::vector<uint32_t> bound = {}) const {
    SearchOptions out;
    out.seed = options.seed;
    out.pct_depth = options.pct_depth;
    out.prefix = std::move(prefix);
    out.bound = std::move(bound);
    out.shared_cache = shared_cache;
    out.sleep_sets = options.sleep_sets;
    out.state_cache = options.state_cache;
    out.dfs_state_cache = options.dfs_state_cache;
    return out;
  }

  // Runs executions under `search` (over the whole space, or the subtree under one schedule
  // prefix for --jobs) until it is done or `limit` executions ran (`budget` in all).
  // `steal`: where the search is asked to give work away (by default CheckOptions::steal).
  Slice run(sim::Engine& engine, Search& search, bool report_progress, uint64_t limit, StealBox* steal = nullptr) const {
    if (steal == nullptr) steal = options.steal;
    Slice out;
    RecordingStrategy recorder(search);
    std::set<std::string> seen;
    std::set<std::string> classes;  // the bug classes this search found
    uint64_t stale = 0;             // executions since the last new class (once there is one)
    uint64_t longest = 0;  // most choice points in one execution (the progress line's depth)
    const bool sampling = !info.exhaustive;
    // The process's resident memory is read at most every 10 ms (/proc/self/statm: a system
    // call that, with a second thread, contends for the address space's lock).
    Clock::time_point next_memory_check{};
    auto memory_check_due = [&] {
      const Clock::time_point now = Clock::now();
      if (now < next_memory_check) return false;
      next_memory_check = now + std::chrono::milliseconds(10);
      return true;
    };
    auto record = [&](uint64_t hash) {
      const SearchStats stats = search.stats();
      out.hashes.push_back(hash);
      out.fold = out.fold * FOLD_BASE + hash;
      out.events_after.push_back(out.events);
      out.pruned_after.push_back(out.pruned);
      out.blocked_after.push_back(stats.sleep_blocked);
    };
    while (true) {
      if (steal != nullptr && steal->asked()) {
        // Before its first execution a search knows nothing to give: it answers after it.
        StealBox::Answer given;
        if (search.give_away(given.prefixes, given.bound) || out.executions > 0) steal->answer(std::move(given));
      }
      if (out.executions >= limit) {
        if (!sampling) out.bound_hit = fmt::format("--max-executions {}", budget);
        break;
      }
      if (options.time_budget_s > 0 && elapsed() > options.time_budget_s) {
        if (!sampling) out.bound_hit = fmt::format("--time-budget {}", options.time_budget_s);
        break;
      }
      if (options.max_memory_bytes > 0 && (out.executions & 63) == 0 && memory_check_due() &&
          sim::resident_bytes() > options.max_memory_bytes) {
        out.bound_hit = fmt::format("--max-memory {} (MiB)", options.max_memory_bytes >> 20);
        break;
      }
      if (!sampling && options.patience > 0 && stale >= options.patience) {
        out.bound_hit = fmt::format("--patience {}", options.patience);
        break;
      }
      if (options.stop != nullptr && options.stop->load(std::memory_order_relaxed)) {
        out.bound_hit = "interrupted";
        out.interrupted = true;
        break;
      }
      if (halted.load(std::memory_order_relaxed)) break;
      if (shared_budget) {
        if (failed.load(std::memory_order_relaxed)) break;  // what stopped it is that search's to report
        if (enough_bugs.load(std::memory_order_relaxed)) {
          out.bound_hit = fmt::format("--max-bugs {}", options.max_bugs);
          break;
        }
        // This execution's place in the budget, taken before it runs.
        if (executions_so_far.fetch_add(1, std::memory_order_relaxed) >= budget) {
          executions_so_far.fetch_sub(1, std::memory_order_relaxed);
          out.bound_hit = fmt::format("--max-executions {}", budget);
          break;
        }
      }
      if (report_progress && options.progress && (out.executions & 63) == 0) {
        const double now = elapsed();
        if (now >= 1.0 && now - last_progress >= 0.5) {
          last_progress = now;
          const uint64_t all = executions_so_far.load(std::memory_order_relaxed);
          options.progress(Progress{all, static_cast<double>(all) / now, longest, search.stats().states,
                                    bugs_so_far.load(std::memory_order_relaxed), now});
        }
      }
      search.begin(out.executions);
      sim::ExecutionResult result = engine.run(recorder);  // tells the recorder where it starts
      ++out.executions;
      if (!shared_budget) executions_so_far.fetch_add(1, std::memory_order_relaxed);
      out.events += result.events;
      longest = std::max<uint64_t>(longest, result.choice_points);
      uint64_t hash = FNV_OFFSET;
      for (const sim::Option& c : recorder.choices()) fnv_mix(hash, static_cast<uint64_t>(c.rank) << 32 | static_cast<uint32_t>(c.detail));
      fnv_mix(hash, static_cast<uint64_t>(result.end));
      if (!classes.empty()) ++stale;
      if (result.end == sim::ExecutionEnd::PRUNED) {
        // Its future was explored from an equal state, or every option was asleep: nothing
        // new to analyse.
        ++out.pruned;
        record(hash);
        if (!search.next(result)) {
          out.complete = true;
          break;
        }
        continue;
      }
      if (result.end == sim::ExecutionEnd::ERROR || result.end == sim::ExecutionEnd::LIMIT) {
        if (result.end == sim::ExecutionEnd::LIMIT) out.bound_hit = result.error->message;
        else out.error = result.error;
        if (shared_budget) failed = true;
        record(hash);
        break;
      }
      // A completed execution has no bug (analyze would say so after copying the ranks' status).
      std::optional<Bug> bug;
      if (result.end != sim::ExecutionEnd::COMPLETED) bug = analyze(scenario, result);
      if (options.collect_terminal_states) out.terminal_states.insert(bug ? bug->signature : std::string("completed"));
      if (bug) {
        fnv_mix(hash, bug->signature);
        if (classes.insert(bug->class_key).second) stale = 0;
        if (seen.insert(bug->signature).second) {
          if (shared_budget) {
            count_shared_bug(bug->signature);
          } else {
            bugs_so_far.fetch_add(1, std::memory_order_relaxed);
          }
          bug->schedule = search.schedule();
          bug->choices = recorder.choices();
          bug->execution = out.executions;
          out.bugs.push_back(std::move(*bug));
        }
      }
      record(hash);
      if (options.max_bugs > 0 && out.bugs.size() >= options.max_bugs) {
        out.bound_hit = fmt::format("--max-bugs {}", options.max_bugs);
        break;
      }
      if (!search.next(result)) {
        out.complete = true;
        break;
      }
    }
    const SearchStats stats = search.stats();
    out.sleep_blocked = stats.sleep_blocked;
    out.states = stats.states;
    out.cache_full = stats.state_cache_full;
    return out;
  }

  // --jobs N with a strategy that gives branches away: one search on this thread, whose
  // branches idle threads explore (and theirs, in turn), sharing one state cache; with
  // run_branches (--mpi), other processes too, each with a cache of its own. What every search
  // found, as one slice (root first, then the branches as they ended).
  Slice explore_giving(unsigned jobs, uint64_t& donations);
};

// check --mpi: the branches given to other processes (BranchPort). Each result is merged as a
// local branch's is, and its mail posted to the search that gave the branch.
class RemoteBranches final : public BranchPort {
 public:
  RemoteBranches(Exploration& search, WorkPool& pool, sim::FootprintIds& ids, std::function<void(Slice)> done)
      : search_(search), pool_(pool), ids_(ids), done_(std::move(done)) {}

  void set_waiting(size_t n) override { pool_.set_remote_waiting(n); }

  bool halted() override {
    return search_.enough_bugs.load(std::memory_order_relaxed) || search_.failed.load(std::memory_order_relaxed) ||
           (search_.options.stop != nullptr && search_.options.stop->load(std::memory_order_relaxed));
  }

  std::optional<std::pair<uint64_t, std::string>> take() override {
    if (halted()) return std::nullopt;  // queued branches are left to the search's threads
    std::unique_ptr<Donation> d = pool_.take();
    if (!d) return std::nullopt;
    // What is left of the budget now; a branch may spend all of it (the report then counts
    // what every process ran).
    const uint64_t used = search_.executions_so_far.load(std::memory_order_relaxed);
    const bool cache = search_.shared_cache != nullptr && search_.shared_cache->useful();
    std::string text = donation_json(*d, search_.budget - std::min(search_.budget, used), cache, ids_);
    const std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t id = next_++;
    out_[id] = std::move(d);
    return std::make_pair(id, std::move(text));
  }

  bool answer(uint64_t id, std::string_view text) override {
    std::unique_ptr<Donation> d = claim(id);
    if (!d) return true;  // taken as lost before: explored again already
    std::optional<BranchResult> r = branch_result_of(text, search_.scenario, search_.options, ids_);
    // Mail only about the nodes down to the branch's, ending with the one DONE.
    const bool fits = r && !r->mail.empty() && r->mail.back().kind == BranchMail::Kind::DONE && r->mail.back().node == d->node &&
                      std::all_of(r->mail.begin(), r->mail.end() - 1, [&](const BranchMail& m) {
                        return m.kind != BranchMail::Kind::DONE && m.node <= d->node;
                      });
    if (!fits) {
      pool_.put_back(std::move(d));
      return false;
    }
    Slice& part = r->part;
    search_.executions_so_far.fetch_add(part.executions, std::memory_order_relaxed);
    if (part.error) search_.failed = true;  // the others stop: that error is the report's
    for (const Bug& bug : part.bugs) search_.count_shared_bug(bug.signature);
    done_(std::move(part));
    for (BranchMail& m : r->mail) d->owner->post(std::move(m));  // DONE last: the slice is in
    return true;
  }

  void lost(uint64_t id) override {
    if (std::unique_ptr<Donation> d = claim(id)) pool_.put_back(std::move(d));
  }

 private:
  // Branch `id`, no longer out (null: not out, its answer or loss already taken).
  std::unique_ptr<Donation> claim(uint64_t id) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = out_.find(id);
    if (it == out_.end()) return nullptr;
    std::unique_ptr<Donation> d = std::move(it->second);
    out_.erase(it);
    return d;
  }

  Exploration& search_;
  WorkPool& pool_;
  sim::FootprintIds& ids_;
  std::function<void(Slice)> done_;
  std::mutex mutex_;
  uint64_t next_ = 0;
  std::map<uint64_t, std::unique_ptr<Donation>> out_;  // sent, not yet answered
};

Slice Exploration::explore_giving(unsigned jobs, uint64_t& donations) {
  // The engines number objects and actors alike, so that what one search posts to another
  // (steps, footprints) and the state cache mean the same on every thread.
  sim::FootprintIds ids;
  engine_options.ids = &ids;
  std::optional<StateCache> cache;
  if (options.state_cache) shared_cache = &cache.emplace(StateCache::DEFAULT_MAX_STATES, true);
  shared_budget = true;
  // The thread that runs the root search reports progress.
  std::atomic<std::thread::id> calling{std::this_thread::get_id()};
  std::mutex mutex;  // what follows
  std::vector<Slice> branches;
  std::map<std::thread::id, std::vector<std::unique_ptr<sim::Engine>>> engines;  // by level
  auto engine_at = [&](int level) -> sim::Engine& {
    const std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::unique_ptr<sim::Engine>>& mine = engines[std::this_thread::get_id()];
    if (mine.size() <= static_cast<size_t>(level)) mine.resize(static_cast<size_t>(level) + 1);
    if (!mine[static_cast<size_t>(level)]) mine[static_cast<size_t>(level)] = std::make_unique<sim::Engine>(scenario, engine_options);
    return *mine[static_cast<size_t>(level)];
  };
  WorkPool* pool_of_branches = nullptr;
  auto explore = [&](std::unique_ptr<Search> search, int level) {
    Slice slice = run(engine_at(level), *search, std::this_thread::get_id() == calling, budget);
    search->finish();
    const std::lock_guard<std::mutex> lock(mutex);
    donations += search->donations();
    return slice;
  };
  WorkPool pool(
      [&](std::unique_ptr<Donation> donation, int level) {
        SearchOptions branch_options = search_options();
        branch_options.pool = pool_of_branches;
        branch_options.level = level;
        branch_options.cache_once_decided = true;
        Slice slice = explore(info.make_branch(branch_options, *donation), level);
        const std::lock_guard<std::mutex> lock(mutex);
        branches.push_back(std::move(slice));
      },
      // Not before the search has run jobs_after executions (one that ends sooner is what
      // --jobs 1 reports; 0: at once).
      [&] { return options.jobs_after == 0 || executions_so_far.load(std::memory_order_relaxed) >= options.jobs_after; });
  pool_of_branches = &pool;
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j) threads.emplace_back([&] { pool.serve(); });
  SearchOptions root_options = search_options();
  root_options.pool = &pool;
  Slice all;
  const auto root = [&] {
    calling = std::this_thread::get_id();
    all = explore(info.make(root_options), 0);
  };
  if (options.run_branches) {
    RemoteBranches port(*this, pool, ids, [&](Slice slice) {
      const std::lock_guard<std::mutex> lock(mutex);
      branches.push_back(std::move(slice));
    });
    options.run_branches(root, port);
  } else {
    root();
  }
  pool.finish();
  for (std::thread& t : threads) t.join();
  for (Slice& b : branches) {
    for (Bug& bug : b.bugs) {
      bug.execution += all.executions;
      all.bugs.push_back(std::move(bug));
    }
    all.fold = all.fold * fold_power(b.executions) + b.fold;
    for (size_t i = 0; i < b.hashes.size(); ++i) {
      all.hashes.push_back(b.hashes[i]);
      all.events_after.push_back(all.events + b.events_after[i]);
      all.pruned_after.push_back(all.pruned + b.pruned_after[i]);
      all.blocked_after.push_back(all.sleep_blocked + b.blocked_after[i]);
    }
    all.executions += b.executions;
    all.pruned += b.pruned;
    all.sleep_blocked += b.sleep_blocked;
    all.events += b.events;
    all.cache_full = all.cache_full || b.cache_full;
    all.terminal_states.insert(b.terminal_states.begin(), b.terminal_states.end());
    if (b.error && !all.error) all.error = b.error;
    if (all.bound_hit.empty()) all.bound_hit = b.bound_hit;
    all.interrupted = all.interrupted || b.interrupted;
    all.complete = all.complete && b.complete;
  }
  all.states = cache ? cache->size() : 0;
  engines.clear();
  engine_options.ids = nullptr;
  shared_cache = nullptr;
  return all;
}

// The search of `scenario` under `options`, with the same bounds inside an execution, so that
// one endless execution cannot run past them.
std::unique_ptr<Exploration> exploration(const sim::Scenario& scenario, const CheckOptions& options) {
  const StrategyInfo* info = find_strategy(options.strategy);
  assert(info != nullptr && "the CLI accepts only strategy_names()");
  // Braces, not make_unique's parentheses: clang 14 (the fuzz targets' compiler) has no
  // parenthesized aggregate initialization.
  std::unique_ptr<Exploration> search(
      new Exploration{scenario, options, *info, engine_options_for(options), Clock::now(), execution_budget(options)});
  if (options.time_budget_s > 0) {
    search->engine_options.deadline =
        search->started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.time_budget_s));
  }
  search->engine_options.max_resident_bytes = options.max_memory_bytes;
  return search;
}

// Parts and their results in depth-first order, by prefix: a part whose later executions were
// given away (bounded) comes before the parts that took them, whose prefixes extend its own.
void sort_by_prefix(std::vector<Part>& parts, std::vector<Slice>& slices) {
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return parts[a].prefix < parts[b].prefix; });
  std::vector<Part> sorted_parts;
  std::vector<Slice> sorted_slices;
  for (const size_t i : order) {
    sorted_parts.push_back(std::move(parts[i]));
    sorted_slices.push_back(std::move(slices[i]));
  }
  parts = std::move(sorted_parts);
  slices = std::move(sorted_slices);
}

// --jobs with a strategy that splits: `parts` run on `jobs` threads, each thread taking the next
// part not started. A thread that finds none left asks the running part that started first to
// give away what it has yet to run (Search::give_away, through the part's StealBox): the parts
// given join the list, after the others, and the part keeps the executions up to its new
// bound. Each part's result goes to `slices` at the part's index.
void run_parts_here(const Exploration& search, unsigned jobs, std::vector<Part>& parts, std::vector<Slice>& slices) {
  struct Running {
    std::unique_ptr<StealBox> box = std::make_unique<StealBox>();
    uint64_t executions = UINT64_MAX;  // its executions once it ended (UINT64_MAX until then)
    uint64_t started = 0;              // its place in the order parts started (0: not yet)
    bool asked = false;                // its box holds a question not yet answered
    bool keeps = false;                // it said it has nothing left to give
  };
  std::mutex mutex;
  std::condition_variable changed;  // a part ended, or parts were added
  std::vector<Running> state(parts.size());
  size_t next = 0;
  uint64_t starts = 0;
  slices.resize(parts.size());
  // Under `mutex`: the answer of part i's search, the parts it gave added.
  auto apply = [&](size_t i, StealBox::Answer given) {
    state[i].asked = false;
    const bool gave = !given.prefixes.empty();
    const std::optional<size_t> added = gave ? take_given(parts, i, std::move(given)) : std::nullopt;
    assert((added || !gave) && "a search gave away executions outside its part");
    if (!added) {
      state[i].keeps = true;
      return;
    }
    state.resize(parts.size());
    slices.resize(parts.size());
    changed.notify_all();
  };
  auto worker = [&](bool calling_thread) {
    sim::Engine engine(search.scenario, search.engine_options);
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      if (next < parts.size()) {
        const size_t i = next++;
        // Its budget: what the parts before it that are done left. Those still running only
        // leave less, so the merge never needs more of a part than it ran.
        uint64_t budget = search.budget;
        for (size_t j = 0; j < parts.size(); ++j) {
          if (state[j].executions != UINT64_MAX && parts[j].prefix < parts[i].prefix) budget -= std::min(budget, state[j].executions);
        }
        if (budget == 0) {  // the merge stops before this part
          state[i].executions = 0;
          continue;
        }
        state[i].started = ++starts;
        Part part = parts[i];
        StealBox* box = state[i].box.get();
        lock.unlock();
        const std::unique_ptr<Search> made = search.info.make(search.search_options(std::move(part.prefix), std::move(part.bound)));
        Slice slice = search.run(engine, *made, calling_thread, budget, box);
        lock.lock();
        slices[i] = std::move(slice);
        state[i].executions = slices[i].executions;
        // An answer its search gave before it ended: the parts it gave are still to run.
        if (std::optional<StealBox::Answer> given = box->take()) apply(i, std::move(*given));
        state[i].asked = false;
        changed.notify_all();
        continue;
      }
      // None left: take work from the part running longest, or wait for an answer.
      bool running = false;
      std::optional<size_t> victim;
      for (size_t j = 0; j < parts.size(); ++j) {  // apply() adds to `state`: no references
        if (state[j].started == 0 || state[j].executions != UINT64_MAX) continue;
        running = true;
        if (state[j].asked) {
          if (std::optional<StealBox::Answer> given = state[j].box->take()) apply(j, std::move(*given));
        }
        if (!state[j].asked && !state[j].keeps && (!victim || state[j].started < state[*victim].started)) victim = j;
      }
      if (!running) return;
      if (next < parts.size()) continue;
      if (victim && std::none_of(state.begin(), state.end(), [](const Running& r) { return r.asked; })) {
        state[*victim].asked = true;
        state[*victim].box->ask();
      }
      changed.wait_for(lock, std::chrono::milliseconds(1));
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j) threads.emplace_back(worker, false);
  worker(true);
  for (std::thread& t : threads) t.join();
}

}  // namespace

std::optional<size_t> take_given(std::vector<Part>& parts, size_t i, StealBox::Answer given) {
  if (i >= parts.size()) return std::nullopt;
  const std::vector<uint32_t>& prefix = parts[i].prefix;
  const std::vector<uint32_t>& old = parts[i].bound;
  const auto extends = [](const std::vector<uint32_t>& v, const std::vector<uint32_t>& start) {
    return v.size() > start.size() && std::equal(start.begin(), start.end(), v.begin());
  };
  // The bound narrows the part (below the old one, or before it); each new part starts after it.
  if (!extends(given.bound, prefix) || (!old.empty() && !(extends(given.bound, old) || given.bound < old))) return std::nullopt;
  for (const std::vector<uint32_t>& p : given.prefixes) {
    if (!extends(p, prefix) || !(given.bound < p)) return std::nullopt;
  }
  parts[i].bound = std::move(given.bound);
  for (std::vector<uint32_t>& p : given.prefixes) parts.push_back(Part{std::move(p), {}});
  return given.prefixes.size();
}

PartResult explore_part(const sim::Scenario& scenario, const CheckOptions& options, Part part_of, uint64_t budget) {
  const std::unique_ptr<Exploration> search = exploration(scenario, options);
  sim::Engine engine(scenario, search->engine_options);
  const std::unique_ptr<Search> part =
      search->info.make(search->search_options(std::move(part_of.prefix), std::move(part_of.bound)));
  return search->run(engine, *part, false, std::min(budget, search->budget));
}

CheckResult check_scenario(const sim::Scenario& scenario, const CheckOptions& options) {
  CheckResult out;
  out.strategy = options.strategy;
  out.fingerprint = FNV_OFFSET;  // folded as PartResult::fold
  const std::unique_ptr<Exploration> explored = exploration(scenario, options);
  Exploration& search = *explored;
  const StrategyInfo* info = &search.info;
  out.reduces = info->reduces;
  const bool sampling = !info->exhaustive;
  if (search.engine_options.symmetry) {
    const sim::Engine engine(scenario, search.engine_options);
    out.symmetry = true;
    for (const std::vector<uint32_t>& c : engine.rank_classes()) out.rank_classes.emplace_back(c.begin(), c.end());
    out.symmetry_note = engine.symmetry_note();
  }

  std::vector<Slice> slices;
  std::vector<Part> remote_parts;  // the parts given to run_parts, as they ended
  const unsigned jobs = std::max(1u, options.jobs);
  bool timing_dependent = false;  // which part finds a bug first depends on the threads' timing
  bool split = info->splits && (jobs > 1 || options.run_parts);
  uint64_t donations = 0;
  std::optional<PartResult> whole = options.run_whole ? options.run_whole(scenario) : std::nullopt;
  if (whole) {
    slices.push_back(std::move(*whole));
    remote_parts.emplace_back();  // a cut inside it is explored again here (below)
    split = false;
  } else if (info->make_branch != nullptr && (jobs > 1 || options.run_branches)) {
    slices.push_back(search.explore_giving(jobs, donations));
    out.parts = donations;
    timing_dependent = donations > 0;
  } else if (split && options.jobs_after > 0) {
    // Small enough for one thread?
    sim::Engine engine(scenario, search.engine_options);
    const std::unique_ptr<Search> one = info->make(search.search_options());
    const uint64_t first = std::min(options.jobs_after, search.budget);
    Slice slice = search.run(engine, *one, true, first);
    if (slice.complete || slice.executions < first || first == search.budget) {
      slices.push_back(std::move(slice));
      split = false;
    } else {
      search.executions_so_far = 0;
      search.bugs_so_far = 0;
    }
  } else if (!split) {
    sim::Engine engine(scenario, search.engine_options);
    const std::unique_ptr<Search> one = info->make(search.search_options());
    slices.push_back(search.run(engine, *one, true, search.budget));
  }
  if (split) {
    std::vector<Part> parts;
    {
      sim::Engine engine(scenario, search.engine_options);
      parts = split_tree(engine, PARTS);
    }
    slices.resize(parts.size());
    out.parts = parts.size();
    if (options.run_parts) {
      remote_parts = std::move(parts);
      slices = options.run_parts(remote_parts, search.budget);
      sort_by_prefix(remote_parts, slices);
      out.parts = remote_parts.size();
      parts.clear();  // run elsewhere
    }
    if (!parts.empty()) {  // not run elsewhere
      run_parts_here(search, jobs, parts, slices);
      sort_by_prefix(parts, slices);
      out.parts = parts.size();
    }
  }

  // Merge in DFS order, cutting at the execution budget exactly where one thread would stop.
  std::set<std::string> seen;
  bool complete = true;
  size_t merged = 0;  // slices taken in
  for (Slice& slice : slices) {
    ++merged;
    const uint64_t room = search.budget - out.executions;
    uint64_t take = std::min<uint64_t>(slice.executions, room);
    // --max-bugs: one thread stops right after the execution that found the last bug wanted. A
    // slice counts only its own distinct bugs, never more than the merge does, so it never
    // stopped before that execution.
    bool enough_bugs = false;
    for (Bug& bug : slice.bugs) {
      if (bug.execution > take || !seen.insert(bug.signature).second) continue;
      const uint64_t local = bug.execution;
      bug.execution += out.executions;
      out.bugs.push_back(std::move(bug));
      if (options.max_bugs > 0 && out.bugs.size() >= options.max_bugs) {
        take = local;
        enough_bugs = true;
        break;
      }
    }
    if (take < slice.executions && slice.hashes.size() != slice.executions && merged <= remote_parts.size()) {
      // Run elsewhere without its series and cut here: its first `take` executions again.
      CheckOptions here = options;
      here.run_parts = nullptr;
      here.steal = nullptr;
      Slice again = explore_part(scenario, here, remote_parts[merged - 1], take);
      slice.hashes = std::move(again.hashes);
      slice.events_after = std::move(again.events_after);
      slice.pruned_after = std::move(again.pruned_after);
      slice.blocked_after = std::move(again.blocked_after);
    }
    if (take < slice.executions && slice.hashes.size() < take && merged > remote_parts.size()) {
      // Branches explored in other processes (--mpi with dpor) sent no series: the slice is
      // taken whole, past the budget by what they ran (its bound_hit says so).
      take = slice.executions;
    }
    if (take == slice.executions) {  // the whole part: its totals
      out.fingerprint = out.fingerprint * fold_power(take) + slice.fold;
      out.pruned += slice.pruned;
      out.sleep_blocked += slice.sleep_blocked;
      out.events += slice.events;
    } else if (take > 0) {
      for (uint64_t i = 0; i < take; ++i) out.fingerprint = out.fingerprint * FOLD_BASE + slice.hashes[i];
      out.pruned += slice.pruned_after[take - 1];
      out.sleep_blocked += slice.blocked_after[take - 1];
      out.events += slice.events_after[take - 1];
    }
    out.executions += take;
    out.states += slice.states;
    out.state_cache_full = out.state_cache_full || slice.cache_full;
    out.terminal_states.insert(slice.terminal_states.begin(), slice.terminal_states.end());
    if (slice.error && !out.error) out.error = slice.error;
    out.interrupted = out.interrupted || slice.interrupted;
    if (enough_bugs) {
      out.bound_hit = fmt::format("--max-bugs {}", options.max_bugs);
      complete = false;
      break;
    }
    if (!slice.bound_hit.empty() && out.bound_hit.empty()) out.bound_hit = slice.bound_hit;
    if (take < slice.executions || !slice.complete) {
      complete = false;
      if (out.bound_hit.empty() && !slice.error) out.bound_hit = fmt::format("--max-executions {}", search.budget);
    }
    if (out.error || !complete) break;
  }
  if (std::any_of(slices.begin(), slices.end(), [](const Slice& slice) { return slice.interrupted; })) {
    // Interrupted: every bug any part found is reported, not only those before the cut.
    out.interrupted = true;
    out.bound_hit = "interrupted";
    for (size_t i = merged; i < slices.size(); ++i) {
      for (Bug& bug : slices[i].bugs) {
        if (seen.insert(bug.signature).second) out.bugs.push_back(std::move(bug));
      }
    }
  }
  out.exhaustive = complete && out.bound_hit.empty() && !out.error;
  out.timing_dependent = timing_dependent;
  if (timing_dependent) {
    // The parts share the state cache: a bug below a state is found by whichever part explores
    // the state first. The bugs are listed by kind, then signature, so that the list and the
    // verdict do not depend on the timing (which execution shows each one still may).
    std::stable_sort(out.bugs.begin(), out.bugs.end(), [](const Bug& a, const Bug& b) {
      return std::tie(a.kind, a.signature) < std::tie(b.kind, b.signature);
    });
  }
  if (!out.bugs.empty()) {
    out.verdict = out.bugs.front().kind;
  } else if (!out.exhaustive && !sampling) {
    out.verdict = sim::Verdict::INCONCLUSIVE;
  } else {
    out.verdict = sim::Verdict::OK;  // sampled runs found none: exhaustive says which
  }
  if (sampling) out.bound_hit.clear();
  out.seconds = search.elapsed();
  return out;
}

namespace {

// The mail of a branch's search, kept to go back with its result.
class KeptMail final : public MailSink {
 public:
  void post(BranchMail mail) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    mail_.push_back(std::move(mail));
  }
  std::vector<BranchMail> take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return std::move(mail_);
  }

 private:
  std::mutex mutex_;
  std::vector<BranchMail> mail_;
};


// What a BranchHost holds.
struct Host {
  const sim::Scenario& scenario;
  std::unique_ptr<Exploration> search;
  sim::FootprintIds ids;
  std::optional<StateCache> cache;
  std::optional<sim::Engine> engine;  // every branch's, one after the other
};

std::string explore_branch(Host& host, std::string_view text) {
  Exploration& search = *host.search;
  std::optional<ReceivedBranch> received = donation_of(text, host.ids);
  if (!received || search.info.make_branch == nullptr) return {};
  KeptMail mail;
  received->donation.owner = &mail;
  SearchOptions options = search.search_options();
  options.state_cache = options.state_cache && received->cache;  // useless where it gave up
  const std::unique_ptr<Search> branch = search.info.make_branch(options, received->donation);
  const Slice slice = search.run(*host.engine, *branch, false, std::min(received->budget, search.budget));
  branch->finish();
  return branch_result_json(slice, mail.take(), host.ids);
}

}  // namespace

// Held through functions: a member of this file's (anonymous namespace) type would give the
// class a part no other file can name.
struct BranchHost::Impl {
  std::function<std::string(std::string_view)> explore;
  std::function<void()> halt;
};

BranchHost::BranchHost(const sim::Scenario& scenario, const CheckOptions& options) : impl_(new Impl) {
  const std::shared_ptr<Host> host(new Host{scenario, exploration(scenario, options), {}, {}, {}});
  host->search->engine_options.ids = &host->ids;
  if (options.state_cache) host->search->shared_cache = &host->cache.emplace(StateCache::DEFAULT_MAX_STATES, true);
  host->engine.emplace(scenario, host->search->engine_options);  // tells the ids the threads
  impl_->explore = [host](std::string_view text) { return explore_branch(*host, text); };
  impl_->halt = [host] { host->search->halted = true; };
}

BranchHost::~BranchHost() = default;

void BranchHost::halt() { impl_->halt(); }

std::string BranchHost::explore(std::string_view text) { return impl_->explore(text); }

}  // namespace lockstep::checker
