// Footprints and vector clocks (EngineOptions::footprints): what each step the engine reports
// touched, and which steps it happened after.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "sim/engine.h"
#include "tests/testing.h"

namespace lockstep::sim {

using testing::scenario_from;

namespace {

// Takes the first option; keeps every step the engine reports.
class StepsKept final : public Strategy {
 public:
  size_t choose(const ChoicePoint&) override { return 0; }
  void taken(const Step& step) override {
    steps.push_back({step.option, step.index, {step.after.begin(), step.after.end()},
                     {step.footprint.begin(), step.footprint.end()}});
  }
  struct Kept {
    Option option;
    uint64_t index;
    std::vector<uint32_t> after;
    std::vector<Touch> footprint;
  };
  std::vector<Kept> steps;
};

bool lists(const std::vector<uint32_t>& after, uint32_t actor, uint64_t index) {
  for (size_t i = 0; i + 1 < after.size(); i += 2) {
    if (after[i] == actor) return after[i + 1] >= index;
  }
  return false;
}

}  // namespace

TEST_CASE("steps: each names what made it possible and what it touched") {
  // Rank 0's main thread blocks in a barrier with rank 1, whose barrier waits for its receive of
  // rank 0's second thread's message. Main's next step (the wait) happens after its own barrier
  // step and after the send; the third thread's compute after nothing but itself.
  const Scenario scenario = scenario_from(R"Y(
scenario: steps
world: 2
groups:
  pair: [0, 1]
threads:
  main:
    - if: "rank == 0"
      then: [{barrier: {group: pair, async: b}}, {wait: b}]
      else:
        - recv: {from: 0, size: 4}
        - barrier: {group: pair}
  second:
    - if: "rank == 0"
      then: [{send: {to: 1, size: 4}}]
  third:
    - if: "rank == 0"
      then: [{compute: 1us}]
)Y");
  EngineOptions options;
  options.footprints = true;
  Engine engine(scenario, options);
  StepsKept strategy;
  REQUIRE(engine.run(strategy).end == ExecutionEnd::COMPLETED);
  for (size_t i = 0; i < strategy.steps.size(); ++i) CHECK(strategy.steps[i].index == i);
  const StepsKept::Kept* barrier = nullptr;
  const StepsKept::Kept* wait = nullptr;
  const StepsKept::Kept* send = nullptr;
  const StepsKept::Kept* compute = nullptr;
  for (const StepsKept::Kept& step : strategy.steps) {
    if (step.option.rank != 0 || step.option.kind != ChoiceKind::THREAD) continue;
    if (step.option.thread == 0) (barrier == nullptr ? barrier : wait) = &step;
    if (step.option.thread == 1 && send == nullptr) send = &step;
    if (step.option.thread == 2 && compute == nullptr) compute = &step;
  }
  REQUIRE(barrier != nullptr);
  REQUIRE(wait != nullptr);
  REQUIRE(send != nullptr);
  REQUIRE(compute != nullptr);
  CHECK(lists(wait->after, wait->option.actor, barrier->index));  // its own barrier
  CHECK(lists(wait->after, send->option.actor, send->index));     // the send it needed
  CHECK_FALSE(lists(compute->after, send->option.actor, 0));
  CHECK_FALSE(lists(compute->after, barrier->option.actor, 0));
  // The compute writes rank 0's stream main (and adds to its streams), reads the rank's liveness.
  std::vector<ObjectKind> kinds;
  for (const Touch& t : compute->footprint) kinds.push_back(object_kind(t.object));
  CHECK(kinds == std::vector<ObjectKind>{ObjectKind::STREAM, ObjectKind::STREAMS, ObjectKind::ALIVE});
  // The send orders rank 0's sends to rank 1 (SEND_SEQ).
  bool orders_sends = false;
  for (const Touch& t : send->footprint) orders_sends |= object_kind(t.object) == ObjectKind::SEND_SEQ && t.access == Access::WRITE;
  CHECK(orders_sends);
}

}  // namespace lockstep::sim
