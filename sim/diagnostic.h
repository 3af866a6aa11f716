// User-facing diagnostics: `file:line:col: error: message`, the source line and a caret.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::sim {

// A position in a scenario file, 1-based. line == 0 means "no position" (a whole-file error).
struct SourceLoc {
  uint32_t line = 0;
  uint32_t col = 0;
  friend bool operator==(const SourceLoc&, const SourceLoc&) = default;
};

enum class Severity : uint8_t { ERROR, WARNING, NOTE };

// Line `line` (1-based) of `text`, without its newline (or a carriage return before it); ""
// past the end.
std::string_view source_line(std::string_view text, uint32_t line);

struct Diagnostic {
  std::string file;
  SourceLoc loc;
  Severity severity = Severity::ERROR;
  std::string message;  // lower case, no final period
};

// "file:line:col: error: message" followed, when the position and text are known, by the
// source line and a caret under the column. Always ends with a newline.
std::string format_diagnostic(const Diagnostic& diagnostic, std::string_view source_text);

// "file:line:col" (or just "file" when the position is unknown).
std::string format_location(std::string_view file, SourceLoc loc);

// The closest candidate by edit distance, or "" when none is close enough to suggest.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

// Pieces of messages: "'name'"; " (did you mean 'x'?)" or ""; "a, b, c" in the order given;
// names sorted without repeats.
std::string quoted(std::string_view name);
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);
std::string join(const std::vector<std::string>& names);
std::vector<std::string> sorted(std::vector<std::string> names);

// "0, 2, 4-7": ascending ranks, runs of three or more as ranges.
std::string format_ranks(const std::vector<int32_t>& ranks);

// A letter or '_' followed by letters, digits or '_' (ASCII, whatever the locale).
bool is_identifier(std::string_view name);

}  // namespace lockstep::sim
