// Helpers shared by the unit tests.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli.h"
#include "sim/engine.h"
#include "sim/loader.h"
#include "sim/scenario.h"
#include "sim/trace_format.h"

namespace lockstep::testing {

// One `lockstep` command line run in this process: its exit code and what it wrote.
struct CliRun {
  int code = 0;
  std::string out;
  std::string err;
};

inline CliRun run_lockstep(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CliRun run;
  run.code = cli::run_cli(args, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

// A new empty folder `name` under `group` in the temporary directory (each test process has its
// own: tests/main.cc).
inline std::filesystem::path fresh_temp_dir(const std::string& group, const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / group / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A file's bytes ("" when it cannot be read).
inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The scenario of a load; fails the test (printing every diagnostic) when it did not load.
inline sim::Scenario loaded_or_fail(sim::LoadResult loaded, const std::string& path) {
  std::string diagnostics;
  for (const sim::Diagnostic& d : loaded.diagnostics) diagnostics += sim::format_diagnostic(d, loaded.text);
  INFO(path << "\n" << diagnostics);
  REQUIRE(loaded.ok());
  return std::move(*loaded.scenario);
}

// Loads a scenario from YAML text.
inline sim::Scenario scenario_from(std::string_view text, const std::string& path = "test.yaml") {
  return loaded_or_fail(sim::load_scenario_text(text, path, {}), path);
}

// Loads a recorded schedule from JSON Lines text (docs/trace-format.md).
inline sim::Scenario trace_from(std::string_view text, const std::string& path = "test.jsonl") {
  return loaded_or_fail(sim::load_trace_text(text, path, {}), path);
}

// Loads a bundled scenario by its path from the source folder (as the tests run there).
inline sim::Scenario scenario_file(const std::string& path) {
  return loaded_or_fail(sim::load_scenario_file(path, {}), path);
}

// A bundled scenario and its execution under the timed strategy (what `lockstep run` does).
struct TimedRun {
  sim::Scenario scenario;
  sim::ExecutionResult result;
};

// One execution of a scenario under the timed strategy.
inline sim::ExecutionResult run_timed(const sim::Scenario& scenario) {
  sim::Engine engine(scenario);
  sim::TimedStrategy timed;
  return engine.run(timed);
}

inline TimedRun timed_run(const std::string& path) {
  TimedRun t{scenario_file(path), {}};
  t.result = run_timed(t.scenario);
  return t;
}

// The fenced blocks of a markdown text in a language (```yaml, ```text), with the line of each
// opening fence; fails the test on a fence left open.
struct FencedBlock {
  int line = 0;
  std::string text;
};

inline std::vector<FencedBlock> fenced_blocks(const std::string& markdown, const std::string& language) {
  std::vector<FencedBlock> blocks;
  std::istringstream in(markdown);
  std::string line;
  int number = 0;
  bool open = false;
  while (std::getline(in, line)) {
    ++number;
    if (!open && line == "```" + language) {
      blocks.push_back({number, ""});
      open = true;
    } else if (open && line == "```") {
      open = false;
    } else if (open) {
      blocks.back().text += line + "\n";
    }
  }
  CHECK_FALSE(open);  // every fence is closed
  return blocks;
}

}  // namespace lockstep::testing
