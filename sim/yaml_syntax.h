// yaml-cpp's syntax errors in words a scenario author can act on: what is wrong and the likely
// fix (an unquoted `?:` expression, an indentation that breaks a mapping or list, a tab).
#pragma once

#include <string>
#include <string_view>

#include "sim/diagnostic.h"

namespace lockstep::sim {

// The diagnostic message for yaml-cpp's `raw` message (already lower case) at `at` in `text`:
// the cause and the fix, ending with yaml-cpp's words in parentheses; `raw` alone when it is not
// one of the messages this knows.
std::string yaml_syntax_message(std::string_view raw, std::string_view text, SourceLoc at);

}  // namespace lockstep::sim
