// One input of the importer fuzz target (import_fuzz.cc), also run on every saved regression by
// import/import_fuzz_test.cc. The first byte picks the importer (mod 3): 0 Flight Recorder dumps
// (JSON or pickle), 1 NCCL logs, 2 a pipeline CSV; the rest is split into files at each
// "\n=====\n" (at most 8). The importer must return a trace or throw ImportError — nothing
// else — and a trace it returns must be written identically by the fast and the reference
// writer, load back through the trace loader without an error, report its partings, and go
// through the reports (report_fuzz.h).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "import/flight_recorder.h"
#include "import/nccl_log.h"
#include "import/pipeline_csv.h"
#include "import/recorded.h"
#include "sim/trace_format.h"
#include "tests/fuzz/report_fuzz.h"

namespace lockstep::import::fuzz {

inline std::string written_by(const RecordedTrace& trace, bool reference) {
  char* data = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&data, &size);
  if (out == nullptr) return "";
  const std::string problem = reference ? write_recorded_trace_reference(trace, out) : write_recorded_trace(trace, out);
  std::fclose(out);
  std::string text = problem.empty() ? std::string(data, size) : "write failed: " + problem;
  std::free(data);
  return text;
}

// "" when the input passes; otherwise what went wrong.
inline std::string import_fuzz_one(const uint8_t* data, size_t size) {
  if (size == 0) return "";
  const int format = data[0] % 3;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> parts;
  constexpr std::string_view SEPARATOR = "\n=====\n";
  size_t start = 0;
  while (parts.size() < 7) {
    const size_t at = rest.find(SEPARATOR, start);
    if (at == std::string_view::npos) break;
    parts.emplace_back(rest.substr(start, at - start));
    start = at + SEPARATOR.size();
  }
  parts.emplace_back(rest.substr(start));

  static const std::filesystem::path dir = [] {
    std::filesystem::path made = std::filesystem::temp_directory_path() / ("lockstep-import-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(made);
    return made;
  }();
  std::vector<std::string> paths;
  for (size_t i = 0; i < parts.size(); ++i) {
    const char* stem = format == 0 ? "nccl_trace_rank_" : (format == 1 ? "log" : "schedule");
    paths.push_back((dir / (stem + std::to_string(i) + (format == 2 ? ".csv" : ""))).string());
    if (format != 0) std::ofstream(paths.back(), std::ios::binary | std::ios::trunc) << parts[i];
  }
  RecordedTrace trace;
  try {
    if (format == 0) trace = import_flight_recorder_data(paths, parts);
    else if (format == 1) trace = import_nccl_logs(paths);
    else trace = import_pipeline_csv(paths.front());
  } catch (const ImportError& error) {
    if (error.message.empty()) return "an ImportError without a message";
    return "";
  } catch (const std::exception& e) {
    return std::string("an exception other than ImportError: ") + e.what();
  }
  trace.scenario = "fuzz";
  const std::vector<std::string> partings = schedule_partings(trace);
  trace.description = partings.empty() ? "" : partings.front();
  const std::string fast = written_by(trace, false);
  if (fast.rfind("write failed: ", 0) == 0) return fast;
  if (fast != written_by(trace, true)) return "the fast writer differs from the reference writer";
  sim::LoadLimits limits;
  const sim::LoadResult loaded = sim::load_trace_text(fast, "fuzz.jsonl", {}, limits);
  if (!loaded.ok()) {
    return "the imported trace does not load: " +
           (loaded.diagnostics.empty() ? std::string("no diagnostic") : loaded.diagnostics.front().message);
  }
  return lockstep::fuzz::fuzz_reports(loaded, "fuzz.jsonl");
}

}  // namespace lockstep::import::fuzz
