#include "checker/explore.h"

#include <chrono>
#include <set>

#include <fmt/format.h>

#include "checker/dfs.h"
#include "checker/replay.h"
#include "checker/sampling.h"

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

sim::EngineOptions engine_options_for(const CheckOptions& options) {
  sim::EngineOptions engine = options.engine;
  engine.record_ops = false;
  // dfs is the plain exhaustive oracle: every interleaving of the ranks' choices.
  engine.rank_persistent_sets = options.strategy != "dfs";
  return engine;
}

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"dfs", "dpor", "pct", "random"};
  return names;
}

bool is_sampling(const std::string& strategy) { return strategy == "random" || strategy == "pct"; }

uint64_t execution_budget(const CheckOptions& options) {
  if (options.max_executions > 0) return options.max_executions;
  return is_sampling(options.strategy) ? DEFAULT_SAMPLES : DEFAULT_MAX_EXECUTIONS;
}

CheckResult check_scenario(const sim::Scenario& scenario, const CheckOptions& options) {
  CheckResult out;
  out.strategy = options.strategy;
  out.fingerprint = FNV_OFFSET;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };

  const sim::EngineOptions engine_options = engine_options_for(options);
  sim::Engine engine(scenario, engine_options);
  const bool sampling = is_sampling(options.strategy);
  const uint64_t budget = execution_budget(options);
  DfsStrategy dfs;
  RandomStrategy random(options.seed);
  PctStrategy pct(options.seed, options.pct_depth);
  sim::Strategy& inner = options.strategy == "random" ? static_cast<sim::Strategy&>(random)
                         : options.strategy == "pct"  ? static_cast<sim::Strategy&>(pct)
                                                      : static_cast<sim::Strategy&>(dfs);
  RecordingStrategy recorder(inner);
  std::set<std::string> seen;
  uint64_t longest = 0;  // most choice points in one execution (PCT's change point range)
  double last_progress = 0;
  bool more = true;
  bool covered = false;  // a sampling run met an execution with no choice at all: one execution is the space
  while (more) {
    if (out.executions >= budget) {
      if (!sampling) out.bound_hit = fmt::format("--max-executions {}", budget);
      break;
    }
    if (options.time_budget_s > 0 && elapsed() > options.time_budget_s) {
      if (!sampling) out.bound_hit = fmt::format("--time-budget {}", options.time_budget_s);
      break;
    }
    if (options.progress && (out.executions & 63) == 0) {
      const double now = elapsed();
      if (now >= 1.0 && now - last_progress >= 0.5) {
        last_progress = now;
        options.progress(Progress{out.executions, static_cast<double>(out.executions) / now, longest, now});
      }
    }
    random.begin_execution(out.executions);
    pct.begin_execution(out.executions, longest);
    recorder.clear();
    sim::ExecutionResult result = engine.run(recorder);
    ++out.executions;
    out.events += result.events;
    longest = std::max<uint64_t>(longest, result.choice_points);
    for (const sim::Option& c : recorder.choices()) fnv_mix(out.fingerprint, static_cast<uint64_t>(c.rank) << 32 | static_cast<uint32_t>(c.detail));
    fnv_mix(out.fingerprint, static_cast<uint64_t>(result.end));
    if (result.end == sim::ExecutionEnd::ERROR || result.end == sim::ExecutionEnd::LIMIT) {
      if (result.end == sim::ExecutionEnd::LIMIT) out.bound_hit = result.error->message;
      else out.error = result.error;
      break;
    }
    std::optional<Bug> bug = analyze(scenario, result);
    if (options.collect_terminal_states) out.terminal_states.insert(bug ? bug->signature : std::string("completed"));
    if (bug) {
      fnv_mix(out.fingerprint, bug->signature);
      if (seen.insert(bug->signature).second) {
        bug->schedule = sampling ? std::vector<uint32_t>() : dfs.schedule();
        bug->choices = recorder.choices();
        bug->execution = out.executions;
        out.bugs.push_back(std::move(*bug));
      }
    }
    if (sampling) {
      covered = result.choice_points == 0;
      more = !covered;
    } else {
      more = dfs.next();
    }
  }
  out.exhaustive = (sampling ? covered : !more) && out.bound_hit.empty() && !out.error;
  if (!out.bugs.empty()) {
    out.verdict = out.bugs.front().kind;
  } else if (!out.exhaustive && !sampling) {
    out.verdict = sim::Verdict::INCONCLUSIVE;
  } else {
    out.verdict = sim::Verdict::OK;  // sampled runs found none: exhaustive says which
  }
  out.seconds = elapsed();
  return out;
}

}  // namespace lockstep::checker
