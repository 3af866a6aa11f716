#include "checker/minimize.h"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include "checker/explore.h"
#include "sim/trace_format.h"
#include "tests/testing.h"

namespace lockstep::checker {

namespace {

// A recorded trace and the lines of the ops a bug is made of.
struct Recorded {
  std::string text;
  std::vector<std::string> culprits;  // "LINE:COL" of each (the position of its "op" key)
};

// Every rank runs `iters` x (compute, allreduce on world). kind "deadlock": then ranks 2 and 5
// send to each other before they receive, the others compute once more. kind "hang": the last
// rank stops one all-reduce early. kind "mismatch": then rank 3 all-reduces 8 bytes where the
// others all-reduce 4, and everyone computes.
Recorded recorded(int world, int iters, const std::string& kind) {
  Recorded out;
  out.text = fmt::format(R"({{"lockstep_trace": 1, "scenario": "dp", "world": {}}})", world) + "\n";
  uint32_t line = 1;
  auto add = [&](const std::string& op, bool culprit) {
    out.text += op + "\n";
    ++line;
    if (culprit) out.culprits.push_back(fmt::format("{}:{}", line, op.find("\"op\"") + 1));
  };
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < iters; ++i) {
      if (kind == "hang" && r == world - 1 && i == iters - 1) break;
      add(fmt::format(R"({{"rank": {}, "op": "compute", "duration_ns": 1000}})", r), false);
      add(fmt::format(R"({{"rank": {}, "op": "allreduce", "size": 1024}})", r), kind == "hang" && i == iters - 1);
    }
    if (kind == "deadlock" && (r == 2 || r == 5)) {
      const int peer = r == 2 ? 5 : 2;
      add(fmt::format(R"({{"rank": {}, "op": "send", "to": {}, "size": 64}})", r, peer), true);
      add(fmt::format(R"({{"rank": {}, "op": "recv", "from": {}, "size": 64}})", r, peer), false);
    } else if (kind == "mismatch") {
      add(fmt::format(R"({{"rank": {}, "op": "allreduce", "size": {}}})", r, r == 3 ? 8 : 4), r == 0 || r == 3);
      add(fmt::format(R"({{"rank": {}, "op": "compute", "duration_ns": 5}})", r), false);
    } else {
      add(fmt::format(R"({{"rank": {}, "op": "compute", "duration_ns": 1000}})", r), false);
    }
  }
  return out;
}


std::vector<std::string> sources(const std::string& path, const std::vector<std::string>& positions) {
  std::vector<std::string> out;
  for (const std::string& position : positions) out.push_back(path + ":" + position);
  return out;
}

MinimizeOptions options_for(const std::string& path, uint64_t budget = DEFAULT_MINIMIZE_BUDGET) {
  MinimizeOptions options;
  options.path = path;
  options.budget = budget;
  return options;
}

}  // namespace

TEST_CASE("minimize cuts a 64-rank recorded deadlock down to the two sends that make it") {
  const Recorded trace = recorded(64, 4, "deadlock");
  const sim::Scenario scenario = testing::trace_from(trace.text, "dp.jsonl");
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);
  REQUIRE(found.bugs[0].kind == sim::Verdict::DEADLOCK);

  const MinimizeResult min = minimize_bug(scenario, found.bugs[0], options_for("dp.min.jsonl"));
  CHECK(min.refused == "");
  CHECK(min.ranks_before == 64);
  CHECK(min.ops_before == 64 * 9 + 2);
  CHECK(min.ranks_after == 2);
  CHECK(min.ops_after == 2);
  CHECK(!min.budget_hit);
  CHECK(min.sources == sources("dp.jsonl", trace.culprits));
  CHECK(min.trace ==
        "{\"lockstep_trace\": 1, \"scenario\": \"dp-min\", \"description\": \"dp.jsonl minimized by lockstep check "
        "--minimize: " + found.bugs[0].summary + "\", \"expect\": \"deadlock\", \"world\": 64}\n"
        "{\"rank\": 2, \"op\": \"send\", \"to\": 5, \"size\": 64}\n"
        "{\"rank\": 5, \"op\": \"send\", \"to\": 2, \"size\": 64}\n");
  CHECK(minimize_summary(min, DEFAULT_MINIMIZE_BUDGET) ==
        fmt::format("minimized: 2 ranks, 2 ops of 64 ranks, 578 ops ({} re-checks)", min.rechecks));

  // The minimized trace, checked on its own, shows the same bug: the same two ranks deadlocked
  // in those sends.
  const sim::Scenario again = testing::trace_from(min.trace, "dp.min.jsonl");
  const CheckResult rechecked = check_scenario(again, {});
  REQUIRE(rechecked.bugs.size() == 1);
  CHECK(rechecked.bugs[0].kind == sim::Verdict::DEADLOCK);
  CHECK(rechecked.bugs[0].cycle == std::vector<int32_t>{2, 5, 2});
  REQUIRE(rechecked.bugs[0].stuck.size() == 2);
  CHECK(again.location(rechecked.bugs[0].stuck[0].op.op.stmt->loc) == "dp.min.jsonl:2:13");
  CHECK(again.location(rechecked.bugs[0].stuck[1].op.op.stmt->loc) == "dp.min.jsonl:3:13");
}

