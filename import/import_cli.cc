#include "import/import_cli.h"

#include <charconv>
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

const char* const IMPORT_USAGE = R"(usage: lockstep import FORMAT INPUT... -o OUT.jsonl [options]

formats:
  flight-recorder DUMP...   PyTorch Flight Recorder dumps, one per rank (JSON or pickle, versions
                            2.2 to 2.10, newer 2.x with a warning); each file name ends in its
                            rank (nccl_trace_rank_3)
  nccl-log LOG...           NCCL_DEBUG=INFO logs with NCCL_DEBUG_SUBSYS=INIT,COLL (and CALL for
                            group boundaries), one or many files, ranks interleaved
  pipeline-csv CSV          a torch.distributed.pipelining schedule CSV (compute only or with
                            comms, OVERLAP_F_B cells; the B and the older BW dialect)

options:
  -o FILE                   the trace to write (JSON Lines, docs/trace-format.md); written only
                            when the import succeeds
  --name NAME               the scenario name (default: OUT's name without .jsonl)
  --activation-bytes N      pipeline-csv: bytes of every send and receive (default 1048576)
  --with-dp N               pipeline-csv: N data-parallel replicas of the pipeline (rank = pp
                            rank x N + dp rank); UNSHARD is an all-gather and REDUCE_GRAD a
                            reduce-scatter on the replicas of a pipeline rank (default: left out)
  --dp-bytes N              pipeline-csv: bytes of every UNSHARD and REDUCE_GRAD (default 16777216)
  --eager-limit N           sends of at most N bytes complete without their receive (NCCL's
                            buffers); writes semantics p2p: eager (default: rendezvous)
  --quiet                   no summary

exit codes: 0 written, 2 bad input or usage (nothing written)
)";

namespace {

struct Usage {
  std::string message;
};

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

int64_t parse_bytes(const std::string& option, const std::string& text) {
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0) {
    throw Usage{fmt::format("{} expects a non-negative integer, got '{}'", option, text)};
  }
  return value;
}

}  // namespace

int run_import(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string format;
  std::vector<std::string> inputs;
  std::string output;
  std::string name;
  bool quiet = false;
  PipelineOptions pipeline;
  std::optional<int64_t> eager_limit;
  try {
    for (size_t i = 1; i < args.size(); ++i) {
      const std::string& arg = args[i];
      auto value = [&](const std::string& option) -> std::string {
        if (arg == option) {
          if (i + 1 >= args.size()) throw Usage{option + " needs a value"};
          return args[++i];
        }
        return arg.substr(option.size() + 1);
      };
      if (arg == "-o" || arg.rfind("-o=", 0) == 0 || arg == "--output" || arg.rfind("--output=", 0) == 0) {
        output = value(arg.rfind("--output", 0) == 0 ? "--output" : "-o");
      } else if (arg == "--name" || arg.rfind("--name=", 0) == 0) {
        name = value("--name");
      } else if (arg == "--activation-bytes" || arg.rfind("--activation-bytes=", 0) == 0) {
        pipeline.activation_bytes = parse_bytes("--activation-bytes", value("--activation-bytes"));
      } else if (arg == "--with-dp" || arg.rfind("--with-dp=", 0) == 0) {
        const int64_t n = parse_bytes("--with-dp", value("--with-dp"));
        if (n < 1 || n > 65536) throw Usage{fmt::format("--with-dp expects a number of replicas from 1 to 65536, got {}", n)};
        pipeline.data_parallel = static_cast<int32_t>(n);
      } else if (arg == "--dp-bytes" || arg.rfind("--dp-bytes=", 0) == 0) {
        pipeline.dp_bytes = parse_bytes("--dp-bytes", value("--dp-bytes"));
      } else if (arg == "--eager-limit" || arg.rfind("--eager-limit=", 0) == 0) {
        eager_limit = parse_bytes("--eager-limit", value("--eager-limit"));
      } else if (arg == "--quiet") {
        quiet = true;
      } else if (arg == "--help" || arg == "-h") {
        out << IMPORT_USAGE;
        return 0;
      } else if (arg.size() > 1 && arg[0] == '-') {
        throw Usage{fmt::format("unknown option '{}' for import", arg)};
      } else if (format.empty()) {
        format = arg;
      } else {
        inputs.push_back(arg);
      }
    }
    if (format.empty()) throw Usage{"import needs a format: flight-recorder, nccl-log or pipeline-csv"};
    if (format != "flight-recorder" && format != "nccl-log" && format != "pipeline-csv") {
      const std::string hint = sim::closest_name(format, {"flight-recorder", "nccl-log", "pipeline-csv"});
      throw Usage{fmt::format("unknown import format '{}'{}; formats: flight-recorder, nccl-log, pipeline-csv", format,
                              hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint))};
    }
    if (inputs.empty()) throw Usage{fmt::format("import {} needs at least one input file", format)};
    if (format == "pipeline-csv" && inputs.size() != 1) throw Usage{"import pipeline-csv takes one CSV file"};
    if (output.empty()) throw Usage{"import needs -o OUT.jsonl"};
  } catch (const Usage& usage) {
    err << "lockstep: error: " << usage.message << "\n" << "run 'lockstep import --help' for usage\n";
    return 2;
  }

  RecordedTrace trace;
  std::vector<std::string> warnings;
  try {
    if (format == "flight-recorder") trace = import_flight_recorder(inputs, &warnings);
    else if (format == "nccl-log") trace = import_nccl_logs(inputs);
    else trace = import_pipeline_csv(inputs.front(), pipeline);
  } catch (const ImportError& error) {
    err << format_error(error);
    return 2;
  } catch (const std::bad_alloc&) {
    err << "lockstep: error: out of memory while importing\n";
    return 2;
  }
  for (const std::string& warning : warnings) err << warning << "\n";
  if (eager_limit) {
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
  if (!quiet) {
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
