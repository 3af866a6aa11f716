// Reports of `lockstep check`: the JSON of docs/report-format.md and the text a person reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checker/explore.h"
#include "sim/scenario.h"

namespace lockstep::checker {

// What `check` learned about one input.
struct InputReport {
  std::string input;                      // the path as given or found
  const sim::Scenario* scenario = nullptr;  // null when the input did not load
  std::vector<std::string> errors;        // formatted diagnostics when it did not load
  std::optional<CheckResult> result;
  std::vector<std::string> counterexamples;  // per bug: the file written, "" if none
  uint64_t seed = 0;

  bool failed_to_load() const { return scenario == nullptr || (result && result->error); }
  // Whether the verdict equals the scenario's `expect:` (a scenario without one expects ok).
  bool matches_expected() const;
};

// The JSON report (docs/report-format.md): one object per input, an array when there are several. Ends with a newline.
std::string report_json(const std::vector<InputReport>& reports, bool as_array);

// The text of one input: a verdict line, then (unless quiet) the explanation of every bug.
std::string report_text(const InputReport& report, bool quiet);

// JUnit XML for CI: one testcase per input; it fails when the input would make `check` exit
// non-zero (with check_expect: when its verdict differs from `expect:`), and the failure text
// is the explanation.
std::string report_junit(const std::vector<InputReport>& reports, bool check_expect);

// XML 1.0 text: valid UTF-8, the five specials escaped, and the control characters it does not
// allow (all below 0x20 but tab, newline and return) written as '?'.
std::string xml_escape(std::string_view raw);

// GitHub Actions workflow commands: one `::error file=...,line=...::` at the YAML line of each
// stuck op (or of each mismatched op) of every bug.
std::string report_github(const std::vector<InputReport>& reports);

using Json = nlohmann::ordered_json;

// One issued op as JSON (reports' stuck ops; `detailed` adds thread, stream, state, duration and
// the sender a wildcard matched, for counterexamples).
Json op_json(const sim::Scenario& scenario, const sim::OpRecord& rec, bool detailed);

// The version string reports carry.
const char* lockstep_version();

}  // namespace lockstep::checker
