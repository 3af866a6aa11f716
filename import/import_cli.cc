#include "import/import_cli.h"

#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "import/flight_recorder.h"
#include "import/line_reader.h"
#include "import/nccl_log.h"
#include "import/pipeline_csv.h"
#include "import/recorded.h"
#include "sim/diagnostic.h"

namespace lockstep::import {

const std::vector<std::string>& import_formats() {
  static const std::vector<std::string> formats = {"flight-recorder", "nccl-log", "pipeline-csv"};
  return formats;
}

namespace {

// "file:line:col: error: message", then the line and a caret when the input is text.
std::string format_error(const ImportError& error) {
  std::string out = sim::format_location(error.file, error.loc) + ": error: " + error.message + "\n";
  if (error.loc.line == 0 || error.file.empty()) return out;
  LineReader reader(error.file);
  std::string_view line;
  while (reader.next(line)) {
    if (reader.line_number() < error.loc.line) continue;
    if (line.size() > 240) break;  // a JSON dump on one line: the position says enough
    out += "  " + std::string(line) + "\n  ";
    for (uint32_t i = 1; i < error.loc.col && i <= line.size(); ++i) out += line[i - 1] == '\t' ? '\t' : ' ';
    out += "^\n";
    break;
  }
  return out;
}

}  // namespace

int run_import(const ImportOptions& options, std::ostream& out, std::ostream& err) {
  const std::string& format = options.format;
  const std::vector<std::string>& inputs = options.inputs;
  const std::string& output = options.output;
  std::string name = options.name;
  // import writes a JSON Lines trace; a .yaml name would read back as a (bad) scenario.
  const std::string extension = std::filesystem::path(output).extension().string();
  if (extension == ".yaml" || extension == ".yml") {
    std::filesystem::path suggested = output;
    suggested.replace_extension(".jsonl");
    err << fmt::format("lockstep: error: -o {}: import writes a JSON Lines trace, not YAML; name it {}\n", output,
                       suggested.generic_string());
    return 2;
  }
  RecordedTrace trace;
  std::vector<std::string> warnings;
  try {
    if (format == "flight-recorder") trace = import_flight_recorder(inputs, &warnings);
    else if (format == "nccl-log") trace = import_nccl_logs(inputs);
    else trace = import_pipeline_csv(inputs.front(), options.pipeline);
  } catch (const ImportError& error) {
    err << format_error(error);
    return 2;
  } catch (const std::bad_alloc&) {
    err << "lockstep: error: out of memory while importing\n";
    return 2;
  }
  for (const std::string& warning : warnings) err << warning << "\n";
  if (const std::optional<int64_t>& eager_limit = options.eager_limit) {
    trace.semantics.p2p = sim::P2pMode::EAGER;
    trace.semantics.eager_limit_bytes = *eager_limit;
    trace.notes.push_back(fmt::format("p2p: eager: sends of at most {} complete without their receive", format_bytes(*eager_limit)));
  }
  if (name.empty()) {
    name = std::filesystem::path(output).filename().string();
    if (name.size() > 6 && name.ends_with(".jsonl")) name.resize(name.size() - 6);
  }
  trace.scenario = name.empty() ? "imported" : name;
  std::string sources;
  for (const std::string& input : inputs) sources += " " + std::filesystem::path(input).filename().string();
  if (sources.size() > 200) sources = fmt::format(" ({} files)", inputs.size());
  trace.source += sources;
  const std::vector<std::string> partings = schedule_partings(trace);
  trace.description = partings.empty() ? "Imported; every group's members issued the same collectives."
                                       : "Imported; " + partings.front();
  const std::string problem = write_trace_file(trace, output);
  if (!problem.empty()) {
    err << "lockstep: error: " << problem << "\n";
    return 2;
  }
  if (!options.quiet) {
    size_t ops = 0;
    for (const auto& rank_ops : trace.ranks) ops += rank_ops.size();
    out << fmt::format("imported {} -> {}: {} rank{}, {} group{}, {} op{}\n", format, output, trace.world,
                       trace.world == 1 ? "" : "s", trace.groups.size(), trace.groups.size() == 1 ? "" : "s", ops,
                       ops == 1 ? "" : "s");
    for (const std::string& note : trace.notes) out << "  " << note << "\n";
    if (partings.empty()) {
      out << "where the schedules part: nowhere; every group's members issued the same ops\n";
    } else {
      out << "where the schedules part:\n";
      for (const std::string& line : partings) out << "  " << line << "\n";
    }
    out << "next: lockstep check " << output << "\n";
  }
  return 0;
}

}  // namespace lockstep::import
