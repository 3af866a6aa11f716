// The independence relation of options (sim/strategy.h) checked the direct way: at choice points
// of random walks through generated scenarios, every pair of options the relation calls
// independent is taken in both orders, and both executions, continued the same way, must end
// identically (same end, statuses, times, and every op's state, sequence number, match and
// times); neither option may disable the other. A control counts how often the pairs the
// relation excludes (steps that may abort their rank) do not commute, so the check can fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checker/sampling.h"
#include "sim/engine.h"
#include "tests/testing.h"

namespace lockstep {

namespace {

using sim::ChoiceKind;
using sim::ChoicePoint;
using sim::Option;

// 2-3 ranks, each with two host threads (so thread steps are choices), 1-3 ops per thread:
// collectives on world and on a pair, p2p with named and wildcard receives, choose, compute,
// sometimes exit or crash, host-blocking `sync` and `barrier`, comm_concurrency 1, eager p2p, a
// short watchdog.
std::string generate(checker::Rng& rng) {
  const int world = 2 + static_cast<int>(rng.below(2));
  const bool limited = rng.below(3) == 0;
  const bool eager = rng.below(3) == 0;
  std::string text = fmt::format("scenario: independence\nworld: {}\ngroups: {{g: [0, 1]}}\n", world);
  text += fmt::format("semantics: {{comm_concurrency: {}, p2p: {}, eager_limit: 4{}}}\n", limited ? 1 : 0,
                      eager ? "eager" : "rendezvous", rng.below(3) == 0 ? ", timeout: 12us" : "");
  auto op = [&](int rank) -> std::string {
    const int peer = (rank + 1 + static_cast<int>(rng.below(static_cast<uint64_t>(world - 1)))) % world;
    const std::string group = rank <= 1 && rng.below(2) ? "g" : "world";
    switch (rng.below(13)) {
      case 0:
      case 1: return fmt::format("{{allreduce: {{group: {}, size: 4}}}}", group);
      case 2: return fmt::format("{{send: {{to: {}, size: 4}}}}", peer);
      case 3: return fmt::format("{{recv: {{from: {}, size: 4}}}}", peer);
      case 4:
      case 5: return rank == 0 ? "{recv: {from: any, size: 4}}" : "{send: {to: 0, size: 4}}";
      case 6: return fmt::format("{{choose: {{a: [{{allreduce: {{group: {}, size: 4}}}}], b: [{{compute: 3us}}]}}}}", group);
      case 7: return rng.below(3) == 0 ? (rng.below(2) ? "exit" : "crash") : "{compute: 20us}";
      case 8: return "{sleep: 2us}";
      case 11: return "sync";  // host-blocking: the thread waits for other ranks' progress
      case 12: return "barrier";
      default: return "{compute: 1us}";
    }
  };
  text += "threads:\n";
  for (const char* thread : {"main", "bg"}) {
    text += fmt::format("  {}:\n", thread);
    for (int rank = 0; rank < world; ++rank) {
      text += fmt::format("    - if: \"rank == {}\"\n      then: [", rank);
      const int ops = 1 + static_cast<int>(rng.below(3));
      for (int i = 0; i < ops; ++i) text += (i ? ", " : "") + op(rank);
      text += "]\n";
    }
  }
  return text;
}

// The same option on another path: a START by its kernel's name (its slot depends on the order).
bool same_option(const Option& a, const Option& b) {
  if (a.kind == ChoiceKind::START) return b.kind == ChoiceKind::START && a.rank == b.rank && a.name == b.name;
  return a.kind == b.kind && a.rank == b.rank && a.thread == b.thread && a.detail == b.detail;
}

// Takes `script` (options named by identity) at the first non-branch choice points, then the
// first option; branches are a fixed function of the thread and how many branches it took
// before, so that both orders of a pair branch alike. `walk` picks at random instead of the
// first option and records what it was offered.
class ScriptStrategy final : public sim::Strategy {
 public:
  ScriptStrategy(std::vector<Option> script, checker::Rng* walk, uint64_t seed)
      : script_(std::move(script)), walk_(walk), seed_(seed) {}

  size_t choose(const ChoicePoint& point) override {
    if (point.options[0].kind == ChoiceKind::BRANCH) {
      const Option& any = point.options[0];
      const int count = branches_[{any.rank, any.thread}]++;
      uint64_t h = seed_ ^ (static_cast<uint64_t>(any.rank) << 40) ^ (static_cast<uint64_t>(any.thread) << 20) ^
                   static_cast<uint64_t>(count);
      h = checker::Rng(h).next();
      return static_cast<size_t>(h % point.options.size());
    }
    if (walk_ != nullptr) {
      offered.emplace_back(point.options.begin(), point.options.end());
      const size_t pick = static_cast<size_t>(walk_->below(point.options.size()));
      picked.push_back(point.options[pick]);
      return pick;
    }
    while (next_ < script_.size()) {
      const Option& want = script_[next_++];
      for (size_t i = 0; i < point.options.size(); ++i) {
        if (same_option(point.options[i], want)) return i;
      }
      // A thread step is no longer a choice when its rank has one live thread left: the engine
      // then steps it eagerly (the other order took it already). Other ranks cannot block a
      // runnable thread, so a thread step missing while its rank still offers thread steps
      // is a disabled option.
      const bool went_eager = want.kind == ChoiceKind::THREAD &&
                              std::none_of(point.options.begin(), point.options.end(), [&](const Option& o) {
                                return o.kind == ChoiceKind::THREAD && o.rank == want.rank;
                              });
      if (went_eager) continue;
      missing = true;
      for (const Option& o : point.options) {
        missing_at += fmt::format("[{} {} {} {}] ", static_cast<int>(o.kind), o.rank, o.thread, o.detail);
      }
      missing_at += fmt::format("offered at script step {} of {}", next_ - 1, script_.size());
      return 0;
    }
    return 0;
  }

