// The expression language of scenarios (docs/scenario-language.md): parsing and evaluation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario.h"

namespace lockstep::sim {

// What a value means, for unit suffixes on literals: sizes take KiB/MiB/GiB/TiB/KB/MB/GB/B,
// durations take ns/us/ms/s/min/h, plain numbers take none.
enum class Unit : uint8_t { NONE, BYTES, NANOSECONDS };

// Raised by eval_expr when evaluation fails (division by zero, overflow).
struct EvalError : std::runtime_error {
  SourceLoc loc;
  EvalError(SourceLoc at, const std::string& message) : std::runtime_error(message), loc(at) {}
};

// Evaluates a compiled expression over an environment (see Scenario::slot_names).
int64_t eval_expr(const Expr& expr, std::span<const int64_t> env);

// An identifier an expression may use, bound to an environment slot.
struct ExprName {
  std::string name;
  int32_t slot = 0;
};

// One expression to compile, where it sits and what it may refer to.
struct ExprSource {
  std::string_view text;            // e.g. "layers * 4MiB"
  std::string_view file;            // for diagnostics
  SourceLoc loc;                    // the position of text[0]; line 0: no position
  bool exact_columns = true;        // false: every problem is reported at `loc` (the text does
                                    // not map 1:1 onto one source line: escapes, folded lines)
  Unit unit = Unit::NONE;           // the unit suffixes literals may carry
  bool any_unit = false;            // literals may carry any unit (parameter values)
  std::span<const ExprName> names;  // in scope; "names in scope" lists them in this order
  std::string_view context;         // when set, every message starts with "CONTEXT: "
  int32_t max_depth = 256;          // bound on nesting (parentheses, operators)
};

// Parses and compiles an expression: identifiers become slots, literals with units become
// bytes or nanoseconds, every subexpression that reads no variable is folded to a constant.
// Appends one diagnostic per problem and returns nullopt when there was any.
std::optional<Expr> parse_expr(const ExprSource& source, std::vector<Diagnostic>& diagnostics);

// Sets used[slot] for every environment slot `expr` reads (grows `used` as needed).
void mark_used_slots(const Expr& expr, std::vector<bool>& used);

}  // namespace lockstep::sim
