// `lockstep record -o DIR [options] -- CMD ARGS...` (docs/record.md): runs CMD with the NCCL
// recorder preloaded, waits for it, and merges what its processes recorded into DIR/trace.jsonl.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace lockstep::record {

// Runs the verb; `args` are the arguments after "record". Returns the exit code: 0 the command
// succeeded and the trace was written, 3 the command failed or was stopped (the trace is still
// written when the recordings allow), 2 usage errors, a command that cannot start, recordings
// that cannot be merged.
int run_record(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace lockstep::record
