// docs/logging.md: its example logs are what the engine writes for its example scenario, byte
// for byte (the log format is pinned here).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "tests/testing.h"

namespace lockstep::sim {
namespace {

std::string log_of(const Scenario& scenario, LogLevel level, const std::vector<int32_t>& ranks) {
  std::ostringstream out;
  {
    EventLog log(out, level, ranks);
    EngineOptions options;
    options.log = &log;
    Engine engine(scenario, options);
    TimedStrategy timed;
    engine.run(timed);
  }
  return out.str();
}

TEST_CASE("docs: the example logs of docs/logging.md are what the engine writes") {
  std::ifstream file(std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "docs" / "logging.md", std::ios::binary);
  REQUIRE(file.good());
  std::ostringstream markdown;
  markdown << file.rdbuf();
  const std::vector<testing::FencedBlock> scenarios = testing::fenced_blocks(markdown.str(), "yaml");
  const std::vector<testing::FencedBlock> logs = testing::fenced_blocks(markdown.str(), "text");
  REQUIRE(scenarios.size() == 1);
  REQUIRE(logs.size() == 2);
  const Scenario scenario = testing::scenario_from(scenarios[0].text, "log-example.yaml");
  CHECK(log_of(scenario, LogLevel::INFO, {}) == logs[0].text);
  CHECK(log_of(scenario, LogLevel::DEBUG, {0}) == logs[1].text);
}

}  // namespace
}  // namespace lockstep::sim
