#include "sim/engine.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdio>

#include "sim/cost.h"
#include "sim/interpreter.h"
#include "sim/timeline.h"
#include "tests/testing.h"

namespace lockstep::sim {

using testing::scenario_file;
using testing::scenario_from;

namespace {

// Picks the first option at every choice point (a deterministic schedule for tests).
class FirstOption final : public Strategy {
 public:
  size_t choose(const ChoicePoint&) override { return 0; }
};

}  // namespace

TEST_CASE("an all-reduce loop on every rank completes at the same virtual time") {
  const Scenario scenario = scenario_from(R"Y(
scenario: loop
world: 4
program:
  - repeat: 3
    do:
      - compute: 20ms
      - allreduce: {size: 100MiB}
)Y");
  const ExecutionResult result = testing::run_timed(scenario);
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  const int64_t allreduce_ns = comm_cost_ns(OpKind::ALLREDUCE, 100LL << 20, 4, Link{});
  for (int r = 0; r < 4; ++r) {
    CHECK(result.rank_status[static_cast<size_t>(r)] == RankStatus::FINISHED);
    CHECK(result.rank_end_ns[static_cast<size_t>(r)] == 3 * (20'000'000 + allreduce_ns));
    CHECK(result.ops[static_cast<size_t>(r)].size() == 6);
  }
  // 6 ops per rank; each is issued, started and completed once.
  CHECK(result.events == 4 * 6 * 3);
}

TEST_CASE("a synchronous collective waits for prior compute, and later compute waits for it") {
  const Scenario scenario = scenario_from(R"Y(
scenario: stream-order
world: 2
program:
  - compute: "(rank + 1) * 10ms"
  - allreduce: {size: 1MiB}
  - compute: 5ms
)Y");
  const ExecutionResult result = testing::run_timed(scenario);
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  const OpRecord& ar0 = result.ops[0][1];
  const OpRecord& ar1 = result.ops[1][1];
  CHECK(ar0.stream == "comm:world");
  CHECK(ar0.start_ns == 10'000'000);  // after rank 0's own compute
  CHECK(ar1.start_ns == 20'000'000);
  CHECK(ar0.end_ns == ar1.end_ns);    // a collective completes together
  CHECK(ar0.end_ns == 20'000'000 + comm_cost_ns(OpKind::ALLREDUCE, 1 << 20, 2, Link{}));
  CHECK(result.ops[0][2].start_ns == ar0.end_ns);  // main waits for the collective
  CHECK(result.ops[0][0].issue_ns == 0);           // the host never blocked
  CHECK(result.ops[0][2].issue_ns == 0);
}

TEST_CASE("blocking sends in both directions deadlock under rendezvous") {
  const Scenario scenario = scenario_from(R"Y(
scenario: h2h
world: 2
program:
  - send: {to: "1 - rank", size: 64MiB}
  - recv: {from: "1 - rank", size: 64MiB}
)Y");
  const ExecutionResult result = testing::run_timed(scenario);
  REQUIRE(result.end == ExecutionEnd::STUCK);
  REQUIRE(result.stuck.size() == 2);
  CHECK(result.stuck[0].rank == 0);
  CHECK(result.stuck[0].op.op.kind == OpKind::SEND);
  CHECK(result.stuck[0].waiting_for == std::vector<int32_t>{1});
  CHECK(result.stuck[0].never_issued.empty());  // rank 1's recv is issued, queued behind its send
  CHECK(result.stuck[1].rank == 1);
  CHECK(result.stuck[1].waiting_for == std::vector<int32_t>{0});
  CHECK(result.rank_status[0] == RankStatus::BLOCKED);
}

TEST_CASE("an eager limit at least the message size lets head-to-head sends complete") {
  const char* text = R"Y(
scenario: h2h-eager
world: 2
semantics: {p2p: eager, eager_limit: LIMIT}
program:
  - send: {to: "1 - rank", size: 64KiB}
  - recv: {from: "1 - rank", size: 64KiB}
)Y";
  std::string fits = text;
  fits.replace(fits.find("LIMIT"), 5, "64KiB");
  CHECK(testing::run_timed(scenario_from(fits)).end == ExecutionEnd::COMPLETED);
  std::string too_small = text;
  too_small.replace(too_small.find("LIMIT"), 5, "32KiB");
  CHECK(testing::run_timed(scenario_from(too_small)).end == ExecutionEnd::STUCK);
}

