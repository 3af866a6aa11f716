// The per-rank event log (EngineOptions::log; docs/logging.md): what it writes of a run, at
// each level, and that logging changes nothing in the result.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "sim/engine.h"
#include "tests/testing.h"

namespace lockstep::sim {
namespace {

const char* const PROGRAM = R"(program:
  - compute: 1ms
  - allreduce: {size: 1MiB}
)";

Scenario with_launch(const std::string& world_and_launch) {
  return testing::scenario_from("scenario: t\n" + world_and_launch + PROGRAM);
}

ExecutionResult run_once(const Scenario& scenario, EventLog* log = nullptr) {
  EngineOptions options;
  options.log = log;
  Engine engine(scenario, options);
  TimedStrategy timed;
  return engine.run(timed);
}

TEST_CASE("log: a hang ends with one line per rank that did not finish, filtered by rank") {
  const Scenario s = testing::scenario_from(R"(scenario: t
world: 3
program:
  - if: "rank != 2"
    then:
      - allreduce: {size: 1MiB}
)");
  std::ostringstream all;
  {
    EventLog log(all, LogLevel::ERROR);
    run_once(s, &log);
  }
  CHECK(all.str() ==
        "[   0.000 ms] rank 0 main: stuck in allreduce #1 on world (test.yaml:6:9) on stream comm:world, waiting for rank 2 (rank 2 never issued it)\n"
        "[   0.000 ms] rank 1 main: stuck in allreduce #1 on world (test.yaml:6:9) on stream comm:world, waiting for rank 2 (rank 2 never issued it)\n");
  std::ostringstream one;
  {
    EventLog log(one, LogLevel::INFO, {1});
    run_once(s, &log);
  }
  CHECK(one.str() ==
        "[   0.000 ms] rank 1 main: reached allreduce #1 on world (test.yaml:6:9)\n"
        "[   0.000 ms] rank 1 main: stuck in allreduce #1 on world (test.yaml:6:9) on stream comm:world, waiting for rank 2 (rank 2 never issued it)\n");
}

TEST_CASE("log: init lines name who never started, and logging changes nothing in the result") {
  const Scenario s = with_launch("world: 2\nlaunch: {processes: [{rank: 0}, {rank: 2, world_size: 2}]}\n");
  std::ostringstream out;
  ExecutionResult logged;
  {
    EventLog log(out, LogLevel::INFO);
    logged = run_once(s, &log);
  }
  CHECK(out.str() ==
        "[   0.000 ms] rank 0 main: reached init_process_group on world (world_size 2, nccl, env://) (test.yaml:3:22)\n"
        "[   0.000 ms] rank 2 main: init_process_group raised (NCCL WARN Invalid rank requested : 2/2, "
        "ncclInvalidArgument): the process (test.yaml:3:33) exits without joining\n"
        "[   0.000 ms] rank 0 main: stuck in init_process_group on world (test.yaml:3:22), waiting for rank 1 (rank 1 never joined)\n"
        "[   0.000 ms] rank 1 main: never started: no process joined init_process_group as this rank\n");
  const ExecutionResult plain = run_once(s);
  CHECK(plain.events == logged.events);
  CHECK(plain.stuck.size() == logged.stuck.size());
}

TEST_CASE("log: debug logs issue, start, match and completion, and twice gives the same bytes") {
  const Scenario s = with_launch("world: 2\n");
  std::string first;
  for (int i = 0; i < 2; ++i) {
    std::ostringstream out;
    {
      EventLog log(out, LogLevel::DEBUG, {1});
      run_once(s, &log);
    }
    if (i == 0) first = out.str();
    CHECK(out.str() == first);
  }
  CHECK(first ==
        "[   0.000 ms] rank 1 main: issue compute 1.000ms on stream main (test.yaml:4:5)\n"
        "[   0.000 ms] rank 1 main: reached allreduce #1 on world on stream comm:world (test.yaml:5:5)\n"
        "[   0.000 ms] rank 1 main: matched allreduce #1 on world on stream comm:world\n"
        "[   0.000 ms] rank 1 main: start compute 1.000ms on stream main\n"
        "[   1.000 ms] rank 1 main: done compute 1.000ms on stream main\n"
        "[   1.000 ms] rank 1 main: start allreduce #1 on world on stream comm:world\n"
        "[   1.020 ms] rank 1 main: done allreduce #1 on world on stream comm:world\n"
        "[   1.020 ms] rank 1 main: finished\n");
}

}  // namespace
}  // namespace lockstep::sim
