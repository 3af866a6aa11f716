#include "checker/split.h"

#include <algorithm>
#include <optional>

#include "checker/reduction/execution.h"
#include "checker/reduction/wakeup_tree.h"

namespace lockstep::checker {

namespace {

StepRef ref_of(const SleepingOption& q) { return {q.option, q.footprint, q.universal}; }

// Follows a part's prefix, then one more choice (`extra`, when set) to see the choice point
// below the part and, with sleep sets, what is asleep there and the footprint of the option
// taken there.
struct Probe final : sim::Strategy {
  const Part* part = nullptr;
  std::optional<uint32_t> extra;
  bool sleep_sets = false;

  std::vector<sim::Option> options;      // at the choice point below the prefix (empty: none)
  std::vector<SleepingOption> asleep;    // what is asleep there
  std::optional<SleepingOption> chosen;  // the step taken there (with `extra`)

  size_t choose(const sim::ChoicePoint& point) override {
    const size_t d = choices++;
    taking = d;
    if (d < part->prefix.size()) return part->prefix[d];
    if (d == part->prefix.size()) {
      options.assign(point.options.begin(), point.options.end());
      asleep = sleep;
      if (extra) return *extra;
    }
    return sim::Strategy::PRUNE;  // the probe has seen what it came for
  }

  bool forced(const sim::Option& option) override {
    (void)option;
    taking = SIZE_MAX;
    return true;
  }

  void taken(const sim::Step& step) override {
    if (!sleep_sets) return;
    const size_t end = part->prefix.size();
    if (taking + 1 == end) {  // the prefix's last choice: the part's sleep set starts after it
      sleep = part->sleep;
      entered = true;
      return;
    }
    const bool universal = aborts_pending(step.footprint);
    if (taking == end) {
      chosen = SleepingOption{step.option, {step.footprint.begin(), step.footprint.end()}, universal};
      return;
    }
    if (!entered) return;
    // A lone step between the prefix and the next choice point wakes what it does not commute
    // with (one that aborts a rank's kernels wakes everything), as in dpor.
    if (universal) {
      sleep.clear();
      return;
    }
    const StepRef p{step.option, step.footprint, false};
    std::erase_if(sleep, [&](const SleepingOption& q) { return dependent(ref_of(q), p); });
  }

 private:
  size_t choices = 0;                  // choice points met
  size_t taking = SIZE_MAX;            // the choice point whose step comes next (SIZE_MAX: a lone step)
  bool entered = false;                // past the prefix's last choice
  std::vector<SleepingOption> sleep;   // the sleep set as the walk goes (below the prefix)

 public:
  void start() {
    if (part->prefix.empty()) {
      sleep = part->sleep;
      entered = true;
    }
  }
};

}  // namespace

std::vector<Part> split_tree(sim::Engine& engine, size_t want, bool sleep_sets) {
  std::vector<Part> frontier{Part{}};
  for (int level = 0; level < 6 && frontier.size() < want; ++level) {
    std::vector<Part> next;
    bool grew = false;
    for (Part& part : frontier) {
      Probe look;
      look.part = &part;
      look.sleep_sets = sleep_sets;
      look.start();
      const sim::ExecutionResult seen = engine.run(look);
      if (seen.end == sim::ExecutionEnd::ERROR || seen.end == sim::ExecutionEnd::LIMIT || look.options.empty()) {
        next.push_back(std::move(part));  // a leaf (or an error the search itself will report)
        continue;
      }
      grew = true;
      std::vector<SleepingOption> sleep = look.asleep;  // at the point, plus the options explored there
      for (uint32_t i = 0; i < look.options.size(); ++i) {
        const uint64_t key = look.options[i].key();
        const bool is_asleep =
            std::any_of(sleep.begin(), sleep.end(), [&](const SleepingOption& q) { return q.option.key() == key; });
        if (sleep_sets && is_asleep) continue;  // an earlier part starts its executions
        Part child;
        child.prefix = part.prefix;
        child.prefix.push_back(i);
        if (sleep_sets) {
          Probe step;
          step.part = &part;
          step.extra = i;
          step.sleep_sets = true;
          step.start();
          engine.run(step);
          if (step.chosen) {
            if (!step.chosen->universal) {
              const StepRef p{step.chosen->option, step.chosen->footprint, false};
              for (const SleepingOption& q : sleep) {
                if (!dependent(ref_of(q), p)) child.sleep.push_back(q);
              }
            }
            sleep.push_back(*step.chosen);
          }
        }
        next.push_back(std::move(child));
      }
    }
    frontier = std::move(next);
    if (!grew) break;
  }
  return frontier;
}

}  // namespace lockstep::checker
