// The `lockstep import FORMAT INPUT... -o OUT` verb. The command line is read by
// cli/command_line.cc; this is what the verb does with it.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "import/pipeline_csv.h"

namespace lockstep::import {

struct ImportOptions {
  std::string format;               // one of import_formats()
  std::vector<std::string> inputs;  // pipeline-csv: exactly one
  std::string output;               // -o OUT.jsonl
  std::string name;                 // --name (default: OUT's name without .jsonl)
  bool quiet = false;
  PipelineOptions pipeline;         // --activation-bytes, --with-dp, --dp-bytes
  std::optional<int64_t> eager_limit;  // --eager-limit N: p2p eager up to N bytes
};

// The formats, in the order the usage lists them.
const std::vector<std::string>& import_formats();

// Returns the exit code: 0 written, 2 bad input (nothing written).
int run_import(const ImportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace lockstep::import
