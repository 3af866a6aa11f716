#include "sim/yaml_syntax.h"

namespace lockstep::sim {

namespace {

bool tab_in_indentation(std::string_view line) {
  for (char c : line) {
    if (c == '\t') return true;
    if (c != ' ') return false;
  }
  return false;
}

// Whether a flow collection that opens on or before line `at` and is still open there holds a
// `?`: the lines from the last one with an unclosed `{` or `[` up to `at`.
bool question_mark_in_flow(std::string_view text, SourceLoc at) {
  for (uint32_t line = at.line; line >= 1 && line + 3 > at.line; --line) {
    const std::string_view l = source_line(text, line);
    if (l.find('?') != std::string_view::npos && (l.find('{') != std::string_view::npos || l.find('[') != std::string_view::npos ||
                                                  line != at.line)) {
      return true;
    }
    if (l.find('{') != std::string_view::npos || l.find('[') != std::string_view::npos) break;
  }
  return false;
}

}  // namespace

std::string yaml_syntax_message(std::string_view raw, std::string_view text, SourceLoc at) {
  const std::string words = " (yaml-cpp: " + std::string(raw) + ")";
  const std::string_view line = source_line(text, at.line);
  const std::string_view previous = at.line > 1 ? source_line(text, at.line - 1) : std::string_view{};
  if (tab_in_indentation(line) || (raw.starts_with("end of") && tab_in_indentation(previous))) {
    return "a tab in the indentation: yaml indents with spaces only; replace the tab with spaces" + words;
  }
  if (raw == "end of map flow not found" || raw == "end of sequence flow not found") {
    const char* open = raw == "end of map flow not found" ? "{...}" : "[...]";
    const char* close = raw == "end of map flow not found" ? "}" : "]";
    if (question_mark_in_flow(text, at)) {
      return std::string("an unquoted `?:` expression inside `") + open +
             "`: its `:` reads as a key's; quote the expression, e.g. size: \"rank == 0 ? 4 : 8\"" + words;
    }
    return std::string("a `") + open + "` is not closed: add its `" + close +
           "`, or quote a value that holds `,`, `:`, `{` or `[`" + words;
  }
  if (raw == "end of map not found") {
    return "this line's indentation breaks the mapping above: indent each key of a mapping by the same spaces, "
           "and a nested one further" + words;
  }
  if (raw == "end of sequence not found") {
    return "this line's indentation breaks the list above: indent each `- ` of a list by the same spaces" + words;
  }
  if (raw == "illegal block entry") {
    return "a list item `- ` where no list can start: indent it under a key that takes a list, as its siblings" + words;
  }
  if (raw == "illegal map value") {
    return "a `key: value` where none can be: indent it as its siblings, or quote a value that holds `: `" + words;
  }
  return std::string(raw);
}

}  // namespace lockstep::sim
