// libFuzzer target: the YAML scenario loader (sim/loader.h). Any input must load or be rejected
// with diagnostics, never crash, hang or throw. A scenario that loads and is a flat recorded
// schedule is also written as a trace and loaded back (no crash; its verdict is not compared:
// the trace loader checks more, e.g. that a rank is a member of the groups it uses). Every
// input also goes through the reports (report_fuzz.h).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sim/loader.h"
#include "sim/trace_format.h"
#include "tests/fuzz/report_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep::sim;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  LoadLimits limits;
  limits.max_world = 4096;  // keeps one input's memory small
  const LoadResult loaded = load_scenario_text(text, "fuzz.yaml", {}, limits);
  bool has_error = false;
  for (const Diagnostic& d : loaded.diagnostics) {
    has_error = has_error || d.severity == Severity::ERROR;
    if (format_diagnostic(d, loaded.text).empty()) std::abort();
  }
  if (loaded.ok() == has_error) std::abort();  // loads iff there is no error
  if (!lockstep::fuzz::fuzz_reports(loaded, "fuzz.yaml").empty()) std::abort();
  if (loaded.ok() && trace_write_problem(*loaded.scenario).empty()) {
    const LoadResult trace = load_trace_text(write_trace(*loaded.scenario), "fuzz.jsonl", {}, limits);
    for (const Diagnostic& d : trace.diagnostics) (void)format_diagnostic(d, trace.text);
  }
  return 0;
}
