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

template <Reversals R>
std::unique_ptr<Search> make_dpor(const SearchOptions& o) {
  return std::make_unique<DporSearch>(o, R);
}

template <Reversals R>
std::unique_ptr<Search> make_dpor_branch(const SearchOptions& o, const Donation& d) {
  return std::make_unique<DporSearch>(o, R, d);
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
       footprints_and_states, make_dpor<Reversals::FIRST_STEP>, make_dpor_branch<Reversals::FIRST_STEP>, true},
      {"odpor", "Optimal-DPOR: dpor with each race's whole reversal in wakeup trees", true, false,
       footprints_and_states, make_dpor<Reversals::WHOLE>, make_dpor_branch<Reversals::WHOLE>, true},
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
