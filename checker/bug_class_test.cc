#include "checker/bug_class.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "checker/explore.h"
#include "checker/report.h"
#include "sim/loader.h"

namespace lockstep::checker {

namespace {

// Each of four ranks may stop early: 14 subsets of stopping ranks hang the others.
constexpr const char* EARLY_STOP = R"(scenario: early-stop
expect: hang
world: 4
params: {epochs: 2}
program:
  - repeat: epochs
    do:
      - compute: 20ms
      - allreduce: {size: 64MiB}
      - sync
      - choose:
          stop: [exit]
          keep_going: []
)";

sim::Scenario load(const std::string& text) {
  sim::LoadResult loaded = sim::load_scenario_text(text, "job.yaml", {});
  REQUIRE(loaded.ok());
  return std::move(*loaded.scenario);
}

}  // namespace

TEST_CASE("bug classes: every subset of early-stopping ranks is one class, shown by one rank stopping alone") {
  const sim::Scenario scenario = load(EARLY_STOP);
  const CheckResult result = check_scenario(scenario, {});
  REQUIRE(result.bugs.size() == 14);
  const std::vector<BugClass> classes = group_bugs(result.bugs);
  REQUIRE(classes.size() == 1);
  CHECK(classes[0].members.size() == 14);
  const Bug& smallest = result.bugs[classes[0].representative];
  CHECK(smallest.summary == "ranks 1-3 wait in allreduce #2 on world (job.yaml:9:9); rank 0 never issued it: it exited");
  CHECK(describe_choices(scenario, smallest) ==
        std::vector<std::string>{"rank 0 took branch 1 (`stop`) of the choose at job.yaml:11:9",
                                 "ranks 1-3 took branch 2 (`keep_going`) of the choose at job.yaml:11:9"});

  InputReport report;
  report.input = "job.yaml";
  report.scenario = &scenario;
  report.result = result;
  CHECK(report_text(report, false) ==
        "job.yaml: hang (expected hang) [31 executions, exhaustive]\n"
        "  hang, 14 variants; smallest:\n"
        "  ranks 1-3 wait in allreduce #2 on world (job.yaml:9:9); rank 0 never issued it: it exited\n"
        "  choice: rank 0 took branch 1 (`stop`) of the choose at job.yaml:11:9\n"
        "  choice: ranks 1-3 took branch 2 (`keep_going`) of the choose at job.yaml:11:9\n");
  // The JSON keeps every member, each naming its class.
  const nlohmann::json json = nlohmann::json::parse(report_json({report}, false));
  CHECK(json["bugs"].size() == 14);
  CHECK(json["bugs"][13]["class"] == 1);
  REQUIRE(json["classes"].size() == 1);
  CHECK(json["classes"][0]["variants"] == 14);
  CHECK(json["classes"][0]["representative"] == classes[0].representative);
  CHECK(json["classes"][0]["members"].size() == 14);
}

TEST_CASE("bug classes: different stuck ops, or a rank that exited rather than finished, are different classes") {
  const sim::Scenario scenario = load(R"(scenario: two-ways
world: 2
program:
  - choose:
      leave: [exit]
      skip: []
      stay: [{allreduce: {size: 4}}]
  - allreduce: {size: 8}
)");
  const CheckResult result = check_scenario(scenario, {});
  const std::vector<BugClass> classes = group_bugs(result.bugs);
  CHECK(classes.size() >= 2);
  std::set<std::string> keys;
  for (const Bug& bug : result.bugs) keys.insert(bug.class_key);
  CHECK(keys.size() == classes.size());
}

TEST_CASE("--patience: a space too large to list stops once executions only add variants") {
  std::string text = "scenario: ckpt\nworld: 16\nthreads:\n  main:\n    - allreduce: {size: 64MiB}\n"
                     "    - allreduce: {size: 64MiB}\n  checkpoint:\n    - allgather: {size: 64KiB}\n";
  const sim::Scenario scenario = load(text);
  CheckOptions options;
  options.patience = 100;
  const CheckResult result = check_scenario(scenario, options);
  CHECK(result.verdict == sim::Verdict::MISMATCH);
  CHECK_FALSE(result.exhaustive);
  CHECK(result.bound_hit == "--patience 100");
  CHECK(result.executions < 400);
  CHECK(group_bugs(result.bugs).size() <= 2);
}

}  // namespace lockstep::checker
