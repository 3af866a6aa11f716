// UTF-8: scenarios and traces are UTF-8 text (YAML and JSON both say so), and every output the
// tool writes (JSON, JUnit XML, text) is too. The loaders refuse a file with an invalid byte;
// text that reaches an output from elsewhere (a path, a -D value) is written with each invalid
// byte replaced (docs/scenario-language.md, "Encoding").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep::sim {

// The offset of the first byte that does not belong to a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points past U+10FFFF are ill-formed), or npos when all are valid.
size_t invalid_utf8_at(std::string_view text);

// `text` with each ill-formed byte replaced by `replacement` (default U+FFFD).
std::string valid_utf8(std::string_view text, std::string_view replacement = "\xEF\xBF\xBD");

}  // namespace lockstep::sim
