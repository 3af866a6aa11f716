// libFuzzer target: the JSON Lines trace loader (sim/trace_format.h). Any input must load or be
// rejected with diagnostics, never crash, hang or throw; a trace that loads must write back to
// a trace that loads and writes the same bytes (the round trip of write_trace); and read on two
// threads (its second half by a second scanner: LoadLimits::trace_split_bytes) it must load
// exactly as in one pass: the same diagnostics, and the same trace written back. Every input
// also goes through the reports (report_fuzz.h).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sim/trace_format.h"
#include "tests/fuzz/report_fuzz.h"

namespace {

lockstep::sim::LoadLimits fuzz_limits() {
  lockstep::sim::LoadLimits limits;
  limits.max_world = 4096;  // keeps one input's memory small; the bound itself is tested
  limits.max_ops = 100'000;
  return limits;
}

// What a load gives, as text: its diagnostics, then the trace it writes back (if it loads).
std::string outcome(const lockstep::sim::LoadResult& loaded) {
  std::string out;
  for (const lockstep::sim::Diagnostic& d : loaded.diagnostics) out += lockstep::sim::format_diagnostic(d, loaded.text);
  if (loaded.ok() && lockstep::sim::trace_write_problem(*loaded.scenario).empty()) {
    out += lockstep::sim::write_trace(*loaded.scenario);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep::sim;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const LoadLimits limits = fuzz_limits();
  const LoadResult loaded = load_trace_text(text, "fuzz.jsonl", {}, limits);
  bool has_error = false;
  for (const Diagnostic& d : loaded.diagnostics) {
    has_error = has_error || d.severity == Severity::ERROR;
    if (format_diagnostic(d, loaded.text).empty()) std::abort();
  }
  if (loaded.ok() == has_error) std::abort();  // loads iff there is no error
  LoadLimits split = limits;
  split.trace_split_bytes = 1;
  const LoadResult halves = load_trace_text(text, "fuzz.jsonl", {}, split);
  if (halves.ok() != loaded.ok() || outcome(halves) != outcome(loaded)) std::abort();
  if (!lockstep::fuzz::fuzz_reports(loaded, "fuzz.jsonl").empty()) std::abort();
  if (!loaded.ok()) return 0;
  if (!trace_write_problem(*loaded.scenario).empty()) std::abort();
  const std::string written = write_trace(*loaded.scenario);
  const LoadResult again = load_trace_text(written, "fuzz.jsonl", {}, limits);
  if (!again.ok() || write_trace(*again.scenario) != written) std::abort();
  return 0;
}