  // A choice point with one option asks nothing: when it is the scripted one, it was taken.
  bool forced(const Option& option) override {
    if (walk_ == nullptr && next_ < script_.size() && same_option(script_[next_], option)) ++next_;
    return true;
  }

  std::vector<std::vector<Option>> offered;  // walk: the options of each non-branch point
  std::vector<Option> picked;                // walk: the option taken at each
  bool missing = false;                      // a scripted option was not offered
  std::string missing_at;                    // what was offered instead

 private:
  std::vector<Option> script_;
  checker::Rng* walk_;
  uint64_t seed_;
  size_t next_ = 0;
  std::map<std::pair<int32_t, int32_t>, int> branches_;
};

// Everything an execution's reports can show.
std::string outcome(const sim::ExecutionResult& r) {
  std::string out = fmt::format("end {}\n", static_cast<int>(r.end));
  for (size_t rank = 0; rank < r.rank_status.size(); ++rank) {
    out += fmt::format("rank {} {} {}\n", rank, sim::rank_status_name(r.rank_status[rank]), r.rank_end_ns[rank]);
  }
  for (size_t rank = 0; rank < r.ops.size(); ++rank) {
    for (const sim::OpRecord& op : r.ops[rank]) {
      out += fmt::format("op {}/{} {} {} {} seq {} peer {} t {} {} {} cause {}/{} {}/{}\n", rank, op.index,
                         sim::op_kind_name(op.op.kind), op.thread, sim::kernel_state_name(op.state), op.seq,
                         op.matched_peer, op.issue_ns, op.start_ns, op.end_ns, op.start_cause_rank,
                         op.start_cause_index, op.end_cause_rank, op.end_cause_index);
    }
  }
  for (const sim::StuckOp& stuck : r.stuck) {
    out += fmt::format("stuck {}/{} waits {}\n", stuck.rank, stuck.op.index, fmt::join(stuck.waiting_for, ","));
  }
  if (r.mismatch) out += fmt::format("mismatch {} {} {}\n", r.mismatch->field, r.mismatch->rank_a, r.mismatch->rank_b);
  if (r.error) out += "error " + r.error->message + "\n";
  return out;
}

}  // namespace

TEST_CASE("independence: options the relation calls independent commute and never disable each other") {
  checker::Rng rng(20261203);
  int pairs = 0;
  int excluded = 0;
  int excluded_differ = 0;
  for (int n = 0; n < 400; ++n) {
    const std::string text = generate(rng);
    const sim::Scenario scenario = testing::scenario_from(text, fmt::format("independence-{}.yaml", n));
    sim::EngineOptions options;
    options.rank_persistent_sets = false;  // every option of every rank is offered
    sim::Engine engine(scenario, options);
    const uint64_t seed = rng.next();

    ScriptStrategy walker({}, &rng, seed);
    engine.run(walker);
    if (walker.offered.empty()) continue;
    // The walk's own path up to a random point (the engine is deterministic and branches are
    // a function of the thread, so the same picks lead to the same point), and its options.
    const size_t depth = static_cast<size_t>(rng.below(walker.offered.size()));
    const std::vector<Option> prefix(walker.picked.begin(), walker.picked.begin() + static_cast<std::ptrdiff_t>(depth));
    const std::vector<Option>& at_depth = walker.offered[depth];
    int tried = 0;
    for (size_t i = 0; i < at_depth.size() && tried < 6; ++i) {
      for (size_t j = i + 1; j < at_depth.size() && tried < 6; ++j) {
        const Option& a = at_depth[i];
        const Option& b = at_depth[j];
        if (a.rank == b.rank) continue;
        const bool claimed = sim::independent(a, b);
        std::vector<Option> ab = prefix;
        ab.push_back(a);
        ab.push_back(b);
        std::vector<Option> ba = prefix;
        ba.push_back(b);
        ba.push_back(a);
        ScriptStrategy first(ab, nullptr, seed);
        const std::string one = outcome(engine.run(first));
        ScriptStrategy second(ba, nullptr, seed);
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
        CHECK_FALSE(first.missing);
        CHECK_FALSE(second.missing);
        CHECK(one == two);
      }
    }
  }
  MESSAGE("independent pairs checked: " << pairs << "; excluded pairs: " << excluded << ", of which "
                                        << excluded_differ << " do not commute");
  CHECK(pairs >= 200);
  // The exclusion is needed: some steps that may abort their rank do not commute.
  CHECK(excluded_differ > 0);
}

}  // namespace lockstep
