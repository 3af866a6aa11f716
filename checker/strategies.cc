// The registry of `check --strategy`: one line per strategy.
#include <memory>

#include "checker/dfs.h"
#include "checker/reduction/dpor.h"
#include "checker/sampling.h"
#include "checker/search.h"

namespace lockstep::checker {

namespace {

void footprints_and_states(sim::EngineOptions& engine) {
  engine.footprints = true;
  engine.track_state = true;
}

}  // namespace

const std::vector<StrategyInfo>& strategies() {
  static const std::vector<StrategyInfo> all = {
      {"dfs", "every interleaving and choice, no reduction (the oracle)", true, true, nullptr,
       [](const SearchOptions& o) -> std::unique_ptr<Search> {
         auto dfs = std::make_unique<DfsSearch>(o.prefix, o.bound);
         dfs->use_state_cache(o.dfs_state_cache);
         return dfs;
       }},
      {"dpor", "DPOR over footprints: source sets, sleep sets, a state cache (the default)", true, false,
       footprints_and_states,
       [](const SearchOptions& o) -> std::unique_ptr<Search> { return std::make_unique<DporSearch>(o, Reversals::FIRST_STEP); },
       [](const SearchOptions& o, const Donation& d) -> std::unique_ptr<Search> {
         return std::make_unique<DporSearch>(o, Reversals::FIRST_STEP, d);
       },
       true},
      {"odpor", "Optimal-DPOR: dpor with each race's whole reversal in wakeup trees", true, false, footprints_and_states,
       [](const SearchOptions& o) -> std::unique_ptr<Search> { return std::make_unique<DporSearch>(o, Reversals::WHOLE); },
       [](const SearchOptions& o, const Donation& d) -> std::unique_ptr<Search> {
         return std::make_unique<DporSearch>(o, Reversals::WHOLE, d);
       },
       true},
      {"pct", "sampled: random priorities with --pct-depth - 1 change points", false, false, nullptr,
       [](const SearchOptions& o) -> std::unique_ptr<Search> { return std::make_unique<PctStrategy>(o.seed, o.pct_depth); }},
      {"random", "sampled: uniformly random choices", false, false, nullptr,
       [](const SearchOptions& o) -> std::unique_ptr<Search> { return std::make_unique<RandomStrategy>(o.seed); }},
  };
  return all;
}

const StrategyInfo* find_strategy(std::string_view name) {
  for (const StrategyInfo& info : strategies()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace lockstep::checker
