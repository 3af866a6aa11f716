#include "checker/explore.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <thread>
#include <set>

#include <fmt/format.h>

#include "checker/replay.h"
#include "checker/search.h"

namespace lockstep::checker {

namespace {

constexpr uint64_t FNV_OFFSET = 14695981039346656037ULL;
constexpr uint64_t FNV_PRIME = 1099511628211ULL;

void fnv_mix(uint64_t& hash, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (value >> (8 * i)) & 0xff;
    hash *= FNV_PRIME;
  }
}

void fnv_mix(uint64_t& hash, const std::string& text) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= FNV_PRIME;
  }
  fnv_mix(hash, text.size());
}

}  // namespace

uint64_t resident_bytes() {
  // statm: total and resident pages. One small read, done every 64 executions.
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (file == nullptr) return 0;
  unsigned long long total = 0, resident = 0;
  const int read = std::fscanf(file, "%llu %llu", &total, &resident);
  std::fclose(file);
  return read == 2 ? resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

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
// schedule prefix (--jobs). Parts are merged in DFS order, so the result does not depend on
// how many threads ran them.
struct Slice {
  uint64_t executions = 0;
  uint64_t pruned = 0;           // executions ended at a state already explored (or all asleep)
  uint64_t sleep_blocked = 0;    // of them, ended because every option was asleep
  uint64_t states = 0;           // states in the cache at the end
  bool cache_full = false;
  uint64_t events = 0;
  std::vector<uint64_t> hashes;  // one per execution, in order
  std::vector<uint64_t> events_after;  // events of the slice's executions so far, per execution
  std::vector<uint64_t> pruned_after;  // pruned executions so far, per execution
  std::vector<uint64_t> blocked_after;  // sleep-blocked executions so far, per execution
  std::vector<Bug> bugs;         // first execution of each signature, `execution` local
  std::set<std::string> terminal_states;
  std::optional<sim::Diagnostic> error;
  std::string bound_hit;
  bool complete = false;         // the part was explored to its end
};

using Clock = std::chrono::steady_clock;

struct Exploration {
  const sim::Scenario& scenario;
  const CheckOptions& options;
  const StrategyInfo& info;
  sim::EngineOptions engine_options;
  Clock::time_point started;
  uint64_t budget;

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - started).count(); }

  SearchOptions search_options(std::vector<uint32_t> prefix = {}) const {
    SearchOptions out;
    out.seed = options.seed;
    out.pct_depth = options.pct_depth;
    out.prefix = std::move(prefix);
    out.sleep_sets = options.sleep_sets;
    out.state_cache = options.state_cache;
    out.dfs_state_cache = options.dfs_state_cache;
    return out;
  }

  // Runs executions under `search` (over the whole space, or the subtree under one schedule
  // prefix for --jobs) until it is done or `budget` executions ran.
  Slice run(sim::Engine& engine, Search& search, bool report_progress) const {
    Slice out;
    RecordingStrategy recorder(search);
    std::set<std::string> seen;
    uint64_t longest = 0;  // most choice points in one execution (the progress line's depth)
    double last_progress = 0;
    const bool sampling = !info.exhaustive;
    auto record = [&](uint64_t hash) {
      const SearchStats stats = search.stats();
      out.hashes.push_back(hash);
      out.events_after.push_back(out.events);
      out.pruned_after.push_back(out.pruned);
      out.blocked_after.push_back(stats.sleep_blocked);
    };
    while (true) {
      if (out.executions >= budget) {
        if (!sampling) out.bound_hit = fmt::format("--max-executions {}", budget);
        break;
      }
      if (options.time_budget_s > 0 && elapsed() > options.time_budget_s) {
        if (!sampling) out.bound_hit = fmt::format("--time-budget {}", options.time_budget_s);
        break;
      }
      if (options.max_memory_bytes > 0 && (out.executions & 63) == 0 && resident_bytes() > options.max_memory_bytes) {
        out.bound_hit = fmt::format("--max-memory {} (MiB)", options.max_memory_bytes >> 20);
        break;
      }
      if (report_progress && options.progress && (out.executions & 63) == 0) {
        const double now = elapsed();
        if (now >= 1.0 && now - last_progress >= 0.5) {
          last_progress = now;
          options.progress(Progress{out.executions, static_cast<double>(out.executions) / now, longest, now});
        }
      }
      search.begin(out.executions);
      sim::ExecutionResult result = engine.run(recorder);  // tells the recorder where it starts
      ++out.executions;
      out.events += result.events;
      longest = std::max<uint64_t>(longest, result.choice_points);
      uint64_t hash = FNV_OFFSET;
      for (const sim::Option& c : recorder.choices()) fnv_mix(hash, static_cast<uint64_t>(c.rank) << 32 | static_cast<uint32_t>(c.detail));
      fnv_mix(hash, static_cast<uint64_t>(result.end));
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
        record(hash);
        break;
      }
      // A completed execution has no bug (analyze would say so after copying the ranks' status).
      std::optional<Bug> bug;
      if (result.end != sim::ExecutionEnd::COMPLETED) bug = analyze(scenario, result);
      if (options.collect_terminal_states) out.terminal_states.insert(bug ? bug->signature : std::string("completed"));
      if (bug) {
        fnv_mix(hash, bug->signature);
        if (seen.insert(bug->signature).second) {
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

  // Schedule prefixes that split the DFS tree into at least `want` subtrees, in DFS order. Each
  // costs one probing execution (not counted in the report).
  std::vector<std::vector<uint32_t>> split(sim::Engine& engine, size_t want) const {
    struct Probe final : sim::Strategy {
      std::vector<uint32_t> prefix;
      std::vector<uint32_t> sizes;
      size_t choose(const sim::ChoicePoint& point) override {
        const size_t depth = sizes.size();
        sizes.push_back(static_cast<uint32_t>(point.options.size()));
        return depth < prefix.size() ? prefix[depth] : 0;
      }
    };
    std::vector<std::vector<uint32_t>> frontier{{}};
    for (int level = 0; level < 6 && frontier.size() < want; ++level) {
      std::vector<std::vector<uint32_t>> next;
      bool grew = false;
      for (const std::vector<uint32_t>& prefix : frontier) {
        Probe probe;
        probe.prefix = prefix;
        const sim::ExecutionResult result = engine.run(probe);
        if (result.end == sim::ExecutionEnd::ERROR || result.end == sim::ExecutionEnd::LIMIT ||
            probe.sizes.size() <= prefix.size()) {
          next.push_back(prefix);  // a leaf (or an error the search itself will report)
          continue;
        }
        grew = true;
        for (uint32_t i = 0; i < probe.sizes[prefix.size()]; ++i) {
          std::vector<uint32_t> child = prefix;
          child.push_back(i);
          next.push_back(std::move(child));
        }
      }
      frontier = std::move(next);
      if (!grew) break;
    }
    return frontier;
  }
};

}  // namespace

CheckResult check_scenario(const sim::Scenario& scenario, const CheckOptions& options) {
  CheckResult out;
  out.strategy = options.strategy;
  out.fingerprint = FNV_OFFSET;
  const StrategyInfo* info = find_strategy(options.strategy);
  assert(info != nullptr && "the CLI accepts only strategy_names()");
  Exploration search{scenario, options, *info, engine_options_for(options), Clock::now(), execution_budget(options)};
  const bool sampling = !info->exhaustive;

  std::vector<Slice> slices;
  const unsigned jobs = std::max(1u, options.jobs);
  if (!info->splits || jobs == 1) {
    sim::Engine engine(scenario, search.engine_options);
    const std::unique_ptr<Search> one = info->make(search.search_options());
    slices.push_back(search.run(engine, *one, true));
  } else {
    std::vector<std::vector<uint32_t>> prefixes;
    {
      sim::Engine engine(scenario, search.engine_options);
      prefixes = search.split(engine, 8 * jobs);
    }
    slices.resize(prefixes.size());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      sim::Engine engine(scenario, search.engine_options);
      for (size_t i = next++; i < prefixes.size(); i = next++) {
        const std::unique_ptr<Search> part = info->make(search.search_options(prefixes[i]));
        slices[i] = search.run(engine, *part, false);
      }
    };
    std::vector<std::thread> threads;
    for (unsigned j = 1; j < jobs; ++j) threads.emplace_back(worker);
    worker();
    for (std::thread& t : threads) t.join();
  }

  // Merge in DFS order, cutting at the execution budget exactly where one thread would stop.
  std::set<std::string> seen;
  bool complete = true;
  for (Slice& slice : slices) {
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
    for (uint64_t i = 0; i < take; ++i) fnv_mix(out.fingerprint, slice.hashes[i]);
    out.executions += take;
    if (take > 0) out.pruned += slice.pruned_after[take - 1];
    if (take > 0) out.sleep_blocked += slice.blocked_after[take - 1];
    out.states += slice.states;
    out.state_cache_full = out.state_cache_full || slice.cache_full;
    if (take > 0) out.events += slice.events_after[take - 1];
    out.terminal_states.insert(slice.terminal_states.begin(), slice.terminal_states.end());
    if (slice.error && !out.error) out.error = slice.error;
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
  out.exhaustive = complete && out.bound_hit.empty() && !out.error;
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

}  // namespace lockstep::checker
