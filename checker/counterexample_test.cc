#include "checker/counterexample.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "checker/explore.h"
#include "sim/trace_format.h"

namespace lockstep::checker {

namespace {

sim::Scenario load_trace(const std::string& text) {
  sim::LoadResult loaded = sim::load_trace_text(text, "t.jsonl", {});
  std::string diagnostics;
  for (const sim::Diagnostic& d : loaded.diagnostics) diagnostics += sim::format_diagnostic(d, loaded.text);
  INFO(diagnostics);
  REQUIRE(loaded.ok());
  return std::move(*loaded.scenario);
}

// The counterexample of the scenario's only bug, parsed.
nlohmann::json counterexample_of(const sim::Scenario& scenario) {
  const CheckResult found = check_scenario(scenario, {});
  REQUIRE(found.bugs.size() == 1);
  bool diverged = false;
  const sim::ExecutionResult replayed = replay_execution(scenario, found.bugs[0].choices, engine_options_for({}), diverged);
  REQUIRE(!diverged);
  const std::string text = counterexample_json(scenario, found.bugs[0], replayed, "dpor", 0);
  CHECK(text == counterexample_json(scenario, found.bugs[0], replayed, "dpor", 0));  // deterministic
  return nlohmann::json::parse(text);
}

std::vector<uint32_t> indices(const nlohmann::json& rank) {
  std::vector<uint32_t> out;
  for (const nlohmann::json& op : rank["ops"]) out.push_back(op["index"].get<uint32_t>());
  return out;
}

}  // namespace

TEST_CASE("a counterexample lists the causal past of the stuck ops and counts what it leaves out") {
  // Ranks 0 and 1 all-reduce with 2 and 3, then send to each other first (a deadlock). Rank 0's
  // second thread, the later all-reduces of 2 and 3 on their own group and rank 4 play no part.
  const sim::Scenario scenario = load_trace(
      R"({"lockstep_trace": 1, "scenario": "trim", "world": 5, "groups": {"front": [0, 1, 2, 3], "back": [2, 3]}})" "\n"
      R"({"rank": 0, "op": "allreduce", "group": "front", "size": 64})" "\n"
      R"({"rank": 0, "op": "send", "to": 1, "size": 8})" "\n"
      R"({"rank": 0, "op": "recv", "from": 1, "size": 8})" "\n"
      R"({"rank": 0, "thread": "loader", "op": "sleep", "duration_ns": 10})" "\n"
      R"({"rank": 1, "op": "allreduce", "group": "front", "size": 64})" "\n"
      R"({"rank": 1, "op": "send", "to": 0, "size": 8})" "\n"
      R"({"rank": 1, "op": "recv", "from": 0, "size": 8})" "\n"
      R"({"rank": 2, "op": "allreduce", "group": "front", "size": 64})" "\n"
      R"({"rank": 2, "op": "allreduce", "group": "back", "size": 64})" "\n"
      R"({"rank": 2, "op": "allreduce", "group": "back", "size": 64})" "\n"
      R"({"rank": 3, "op": "allreduce", "group": "front", "size": 64})" "\n"
      R"({"rank": 3, "op": "allreduce", "group": "back", "size": 64})" "\n"
      R"({"rank": 3, "op": "allreduce", "group": "back", "size": 64})" "\n"
      R"({"rank": 4, "op": "compute", "duration_ns": 10})" "\n"
      R"({"rank": 4, "op": "compute", "duration_ns": 10})" "\n");
  const nlohmann::json cex = counterexample_of(scenario);
  CHECK(cex["bug"]["kind"] == "deadlock");
  CHECK(cex["listed"] == nlohmann::json::parse(
                             R"({"rule": "causal past of the bug", "ops": 8, "ops_left_out": 7, "ranks_left_out": 1})"));
  REQUIRE(cex["ranks"].size() == 4);
  CHECK(cex["ranks"][0]["rank"] == 0);
  CHECK(cex["ranks"][0]["stuck_in"] == nlohmann::json::array({1}));
  // The loader's sleep is left out; the receive issued after the send is listed: rank 1's send
  // matched it, and waits for it to run.
  CHECK(cex["ranks"][0]["left_out"] == 1);
  CHECK(indices(cex["ranks"][0]) == std::vector<uint32_t>{0, 1, 2});
  CHECK(cex["ranks"][0]["ops"][1]["source"] == "t.jsonl:3:13");
  CHECK(cex["ranks"][2]["rank"] == 2);
  CHECK(indices(cex["ranks"][2]) == std::vector<uint32_t>{0});
  CHECK(cex["ranks"][2]["left_out"] == 2);
  CHECK(cex["ranks"][3]["left_out"] == 2);
  // The scenario stays whole: replay needs it.
  CHECK(cex["scenario"]["text"].get<std::string>() == scenario.text);
}

TEST_CASE("a counterexample lists everything a rank did before it finished without the awaited op") {
  const sim::Scenario scenario = load_trace(
      R"({"lockstep_trace": 1, "scenario": "early", "world": 3})" "\n"
      R"({"rank": 0, "op": "allreduce", "size": 64})" "\n"
      R"({"rank": 0, "op": "allreduce", "size": 64})" "\n"
      R"({"rank": 1, "op": "allreduce", "size": 64})" "\n"
      R"({"rank": 1, "op": "allreduce", "size": 64})" "\n"
      R"({"rank": 2, "op": "allreduce", "size": 64})" "\n"
      R"({"rank": 2, "op": "compute", "duration_ns": 10})" "\n"
      R"({"rank": 2, "op": "sleep", "duration_ns": 10})" "\n");
  const nlohmann::json cex = counterexample_of(scenario);
  CHECK(cex["bug"]["kind"] == "hang");
  REQUIRE(cex["ranks"].size() == 3);
  CHECK(cex["ranks"][2]["status"] == "finished");
  CHECK(indices(cex["ranks"][2]) == std::vector<uint32_t>{0, 1, 2});
  CHECK(cex["listed"]["ops_left_out"] == 0);
}

TEST_CASE("a mismatch lists the causal past of the two mismatched ops") {
  const sim::Scenario scenario = load_trace(
      R"({"lockstep_trace": 1, "scenario": "mm", "world": 3, "groups": {"pair": [0, 1]}})" "\n"
      R"({"rank": 0, "op": "allreduce", "group": "pair", "size": 64})" "\n"
      R"({"rank": 0, "op": "allreduce", "group": "pair", "size": 4})" "\n"
      R"({"rank": 1, "op": "allreduce", "group": "pair", "size": 64})" "\n"
      R"({"rank": 1, "op": "allreduce", "group": "pair", "size": 8})" "\n"
      R"({"rank": 2, "op": "compute", "duration_ns": 10})" "\n");
  const nlohmann::json cex = counterexample_of(scenario);
  CHECK(cex["bug"]["kind"] == "mismatch");
  REQUIRE(cex["ranks"].size() == 2);
  CHECK(indices(cex["ranks"][0]) == std::vector<uint32_t>{0, 1});
  CHECK(indices(cex["ranks"][1]) == std::vector<uint32_t>{0, 1});
}

TEST_CASE("matched sets pair collective members by communicator and seq, and a send with its receive") {
  const sim::Scenario scenario = load_trace(
      R"({"lockstep_trace": 1, "scenario": "m", "world": 2})" "\n"
      R"({"rank": 0, "op": "allreduce", "size": 64})" "\n"
      R"({"rank": 0, "op": "send", "to": 1, "size": 8})" "\n"
      R"({"rank": 1, "op": "allreduce", "size": 64})" "\n"
      R"({"rank": 1, "op": "recv", "from": "any", "size": 8})" "\n");
  sim::Engine engine(scenario);
  sim::TimedStrategy timed;
  const sim::ExecutionResult result = engine.run(timed);
  REQUIRE(result.end == sim::ExecutionEnd::COMPLETED);
  const std::vector<std::vector<OpId>> sets = matched_sets(scenario, result);
  REQUIRE(sets.size() == 2);
  CHECK(sets[0] == std::vector<OpId>{{0, 0}, {1, 0}});
  CHECK(sets[1] == std::vector<OpId>{{0, 1}, {1, 1}});
}

}  // namespace lockstep::checker
