#include "checker/split.h"

namespace lockstep::checker {

namespace {

// Follows a part's prefix to see the choice point below it.
struct Probe final : sim::Strategy {
  const Part* part = nullptr;
  std::vector<sim::Option> options;  // at the choice point below the prefix (empty: none)

  size_t choose(const sim::ChoicePoint& point) override {
    const size_t d = choices++;
    if (d < part->prefix.size()) return part->prefix[d];
    options.assign(point.options.begin(), point.options.end());
    return sim::Strategy::PRUNE;  // the probe has seen what it came for
  }

 private:
  size_t choices = 0;  // choice points met
};

}  // namespace

std::vector<Part> split_tree(sim::Engine& engine, size_t want) {
  std::vector<Part> frontier{Part{}};
  for (int level = 0; level < 6 && frontier.size() < want; ++level) {
    std::vector<Part> next;
    bool grew = false;
    for (Part& part : frontier) {
      Probe look;
      look.part = &part;
      const sim::ExecutionResult seen = engine.run(look);
      if (seen.end == sim::ExecutionEnd::ERROR || seen.end == sim::ExecutionEnd::LIMIT || look.options.empty()) {
        next.push_back(std::move(part));  // a leaf (or an error the search itself will report)
        continue;
      }
      grew = true;
      for (uint32_t i = 0; i < look.options.size(); ++i) {
        Part child;
        child.prefix = part.prefix;
        child.prefix.push_back(i);
        next.push_back(std::move(child));
      }
    }
    frontier = std::move(next);
    if (!grew) break;
  }
  return frontier;
}

}  // namespace lockstep::checker
