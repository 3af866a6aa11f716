#include "sim/expr.h"

#include <doctest/doctest.h>

#include <array>
#include <limits>

namespace lockstep::sim {
namespace {

// rank = slot 0, world = slot 1, batches = slot 2, as the loader binds them.
const std::vector<ExprName> SCOPE = {{"rank", 0}, {"world", 1}, {"batches", 2}};

struct Compiled {
  std::optional<Expr> expr;
  std::vector<Diagnostic> diagnostics;
};

// Compiles `text` as if it started at line 3, column 10 of "s.yaml".
Compiled compile(std::string_view text, Unit unit = Unit::NONE, ExprSource source = {}) {
  source.text = text;
  source.file = "s.yaml";
  if (source.loc.line == 0 && source.exact_columns) source.loc = {3, 10};
  source.unit = unit;
  if (source.names.empty()) source.names = SCOPE;
  Compiled compiled;
  compiled.expr = parse_expr(source, compiled.diagnostics);
  return compiled;
}

// The folded value of a constant expression; fails the test otherwise.
int64_t constant(std::string_view text, Unit unit = Unit::NONE) {
  const Compiled compiled = compile(text, unit);
  REQUIRE(compiled.diagnostics.empty());
  REQUIRE(compiled.expr.has_value());
  REQUIRE(compiled.expr->is_constant());
  return compiled.expr->value;
}

int64_t evaluate(std::string_view text, std::array<int64_t, 3> env, Unit unit = Unit::NONE) {
  const Compiled compiled = compile(text, unit);
  REQUIRE(compiled.diagnostics.empty());
  REQUIRE(compiled.expr.has_value());
  return eval_expr(*compiled.expr, env);
}

// The single diagnostic of a failed compile, as "line:col: message".
std::string only_error(std::string_view text, Unit unit = Unit::NONE, ExprSource source = {}) {
  const Compiled compiled = compile(text, unit, source);
  CHECK_FALSE(compiled.expr.has_value());
  REQUIRE(compiled.diagnostics.size() == 1);
  const Diagnostic& d = compiled.diagnostics[0];
  CHECK(d.file == "s.yaml");
  CHECK(d.severity == Severity::ERROR);
  return std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + d.message;
}

TEST_CASE("expr: integer literals, booleans and arithmetic fold to constants") {
  CHECK(constant("3") == 3);
  CHECK(constant("  42  ") == 42);
  CHECK(constant("true") == 1);
  CHECK(constant("false") == 0);
  CHECK(constant("1 + 2 * 3") == 7);
  CHECK(constant("(1 + 2) * 3") == 9);
  CHECK(constant("10 - 3 - 2") == 5);
  CHECK(constant("7 / 2") == 3);
  CHECK(constant("-7 / 2") == -3);
  CHECK(constant("-7 % 3") == -1);
  CHECK(constant("7 % -3") == 1);
  CHECK(constant("+5") == 5);
  CHECK(constant("--5") == 5);
  CHECK(constant("9223372036854775807") == std::numeric_limits<int64_t>::max());
  CHECK(constant("-9223372036854775807 - 1") == std::numeric_limits<int64_t>::min());
}

TEST_CASE("expr: comparisons, logic, conditionals and functions") {
  CHECK(constant("2 < 3") == 1);
  CHECK(constant("3 <= 3") == 1);
  CHECK(constant("2 > 3") == 0);
  CHECK(constant("2 >= 3") == 0);
  CHECK(constant("2 == 2") == 1);
  CHECK(constant("2 != 2") == 0);
  CHECK(constant("1 < 2 == 1") == 1);
  CHECK(constant("2 && 3") == 1);
  CHECK(constant("0 || 0") == 0);
  CHECK(constant("!0") == 1);
  CHECK(constant("!7") == 0);
  CHECK(constant("1 || 0 && 0") == 1);
  CHECK(constant("1 ? 2 : 3") == 2);
  CHECK(constant("0 ? 2 : 1 ? 4 : 5") == 4);
  CHECK(constant("min(3, 1, 2)") == 1);
  CHECK(constant("max(3, 1, 2)") == 3);
  CHECK(constant("abs(-4) + abs(4)") == 8);
  CHECK(constant("max(1, min(5, 9)) * 2") == 10);
}

TEST_CASE("expr: size literals are bytes") {
  CHECK(constant("123", Unit::BYTES) == 123);
  CHECK(constant("7B", Unit::BYTES) == 7);
  CHECK(constant("4KiB", Unit::BYTES) == 4096);
  CHECK(constant("64MiB", Unit::BYTES) == 64LL << 20);
  CHECK(constant("1GiB", Unit::BYTES) == 1LL << 30);
  CHECK(constant("1TiB", Unit::BYTES) == 1LL << 40);
  CHECK(constant("3KB", Unit::BYTES) == 3000);
  CHECK(constant("2MB", Unit::BYTES) == 2'000'000);
  CHECK(constant("1GB", Unit::BYTES) == 1'000'000'000);
  CHECK(constant("1TB", Unit::BYTES) == 1'000'000'000'000);
  CHECK(constant("1.5GiB", Unit::BYTES) == 1'610'612'736);
  CHECK(constant("0.5KiB", Unit::BYTES) == 512);
  CHECK(constant("2.50MB", Unit::BYTES) == 2'500'000);
  CHECK(constant("3 * 4MiB", Unit::BYTES) == 12LL << 20);
}

TEST_CASE("expr: duration literals are nanoseconds") {
  CHECK(constant("7ns", Unit::NANOSECONDS) == 7);
  CHECK(constant("5us", Unit::NANOSECONDS) == 5'000);
  CHECK(constant("20ms", Unit::NANOSECONDS) == 20'000'000);
  CHECK(constant("0.5ms", Unit::NANOSECONDS) == 500'000);
  CHECK(constant("2s", Unit::NANOSECONDS) == 2'000'000'000);
  CHECK(constant("10min", Unit::NANOSECONDS) == 600'000'000'000);
  CHECK(constant("1h", Unit::NANOSECONDS) == 3'600'000'000'000);
  CHECK(constant("2 * 10ms", Unit::NANOSECONDS) == 20'000'000);
  CHECK(constant("0", Unit::NANOSECONDS) == 0);
}

TEST_CASE("expr: parameters may take any unit") {
  ExprSource source;
  source.any_unit = true;
  const Compiled size = compile("4MiB", Unit::NONE, source);
  REQUIRE(size.expr.has_value());
  CHECK(size.expr->value == 4LL << 20);
  const Compiled time = compile("1.5s", Unit::NONE, source);
  REQUIRE(time.expr.has_value());
  CHECK(time.expr->value == 1'500'000'000);
}

TEST_CASE("expr: variables resolve to slots and evaluate over the environment") {
  CHECK(evaluate("batches - (rank == 3)", {3, 4, 5}) == 4);
  CHECK(evaluate("batches - (rank == 3)", {0, 4, 5}) == 5);
  CHECK(evaluate("(rank + 1) % world", {3, 4, 0}) == 0);
  CHECK(evaluate("rank < 2 ? batches : -batches", {2, 4, 7}) == -7);
  CHECK(evaluate("batches * 4MiB", {0, 0, 3}, Unit::BYTES) == 12LL << 20);

  const Compiled compiled = compile("batches - (rank == 3)");
  REQUIRE(compiled.expr.has_value());
  const Expr& expr = *compiled.expr;
  CHECK(expr.op == ExprOp::SUB);
  CHECK(expr.loc == SourceLoc{3, 18});
  REQUIRE(expr.args.size() == 2);
  CHECK(expr.args[0].op == ExprOp::VAR);
  CHECK(expr.args[0].value == 2);
  CHECK(expr.args[0].loc == SourceLoc{3, 10});
  CHECK(expr.args[1].op == ExprOp::EQ);
}

TEST_CASE("expr: subexpressions without variables are folded") {
  const Compiled compiled = compile("rank + 2 * 3");
  REQUIRE(compiled.expr.has_value());
  REQUIRE(compiled.expr->args.size() == 2);
  CHECK(compiled.expr->args[1].is_constant());
  CHECK(compiled.expr->args[1].value == 6);

  const Compiled chosen = compile("1 ? rank : 5");
  REQUIRE(chosen.expr.has_value());
  CHECK(chosen.expr->op == ExprOp::VAR);
  CHECK(chosen.expr->value == 0);
}

TEST_CASE("expr: && || and ?: evaluate lazily at run time") {
  CHECK(evaluate("rank != 0 && 10 / rank > 1", {0, 1, 0}) == 0);
  CHECK(evaluate("rank == 0 || 10 / rank > 1", {0, 1, 0}) == 1);
  CHECK(evaluate("rank == 0 ? 1 : 10 / rank", {0, 1, 0}) == 1);
}

TEST_CASE("expr: run-time errors name the operator's position") {
  const Compiled compiled = compile("batches / rank");
  REQUIRE(compiled.expr.has_value());
  const std::array<int64_t, 3> env = {0, 1, 5};
  try {
    eval_expr(*compiled.expr, env);
    FAIL("expected an EvalError");
  } catch (const EvalError& e) {
    CHECK(std::string(e.what()) == "division by zero");
    CHECK(e.loc == SourceLoc{3, 18});
  }
  const Compiled modulo = compile("batches % rank");
  REQUIRE(modulo.expr.has_value());
  CHECK_THROWS_WITH_AS(eval_expr(*modulo.expr, env), "modulo by zero", EvalError);

  const Compiled product = compile("batches * 4611686018427387904");
  REQUIRE(product.expr.has_value());
  const std::array<int64_t, 3> two = {0, 1, 2};
  CHECK_THROWS_WITH_AS(eval_expr(*product.expr, two), "integer overflow in '*'", EvalError);

  const std::array<int64_t, 3> lowest = {0, 1, std::numeric_limits<int64_t>::min()};
  const Compiled negated = compile("-batches");
  REQUIRE(negated.expr.has_value());
  CHECK_THROWS_WITH_AS(eval_expr(*negated.expr, lowest), "integer overflow in '-'", EvalError);
  const Compiled absolute = compile("abs(batches)");
  REQUIRE(absolute.expr.has_value());
  CHECK_THROWS_WITH_AS(eval_expr(*absolute.expr, lowest), "integer overflow in 'abs'", EvalError);
  const Compiled quotient = compile("batches / -1");
  REQUIRE(quotient.expr.has_value());
  CHECK_THROWS_WITH_AS(eval_expr(*quotient.expr, lowest), "integer overflow in '/'", EvalError);
  const Compiled remainder = compile("batches % -1");
  REQUIRE(remainder.expr.has_value());
  CHECK(eval_expr(*remainder.expr, lowest) == 0);
}

TEST_CASE("expr: a fold that fails is a diagnostic at the operator") {
  CHECK(only_error("1 / (2 - 2)") == "3:12: division by zero");
  CHECK(only_error("rank + 5 % 0") == "3:19: modulo by zero");
  CHECK(only_error("9223372036854775807 + 1") == "3:30: integer overflow in '+'");
  CHECK(only_error("-(-9223372036854775807 - 1)") == "3:10: integer overflow in '-'");
}

TEST_CASE("expr: unknown names suggest a close name and list the names in scope") {
  CHECK(only_error("batchs - (rank == 3)") ==
        "3:10: unknown name 'batchs' (did you mean 'batches'?); names in scope: rank, world, "
        "batches");
  CHECK(only_error("1 + zzz") == "3:14: unknown name 'zzz'; names in scope: rank, world, batches");
  ExprSource no_names;  // world, params and groups: constants only
  no_names.text = "n + 1";
  no_names.file = "s.yaml";
  no_names.loc = {2, 8};
  std::vector<Diagnostic> diagnostics;
  CHECK_FALSE(parse_expr(no_names, diagnostics).has_value());
  REQUIRE(diagnostics.size() == 1);
  CHECK(diagnostics[0].message == "unknown name 'n'; only constants are allowed here");
  CHECK(diagnostics[0].loc == SourceLoc{2, 8});
}

TEST_CASE("expr: every unknown name of an expression is reported") {
  const Compiled compiled = compile("batchs + ranc");
  CHECK_FALSE(compiled.expr.has_value());
  REQUIRE(compiled.diagnostics.size() == 2);
  CHECK(compiled.diagnostics[0].loc == SourceLoc{3, 10});
  CHECK(compiled.diagnostics[1].loc == SourceLoc{3, 19});
  CHECK(compiled.diagnostics[1].message ==
        "unknown name 'ranc' (did you mean 'rank'?); names in scope: rank, world, batches");
}

TEST_CASE("expr: units must fit the context") {
  CHECK(only_error("20ms", Unit::BYTES) == "3:10: 'ms' is a duration unit; size expected");
  CHECK(only_error("4MiB", Unit::NANOSECONDS) == "3:10: 'MiB' is a size unit; duration expected");
  CHECK(only_error("rank + 4MiB") == "3:17: 'MiB' is a size unit; plain number expected");
  CHECK(only_error("4mb", Unit::BYTES) ==
        "3:10: unknown unit 'mb' (did you mean 'MB'?); size units: B, KB, MB, GB, TB, KiB, MiB, "
        "GiB, TiB");
  CHECK(only_error("5sec", Unit::NANOSECONDS) ==
        "3:10: unknown unit 'sec' (did you mean 's'?); duration units: ns, us, ms, s, min, h");
  CHECK(only_error("3x") ==
        "3:10: unknown unit 'x' (did you mean 'B'?); units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, "
        "ns, us, ms, s, min, h");
}

TEST_CASE("expr: a duration needs a unit unless it is zero or uses a variable") {
  CHECK(only_error("20", Unit::NANOSECONDS) == "3:10: duration needs a unit (e.g. 20ms)");
  CHECK(only_error("2 * 3", Unit::NANOSECONDS) == "3:10: duration needs a unit (e.g. 20ms)");
  const Compiled variable = compile("batches", Unit::NANOSECONDS);
  CHECK(variable.diagnostics.empty());
}

TEST_CASE("expr: fractions must come out whole and numbers must fit in 64 bits") {
  CHECK(only_error("1.5") == "3:10: '1.5' is not an integer");
  CHECK(only_error("1.5B", Unit::BYTES) == "3:10: '1.5B' is not a whole number of bytes");
  CHECK(only_error("0.3ns", Unit::NANOSECONDS) ==
        "3:10: '0.3ns' is not a whole number of nanoseconds");
  CHECK(only_error("99999999999999999999") ==
        "3:10: number '99999999999999999999' is out of range");
  CHECK(only_error("9000000TiB", Unit::BYTES) == "3:10: number '9000000TiB' is out of range");
  CHECK(only_error("1.0000000000000000001GiB", Unit::BYTES) ==
        "3:10: '1.0000000000000000001GiB' has more than 18 digits after the point");
  CHECK(only_error("1.ms", Unit::NANOSECONDS) == "3:10: expected digits after '.' in '1.'");
}

TEST_CASE("expr: syntax errors point at the offending token") {
  CHECK(only_error("") == "3:10: expected an expression, got end of expression");
  CHECK(only_error("3 +") == "3:13: expected an expression, got end of expression");
  CHECK(only_error("3 +* 4") == "3:13: expected an expression, got '*'");
  CHECK(only_error("(1 + 2") == "3:16: expected ')' to close '(', got end of expression");
  CHECK(only_error("3 4") == "3:12: unexpected '4' after the expression");
  CHECK(only_error("rank = 1") == "3:15: '=' is not an operator (did you mean '=='?)");
  CHECK(only_error("rank | 1") == "3:15: '|' is not an operator (did you mean '||'?)");
  CHECK(only_error("rank # 1") == "3:15: unexpected character '#'");
  CHECK(only_error("1 ? 2") ==
        "3:15: expected ':' in the conditional expression, got end of expression");
  CHECK(only_error("min + 1") == "3:10: expected '(' after the function 'min'");
  CHECK(only_error("min(1, 2") ==
        "3:18: expected ')' to close the arguments of 'min', got end of expression");
}

TEST_CASE("expr: function calls check names and argument counts") {
  CHECK(only_error("abs(1, 2)") == "3:10: 'abs' takes 1 argument, got 2");
  CHECK(only_error("min(1)") == "3:10: 'min' takes at least 2 arguments, got 1");
  CHECK(only_error("mn(1, 2)") ==
        "3:10: unknown function 'mn' (did you mean 'min'?); functions: abs, max, min");
}

TEST_CASE("expr: nesting is bounded") {
  ExprSource shallow;
  shallow.max_depth = 3;
  CHECK(only_error("((((1))))", Unit::NONE, shallow) ==
        "3:13: expression is nested deeper than the limit of 3");
  CHECK(compile("(((1)))", Unit::NONE, shallow).diagnostics.empty());
  CHECK(only_error("rank + (rank + (rank + rank))", Unit::NONE, shallow) ==
        "3:15: expression is nested deeper than the limit of 3");
  // Constant chains fold as they are built, so they stay shallow however long they are.
  std::string sum = "1";
  for (int i = 0; i < 1000; ++i) sum += " + 1";
  CHECK(constant(sum) == 1001);
  const std::string deep(1000, '(');
  CHECK(only_error(deep + "1" + std::string(1000, ')')) ==
        "3:266: expression is nested deeper than the limit of 256");
}

TEST_CASE("expr: positions fall back to the start when columns are not exact") {
  ExprSource inexact;
  inexact.exact_columns = false;
  inexact.loc = {7, 4};
  CHECK(only_error("1 + zzz", Unit::NONE, inexact) ==
        "7:4: unknown name 'zzz'; names in scope: rank, world, batches");
  ExprSource flag;
  flag.exact_columns = false;
  flag.context = "in -D batches=x";
  CHECK(only_error("x", Unit::NONE, flag) ==
        "0:0: in -D batches=x: unknown name 'x'; names in scope: rank, world, batches");
}

TEST_CASE("expr: mark_used_slots finds every variable read") {
  const Compiled compiled = compile("batches + max(rank, 2)");
  REQUIRE(compiled.expr.has_value());
  std::vector<bool> used;
  mark_used_slots(*compiled.expr, used);
  CHECK(used == std::vector<bool>{true, false, true});
}

}  // namespace
}  // namespace lockstep::sim
