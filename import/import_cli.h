// The `lockstep import FORMAT INPUT... -o OUT` verb (called by cli/cli.cc).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace lockstep::import {

// args[0] is "import". Returns the exit code: 0 written, 2 bad input or usage (nothing written).
int run_import(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The usage lines of the verb, for `lockstep --help`.
extern const char* const IMPORT_USAGE;

}  // namespace lockstep::import
