#include "sim/expr.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

namespace lockstep::sim {

// ---------------------------------------------------------------------------------------------
// Evaluation.

namespace {

constexpr int64_t INT64_LOWEST = std::numeric_limits<int64_t>::min();

std::string_view op_symbol(ExprOp op) {
  switch (op) {
    case ExprOp::NEG:
    case ExprOp::SUB: return "-";
    case ExprOp::NOT: return "!";
    case ExprOp::ABS: return "abs";
    case ExprOp::ADD: return "+";
    case ExprOp::MUL: return "*";
    case ExprOp::DIV: return "/";
    case ExprOp::MOD: return "%";
    case ExprOp::LT: return "<";
    case ExprOp::LE: return "<=";
    case ExprOp::GT: return ">";
    case ExprOp::GE: return ">=";
    case ExprOp::EQ: return "==";
    case ExprOp::NE: return "!=";
    case ExprOp::AND: return "&&";
    case ExprOp::OR: return "||";
    case ExprOp::MIN: return "min";
    case ExprOp::MAX: return "max";
    case ExprOp::COND: return "?:";
    case ExprOp::CONST:
    case ExprOp::VAR: break;
  }
  return "?";
}

[[noreturn]] void throw_overflow(const Expr& expr) {
  throw EvalError(expr.loc, "integer overflow in '" + std::string(op_symbol(expr.op)) + "'");
}

int64_t eval_binary(const Expr& expr, int64_t a, int64_t b) {
  int64_t result = 0;
  switch (expr.op) {
    case ExprOp::ADD:
      if (__builtin_add_overflow(a, b, &result)) throw_overflow(expr);
      return result;
    case ExprOp::SUB:
      if (__builtin_sub_overflow(a, b, &result)) throw_overflow(expr);
      return result;
    case ExprOp::MUL:
      if (__builtin_mul_overflow(a, b, &result)) throw_overflow(expr);
      return result;
    case ExprOp::DIV:
      if (b == 0) throw EvalError(expr.loc, "division by zero");
      if (a == INT64_LOWEST && b == -1) throw_overflow(expr);
      return a / b;
    case ExprOp::MOD:
      if (b == 0) throw EvalError(expr.loc, "modulo by zero");
      if (b == -1) return 0;  // INT64_LOWEST % -1 is undefined in C++, 0 in arithmetic
      return a % b;
    case ExprOp::LT: return a < b;
    case ExprOp::LE: return a <= b;
    case ExprOp::GT: return a > b;
    case ExprOp::GE: return a >= b;
    case ExprOp::EQ: return a == b;
    case ExprOp::NE: return a != b;
    default: break;
  }
  throw EvalError(expr.loc, "malformed expression");
}

int64_t eval_extremum(const Expr& expr, std::span<const int64_t> env) {
  int64_t result = eval_expr(expr.args.at(0), env);
  for (size_t i = 1; i < expr.args.size(); ++i) {
    const int64_t value = eval_expr(expr.args[i], env);
    result = expr.op == ExprOp::MIN ? std::min(result, value) : std::max(result, value);
  }
  return result;
}

}  // namespace

int64_t eval_expr(const Expr& expr, std::span<const int64_t> env) {
  switch (expr.op) {
    case ExprOp::CONST: return expr.value;
    case ExprOp::VAR:
      if (expr.value < 0 || expr.value >= static_cast<int64_t>(env.size())) {
        throw EvalError(expr.loc, "variable slot " + std::to_string(expr.value) + " is not bound");
      }
      return env[static_cast<size_t>(expr.value)];
    case ExprOp::NEG: {
      const int64_t value = eval_expr(expr.args.at(0), env);
      if (value == INT64_LOWEST) throw_overflow(expr);
      return -value;
    }
    case ExprOp::ABS: {
      const int64_t value = eval_expr(expr.args.at(0), env);
      if (value == INT64_LOWEST) throw_overflow(expr);
      return value < 0 ? -value : value;
    }
    case ExprOp::NOT: return eval_expr(expr.args.at(0), env) == 0;
    case ExprOp::AND:
      return eval_expr(expr.args.at(0), env) != 0 && eval_expr(expr.args.at(1), env) != 0;
    case ExprOp::OR:
      return eval_expr(expr.args.at(0), env) != 0 || eval_expr(expr.args.at(1), env) != 0;
    case ExprOp::COND:
      return eval_expr(expr.args.at(0), env) != 0 ? eval_expr(expr.args.at(1), env)
                                                  : eval_expr(expr.args.at(2), env);
    case ExprOp::MIN:
    case ExprOp::MAX: return eval_extremum(expr, env);
    default:
      return eval_binary(expr, eval_expr(expr.args.at(0), env), eval_expr(expr.args.at(1), env));
  }
}

void mark_used_slots(const Expr& expr, std::vector<bool>& used) {
  if (expr.op == ExprOp::VAR && expr.value >= 0) {
    const auto slot = static_cast<size_t>(expr.value);
    if (used.size() <= slot) used.resize(slot + 1, false);
    used[slot] = true;
  }
  for (const Expr& arg : expr.args) mark_used_slots(arg, used);
}

// ---------------------------------------------------------------------------------------------
// Parsing.

namespace {

struct UnitSpec {
  std::string_view suffix;
  Unit unit;
  int64_t scale;
};

constexpr std::array<UnitSpec, 15> UNITS = {{
    {"B", Unit::BYTES, 1},
    {"KB", Unit::BYTES, 1'000},
    {"MB", Unit::BYTES, 1'000'000},
    {"GB", Unit::BYTES, 1'000'000'000},
    {"TB", Unit::BYTES, 1'000'000'000'000},
    {"KiB", Unit::BYTES, int64_t{1} << 10},
    {"MiB", Unit::BYTES, int64_t{1} << 20},
    {"GiB", Unit::BYTES, int64_t{1} << 30},
    {"TiB", Unit::BYTES, int64_t{1} << 40},
    {"ns", Unit::NANOSECONDS, 1},
    {"us", Unit::NANOSECONDS, 1'000},
    {"ms", Unit::NANOSECONDS, 1'000'000},
    {"s", Unit::NANOSECONDS, 1'000'000'000},
    {"min", Unit::NANOSECONDS, 60'000'000'000},
    {"h", Unit::NANOSECONDS, 3'600'000'000'000},
}};

constexpr int MAX_FRACTION_DIGITS = 18;

std::string_view unit_kind(Unit unit) {
  switch (unit) {
    case Unit::BYTES: return "size";
    case Unit::NANOSECONDS: return "duration";
    case Unit::NONE: break;
  }
  return "plain number";
}

// "unknown THING 'x' (did you mean 'y'?)" without the list of valid names.
std::string unknown_with_hint(std::string_view thing, std::string_view name,
                              const std::vector<std::string>& candidates) {
  return "unknown " + std::string(thing) + " " + quoted(name) + did_you_mean(name, candidates);
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

enum class TokenKind : uint8_t { END, NUMBER, NAME, PUNCT };

struct Token {
  TokenKind kind = TokenKind::END;
  std::string_view text;
  size_t offset = 0;
};

// A parsed subexpression: the compiled tree, its depth and where its text starts.
struct Parsed {
  Expr expr;
  int32_t depth = 1;
  size_t start = 0;
};

struct BinaryOp {
  std::string_view symbol;
  ExprOp op;
};

// Binary operators by precedence, loosest first; all associate to the left.
const std::vector<std::vector<BinaryOp>>& binary_levels() {
  static const std::vector<std::vector<BinaryOp>> levels = {
      {{"||", ExprOp::OR}},
      {{"&&", ExprOp::AND}},
      {{"==", ExprOp::EQ}, {"!=", ExprOp::NE}},
      {{"<", ExprOp::LT}, {"<=", ExprOp::LE}, {">", ExprOp::GT}, {">=", ExprOp::GE}},
      {{"+", ExprOp::ADD}, {"-", ExprOp::SUB}},
      {{"*", ExprOp::MUL}, {"/", ExprOp::DIV}, {"%", ExprOp::MOD}},
  };
  return levels;
}

struct Function {
  std::string_view name;
  ExprOp op;
  size_t min_args;
  size_t max_args;
};

constexpr std::array<Function, 3> FUNCTIONS = {{
    {"abs", ExprOp::ABS, 1, 1},
    {"max", ExprOp::MAX, 2, std::numeric_limits<size_t>::max()},
    {"min", ExprOp::MIN, 2, std::numeric_limits<size_t>::max()},
}};

const Function* find_function(std::string_view name) {
  for (const Function& function : FUNCTIONS) {
    if (function.name == name) return &function;
  }
  return nullptr;
}

// A syntax error ends the parse of one expression; it has already been reported.
struct SyntaxAbort {};

class Parser {
 public:
  Parser(const ExprSource& source, std::vector<Diagnostic>& diagnostics)
      : source_(source), diagnostics_(diagnostics) {}

  std::optional<Expr> run() {
    try {
      tokenize();
      Parsed parsed = parse_ternary();
      if (peek().kind != TokenKind::END) {
        syntax_error(peek().offset, "unexpected " + describe(peek()) + " after the expression");
      }
      check_duration_unit(parsed);
      if (failed_) return std::nullopt;
      return std::move(parsed.expr);
    } catch (const SyntaxAbort&) {
      return std::nullopt;
    }
  }

 private:
  // ----- diagnostics

  SourceLoc loc_at(size_t offset) const {
    if (!source_.exact_columns || source_.loc.line == 0) return source_.loc;
    return {source_.loc.line, source_.loc.col + static_cast<uint32_t>(offset)};
  }

  void error_at(SourceLoc at, const std::string& message) {
    std::string text =
        source_.context.empty() ? message : std::string(source_.context) + ": " + message;
    diagnostics_.push_back({std::string(source_.file), at, Severity::ERROR, std::move(text)});
    failed_ = true;
  }
  void error(size_t offset, const std::string& message) { error_at(loc_at(offset), message); }

  [[noreturn]] void syntax_error(size_t offset, const std::string& message) {
    error(offset, message);
    throw SyntaxAbort{};
  }

  static std::string describe(const Token& token) {
    if (token.kind == TokenKind::END) return "end of expression";
    return quoted(token.text);
  }

  // ----- lexing

  void tokenize() {
    const std::string_view text = source_.text;
    size_t i = 0;
    while (i < text.size()) {
      const char c = text[i];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i;
      } else if (is_digit(c)) {
        i = lex_number(i);
      } else if (is_name_start(c)) {
        size_t end = i + 1;
        while (end < text.size() && is_name_char(text[end])) ++end;
        tokens_.push_back({TokenKind::NAME, text.substr(i, end - i), i});
        i = end;
      } else {
        i = lex_punct(i);
      }
    }
    tokens_.push_back({TokenKind::END, {}, text.size()});
  }

  // digits [ '.' digits ] [ unit ]
  size_t lex_number(size_t begin) {
    const std::string_view text = source_.text;
    size_t end = begin;
    while (end < text.size() && is_digit(text[end])) ++end;
    if (end < text.size() && text[end] == '.') {
      ++end;
      if (end >= text.size() || !is_digit(text[end])) {
        syntax_error(begin, "expected digits after '.' in '" +
                                std::string(text.substr(begin, end - begin)) + "'");
      }
      while (end < text.size() && is_digit(text[end])) ++end;
    }
    while (end < text.size() && is_name_char(text[end])) ++end;
    tokens_.push_back({TokenKind::NUMBER, text.substr(begin, end - begin), begin});
    return end;
  }

  size_t lex_punct(size_t begin) {
    static constexpr std::array<std::string_view, 6> two_chars = {
        "<=", ">=", "==", "!=", "&&", "||"};
    const std::string_view text = source_.text;
    const std::string_view rest = text.substr(begin);
    for (std::string_view symbol : two_chars) {
      if (rest.starts_with(symbol)) {
        tokens_.push_back({TokenKind::PUNCT, rest.substr(0, 2), begin});
        return begin + 2;
      }
    }
    const char c = text[begin];
    if (std::string_view("+-*/%<>!(),?:").find(c) != std::string_view::npos) {
      tokens_.push_back({TokenKind::PUNCT, rest.substr(0, 1), begin});
      return begin + 1;
    }
    if (c == '=' || c == '&' || c == '|') {
      syntax_error(begin, quoted(std::string(1, c)) + " is not an operator (did you mean " +
                              quoted(std::string(2, c)) + "?)");
    }
    if (std::isprint(static_cast<unsigned char>(c))) {
      syntax_error(begin, "unexpected character '" + std::string(1, c) + "'");
    }
    static constexpr std::string_view hex = "0123456789abcdef";
    const auto byte = static_cast<unsigned char>(c);
    syntax_error(begin, std::string("unexpected byte 0x") + hex[byte >> 4] + hex[byte & 15]);
  }

  const Token& peek() const { return tokens_[next_]; }
  bool at_punct(std::string_view symbol) const {
    return peek().kind == TokenKind::PUNCT && peek().text == symbol;
  }
  Token take() {
    Token token = peek();
    if (token.kind != TokenKind::END) ++next_;
    return token;
  }
  void expect_punct(std::string_view symbol, std::string_view after) {
    if (!at_punct(symbol)) {
      syntax_error(peek().offset, "expected '" + std::string(symbol) + "' " + std::string(after) +
                                      ", got " + describe(peek()));
    }
    take();
  }

  // ----- nesting bound: parentheses, calls, unary operators and conditionals each nest one level

  class Nesting {
   public:
    Nesting(Parser& parser, size_t offset) : parser_(parser) {
      if (++parser_.nesting_ > parser_.source_.max_depth) parser_.too_deep(offset);
    }
    ~Nesting() { --parser_.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& parser_;
  };

  [[noreturn]] void too_deep(size_t offset) {
    syntax_error(offset, "expression is nested deeper than the limit of " +
                             std::to_string(source_.max_depth));
  }

  // ----- building nodes (with constant folding)

  // A stand-in for a subexpression that had an error: never folded, never evaluated.
  Parsed placeholder(size_t start) { return {Expr{ExprOp::VAR, -1, loc_at(start), {}}, 1, start}; }

  Parsed make_node(ExprOp op, size_t op_offset, size_t start, std::vector<Parsed> args) {
    int32_t depth = 0;
    bool constant = true;
    Expr expr{op, 0, loc_at(op_offset), {}};
    for (Parsed& arg : args) {
      depth = std::max(depth, arg.depth);
      constant = constant && arg.expr.is_constant();
      expr.args.push_back(std::move(arg.expr));
    }
    if (op == ExprOp::COND && expr.args[0].is_constant()) {
      Expr chosen = std::move(expr.args[expr.args[0].value != 0 ? 1 : 2]);
      if (chosen.is_constant()) chosen.loc = loc_at(start);
      return {std::move(chosen), depth, start};
    }
    if (constant) return fold(expr, start);
    if (depth + 1 > source_.max_depth) too_deep(op_offset);
    return {std::move(expr), depth + 1, start};
  }

  Parsed fold(const Expr& expr, size_t start) {
    try {
      return {Expr::constant(eval_expr(expr, {}), loc_at(start)), 1, start};
    } catch (const EvalError& err) {
      error_at(err.loc, err.what());
      return placeholder(start);
    }
  }

  // ----- grammar

  Parsed parse_ternary() {
    Parsed cond = parse_binary(0);
    if (!at_punct("?")) return cond;
    const size_t op_offset = take().offset;
    const Nesting nesting(*this, op_offset);
    Parsed then_value = parse_ternary();
    expect_punct(":", "in the conditional expression");
    Parsed else_value = parse_ternary();
    const size_t start = cond.start;
    std::vector<Parsed> args;
    args.push_back(std::move(cond));
    args.push_back(std::move(then_value));
    args.push_back(std::move(else_value));
    return make_node(ExprOp::COND, op_offset, start, std::move(args));
  }

  const BinaryOp* match_binary(size_t level) const {
    if (peek().kind != TokenKind::PUNCT) return nullptr;
    for (const BinaryOp& candidate : binary_levels()[level]) {
      if (candidate.symbol == peek().text) return &candidate;
    }
    return nullptr;
  }

  Parsed parse_binary(size_t level) {
    if (level == binary_levels().size()) return parse_unary();
    Parsed left = parse_binary(level + 1);
    while (const BinaryOp* binary = match_binary(level)) {
      const size_t op_offset = take().offset;
      Parsed right = parse_binary(level + 1);
      const size_t start = left.start;
      std::vector<Parsed> args;
      args.push_back(std::move(left));
      args.push_back(std::move(right));
      left = make_node(binary->op, op_offset, start, std::move(args));
    }
    return left;
  }

  Parsed parse_unary() {
    if (at_punct("-") || at_punct("!") || at_punct("+")) {
      const Token op = take();
      const Nesting nesting(*this, op.offset);
      Parsed operand = parse_unary();
      if (op.text == "+") {
        operand.start = op.offset;
        return operand;
      }
      std::vector<Parsed> args;
      args.push_back(std::move(operand));
      return make_node(op.text == "-" ? ExprOp::NEG : ExprOp::NOT, op.offset, op.offset,
                       std::move(args));
    }
    return parse_primary();
  }

  Parsed parse_primary() {
    const Token token = peek();
    if (token.kind == TokenKind::NUMBER) {
      take();
      return parse_number(token);
    }
    if (token.kind == TokenKind::NAME) {
      take();
      if (at_punct("(")) return parse_call(token);
      return parse_name(token);
    }
    if (at_punct("(")) {
      take();
      const Nesting nesting(*this, token.offset);
      Parsed inner = parse_ternary();
      expect_punct(")", "to close '('");
      inner.start = token.offset;
      if (inner.expr.is_constant()) inner.expr.loc = loc_at(token.offset);
      return inner;
    }
    syntax_error(token.offset, "expected an expression, got " + describe(token));
  }

  Parsed parse_name(const Token& token) {
    if (token.text == "true" || token.text == "false") {
      return {Expr::constant(token.text == "true" ? 1 : 0, loc_at(token.offset)), 1, token.offset};
    }
    for (auto it = source_.names.rbegin(); it != source_.names.rend(); ++it) {
      if (it->name == token.text) {
        saw_variable_ = true;
        return {Expr{ExprOp::VAR, it->slot, loc_at(token.offset), {}}, 1, token.offset};
      }
    }
    if (find_function(token.text) != nullptr) {
      syntax_error(token.offset,
                   "expected '(' after the function '" + std::string(token.text) + "'");
    }
    error(token.offset, unknown_name_message(token.text));
    return placeholder(token.offset);
  }

  std::string unknown_name_message(std::string_view name) const {
    std::vector<std::string> names;
    for (const ExprName& entry : source_.names) names.push_back(entry.name);
    if (names.empty())
      return "unknown name '" + std::string(name) + "'; only constants are allowed here";
    return unknown_with_hint("name", name, names) + "; names in scope: " + join(names);
  }

  Parsed parse_call(const Token& name) {
    take();  // '('
    const Nesting nesting(*this, name.offset);
    std::vector<Parsed> args;
    if (!at_punct(")")) {
      args.push_back(parse_ternary());
      while (at_punct(",")) {
        take();
        args.push_back(parse_ternary());
      }
    }
    expect_punct(")", "to close the arguments of '" + std::string(name.text) + "'");
    const Function* function = find_function(name.text);
    if (function == nullptr) {
      std::vector<std::string> known;
      for (const Function& candidate : FUNCTIONS) known.emplace_back(candidate.name);
      error(name.offset,
            unknown_with_hint("function", name.text, known) + "; functions: " + join(known));
      return placeholder(name.offset);
    }
    if (args.size() < function->min_args || args.size() > function->max_args) {
      error(name.offset, arity_message(*function, args.size()));
      return placeholder(name.offset);
    }
    return make_node(function->op, name.offset, name.offset, std::move(args));
  }

  static std::string arity_message(const Function& function, size_t given) {
    const bool exact = function.min_args == function.max_args;
    std::string message = quoted(function.name) + " takes " + (exact ? "" : "at least ") +
                          std::to_string(function.min_args) + " argument" +
                          (function.min_args == 1 ? "" : "s");
    return message + ", got " + std::to_string(given);
  }

  // ----- literals

  Parsed parse_number(const Token& token) {
    const std::string_view text = token.text;
    size_t digits_end = 0;
    while (digits_end < text.size() && (is_digit(text[digits_end]) || text[digits_end] == '.')) {
      ++digits_end;
    }
    const std::string_view digits = text.substr(0, digits_end);
    const std::string_view suffix = text.substr(digits_end);
    const UnitSpec* unit = nullptr;
    if (!suffix.empty()) {
      unit = check_unit(token, suffix);
      if (unit == nullptr) return placeholder(token.offset);
      saw_unit_ = true;
    }
    const std::optional<int64_t> value = scaled_value(token, digits, unit);
    if (!value) return placeholder(token.offset);
    return {Expr::constant(*value, loc_at(token.offset)), 1, token.offset};
  }

  // The unit named by `suffix` when it fits the context; otherwise reports and returns null.
  const UnitSpec* check_unit(const Token& token, std::string_view suffix) {
    for (const UnitSpec& unit : UNITS) {
      if (unit.suffix != suffix) continue;
      if (source_.any_unit || unit.unit == source_.unit) return &unit;
      error(token.offset, quoted(suffix) + " is a " + std::string(unit_kind(unit.unit)) +
                              " unit; " + std::string(unit_kind(source_.unit)) + " expected");
      return nullptr;
    }
    std::vector<std::string> valid;
    for (const UnitSpec& unit : UNITS) {
      if (source_.any_unit || source_.unit == Unit::NONE || unit.unit == source_.unit) {
        valid.emplace_back(unit.suffix);
      }
    }
    const std::string kind = source_.any_unit || source_.unit == Unit::NONE
                                 ? "units"
                                 : std::string(unit_kind(source_.unit)) + " units";
    error(token.offset, unknown_unit(suffix, valid) + "; " + kind + ": " + join(valid));
    return nullptr;
  }

  // "unknown unit 'mb' (did you mean 'MB'?)": a unit that differs only in case comes first.
  static std::string unknown_unit(std::string_view suffix, const std::vector<std::string>& valid) {
    const auto lower = [](std::string_view s) {
      std::string out(s);
      for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return out;
    };
    for (const std::string& unit : valid) {
      if (lower(unit) == lower(suffix)) {
        return "unknown unit '" + std::string(suffix) + "' (did you mean '" + unit + "'?)";
      }
    }
    return unknown_with_hint("unit", suffix, valid);
  }

  // digits (with an optional fraction) in `unit` (null: none), when that is a whole number of
  // bytes or nanoseconds in range.
  std::optional<int64_t> scaled_value(const Token& token, std::string_view digits,
                                      const UnitSpec* unit) {
    const int64_t scale = unit != nullptr ? unit->scale : 1;
    const size_t dot = digits.find('.');
    std::string_view fraction =
        dot == std::string_view::npos ? std::string_view{} : digits.substr(dot + 1);
    while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
    const std::string_view whole = digits.substr(0, std::min(dot, digits.size()));
    const std::string literal = quoted(token.text);
    if (!fraction.empty() && unit == nullptr) {
      error(token.offset, literal + " is not an integer");
      return std::nullopt;
    }
    if (fraction.size() > MAX_FRACTION_DIGITS) {
      error(token.offset, literal + " has more than " + std::to_string(MAX_FRACTION_DIGITS) +
                              " digits after the point");
      return std::nullopt;
    }
    int64_t mantissa = 0;
    int64_t divisor = 1;
    bool overflow = false;
    for (char c : std::string(whole) + std::string(fraction)) {
      overflow = overflow || __builtin_mul_overflow(mantissa, 10, &mantissa) ||
                 __builtin_add_overflow(mantissa, c - '0', &mantissa);
    }
    for (size_t i = 0; i < fraction.size(); ++i) divisor *= 10;
    int64_t scaled = 0;
    if (overflow || __builtin_mul_overflow(mantissa, scale, &scaled)) {
      error(token.offset, "number " + literal + " is out of range");
      return std::nullopt;
    }
    if (scaled % divisor != 0) {
      error(token.offset, literal + " is not a whole number of " +
                              (unit->unit == Unit::NANOSECONDS ? "nanoseconds" : "bytes"));
      return std::nullopt;
    }
    return scaled / divisor;
  }

  // A plain non-zero number in a duration context lacks its unit (`compute: 20`).
  void check_duration_unit(const Parsed& parsed) {
    if (source_.unit != Unit::NANOSECONDS || source_.any_unit || failed_) return;
    if (saw_unit_ || saw_variable_ || !parsed.expr.is_constant() || parsed.expr.value == 0) return;
    error(parsed.start, "duration needs a unit (e.g. 20ms)");
  }

  const ExprSource& source_;
  std::vector<Diagnostic>& diagnostics_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
  int32_t nesting_ = 0;
  bool failed_ = false;
  bool saw_unit_ = false;
  bool saw_variable_ = false;
};

}  // namespace

std::optional<Expr> parse_expr(const ExprSource& source, std::vector<Diagnostic>& diagnostics) {
  return Parser(source, diagnostics).run();
}

}  // namespace lockstep::sim
