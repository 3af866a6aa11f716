#include "sim/yaml_syntax.h"

#include <doctest/doctest.h>

#include "sim/loader.h"

namespace lockstep::sim {

namespace {

// The first diagnostic of loading `text` as j.yaml, formatted.
std::string first_error(const std::string& text) {
  const LoadResult loaded = load_scenario_text(text, "j.yaml", {});
  REQUIRE_FALSE(loaded.diagnostics.empty());
  return format_diagnostic(loaded.diagnostics.front(), text);
}

}  // namespace

TEST_CASE("yaml syntax: an unquoted ?: expression in a flow mapping says to quote it") {
  CHECK(first_error("scenario: x\nworld: 2\nprogram:\n  - allreduce: {size: rank == 0 ? 4 : 8}\n") ==
        "j.yaml:4:33: error: an unquoted `?:` expression inside `{...}`: its `:` reads as a key's; quote the expression, "
        "e.g. size: \"rank == 0 ? 4 : 8\" (yaml-cpp: end of map flow not found)\n"
        "    - allreduce: {size: rank == 0 ? 4 : 8}\n"
        "                                  ^\n");
}

TEST_CASE("yaml syntax: a key indented apart from its siblings says how to indent") {
  CHECK(first_error("scenario: x\nworld: 2\nparams:\n  a: 1\n b: 2\nprogram:\n  - compute: 1ms\n") ==
        "j.yaml:5:2: error: this line's indentation breaks the mapping above: indent each key of a mapping by the same "
        "spaces, and a nested one further (yaml-cpp: end of map not found)\n"
        "   b: 2\n"
        "   ^\n");
}

TEST_CASE("yaml syntax: a tab in the indentation says to use spaces") {
  CHECK(first_error("scenario: x\nworld: 2\nprogram:\n\t- compute: 1ms\n").starts_with(
      "j.yaml:4:2: error: a tab in the indentation: yaml indents with spaces only; replace the tab with spaces "
      "(yaml-cpp: illegal block entry)\n"));
}

TEST_CASE("yaml syntax: an unclosed flow mapping, and messages it does not know, pass through") {
  CHECK(yaml_syntax_message("end of map flow not found", "a: {b: 1\n", {2, 1}) ==
        "a `{...}` is not closed: add its `}`, or quote a value that holds `,`, `:`, `{` or `[` (yaml-cpp: end of map flow "
        "not found)");
  CHECK(yaml_syntax_message("unknown escape character: q", "a: \"\\q\"\n", {1, 5}) == "unknown escape character: q");
}

}  // namespace lockstep::sim