TEST_CASE("minimize keeps every rank waiting in a hang's all-reduce and empties the rank that stopped") {
  const Recorded trace = recorded(16, 3, "hang");
  const sim::Scenario scenario = testing::trace_from(trace.text, "hang.jsonl");
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);
  REQUIRE(found.bugs[0].kind == sim::Verdict::HANG);

  const MinimizeResult min = minimize_bug(scenario, found.bugs[0], options_for("hang.min.jsonl"));
  CHECK(min.refused == "");
  CHECK(min.ops_before == 15 * 7 + 5);
  CHECK(min.ranks_after == 15);
  CHECK(min.ops_after == 15);
  CHECK(min.sources == sources("hang.jsonl", trace.culprits));

  const CheckResult rechecked = check_scenario(testing::trace_from(min.trace, "hang.min.jsonl"), {});
  REQUIRE(rechecked.bugs.size() == 1);
  CHECK(rechecked.bugs[0].kind == sim::Verdict::HANG);
  CHECK(rechecked.bugs[0].stuck.size() == 15);
  CHECK(rechecked.bugs[0].stuck[0].never_issued == std::vector<int32_t>{15});
}

TEST_CASE("minimize of a mismatch keeps exactly the two mismatched all-reduces") {
  const Recorded trace = recorded(8, 5, "mismatch");
  const sim::Scenario scenario = testing::trace_from(trace.text, "mm.jsonl");
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);
  REQUIRE(found.bugs[0].kind == sim::Verdict::MISMATCH);

  const MinimizeResult min = minimize_bug(scenario, found.bugs[0], options_for("mm.min.jsonl"));
  CHECK(min.ops_after == 2);
  CHECK(min.sources == sources("mm.jsonl", trace.culprits));
  const CheckResult rechecked = check_scenario(testing::trace_from(min.trace, "mm.min.jsonl"), {});
  REQUIRE(rechecked.bugs.size() == 1);
  REQUIRE(rechecked.bugs[0].mismatch);
  CHECK(rechecked.bugs[0].mismatch->field == "size");
  CHECK(rechecked.bugs[0].mismatch->rank_a == 0);
  CHECK(rechecked.bugs[0].mismatch->rank_b == 3);
}

TEST_CASE("minimize stops at its budget, says so, and what it kept still shows the bug") {
  const Recorded trace = recorded(64, 4, "deadlock");
  const sim::Scenario scenario = testing::trace_from(trace.text, "dp.jsonl");
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);

  const MinimizeResult min = minimize_bug(scenario, found.bugs[0], options_for("dp.min.jsonl", 3));
  CHECK(min.refused == "");
  CHECK(min.budget_hit);
  CHECK(min.rechecks == 3);
  CHECK(min.ops_after < min.ops_before);
  CHECK(min.ops_after > 2);
  CHECK(minimize_summary(min, 3).ends_with("(3 re-checks); stopped at the budget of 3 re-checks (--minimize-budget)"));
  const CheckResult rechecked = check_scenario(testing::trace_from(min.trace, "dp.min.jsonl"), {});
  REQUIRE(rechecked.bugs.size() == 1);
  CHECK(rechecked.bugs[0].cycle == std::vector<int32_t>{2, 5, 2});
}

TEST_CASE("minimize is deterministic") {
  const Recorded trace = recorded(32, 3, "deadlock");
  const sim::Scenario scenario = testing::trace_from(trace.text, "dp.jsonl");
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);
  const MinimizeResult a = minimize_bug(scenario, found.bugs[0], options_for("dp.min.jsonl"));
  const MinimizeResult b = minimize_bug(scenario, found.bugs[0], options_for("dp.min.jsonl"));
  CHECK(a.trace == b.trace);
  CHECK(a.rechecks == b.rechecks);
  CHECK(a.sources == b.sources);
}

TEST_CASE("minimize refuses a scripted scenario and says why") {
  const sim::Scenario scenario = testing::scenario_file("scenarios/examples/wildcard-race.yaml");
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);
  const MinimizeResult min = minimize_bug(scenario, found.bugs[0], options_for("x.min.jsonl"));
  CHECK(min.refused ==
        "--minimize applies to recorded schedules only, and scenarios/examples/wildcard-race.yaml is not one "
        "(scenarios/examples/wildcard-race.yaml:9:5: a statement other than an operation)");
  CHECK(min.trace == "");
  CHECK(min.rechecks == 0);
}

TEST_CASE("minimize accepts a recorded YAML schedule (ranks:) and writes it as a trace") {
  const sim::Scenario scenario = testing::scenario_from(R"Y(
scenario: yaml-recorded
world: 3
ranks:
  0:
    - compute: 1ms
    - allreduce: {size: 1KiB}
    - send: {to: 1, size: 1KiB}
  1:
    - compute: 1ms
    - allreduce: {size: 1KiB}
    - send: {to: 0, size: 1KiB}
  2:
    - allreduce: {size: 1KiB}
    - compute: 5ms
)Y", "rec.yaml");
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);
  const MinimizeResult min = minimize_bug(scenario, found.bugs[0], options_for("rec.min.jsonl"));
  CHECK(min.refused == "");
  CHECK(min.ops_before == 8);
  CHECK(min.ops_after == 2);
  CHECK(min.sources == std::vector<std::string>{"rec.yaml:8:7", "rec.yaml:12:7"});
}

}  // namespace lockstep::checker
