#include "checker/explore.h"

#include <chrono>
#include <set>

#include <fmt/format.h>

#include "checker/dfs.h"
#include "checker/replay.h"

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
  static const std::vector<std::string> names = {"dfs", "dpor"};
  return names;
}

CheckResult check_scenario(const sim::Scenario& scenario, const CheckOptions& options) {
  CheckResult out;
  out.strategy = options.strategy;
  out.fingerprint = FNV_OFFSET;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };

  const sim::EngineOptions engine_options = engine_options_for(options);
  sim::Engine engine(scenario, engine_options);
  DfsStrategy dfs;
  RecordingStrategy recorder(dfs);
  std::set<std::string> seen;
  bool more = true;
  while (more) {
    if (out.executions >= options.max_executions) {
      out.bound_hit = fmt::format("--max-executions {}", options.max_executions);
      break;
    }
    if (options.time_budget_s > 0 && elapsed() > options.time_budget_s) {
      out.bound_hit = fmt::format("--time-budget {}", options.time_budget_s);
      break;
    }
    recorder.clear();
    sim::ExecutionResult result = engine.run(recorder);
    ++out.executions;
    out.events += result.events;
    const std::vector<uint32_t> schedule = dfs.schedule();
    for (uint32_t c : schedule) fnv_mix(out.fingerprint, c);
    fnv_mix(out.fingerprint, static_cast<uint64_t>(result.end));
    if (result.end == sim::ExecutionEnd::ERROR || result.end == sim::ExecutionEnd::LIMIT) {
      if (result.end == sim::ExecutionEnd::LIMIT) out.bound_hit = result.error->message;
      else out.error = result.error;
      break;
    }
    if (std::optional<Bug> bug = analyze(scenario, result)) {
      fnv_mix(out.fingerprint, bug->signature);
      if (seen.insert(bug->signature).second) {
        bug->schedule = schedule;
        bug->choices = recorder.choices();
        bug->execution = out.executions;
        out.bugs.push_back(std::move(*bug));
      }
    }
    more = dfs.next();
  }
  out.exhaustive = !more && out.bound_hit.empty() && !out.error;
  if (!out.bugs.empty()) {
    out.verdict = out.bugs.front().kind;
  } else if (!out.exhaustive) {
    out.verdict = sim::Verdict::INCONCLUSIVE;
  } else {
    out.verdict = sim::Verdict::OK;
  }
  out.seconds = elapsed();
  return out;
}

}  // namespace lockstep::checker
