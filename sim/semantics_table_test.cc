#include "sim/semantics_table.h"

#include <doctest/doctest.h>

#include <string>

#include "sim/loader.h"
#include "sim/trace_format.h"

namespace lockstep::sim {

TEST_CASE("semantics table: every setting reads the same from YAML and from a trace, and is written back") {
  // A value other than the default for each setting, in each form.
  const std::string yaml = R"(scenario: s
world: 2
semantics: {p2p: eager, eager_limit: 64KiB, p2p_comm: pair, comm_concurrency: 2, launch_order_implicit: true, timeout: 30s, algorithm: tree}
program:
  - allreduce: {size: 4}
)";
  const std::string trace =
      R"({"lockstep_trace": 1, "scenario": "s", "world": 2, "semantics": {"p2p": "eager", "eager_limit": 65536, )"
      R"("p2p_comm": "pair", "comm_concurrency": 2, "launch_order_implicit": true, "timeout_ns": 30000000000, "algorithm": "tree"}})"
      "\n{\"rank\": 0, \"op\": \"allreduce\", \"size\": 4}\n{\"rank\": 1, \"op\": \"allreduce\", \"size\": 4}\n";
  const LoadResult from_yaml = load_scenario_text(yaml, "s.yaml", {});
  const LoadResult from_trace = load_trace_text(trace, "s.jsonl", {});
  REQUIRE(from_yaml.ok());
  REQUIRE(from_trace.ok());
  const Semantics defaults;
  for (const SemanticsSetting& setting : semantics_settings()) {
    INFO(setting.yaml_key);
    CHECK(setting.get(from_yaml.scenario->semantics) != setting.get(defaults));
    CHECK(setting.get(from_yaml.scenario->semantics) == setting.get(from_trace.scenario->semantics));
    CHECK(find_setting(setting.yaml_key, true) == &setting);
    CHECK(find_setting(setting.trace_key, false) == &setting);
  }
  // The writer writes every one of them, and reading it back gives the same settings.
  const std::string written = write_trace(*from_trace.scenario);
  const LoadResult again = load_trace_text(written, "again.jsonl", {});
  REQUIRE(again.ok());
  for (const SemanticsSetting& setting : semantics_settings()) {
    CHECK(written.find("\"" + std::string(setting.trace_key) + "\": ") != std::string::npos);
    CHECK(setting.get(again.scenario->semantics) == setting.get(from_yaml.scenario->semantics));
  }
}

TEST_CASE("semantics table: a key of the other form is unknown, with the valid keys of this one") {
  const LoadResult yaml = load_scenario_text("scenario: s\nworld: 2\nsemantics: {timeout_ns: 5}\nprogram: []\n", "s.yaml", {});
  REQUIRE(!yaml.diagnostics.empty());
  CHECK(yaml.diagnostics.front().message ==
        "unknown key 'timeout_ns' in semantics (did you mean 'timeout'?); valid keys: algorithm, comm_concurrency, "
        "eager_limit, launch_order_implicit, p2p, p2p_comm, timeout");
}

}  // namespace lockstep::sim
