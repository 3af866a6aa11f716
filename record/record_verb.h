// `lockstep record -o DIR [options] -- CMD ARGS...` (docs/record.md): runs CMD with the NCCL
// recorder preloaded, waits for it, and merges what its processes recorded into DIR/trace.jsonl.
// The command line is read by cli/command_line.cc; this is what the verb does with it.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace lockstep::record {

constexpr int32_t MAX_TORCH_RANKS = 1024;        // --nproc
constexpr double TORCH_DEFAULT_TIMEOUT_S = 300;  // record --torch without --timeout

struct RecordOptions {
  std::string dir;              // -o DIR
  std::string name;             // --name: the scenario name (default: the command's)
  std::string lib;              // --lib: the recorder library (default: beside the binary)
  std::optional<double> timeout_s;
  bool merge_only = false;      // --merge-only: merge DIR/raw, run nothing
  bool quiet = false;
  bool torch = false;           // --torch: the ranks of a PyTorch script, recorded by lockstep_torch.py
  bool fake = false;            // --torch --fake: no communication
  bool check = false;           // --torch --check: check the trace, reports with the script's lines
  int32_t nproc = 0;            // --torch: how many ranks to start
  std::vector<std::string> command;  // what follows '--'
};

// Runs the verb. Returns the exit code: 0 the command succeeded and the trace was written, 3 the
// command failed or was stopped (the trace is still written when the recordings allow), 2 a
// command that cannot start, recordings that cannot be merged.
int run_record(const RecordOptions& options, std::ostream& out, std::ostream& err);

}  // namespace lockstep::record