TEST_CASE("ranks waiting on a rank that finished without the op are stuck with never_issued") {
  const Scenario scenario = scenario_from(R"Y(
scenario: uneven
world: 4
program:
  - repeat: "3 - (rank == 3)"
    do:
      - allreduce: {size: 1MiB}
)Y");
  const ExecutionResult result = testing::run_timed(scenario);
  REQUIRE(result.end == ExecutionEnd::STUCK);
  REQUIRE(result.stuck.size() == 3);
  for (const StuckOp& stuck : result.stuck) {
    CHECK(stuck.op.seq == 3);
    CHECK(stuck.op.op.kind == OpKind::ALLREDUCE);
    CHECK(stuck.waiting_for == std::vector<int32_t>{3});
    CHECK(stuck.never_issued == std::vector<int32_t>{3});
  }
  CHECK(result.rank_status[3] == RankStatus::FINISHED);
}

TEST_CASE("the k-th collectives on a communicator must agree") {
  SUBCASE("size") {
    const ExecutionResult result = testing::run_timed(scenario_from(R"Y(
scenario: size
world: 3
program:
  - allreduce: {size: "rank == 2 ? 2MiB : 1MiB"}
)Y"));
    REQUIRE(result.end == ExecutionEnd::MISMATCH);
    CHECK(result.mismatch->field == "size");
    CHECK(result.mismatch->rank_a == 0);
    CHECK(result.mismatch->rank_b == 2);
    CHECK(result.mismatch->seq == 1);
  }
  SUBCASE("barrier against all-reduce is a kind mismatch") {
    const ExecutionResult result = testing::run_timed(scenario_from(R"Y(
scenario: kind
world: 2
program:
  - if: "rank == 0"
    then: [{barrier: world}]
    else: [{allreduce: {size: 2}}]
)Y"));
    REQUIRE(result.end == ExecutionEnd::MISMATCH);
    CHECK(result.mismatch->field == "kind");
  }
  SUBCASE("tag") {
    const ExecutionResult result = testing::run_timed(scenario_from(R"Y(
scenario: tag
world: 2
program:
  - if: "rank == 0"
    then: [{allgather: {size: 8MiB, tag: layer1.weight}}]
    else: [{allgather: {size: 8MiB, tag: layer2.weight}}]
)Y"));
    REQUIRE(result.end == ExecutionEnd::MISMATCH);
    CHECK(result.mismatch->field == "tag");
  }
  SUBCASE("a matched send and recv with different tags moved the wrong tensor") {
    const ExecutionResult result = testing::run_timed(scenario_from(R"Y(
scenario: p2p-tag
world: 2
program:
  - if: "rank == 0"
    then: [{send: {to: 1, size: 4MiB, tag: activations}}, {send: {to: 1, size: 4MiB, tag: mask}}]
    else: [{recv: {from: 0, size: 4MiB, tag: mask}}, {recv: {from: 0, size: 4MiB, tag: activations}}]
)Y"));
    REQUIRE(result.end == ExecutionEnd::MISMATCH);
    CHECK(result.mismatch->field == "tag");
    CHECK(result.mismatch->rank_a == 0);
    CHECK(result.mismatch->rank_b == 1);
  }
}

TEST_CASE("a collective that waits longer than the watchdog is a timeout, in virtual time") {
  const char* text = R"Y(
scenario: slow
world: 3
semantics: {timeout: LIMIT}
program:
  - compute: "rank == 2 ? 90s : 1s"
  - allreduce: {size: 4MiB}
)Y";
  std::string tight = text;
  tight.replace(tight.find("LIMIT"), 5, "60s");
  const ExecutionResult late = testing::run_timed(scenario_from(tight));
  REQUIRE(late.end == ExecutionEnd::TIMEOUT);
  REQUIRE(late.stuck.size() == 2);  // ranks 0 and 1 waited 89 s for rank 2
  CHECK(late.stuck[0].rank == 0);
  CHECK(late.stuck[0].waiting_for == std::vector<int32_t>{2});
  CHECK(late.stuck[1].rank == 1);
  std::string loose = text;
  loose.replace(loose.find("LIMIT"), 5, "2min");
  CHECK(testing::run_timed(scenario_from(loose)).end == ExecutionEnd::COMPLETED);
}

TEST_CASE("a run-time evaluation error stops the execution with its location") {
  const Scenario scenario = scenario_from(R"Y(
scenario: div
world: 2
program:
  - repeat: "4 / rank"
    do:
      - compute: 1ms
)Y");
  const ExecutionResult result = testing::run_timed(scenario);
  REQUIRE(result.end == ExecutionEnd::ERROR);
  CHECK(result.error->loc.line == 5);
  CHECK(result.error->message.find("division by zero") != std::string::npos);
  CHECK(result.error->message.find("rank 0") != std::string::npos);
}

TEST_CASE("a rank outside the op's group is a run-time error") {
  const Scenario scenario = scenario_from(R"Y(
scenario: member
world: 3
groups: {evens: [0, 2]}
program:
  - allreduce: {group: evens, size: 4}
)Y");
  const ExecutionResult result = testing::run_timed(scenario);
  REQUIRE(result.end == ExecutionEnd::ERROR);
  CHECK(result.error->message == "rank 1 issues allreduce on group 'evens' but is not a member of it");
}

TEST_CASE("virtual time past int64 is an error at the op that reaches it, never a wrapped time") {
  // 2562047h is just under 2^63 ns: once is a long wait (a timeout), twice overflows.
  const char* text = R"Y(
scenario: saturate
world: 2
program:
  - if: "rank == 0"
    then:
      - compute: 2562047h
      - compute: COUNT
  - barrier: world
)Y";
  std::string twice = text;
  twice.replace(twice.find("COUNT"), 5, "2562047h");
  const ExecutionResult overflow = testing::run_timed(scenario_from(twice));
  REQUIRE(overflow.end == ExecutionEnd::ERROR);
  CHECK(overflow.error->loc.line == 8);
  CHECK(overflow.error->message == "virtual time of rank 0 overflows: compute ends past 2^63 ns (292 years)");
  std::string once = text;
  once.replace(once.find("COUNT"), 5, "1ms");
  CHECK(testing::run_timed(scenario_from(once)).end == ExecutionEnd::TIMEOUT);
  // A sleep past the end of time, on the host, is the same error.
  const ExecutionResult sleep = testing::run_timed(scenario_from(R"Y(
scenario: sleep
world: 1
program:
  - sleep: 2562047h
  - sleep: 2562047h
)Y"));
  REQUIRE(sleep.end == ExecutionEnd::ERROR);
  CHECK(sleep.error->loc.line == 6);
}

TEST_CASE("the operation bound is reported when hit") {
  const Scenario scenario = scenario_from(R"Y(
scenario: many
world: 2
program:
  - repeat: 1000
    do: [{compute: 1us}]
)Y");
  EngineOptions options;
  options.limits.max_ops = 100;
  Engine engine(scenario, options);
  TimedStrategy timed;
  const ExecutionResult result = engine.run(timed);
  REQUIRE(result.end == ExecutionEnd::LIMIT);
  CHECK(result.error->message == "execution exceeds the limit of 100 operations (raise it with --max-ops)");
}

TEST_CASE("the time and memory bounds end an execution inside it, as LIMIT naming the bound") {
  // Valid and endless in practice: 2 x 10^8 collectives.
  const Scenario scenario = scenario_from(R"Y(
scenario: endless
world: 2
program:
  - repeat: 99999999
    do: [{allreduce: {size: 4}}]
)Y");
  EngineOptions timed_out;
  timed_out.limits.max_ops = UINT64_MAX;
  timed_out.deadline = std::chrono::steady_clock::now();  // already past: the first check ends it
  Engine engine(scenario, timed_out);
  TimedStrategy timed;
  const ExecutionResult late = engine.run(timed);
  REQUIRE(late.end == ExecutionEnd::LIMIT);
  CHECK(late.error->message == fmt::format("the time budget ran out inside an execution, after {} operations (raise it "
                                           "with --time-budget)", EngineOptions::BOUND_CHECK_OPS));

  EngineOptions bounded;
  bounded.limits.max_ops = UINT64_MAX;
  bounded.record_ops = false;
  bounded.max_resident_bytes = resident_bytes() + (uint64_t{32} << 20);
  Engine grows(scenario, bounded);
  const ExecutionResult full = grows.run(timed);
  REQUIRE(full.end == ExecutionEnd::LIMIT);
  CHECK(full.error->message.find("passed the bound of " + std::to_string(bounded.max_resident_bytes >> 20) +
                                 " MiB inside an execution") != std::string::npos);
  CHECK(full.error->message.ends_with("(raise it with --max-memory)"));
}

TEST_CASE("stacks: only a program whose depth has no static bound gets a guard page of its own") {
  const Scenario straight = scenario_file("scenarios/examples/3d-parallel.yaml");
  CHECK_FALSE(program_needs_guard(straight, straight.program_of(0)[0].body()));
  const Scenario recursive = scenario_from(R"Y(
scenario: recursive
world: 1
params: {n: 3}
define:
  down: [{if: "n > 0", then: [{compute: 1ms}, {call: up}]}]
  up: [{call: down}]
program: [{call: down}]
)Y");
  CHECK(program_needs_guard(recursive, recursive.program_of(0)[0].body()));
  // A chain of calls MAX_UNGUARDED_DEPTH deep is bounded; one more level is not.
  const auto chain = [](uint32_t calls) {
    std::string text = "scenario: chain\nworld: 1\ndefine:\n";
    for (uint32_t i = 0; i + 1 < calls; ++i) text += fmt::format("  d{}: [{{call: d{}}}]\n", i, i + 1);
    // More ops than the lookahead at the bottom: the program suspends there, its stack deepest.
    text += fmt::format("  d{}: [", calls - 1);
    for (int i = 0; i < 16; ++i) text += "{compute: \"rank + 1\"}, ";
    return text + "{compute: 1us}]\nprogram: [{call: d0}]\n";
  };
  const Scenario deep = scenario_from(chain(MAX_UNGUARDED_DEPTH));
  CHECK_FALSE(program_needs_guard(deep, deep.program_of(0)[0].body()));
  const Scenario deeper = scenario_from(chain(MAX_UNGUARDED_DEPTH + 1));
  CHECK(program_needs_guard(deeper, deeper.program_of(0)[0].body()));
  // What the deepest bounded program uses of its (unguarded) stack, suspended at its op: far
  // below the stack's size.
  StackPool pool(EngineLimits{}.fiber_stack_bytes);
  ProgramFiber fiber(deep, deep.program_of(0)[0].body(), 0, pool, EngineLimits{}, false);
  fiber.advance();
  REQUIRE(fiber.state() == ProgramFiber::State::READY);
  MESSAGE("stack used at depth " << MAX_UNGUARDED_DEPTH << ": " << fiber.snapshot_bytes() << " bytes");
  CHECK(fiber.snapshot_bytes() < EngineLimits{}.fiber_stack_bytes / 2);  // 44 KB in the dev build, 190 KB under ASan
}

TEST_CASE("stacks: 40,000 single-threaded ranks run without a mapping each, and a world past the mapping bound is named") {
  // Before slabs: each stack a mapping and a guard page, bad_alloc past ~32,700 threads.
  const Scenario wide = scenario_from(R"Y(
scenario: wide
world: 40000
program:
  - compute: "rank * 1us"
  - barrier: world
)Y");
  const ExecutionResult result = testing::run_timed(wide);
  CHECK(result.end == ExecutionEnd::COMPLETED);
  // Recursive programs keep their guard pages, two mappings each: past half of
  // vm.max_map_count (65,530 by default) the bound is named before any stack is made.
  size_t max_maps = 65530;
  if (std::FILE* file = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long long value = 0;
    if (std::fscanf(file, "%llu", &value) == 1) max_maps = static_cast<size_t>(value);
    std::fclose(file);
  }
  const size_t world = max_maps / 2 + 100;
  if (world > 600'000) {
    MESSAGE("vm.max_map_count is " << max_maps << ": the mapping bound is not tried here");
    return;
  }
  const Scenario recursive = scenario_from(fmt::format(R"Y(
scenario: recursive-wide
world: {}
define:
  down:
    params: [n]
    do: [{{if: "n > 0", then: [{{compute: 1ms}}, {{call: down, with: {{n: "n - 1"}}}}]}}]
program: [{{call: down, with: {{n: 2}}}}]
)Y", world));
  const ExecutionResult refused = testing::run_timed(recursive);
  REQUIRE(refused.end == ExecutionEnd::LIMIT);
  CHECK(refused.error->message.rfind(fmt::format("{} host threads need {} memory mappings for their stacks ({} of them "
                                                 "guard-paged", world, 2 * world, world), 0) == 0);
  CHECK(refused.error->message.find("that vm.max_map_count (") != std::string::npos);
}

TEST_CASE("a wildcard receive is a choice point with one option per pending sender") {
  const Scenario scenario = testing::scenario_file("scenarios/examples/wildcard-race.yaml");
  Engine engine(scenario);
  FirstOption first;
  const ExecutionResult takes_1 = engine.run(first);  // options sorted: sender 1 first
  CHECK(takes_1.end == ExecutionEnd::COMPLETED);
  CHECK(takes_1.choice_points == 1);
  struct Second final : Strategy {
    size_t choose(const ChoicePoint& point) override {
      CHECK(point.options.size() == 2);
      CHECK(point.options[1].detail == 2);
      return 1;
    }
  } second;
  const ExecutionResult takes_2 = engine.run(second);
  REQUIRE(takes_2.end == ExecutionEnd::STUCK);
  CHECK(takes_2.stuck.size() == 2);  // rank 0's named recv and rank 1's send
}

TEST_CASE("the same scenario gives the same timeline bytes twice") {
  const Scenario scenario = scenario_from(R"Y(
scenario: det
world: 4
program:
  - repeat: 2
    do:
      - compute: "(rank + 1) * 3ms"
      - allreduce: {size: 8MiB}
      - if: "rank % 2 == 0"
        then: [{send: {to: "rank + 1", size: 1MiB}}]
        else: [{recv: {from: "rank - 1", size: 1MiB}}]
)Y");
  const std::string first = chrome_trace(scenario, testing::run_timed(scenario));
  const std::string second = chrome_trace(scenario, testing::run_timed(scenario));
  CHECK(first == second);
  CHECK(first.find("\"allreduce #2 world\"") != std::string::npos);
}

TEST_CASE("one engine runs many executions (fiber stacks are recycled)") {
  const Scenario scenario = scenario_from(R"Y(
scenario: again
world: 8
program:
  - allreduce: {size: 1KiB}
)Y");
  Engine engine(scenario);
  TimedStrategy timed;
  for (int i = 0; i < 200; ++i) REQUIRE(engine.run(timed).end == ExecutionEnd::COMPLETED);
}

// The interpreter evaluates ops ahead of the engine (ProgramFiber::LOOKAHEAD). What it finds
// ahead of a thread that blocks forever must not show: neither an error in an op the thread
// never reaches, nor the cost of walking far ahead (here 10^16 loop steps, which would hang).
TEST_CASE("a program never runs far ahead of a thread that blocks forever") {
  const Scenario scenario = scenario_from(R"Y(
scenario: blocked-ahead
world: 2
program:
  - recv: {from: "1 - rank", size: 4}
  - sync
  - repeat: 100000000
    do:
      - repeat: 100000000
        do:
          - if: "rank < 0"
            then: [{compute: 1us}]
  - send: {to: "rank + 5", size: 4}
)Y");
  Engine engine(scenario);
  FirstOption first;
  for (int i = 0; i < 3; ++i) {  // and again, with each program cancelled while ahead
    const ExecutionResult result = engine.run(first);
    CHECK(result.end == ExecutionEnd::STUCK);
    CHECK(result.ops[0].size() == 2);  // the receive and the sync, which never returns
    CHECK(result.ops[1].size() == 2);
  }
}

TEST_CASE("an error the program meets ahead of the engine is reported when the engine reaches it") {
  const Scenario scenario = scenario_from(R"Y(
scenario: error-ahead
world: 2
program:
  - repeat: 20
    do: [{compute: 1us}]
  - allreduce: {size: 4}
  - send: {to: "rank + 5", size: 4}
)Y");
  const ExecutionResult result = testing::run_timed(scenario);
  REQUIRE(result.end == ExecutionEnd::ERROR);
  REQUIRE(result.error.has_value());
  CHECK(result.error->message.find("destination") != std::string::npos);
  CHECK(result.ops[0].size() == 21);  // every op before the failing one was issued
}

}  // namespace lockstep::sim
