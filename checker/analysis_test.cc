#include "checker/analysis.h"

#include <doctest/doctest.h>

#include "checker/explore.h"
#include "sim/loader.h"
#include "tests/testing.h"

namespace lockstep::checker {

namespace {

sim::StuckOp waits(int32_t rank, std::vector<int32_t> on) {
  sim::StuckOp op;
  op.rank = rank;
  op.waiting_for = std::move(on);
  return op;
}

}  // namespace

TEST_CASE("the wait-for cycle starts and ends at its lowest rank") {
  CHECK(find_wait_cycle(4, {waits(3, {2}), waits(2, {3})}) == std::vector<int32_t>{2, 3, 2});
  CHECK(find_wait_cycle(4, {waits(0, {2}), waits(2, {3}), waits(3, {1}), waits(1, {2})}) ==
        std::vector<int32_t>{1, 2, 3, 1});
}

TEST_CASE("waits that end at a rank that is not waiting are no cycle") {
  CHECK(find_wait_cycle(4, {waits(0, {3}), waits(1, {3}), waits(2, {3})}).empty());
  CHECK(find_wait_cycle(3, {waits(0, {1}), waits(1, {2})}).empty());
}

TEST_CASE("sizes print in the largest exact binary unit") {
  CHECK(format_size(100LL << 20) == "100MiB");
  CHECK(format_size(1536) == "1536B");
  CHECK(format_size(1LL << 30) == "1GiB");
  CHECK(format_size(0) == "0B");
}

TEST_CASE("the explanation names every stuck rank, its op and source, and whom it waits for") {
  const sim::Scenario scenario = testing::scenario_from(R"Y(scenario: uneven
world: 4
program:
  - repeat: "3 - (rank == 3)"
    do:
      - allreduce: {size: 1MiB}
)Y", "uneven.yaml");
  const CheckResult result = check_scenario(scenario, {});
  REQUIRE(result.bugs.size() == 1);
  CHECK(result.bugs[0].kind == sim::Verdict::HANG);
  CHECK(result.bugs[0].explanation ==
        std::vector<std::string>{"ranks 0-2 wait in allreduce #3 on world (uneven.yaml:6:9); rank 3 never issued it: it finished"});
}

TEST_CASE("a timeout names who waited, how long, and for whom") {
  const sim::Scenario scenario = testing::scenario_from(R"Y(scenario: slow
world: 2
program:
  - compute: "rank == 1 ? 11min : 0ms"
  - allreduce: {size: 0}
)Y", "slow.yaml");
  const CheckResult result = check_scenario(scenario, {});
  REQUIRE(result.bugs.size() == 1);
  CHECK(result.verdict == sim::Verdict::TIMEOUT);
  CHECK(result.bugs[0].explanation ==
        std::vector<std::string>{"rank 0 waited 660.000s in allreduce #1 on world (slow.yaml:5:5), past the 10min watchdog timeout for rank 1"});
}

TEST_CASE("durations print in a readable unit") {
  CHECK(format_duration(600'000'000'000) == "10min");
  CHECK(format_duration(1'500'000'000) == "1.500s");
  CHECK(format_duration(20'000'000) == "20.000ms");
  CHECK(format_duration(12) == "12ns");
}

TEST_CASE("a deadlock explanation ends with the wait-for cycle") {
  const sim::Scenario scenario = testing::scenario_from(R"Y(scenario: h2h
world: 2
program:
  - send: {to: "1 - rank", size: 64MiB}
  - recv: {from: "1 - rank", size: 64MiB}
)Y", "h2h.yaml");
  const CheckResult result = check_scenario(scenario, {});
  REQUIRE(result.bugs.size() == 1);
  CHECK(result.bugs[0].explanation ==
        std::vector<std::string>{
            "rank 0 waits in send to rank 1 #1 on world (h2h.yaml:4:5); rank 1 issued the matching recv but never "
            "ran it: it waits in send to rank 0 #1 on world (h2h.yaml:4:5)",
            "rank 1 waits in send to rank 0 #1 on world (h2h.yaml:4:5); rank 0 issued the matching recv but never "
            "ran it: it waits in send to rank 1 #1 on world (h2h.yaml:4:5)",
            "wait-for cycle: 0 -> 1 -> 0"});
}

TEST_CASE("a deadlock through a current stream two threads share says so") {
  const char* text = R"Y(scenario: shared
world: 2
groups: {ckpt: [0, 1]}
threads:
  main: [{allreduce: {size: 64MiB}}]
  ckpt: [{allgather: {group: ckpt, size: 64KiB}}]
)Y";
  const CheckResult result = check_scenario(testing::scenario_from(text, "shared.yaml"), {});
  REQUIRE(result.bugs.size() == 2);
  CHECK(result.verdict == sim::Verdict::DEADLOCK);
  CHECK(result.bugs[0].explanation[0] ==
        "rank 0 waits in allreduce #1 on world (shared.yaml:5:11); rank 1 issued it but never ran it: it is queued "
        "behind allgather #1 on ckpt (shared.yaml:6:11) on stream main, shared by threads main and ckpt");
  // With a stream of its own the checkpoint thread's collective waits for nothing of main's.
  const char* own = R"Y(scenario: own
world: 2
groups: {ckpt: [0, 1]}
threads:
  main: [{allreduce: {size: 64MiB}}]
  ckpt: {stream: ckpt_s, do: [{allgather: {group: ckpt, size: 64KiB}}]}
)Y";
  CHECK(check_scenario(testing::scenario_from(own, "own.yaml"), {}).verdict == sim::Verdict::OK);
}

}  // namespace lockstep::checker

namespace lockstep::checker {

TEST_CASE("the DOT graph of a mismatch shows the two ops that disagree") {
  sim::LoadResult loaded = sim::load_scenario_text(
      "scenario: sizes\nworld: 2\nprogram:\n  - allreduce: {size: \"rank == 0 ? 4 : 8\"}\n", "sizes.yaml", {});
  REQUIRE(loaded.ok());
  const CheckResult result = check_scenario(*loaded.scenario, {});
  REQUIRE(result.bugs.size() == 1);
  const std::string dot = wait_for_dot(*loaded.scenario, result.bugs[0]);
  CHECK(dot.find("0[label=\"rank 0\\nissued allreduce #1 on world of 4B bf16\\nsizes.yaml:4:5\"];") != std::string::npos);
  CHECK(dot.find("1[label=\"rank 1\\nissued allreduce #1 on world of 8B bf16\\nsizes.yaml:4:5\"];") != std::string::npos);
  CHECK(dot.find("0->1 [label=\"differs in size\",dir=none,color=red];") != std::string::npos);
}

}  // namespace lockstep::checker

namespace lockstep::checker {

TEST_CASE("explanations stay short at scale: timeouts share a line, p2p lines and long cycles are cut") {
  sim::LoadResult timeout = sim::load_scenario_text("scenario: t\nworld: 4\nsemantics: {timeout: 1s}\nprogram:\n"
                                                    "  - if: \"rank == 0\"\n    then: [{compute: 5s}]\n  - allreduce: {size: 4}\n",
                                                    "t.yaml", {});
  REQUIRE(timeout.ok());
  const CheckResult late = check_scenario(*timeout.scenario, {});
  REQUIRE(late.bugs.size() == 1);
  CHECK(late.bugs[0].explanation ==
        std::vector<std::string>{"ranks 1-3 waited 5.000s in allreduce #1 on world (t.yaml:7:5), past the 1.000s watchdog "
                                 "timeout for rank 0"});

  sim::LoadResult ring = sim::load_scenario_text("scenario: r\nworld: 40\nprogram:\n"
                                                 "  - recv: {from: \"(rank + world - 1) % world\", size: 4}\n"
                                                 "  - send: {to: \"(rank + 1) % world\", size: 4}\n",
                                                 "r.yaml", {});
  REQUIRE(ring.ok());
  const CheckResult cycle = check_scenario(*ring.scenario, {});
  REQUIRE(cycle.bugs.size() == 1);
  const std::vector<std::string>& lines = cycle.bugs[0].explanation;
  REQUIRE(lines.size() == 17);
  CHECK(lines[15] == "... and 25 more lines like these (the --json report lists every stuck op)");
  CHECK(lines[16] == "wait-for cycle: 0 -> 39 -> 38 -> 37 -> 36 -> 35 -> ... -> 3 -> 2 -> 1 -> 0 (40 ranks)");
  CHECK(cycle.bugs[0].cycle.size() == 41);
}

}  // namespace lockstep::checker
