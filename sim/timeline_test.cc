#include "sim/timeline.h"

#include <doctest/doctest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "tests/testing.h"

namespace lockstep::sim {

TEST_CASE("the timeline follows the Trace Event format: metadata, complete events, one track each") {
  const Scenario scenario = testing::scenario_from(R"Y(
scenario: tl
world: 2
threads:
  main:
    - compute: 2ms
    - allreduce: {size: 8MiB}
    - sleep: 1ms
  bg:
    - if: "rank == 0"
      then: [{send: {to: 1, size: 1MiB, async: h}}]
      else: [{recv: {from: 0, size: 1MiB, async: h}}]
)Y");
  Engine engine(scenario);
  TimedStrategy timed;
  const ExecutionResult result = engine.run(timed);
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace(scenario, result));
  REQUIRE(trace["traceEvents"].is_array());
  CHECK(trace["displayTimeUnit"] == "ns");
  std::set<std::tuple<int, int>> named_tracks;
  std::set<std::string> track_names;
  int complete = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    if (e["ph"] == "M") {
      const std::string name = e["name"];
      CHECK((name == "process_name" || name == "thread_name" || name == "process_sort_index"));
      if (name == "thread_name") {
        CHECK(named_tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()}).second);  // one name per track
        track_names.insert(std::to_string(e["pid"].get<int>()) + " " + e["args"]["name"].get<std::string>());
      }
      continue;
    }
    REQUIRE(e["ph"] == "X");
    CHECK(e["ts"].get<double>() >= 0);
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(named_tracks.count({e["pid"].get<int>(), e["tid"].get<int>()}) == 1);  // named before use
    ++complete;
  }
  // Host threads and streams are separate tracks, even where they share the name "main".
  CHECK(track_names.count("0 thread main") == 1);
  CHECK(track_names.count("0 thread bg") == 1);
  CHECK(track_names.count("0 stream main") == 1);
  CHECK(track_names.count("0 stream comm:world") == 1);
  CHECK(complete == 2 * 4);  // compute, allreduce, sleep, send or recv on each rank
}

TEST_CASE("a stuck op is drawn open to the end of the trace, marked stuck") {
  const Scenario scenario = testing::scenario_from(R"Y(
scenario: stuck
world: 2
program:
  - compute: "(rank + 1) * 5ms"
  - if: "rank == 0"
    then: [{allreduce: {size: 1MiB}}]
)Y");
  Engine engine(scenario);
  TimedStrategy timed;
  const ExecutionResult result = engine.run(timed);
  REQUIRE(result.end == ExecutionEnd::STUCK);
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace(scenario, result));
  bool found = false;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].contains("stuck")) {
      found = true;
      CHECK(e["ts"].get<double>() == 5000.0);          // rank 0's all-reduce started at 5 ms
      CHECK(e["dur"].get<double>() == 11000.0 - 5000.0);  // open until the trace ends (10 ms + a tenth)
      CHECK(e["name"].get<std::string>().ends_with(" (stuck)"));
      CHECK(e["cname"] == "terrible");
    }
  }
  CHECK(found);
  // The same spans, as the HTML report draws them.
  CHECK(timeline_horizon_ns(result) == 11'000'000);
  const std::optional<TimelineSpan> span = timeline_span(scenario, result.ops[0].back(), timeline_horizon_ns(result));
  REQUIRE(span);
  CHECK(span->name == "allreduce #1 world");
  CHECK(span->start_ns == 5'000'000);
  CHECK(span->end_ns == 11'000'000);
  CHECK(span->stuck);
  CHECK(span->comm);
}

TEST_CASE("the last rank's stuck op, started at the last event, still has a duration") {
  const Scenario scenario = testing::scenario_from(R"Y(
scenario: stuck-last
world: 2
program:
  - compute: "(rank + 1) * 5ms"
  - if: "rank == 1"
    then: [{allreduce: {size: 1MiB}}]
)Y");
  Engine engine(scenario);
  TimedStrategy timed;
  const ExecutionResult result = engine.run(timed);
  REQUIRE(result.end == ExecutionEnd::STUCK);
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace(scenario, result));
  bool found = false;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].contains("stuck")) {
      found = true;
      CHECK(e["pid"] == 1);
      CHECK(e["ts"].get<double>() == 10000.0);  // rank 1 starts it at 10 ms, the last event
      CHECK(e["dur"].get<double>() == 1000.0);
    }
  }
  CHECK(found);
}

}  // namespace lockstep::sim
