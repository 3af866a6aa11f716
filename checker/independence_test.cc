// The dependence relation of steps (sim/strategy.h: footprints), checked the direct way: at
// choice points of random walks through generated scenarios, every pair of options of different
// actors whose footprints there do not conflict is taken in both orders, and both executions,
// continued the same way, must end identically (same end, statuses, times, and every op's
// state, sequence number, match and times); neither option may disable the other. A control
// counts how often pairs whose footprints conflict indeed do not commute, so the check can fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checker/reduction/execution.h"
#include "checker/sampling.h"
#include "sim/engine.h"
#include "tests/generated_scenarios.h"
#include "tests/testing.h"

namespace lockstep {

namespace {

using sim::ChoiceKind;
using sim::ChoicePoint;
using sim::Option;

// Takes `script` (options named by Option::key) at the first choice points, then the option
// of the lowest key. `walk` picks at random instead and records what it was offered. Keeps the footprint
// of every step taken.
class ScriptStrategy final : public sim::Strategy {
 public:
  ScriptStrategy(std::vector<Option> script, checker::Rng* walk) : script_(std::move(script)), walk_(walk) {}

  size_t choose(const ChoicePoint& point) override {
    if (walk_ != nullptr) {
      offered.emplace_back(point.options.begin(), point.options.end());
      const size_t pick = static_cast<size_t>(walk_->below(point.options.size()));
      picked.push_back(point.options[pick]);
      return pick;
    }
    if (next_ < script_.size()) {
      const Option& want = script_[next_++];
      for (size_t i = 0; i < point.options.size(); ++i) {
        if (point.options[i].key() != want.key()) continue;
        if (next_ == script_.size()) last_at = steps.size();
        return i;
      }
      missing = true;
      for (const Option& o : point.options) {
        missing_at += fmt::format("[{} {} {} {}] ", static_cast<int>(o.kind), o.rank, o.thread, o.detail);
      }
      missing_at += fmt::format("offered at script step {} of {}", next_ - 1, script_.size());
    }
    // After the script, the same continuation whatever the order before: the option of the
    // lowest identity (the list's order follows the engine's kernel slots, which depend on it).
    size_t best = 0;
    for (size_t i = 1; i < point.options.size(); ++i) {
      if (point.options[i].key() < point.options[best].key()) best = i;
    }
    return best;
  }

  // A choice point with one option asks nothing: when it is the scripted one, it was taken.
  bool forced(const Option& option) override {
    if (walk_ == nullptr && next_ < script_.size() && script_[next_].key() == option.key()) {
      if (++next_ == script_.size()) last_at = steps.size();
    }
    return true;
  }

  void taken(const sim::Step& step) override {
    steps.push_back({step.option, std::vector<sim::Touch>(step.footprint.begin(), step.footprint.end())});
  }

  std::vector<std::vector<Option>> offered;  // walk: the options of each choice point
  std::vector<Option> picked;                // walk: the option taken at each
  bool missing = false;                      // a scripted option was not offered
  std::string missing_at;                    // what was offered instead
  std::vector<std::pair<Option, std::vector<sim::Touch>>> steps;
  size_t last_at = SIZE_MAX;  // the step that took the script's last option

