#include "export/promela.h"

#include <doctest/doctest.h>

#include <string>

#include "tests/testing.h"

namespace lockstep::exporter {

namespace {

std::string first_error(const sim::Scenario& scenario) {
  const PromelaExport exported = export_promela(scenario);
  REQUIRE_FALSE(exported.model);
  REQUIRE_FALSE(exported.diagnostics.empty());
  const sim::Diagnostic& d = exported.diagnostics.front();
  return sim::format_location(d.file, d.loc) + ": " + d.message;
}

}  // namespace

TEST_CASE("export promela: a ring is one process per rank with its sends, receives and matching") {
  const sim::Scenario ring = testing::scenario_from(R"(scenario: ring
world: 3
program:
  - send: {to: "(rank + 1) % world", size: 4}
  - recv: {from: "(rank + world - 1) % world", size: 4}
)");
  const PromelaExport exported = export_promela(ring);
  REQUIRE(exported.model);
  CHECK(exported.model->processes == 3);
  CHECK(exported.model->ops == 6);
  const std::string& text = exported.model->text;
  CHECK(text.find("proctype r2_0()") != std::string::npos);
  CHECK(text.find("proctype matcher") == std::string::npos);  // no wildcard
  CHECK(text.find("/* send 4B to 1 on world (test.yaml:4:5) */") != std::string::npos);
  CHECK(text.find("init {\n  atomic { run r0_0(); run r1_0(); run r2_0(); }\n}") != std::string::npos);
}

TEST_CASE("export promela: threads get a device process, wildcards a matcher, a batch one init") {
  const sim::Scenario scenario = testing::scenario_from(R"(scenario: mixed
world: 2
threads:
  main:
    - if: "rank == 0"
      then: [{recv: {from: any, size: 4}}]
      else: [{send: {to: 0, size: 4}}]
  bg:
    - choose: {a: [{allreduce: {size: 4}}], b: [exit]}
)");
  PromelaOptions options;
  options.prefix = "m7_";
  options.stuck_as_assertion = true;
  const PromelaExport exported = export_promela(scenario, options);
  REQUIRE(exported.model);
  CHECK(exported.model->processes == 2 * 2 + 2 + 1 + 1);  // threads, devices, matcher, watchdog
  const std::string batch = promela_batch({*exported.model, *exported.model});
  CHECK(batch.find("proctype m7_dev1()") != std::string::npos);
  CHECK(batch.find("proctype m7_matcher()") != std::string::npos);
  CHECK(batch.find("timeout -> assert(m7_fin == 2)") != std::string::npos);
  CHECK(batch.find("} unless { m7_dead0 }") != std::string::npos);  // a thread may exit
  CHECK(batch.find("    :: run m7_r0_0(); ") != std::string::npos);
}

TEST_CASE("export promela: constructs outside the subset are named at their source") {
  CHECK(first_error(testing::scenario_from(R"(scenario: x
world: 2
program:
  - new_group: {name: pair, ranks: [0, 1]}
)")) == "test.yaml:4:5: export promela: 'new_group' is outside the subset SPIN models (docs/spin.md)");
  CHECK(first_error(testing::scenario_from(R"(scenario: x
world: 2
program:
  - allreduce: {size: 4, async: h}
  - wait: h
)")) == "test.yaml:4:5: export promela: 'async' (a handle waited for later) is outside the subset SPIN models (docs/spin.md)");
  CHECK(first_error(testing::scenario_from(R"(scenario: x
world: 2
semantics: {comm_concurrency: 1}
program:
  - allreduce: {size: 4}
)")) == "test.yaml: export promela: semantics comm_concurrency is outside the subset SPIN models (docs/spin.md)");
  CHECK(first_error(testing::scenario_from(R"(scenario: x
world: 2
launch:
  processes: [{rank: 0}, {rank: 1}]
program:
  - allreduce: {size: 4}
)")) == "test.yaml:3:1: export promela: 'launch' (process initialisation) is outside the subset SPIN models (docs/spin.md)");
  // The word alone (a tag, a description) is not a launch.
  CHECK(export_promela(testing::scenario_from(R"(scenario: x
description: "a
  launch: later"
world: 2
program:
  - allreduce: {size: 4, tag: launch}
)")).model);
  CHECK(first_error(testing::scenario_from(R"(scenario: x
world: 300
program:
  - allreduce: {size: 4}
)")) == "test.yaml: the model needs 301 processes (one per host thread, one device per rank with several threads, "
        "init); SPIN runs at most 255");
}

}  // namespace lockstep::exporter
