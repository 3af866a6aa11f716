// The `lockstep` command line. Verdicts become exit codes here and only here.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/loader.h"

namespace lockstep::cli {

// Exit codes, the same for every verb (docs/cli.md).
enum ExitCode : int { EXIT_NO_BUG = 0, EXIT_BUG = 1, EXIT_BAD_INPUT = 2, EXIT_INCONCLUSIVE = 3 };

struct CommandLine;

// Runs one command line (args without the program name). Writes to out/err; never exits.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// One input, a scenario or a trace told apart by its first bytes (`{"lockstep_trace"`), by its
// extension where it has none to read.
sim::LoadResult load_input(const std::string& path, const std::vector<sim::ParamOverride>& overrides,
                           const sim::LoadLimits& limits);

// The inputs of check and validate: files stay as given; folders contribute every .yaml and
// .jsonl below them, in sorted order. A folder that cannot be listed, or holds none, is said on
// `err` and sets `bad`.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, std::ostream& err, bool& bad);

// Runs a command line already read (lockstep-mpi sets hooks in its options first).
int run_command(const CommandLine& line, std::ostream& out, std::ostream& err);

}  // namespace lockstep::cli