 private:
  std::vector<Option> script_;
  checker::Rng* walk_;
  size_t next_ = 0;
};

// Everything an execution's reports can show, with each rank's ops in their thread's order
// (the rank's issue order interleaves its threads' ops in the order they were taken).
std::string outcome(const sim::ExecutionResult& r) {
  std::string out = fmt::format("end {}\n", static_cast<int>(r.end));
  for (size_t rank = 0; rank < r.rank_status.size(); ++rank) {
    out += fmt::format("rank {} {} {}\n", rank, sim::rank_status_name(r.rank_status[rank]), r.rank_end_ns[rank]);
  }
  for (size_t rank = 0; rank < r.ops.size(); ++rank) {
    std::vector<std::string> lines;
    for (const sim::OpRecord& op : r.ops[rank]) {
      lines.push_back(fmt::format("op {}/{}/{} {} {} seq {} peer {} t {} {} {} stream {}\n", rank, op.thread, op.thread_index,
                                  sim::op_kind_name(op.op.kind), sim::kernel_state_name(op.state), op.seq,
                                  op.matched_peer, op.issue_ns, op.start_ns, op.end_ns, op.stream));
    }
    std::sort(lines.begin(), lines.end());
    for (const std::string& line : lines) out += line;
  }
  for (const sim::StuckOp& stuck : r.stuck) {
    out += fmt::format("stuck {}/{}/{} waits {}\n", stuck.rank, stuck.thread, stuck.op.thread_index,
                       fmt::join(stuck.waiting_for, ","));
  }
  if (r.mismatch) out += fmt::format("mismatch {} {} {}\n", r.mismatch->field, r.mismatch->rank_a, r.mismatch->rank_b);
  if (r.error) out += "error " + r.error->message + "\n";
  return out;
}

// The footprint of `option` taken right after `prefix`.
std::vector<sim::Touch> footprint_after(sim::Engine& engine, const std::vector<Option>& prefix, const Option& option) {
  std::vector<Option> script = prefix;
  script.push_back(option);
  ScriptStrategy strategy(script, nullptr);
  engine.run(strategy);
  REQUIRE(strategy.last_at < strategy.steps.size());
  REQUIRE(strategy.steps[strategy.last_at].first.key() == option.key());
  return strategy.steps[strategy.last_at].second;
}

std::string describe(const std::vector<sim::Touch>& footprint) {
  std::string out;
  for (const sim::Touch& t : footprint) {
    out += fmt::format("{}:{}/{} ", static_cast<int>(sim::object_kind(t.object)),
                       t.object & ((1u << sim::OBJECT_KIND_SHIFT) - 1), static_cast<int>(t.access));
  }
  return out;
}

}  // namespace

TEST_CASE("independence: options whose footprints do not conflict commute and never disable each other") {
  checker::Rng rng(20261204);
  int pairs = 0;
  int excluded = 0;
  int excluded_differ = 0;
  for (int n = 0; n < 500; ++n) {
    const std::string text = testing::generate_threaded_scenario(rng);
    const sim::Scenario scenario = testing::scenario_from(text, fmt::format("independence-{}.yaml", n));
    sim::EngineOptions options;
    options.footprints = true;
    sim::Engine engine(scenario, options);

    ScriptStrategy walker({}, &rng);
    engine.run(walker);
    if (walker.offered.empty()) continue;
    // The walk's own path up to a random point (the engine is deterministic: the same picks
    // lead to the same point), and its options.
    const size_t depth = static_cast<size_t>(rng.below(walker.offered.size()));
    const std::vector<Option> prefix(walker.picked.begin(), walker.picked.begin() + static_cast<std::ptrdiff_t>(depth));
    const std::vector<Option>& at_depth = walker.offered[depth];
    int tried = 0;
    for (size_t i = 0; i < at_depth.size() && tried < 6; ++i) {
      for (size_t j = i + 1; j < at_depth.size() && tried < 6; ++j) {
        const Option& a = at_depth[i];
        const Option& b = at_depth[j];
        if (a.actor == b.actor) continue;  // one actor's steps (a choose's branches) never commute
        const std::vector<sim::Touch> fa = footprint_after(engine, prefix, a);
        const std::vector<sim::Touch> fb = footprint_after(engine, prefix, b);
        const bool claimed = !checker::footprints_conflict(fa, fb);
        std::vector<Option> ab = prefix;
        ab.push_back(a);
        ab.push_back(b);
        std::vector<Option> ba = prefix;
        ba.push_back(b);
        ba.push_back(a);
        ScriptStrategy first(ab, nullptr);
        const std::string one = outcome(engine.run(first));
        ScriptStrategy second(ba, nullptr);
        const std::string two = outcome(engine.run(second));
        if (!claimed) {
          ++excluded;
          excluded_differ += (one != two || first.missing || second.missing) ? 1 : 0;
          continue;
        }
        ++tried;
        ++pairs;
        INFO("scenario:\n" << text << "depth " << depth << ", options (kind rank thread detail) "
                           << static_cast<int>(a.kind) << " " << a.rank << " " << a.thread << " " << a.detail << " and "
                           << static_cast<int>(b.kind) << " " << b.rank << " " << b.thread << " " << b.detail);
        INFO("a then b: " << first.missing_at << "\nb then a: " << second.missing_at);
        INFO("footprints: " << describe(fa) << " and " << describe(fb));
        CHECK_FALSE(first.missing);
        CHECK_FALSE(second.missing);
        CHECK(one == two);
      }
    }
  }
  MESSAGE("independent pairs checked: " << pairs << "; dependent pairs: " << excluded << ", of which "
                                        << excluded_differ << " do not commute");
  CHECK(pairs >= 300);
  // The relation is not empty for nothing: many dependent pairs indeed do not commute.
  CHECK(excluded_differ > 50);
}

}  // namespace lockstep
