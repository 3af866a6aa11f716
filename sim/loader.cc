// Scenario YAML -> Scenario. yaml-cpp's event parser builds a small tree of our own (every node
// keeps its position and duplicate keys stay visible); the loader walks that tree with tables of
// known keys, operations and arguments, and collects every problem as a diagnostic.
#include "sim/loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <system_error>

#include "sim/expr.h"

namespace lockstep::sim {

namespace {

// ---------------------------------------------------------------------------------------------
// Generic helpers.

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

// "'name'" (built by appending: g++ 12 -O3 warns falsely on "'" + std::string(...)).
std::string quoted(std::string_view name) {
  std::string out = "'";
  out += name;
  out += '\'';
  return out;
}

// "unknown THING 'name'WHERE (did you mean 'x'?); valid THINGs: a, b, c" -- the hint is drawn from
// `known` (which may hold names not yet supported), the list shows `valid`, sorted.
std::string unknown_message(std::string_view thing, std::string_view name, std::string_view where,
                            const std::vector<std::string>& known,
                            const std::vector<std::string>& valid) {
  std::string message = "unknown " + std::string(thing) + " " + quoted(name) + std::string(where);
  const std::string hint = closest_name(name, known);
  if (!hint.empty()) message += " (did you mean " + quoted(hint) + "?)";
  return message + "; valid " + std::string(thing) + "s: " + join(sorted(valid));
}

bool is_identifier(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Words of the expression language that no parameter or loop variable may take.
bool is_reserved_word(std::string_view name) {
  static constexpr std::array<std::string_view, 6> words = {"true", "false", "any",
                                                            "min",  "max",   "abs"};
  return std::find(words.begin(), words.end(), name) != words.end();
}

// "0, 2, 4-7": ascending ranks, runs of three or more as ranges.
std::string format_ranks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      ++i;
    }
  }
  return out;
}

// yaml-cpp's messages start with a capital now and then; ours never do.
std::string lower_first(std::string message) {
  if (!message.empty()) {
    message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
  }
  return message;
}

SourceLoc to_loc(const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return {};
  return {static_cast<uint32_t>(mark.line) + 1, static_cast<uint32_t>(mark.column) + 1};
}

// ---------------------------------------------------------------------------------------------
// The YAML tree.

enum class NodeKind : uint8_t { NUL, SCALAR, LIST, MAP };

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Node {
  NodeKind kind = NodeKind::NUL;
  SourceLoc loc;
  size_t pos = 0;                                    // byte offset in the text
  std::string value;                                 // SCALAR
  std::vector<NodePtr> items;                        // LIST
  std::vector<std::pair<NodePtr, NodePtr>> entries;  // MAP, in order, duplicates kept
  uint64_t weight = 1;                               // nodes below, aliases expanded
};

std::string type_name(const Node& node) {
  switch (node.kind) {
    case NodeKind::NUL: return "null";
    case NodeKind::SCALAR: return "a scalar";
    case NodeKind::LIST: return "a list";
    case NodeKind::MAP: return "a map";
  }
  return "?";
}

struct YamlProblem {
  SourceLoc loc;
  std::string message;
};

// Turns yaml-cpp's events into Nodes. Anchors are registered when their node is complete, so an
// alias can never make a cycle; aliases share the anchored node, and `weight` bounds how large
// the tree is with every alias expanded (the "billion laughs").
class TreeBuilder : public YAML::EventHandler {
 public:
  struct Document {
    SourceLoc loc;
    NodePtr root;
  };

  explicit TreeBuilder(uint64_t max_weight) : max_weight_(max_weight) {}

  std::vector<Document> documents;
  std::vector<YamlProblem> problems;

  void OnDocumentStart(const YAML::Mark& mark) override {
    documents.push_back({to_loc(mark), nullptr});
    open_.clear();
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto node = std::make_shared<Node>();
    node->loc = to_loc(mark);
    node->pos = static_cast<size_t>(std::max(mark.pos, 0));
    // An empty value's mark is wherever the next token starts: point at its key instead.
    if (!open_.empty() && open_.back().key) {
      node->loc = open_.back().key->loc;
      node->pos = open_.back().key->pos;
    }
    finish(node, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto found = anchors_.find(anchor);
    if (found != anchors_.end()) {
      add(found->second);
      return;
    }
    problems.push_back({to_loc(mark), "an alias may not refer to a node that contains it"});
    auto node = std::make_shared<Node>();
    node->loc = to_loc(mark);
    add(node);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                const std::string& value) override {
    auto node = std::make_shared<Node>();
    node->kind = NodeKind::SCALAR;
    node->loc = to_loc(mark);
    node->pos = static_cast<size_t>(std::max(mark.pos, 0));
    node->value = value;
    finish(node, anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    open(NodeKind::LIST, mark, anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    open(NodeKind::MAP, mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    std::shared_ptr<Node> node;
    YAML::anchor_t anchor;
    NodePtr key;  // a map's key waiting for its value
  };

  void open(NodeKind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    auto node = std::make_shared<Node>();
    node->kind = kind;
    node->loc = to_loc(mark);
    node->pos = static_cast<size_t>(std::max(mark.pos, 0));
    open_.push_back({node, anchor, nullptr});
  }

  void close() {
    if (open_.empty()) return;
    Open done = std::move(open_.back());
    open_.pop_back();
    finish(done.node, done.anchor);
  }

  void finish(const NodePtr& node, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) anchors_[anchor] = node;
    add(node);
  }

  void add(const NodePtr& node) {
    if (open_.empty()) {
      if (!documents.empty()) documents.back().root = node;
      return;
    }
    Open& parent = open_.back();
    if (parent.node->kind == NodeKind::LIST) {
      parent.node->items.push_back(node);
    } else if (!parent.key) {
      parent.key = node;
    } else {
      parent.node->entries.emplace_back(std::move(parent.key), node);
      parent.key = nullptr;
    }
    const uint64_t weight = parent.node->weight + node->weight;
    parent.node->weight = weight < parent.node->weight ? UINT64_MAX : weight;
    if (parent.node->weight > max_weight_ && !too_heavy_) {
      too_heavy_ = true;
      problems.push_back({node->loc, "aliases expand the document beyond the limit of " +
                                         std::to_string(max_weight_) + " nodes"});
    }
  }

  uint64_t max_weight_;
  bool too_heavy_ = false;
  std::vector<Open> open_;
  std::map<YAML::anchor_t, NodePtr> anchors_;
};

// ---------------------------------------------------------------------------------------------
// Tables: statements, operations and their arguments.

enum class Arg : uint8_t { GROUP, SIZE, DTYPE, ROOT, TAG, TO, FROM };

struct ArgName {
  std::string_view name;
  Arg arg;
};

constexpr std::array<ArgName, 7> ARG_NAMES = {{
    {"group", Arg::GROUP},
    {"size", Arg::SIZE},
    {"dtype", Arg::DTYPE},
    {"root", Arg::ROOT},
    {"tag", Arg::TAG},
    {"to", Arg::TO},
    {"from", Arg::FROM},
}};

// Arguments of the language that this slice does not implement yet.
constexpr std::array<std::string_view, 2> UNSUPPORTED_ARGS = {"async", "stream"};

std::string_view arg_name(Arg arg) {
  for (const ArgName& entry : ARG_NAMES) {
    if (entry.arg == arg) return entry.name;
  }
  return "?";
}

enum class OpForm : uint8_t {
  ARGS,      // a map of arguments, or the short form `op: GROUP`, or nothing
  DURATION,  // `op: DURATION`
};

struct OpSpec {
  std::string_view name;
  OpKind kind;
  OpForm form;
  std::vector<Arg> args;  // accepted, in the order they are loaded
  std::vector<Arg> required;
};

const std::vector<OpSpec>& op_specs() {
  using enum Arg;
  static const std::vector<Arg> plain = {GROUP, DTYPE, SIZE, TAG};
  static const std::vector<Arg> rooted = {GROUP, DTYPE, SIZE, ROOT, TAG};
  static const std::vector<OpSpec> specs = {
      {"allreduce", OpKind::ALLREDUCE, OpForm::ARGS, plain, {SIZE}},
      {"allgather", OpKind::ALLGATHER, OpForm::ARGS, plain, {SIZE}},
      {"reduce_scatter", OpKind::REDUCE_SCATTER, OpForm::ARGS, plain, {SIZE}},
      {"all_to_all", OpKind::ALL_TO_ALL, OpForm::ARGS, plain, {SIZE}},
      {"broadcast", OpKind::BROADCAST, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"reduce", OpKind::REDUCE, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"gather", OpKind::GATHER, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"scatter", OpKind::SCATTER, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"barrier", OpKind::BARRIER, OpForm::ARGS, {GROUP, DTYPE, TAG}, {}},
      {"send", OpKind::SEND, OpForm::ARGS, {GROUP, DTYPE, SIZE, TO, TAG}, {TO, SIZE}},
      {"recv", OpKind::RECV, OpForm::ARGS, {GROUP, DTYPE, SIZE, FROM, TAG}, {FROM, SIZE}},
      {"compute", OpKind::COMPUTE, OpForm::DURATION, {}, {}},
      {"sleep", OpKind::SLEEP, OpForm::DURATION, {}, {}},
  };
  return specs;
}

const OpSpec* find_op(std::string_view name) {
  for (const OpSpec& spec : op_specs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// Statements of the language that this slice does not implement yet.
constexpr std::array<std::string_view, 8> UNSUPPORTED_STATEMENTS = {
    "sync", "wait", "new_group", "exit", "crash", "choose", "call", "group"};

constexpr std::array<std::string_view, 2> BLOCK_STATEMENTS = {"repeat", "if"};

bool is_statement_name(std::string_view name) {
  return find_op(name) != nullptr ||
         std::find(BLOCK_STATEMENTS.begin(), BLOCK_STATEMENTS.end(), name) !=
             BLOCK_STATEMENTS.end() ||
         std::find(UNSUPPORTED_STATEMENTS.begin(), UNSUPPORTED_STATEMENTS.end(), name) !=
             UNSUPPORTED_STATEMENTS.end();
}

struct DTypeName {
  std::string_view name;
  DType dtype;
};

constexpr std::array<DTypeName, 19> DTYPE_NAMES = {{
    {"int8", DType::INT8},         {"uint8", DType::UINT8},   {"int32", DType::INT32},
    {"uint32", DType::UINT32},     {"int64", DType::INT64},   {"uint64", DType::UINT64},
    {"fp16", DType::FP16},         {"float16", DType::FP16},  {"half", DType::FP16},
    {"bf16", DType::BF16},         {"bfloat16", DType::BF16}, {"fp32", DType::FP32},
    {"float32", DType::FP32},      {"float", DType::FP32},    {"fp64", DType::FP64},
    {"float64", DType::FP64},      {"double", DType::FP64},   {"fp8_e4m3", DType::FP8_E4M3},
    {"fp8_e5m2", DType::FP8_E5M2},
}};

// ---------------------------------------------------------------------------------------------
// The loader.

// One key of a map, with the key and value nodes.
struct Entry {
  std::string key;
  const Node* key_node = nullptr;
  const Node* value = nullptr;
};

// Names of keys a map accepts, and those of the language not supported yet.
struct KeySet {
  std::vector<std::string> valid;
  std::vector<std::string> unsupported;
};

class Loader {
 public:
  Loader(std::string_view text, const std::string& path, std::span<const ParamOverride> overrides,
         const LoadLimits& limits)
      : text_(text), path_(path), overrides_(overrides), limits_(limits) {}

  LoadResult run() {
    LoadResult result;
    result.text = std::string(text_);
    if (text_.size() > static_cast<uint64_t>(limits_.max_file_bytes)) {
      error({}, "file exceeds the limit of " + std::to_string(limits_.max_file_bytes) + " bytes");
    } else if (const NodePtr root = parse_yaml()) {
      load_top_level(*root);
    }
    finish_diagnostics();
    const bool failed = has_error();
    result.diagnostics = std::move(diagnostics_);
    if (!failed) {
      scenario_.path = path_;
      scenario_.text = result.text;
      result.scenario = std::move(scenario_);
    }
    return result;
  }

 private:
  using KeyLoader = void (Loader::*)(const Entry&);
  using Step = void (Loader::*)();

  struct TopLevelKey {
    std::string_view name;
    bool supported;
    bool required;
    KeyLoader load;
    Step after = nullptr;  // runs whether or not the key is present
  };

  // In the order they are loaded: later keys depend on earlier ones (world, params, groups).
  static const std::vector<TopLevelKey>& top_level_keys() {
    static const std::vector<TopLevelKey> keys = {
        {"scenario", true, true, &Loader::load_name},
        {"description", true, false, &Loader::load_description},
        {"source", true, false, &Loader::load_source},
        {"expect", true, false, &Loader::load_expect},
        {"world", true, true, &Loader::load_world, &Loader::define_world_group},
        {"params", true, false, &Loader::load_params, &Loader::bind_params},
        {"groups", true, false, &Loader::load_groups},
        {"semantics", true, false, &Loader::load_semantics},
        {"program", true, true, &Loader::load_program},
        {"mesh", false, false, nullptr},
        {"threads", false, false, nullptr},
        {"define", false, false, nullptr},
        {"ranks", false, false, nullptr},
        {"launch", false, false, nullptr},
    };
    return keys;
  }

  // ----- diagnostics

  void error(SourceLoc at, std::string message) {
    diagnostics_.push_back({path_, at, Severity::ERROR, std::move(message)});
  }
  void warning(SourceLoc at, std::string message) {
    diagnostics_.push_back({path_, at, Severity::WARNING, std::move(message)});
  }
  bool has_error() const {
    return std::any_of(diagnostics_.begin(), diagnostics_.end(),
                       [](const Diagnostic& d) { return d.severity == Severity::ERROR; });
  }

  // Sorted by position (stable); a node shared through an alias reports once.
  void finish_diagnostics() {
    std::stable_sort(diagnostics_.begin(), diagnostics_.end(),
                     [](const Diagnostic& a, const Diagnostic& b) {
                       return std::pair(a.loc.line, a.loc.col) < std::pair(b.loc.line, b.loc.col);
                     });
    const auto same = [](const Diagnostic& a, const Diagnostic& b) {
      return a.loc == b.loc && a.severity == b.severity && a.message == b.message;
    };
    diagnostics_.erase(std::unique(diagnostics_.begin(), diagnostics_.end(), same),
                       diagnostics_.end());
  }

  // ----- YAML

  NodePtr parse_yaml() {
    const uint64_t max_weight = std::max<uint64_t>(uint64_t{1} << 20, 2 * uint64_t{text_.size()});
    TreeBuilder builder(max_weight);
    try {
      std::istringstream stream{std::string(text_)};
      YAML::Parser parser(stream);
      while (builder.documents.size() < 2 && parser.HandleNextDocument(builder)) {
      }
    } catch (const YAML::Exception& e) {
      error(to_loc(e.mark), lower_first(e.msg));
      return nullptr;
    } catch (const std::exception& e) {
      error({}, std::string("cannot parse yaml: ") + e.what());
      return nullptr;
    }
    for (const YamlProblem& problem : builder.problems) error(problem.loc, problem.message);
    if (builder.documents.size() > 1) {
      error(builder.documents[1].loc,
            "a scenario file holds one yaml document; this is a second one");
    }
    if (!builder.problems.empty() || builder.documents.size() > 1) return nullptr;
    if (builder.documents.empty() || !builder.documents[0].root ||
        builder.documents[0].root->kind == NodeKind::NUL) {
      error({}, "empty scenario file");
      return nullptr;
    }
    return builder.documents[0].root;
  }

  bool expect_kind(const Node& node, NodeKind kind, std::string_view what) {
    if (node.kind == kind) return true;
    error(node.loc, "expected " + std::string(what) + ", got " + type_name(node));
    return false;
  }

  // The keys of a map, in order; non-string and duplicate keys are reported and left out.
  std::vector<Entry> entries_of(const Node& map) {
    std::vector<Entry> entries;
    std::map<std::string, uint32_t> first_line;
    for (const auto& [key, value] : map.entries) {
      if (key->kind != NodeKind::SCALAR) {
        error(key->loc, "expected a string key, got " + type_name(*key));
        continue;
      }
      if (key->value == "<<") {
        error(key->loc, "yaml merge keys ('<<') are not supported");
        continue;
      }
      const auto [it, inserted] = first_line.emplace(key->value, key->loc.line);
      if (!inserted) {
        error(key->loc, "duplicate key " + quoted(key->value) + " (first given at line " +
                            std::to_string(it->second) + ")");
        continue;
      }
      entries.push_back({key->value, key.get(), value.get()});
    }
    return entries;
  }

  // Reports every key not in `keys`; returns the others.
  std::vector<Entry> known_entries(const std::vector<Entry>& entries, const KeySet& keys,
                                   std::string_view where) {
    std::vector<std::string> known = keys.valid;
    known.insert(known.end(), keys.unsupported.begin(), keys.unsupported.end());
    std::vector<Entry> accepted;
    for (const Entry& entry : entries) {
      if (std::find(keys.valid.begin(), keys.valid.end(), entry.key) != keys.valid.end()) {
        accepted.push_back(entry);
      } else if (std::find(keys.unsupported.begin(), keys.unsupported.end(), entry.key) !=
                 keys.unsupported.end()) {
        error(entry.key_node->loc, quoted(entry.key) + " is not supported yet");
      } else {
        error(entry.key_node->loc, unknown_message("key", entry.key, where, known, keys.valid));
      }
    }
    return accepted;
  }

  std::optional<std::string> string_of(const Node& node) {
    if (!expect_kind(node, NodeKind::SCALAR, "a string")) return std::nullopt;
    return node.value;
  }

  // ----- expressions

  // Where a scalar's text starts, and whether its characters sit 1:1 on one source line.
  std::pair<SourceLoc, bool> scalar_start(const Node& node) const {
    const size_t pos = node.pos;
    const std::string_view value = node.value;
    if (pos >= text_.size()) return {node.loc, false};
    const char first = text_[pos];
    if (first == '"' || first == '\'') {
      const size_t end = pos + 1 + value.size();
      const bool exact =
          end < text_.size() && text_.substr(pos + 1, value.size()) == value && text_[end] == first;
      return {{node.loc.line, node.loc.col + 1}, exact};
    }
    return {node.loc, text_.substr(pos, value.size()) == value};
  }

  std::optional<Expr> expr_of(const Node& node, Unit unit, std::string_view what,
                              std::span<const ExprName> names, bool any_unit = false) {
    if (!expect_kind(node, NodeKind::SCALAR, what)) return std::nullopt;
    const auto [loc, exact] = scalar_start(node);
    ExprSource source;
    source.text = node.value;
    source.file = path_;
    source.loc = loc;
    source.exact_columns = exact;
    source.unit = unit;
    source.any_unit = any_unit;
    source.names = names;
    return parse_expr(source, diagnostics_);
  }

  // A constant expression (no names in scope) that is at least `min`.
  std::optional<int64_t> constant_of(const Node& node, Unit unit, std::string_view what,
                                     std::string_view name, int64_t min) {
    const std::optional<Expr> expr = expr_of(node, unit, what, {});
    if (!expr) return std::nullopt;
    if (!check_minimum(*expr, node, name, min)) return std::nullopt;
    return expr->value;
  }

  // For a constant `expr`: reports (at `node`) a value below `min`.
  bool check_minimum(const Expr& expr, const Node& node, std::string_view name, int64_t min) {
    if (!expr.is_constant() || expr.value >= min) return true;
    const std::string bound = min == 0 ? " must not be negative" : " must be positive";
    error(node.loc, std::string(name) + bound + ", got " + std::to_string(expr.value));
    return false;
  }

  // ----- top level

  void load_top_level(const Node& root) {
    if (!expect_kind(root, NodeKind::MAP, "a map of scenario keys")) return;
    KeySet keys;
    for (const TopLevelKey& key : top_level_keys()) {
      (key.supported ? keys.valid : keys.unsupported).emplace_back(key.name);
    }
    const std::vector<Entry> entries = known_entries(entries_of(root), keys, "");
    for (const TopLevelKey& key : top_level_keys()) {
      if (!key.supported) continue;
      const auto found = std::find_if(entries.begin(), entries.end(),
                                      [&](const Entry& e) { return e.key == key.name; });
      if (found != entries.end()) {
        (this->*key.load)(*found);
      } else if (key.required) {
        error(root.loc, "missing required key " + quoted(key.name));
      }
      if (key.after != nullptr) (this->*key.after)();
    }
    if (!has_error()) warn_unused();
  }

  void load_name(const Entry& entry) {
    if (auto name = string_of(*entry.value)) {
      if (name->empty()) error(entry.value->loc, "the scenario name is empty");
      scenario_.name = std::move(*name);
    }
  }

  void load_description(const Entry& entry) {
    if (auto text = string_of(*entry.value)) scenario_.description = std::move(*text);
  }

  void load_source(const Entry& entry) {
    if (auto text = string_of(*entry.value)) scenario_.source_url = std::move(*text);
  }

  void load_expect(const Entry& entry) {
    const std::optional<std::string> name = string_of(*entry.value);
    if (!name) return;
    scenario_.expect_loc = entry.value->loc;
    scenario_.expect = parse_verdict(*name);
    if (scenario_.expect) return;
    std::vector<std::string> verdicts;
    for (int v = 0; v <= static_cast<int>(Verdict::INCONCLUSIVE); ++v) {
      verdicts.emplace_back(verdict_name(static_cast<Verdict>(v)));
    }
    error(entry.value->loc, invalid_value_message(*name, "expect", verdicts));
  }

  static std::string invalid_value_message(std::string_view value, std::string_view key,
                                           const std::vector<std::string>& valid) {
    std::string message = "invalid value " + quoted(value) + " for " + quoted(key);
    const std::string hint = closest_name(value, valid);
    if (!hint.empty()) message += " (did you mean " + quoted(hint) + "?)";
    return message + "; valid values: " + join(sorted(valid));
  }

  void load_world(const Entry& entry) {
    world_loc_ = entry.key_node->loc;
    const std::optional<int64_t> world =
        constant_of(*entry.value, Unit::NONE, "an integer", "world", 1);
    if (!world) return;
    if (*world > limits_.max_world) {
      error(entry.value->loc, "world " + std::to_string(*world) + " exceeds the limit of " +
                                  std::to_string(limits_.max_world) + " ranks");
      return;
    }
    scenario_.world = static_cast<int32_t>(*world);
  }

  // groups[0]: every rank (none when `world` is missing or invalid).
  void define_world_group() {
    std::vector<int32_t> ranks;
    for (int32_t rank = 0; rank < scenario_.world; ++rank) ranks.push_back(rank);
    scenario_.groups.push_back(make_group("world", world_loc_, std::move(ranks), scenario_.world));
    group_used_.push_back(true);
  }

  // ----- names: parameters, groups, loop variables

  // Reports a name that is not an identifier, or (for names used in expressions) is a reserved
  // word; `what` is e.g. "parameter".
  bool check_name(const Node& node, std::string_view what, bool in_expressions = true) {
    if (!is_identifier(node.value)) {
      error(node.loc, "invalid " + std::string(what) + " name " + quoted(node.value) +
                          "; a name is a letter or '_' followed by letters, digits or '_'");
      return false;
    }
    if (in_expressions && is_reserved_word(node.value)) {
      error(node.loc, quoted(node.value) + " is reserved and cannot name a " + std::string(what));
      return false;
    }
    return true;
  }

  void load_params(const Entry& entry) {
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of parameters")) return;
    for (const Entry& param : entries_of(*entry.value)) {
      if (!check_name(*param.key_node, "parameter")) continue;
      if (param.key == "rank" || param.key == "world") {
        error(param.key_node->loc, "parameter " + quoted(param.key) +
                                       " clashes with the built-in name " + quoted(param.key));
        continue;
      }
      const std::optional<Expr> value =
          expr_of(*param.value, Unit::NONE, "an integer, size or duration", {}, true);
      if (!value) continue;
      scenario_.params.push_back({param.key, value->value, param.key_node->loc, false});
    }
  }

  // Applies the -D overrides and puts rank, world and the parameters in scope.
  void bind_params() {
    scenario_.slot_names = {"rank", "world"};
    for (const Param& param : scenario_.params) scenario_.slot_names.push_back(param.name);
    for (const ParamOverride& override_ : overrides_) apply_override(override_);
    scope_.clear();
    for (size_t slot = 0; slot < scenario_.slot_names.size(); ++slot) {
      scope_.push_back({scenario_.slot_names[slot], static_cast<int32_t>(slot)});
    }
  }

  void apply_override(const ParamOverride& override_) {
    const std::string flag = "-D " + override_.name + "=" + override_.value;
    const auto param = std::find_if(scenario_.params.begin(), scenario_.params.end(),
                                    [&](const Param& p) { return p.name == override_.name; });
    if (param == scenario_.params.end()) {
      std::vector<std::string> names;
      for (const Param& p : scenario_.params) names.push_back(p.name);
      std::string message = "unknown parameter " + quoted(override_.name) + " in " + flag;
      const std::string hint = closest_name(override_.name, names);
      if (!hint.empty()) message += " (did you mean " + quoted(hint) + "?)";
      message +=
          names.empty() ? "; the scenario has no parameters" : "; parameters: " + join(names);
      error({}, message);
      return;
    }
    ExprSource source;
    source.text = override_.value;
    source.file = path_;
    source.exact_columns = false;
    source.any_unit = true;
    const std::string context = "in " + flag;
    source.context = context;
    if (const std::optional<Expr> value = parse_expr(source, diagnostics_)) {
      param->value = value->value;
      param->overridden = true;
    }
  }

  void load_groups(const Entry& entry) {
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of groups")) return;
    for (const Entry& group : entries_of(*entry.value)) {
      if (group.key == "world") {
        error(group.key_node->loc, "group 'world' is predefined and may not be redefined");
        continue;
      }
      if (!check_name(*group.key_node, "group", false)) continue;
      std::vector<int32_t> ranks;
      if (expect_kind(*group.value, NodeKind::LIST, "a list of ranks")) {
        ranks = load_group_ranks(group.key, *group.value);
      }
      scenario_.groups.push_back(make_group(group.key, group.key_node->loc, std::move(ranks), scenario_.world));
      group_used_.push_back(false);
    }
  }

  std::vector<int32_t> load_group_ranks(const std::string& name, const Node& list) {
    std::vector<int32_t> ranks;
    for (const NodePtr& item : list.items) {
      const std::optional<Expr> rank = expr_of(*item, Unit::NONE, "a rank", {});
      if (!rank || !check_in_world(rank->value, *item)) continue;
      const auto value = static_cast<int32_t>(rank->value);
      if (std::find(ranks.begin(), ranks.end(), value) != ranks.end()) {
        error(item->loc,
              "rank " + std::to_string(value) + " appears twice in group " + quoted(name));
        continue;
      }
      ranks.push_back(value);
    }
    if (list.items.empty()) error(list.loc, "group " + quoted(name) + " has no ranks");
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }

  // Reports a rank outside [0, world); with an unknown world only negative ranks.
  bool check_in_world(int64_t rank, const Node& at) {
    const int32_t world = scenario_.world;
    if (rank >= 0 && (world == 0 || rank < world)) return true;
    if (world == 0) {
      error(at.loc, "rank " + std::to_string(rank) + " is negative");
    } else {
      const std::string ranks = world == 1   ? "0"
                                : world == 2 ? "0, 1"
                                             : "0-" + std::to_string(world - 1);
      error(at.loc, "rank " + std::to_string(rank) + " is outside the world (ranks " + ranks + ")");
    }
    return false;
  }

  // A constant peer or root: in the world and a member of `group`.
  void check_member(const Expr& rank, const Node& at, uint32_t group) {
    if (!rank.is_constant() || !check_in_world(rank.value, at)) return;
    const GroupDef& def = scenario_.groups.at(group);
    // Only a single-communicator group has a membership that does not depend on the rank.
    if (group == 0 || !def.single() || def.comm_for(static_cast<int32_t>(rank.value)) != nullptr) return;
    error(at.loc, "rank " + std::to_string(rank.value) + " is not a member of group " +
                      quoted(def.name) + " (ranks " + format_ranks(def.comms.front()) + ")");
  }

  // ----- semantics

  void load_semantics(const Entry& entry) {
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of semantics settings")) return;
    const KeySet keys{
        {"p2p", "eager_limit", "p2p_comm", "comm_concurrency", "launch_order_implicit", "timeout"},
        {"link"}};
    Semantics& semantics = scenario_.semantics;
    for (const Entry& setting : known_entries(entries_of(*entry.value), keys, " in semantics")) {
      const Node& value = *setting.value;
      if (setting.key == "p2p") {
        if (auto mode = choice_of(value, "p2p", {"rendezvous", "eager"})) {
          semantics.p2p = *mode == 0 ? P2pMode::RENDEZVOUS : P2pMode::EAGER;
        }
      } else if (setting.key == "p2p_comm") {
        if (auto mode = choice_of(value, "p2p_comm", {"group", "pair"})) {
          semantics.p2p_comm = *mode == 0 ? P2pComm::GROUP : P2pComm::PAIR;
        }
      } else if (setting.key == "eager_limit") {
        if (auto bytes = constant_of(value, Unit::BYTES, "a size", "eager_limit", 0)) {
          semantics.eager_limit_bytes = *bytes;
        }
      } else if (setting.key == "comm_concurrency") {
        if (auto count = constant_of(value, Unit::NONE, "an integer", "comm_concurrency", 0)) {
          semantics.comm_concurrency = *count;
        }
      } else if (setting.key == "launch_order_implicit") {
        if (auto flag = choice_of(value, "launch_order_implicit", {"false", "true"})) {
          semantics.launch_order_implicit = *flag == 1;
        }
      } else if (setting.key == "timeout") {
        if (auto ns = constant_of(value, Unit::NANOSECONDS, "a duration", "timeout", 1)) {
          semantics.timeout_ns = *ns;
        }
      }
    }
  }

  // The index of the node's value among `choices`.
  std::optional<size_t> choice_of(const Node& node, std::string_view key,
                                  const std::vector<std::string>& choices) {
    const std::optional<std::string> value = string_of(node);
    if (!value) return std::nullopt;
    const auto found = std::find(choices.begin(), choices.end(), *value);
    if (found != choices.end()) return static_cast<size_t>(found - choices.begin());
    error(node.loc, invalid_value_message(*value, key, choices));
    return std::nullopt;
  }

  // ----- program

  void load_program(const Entry& entry) {
    ThreadDef thread{"main", entry.key_node->loc, {}};
    load_block(*entry.value, thread.body, 0);
    scenario_.programs.push_back(RankProgram{std::move(thread)});
    scenario_.rank_program.assign(static_cast<size_t>(std::max(scenario_.world, 0)), 0);
  }

  void load_block(const Node& list, std::vector<Stmt>& out, int32_t depth) {
    if (!expect_kind(list, NodeKind::LIST, "a list of statements")) return;
    for (const NodePtr& item : list.items) {
      if (std::optional<Stmt> stmt = load_statement(*item, depth)) out.push_back(std::move(*stmt));
    }
  }

  std::optional<Stmt> load_statement(const Node& item, int32_t depth) {
    if (item.kind == NodeKind::SCALAR) {  // `- barrier`: an operation with no arguments
      static const Node nothing;
      return load_headed(Entry{item.value, &item, &nothing}, {}, depth);
    }
    if (!expect_kind(item, NodeKind::MAP, "a statement")) return std::nullopt;
    const std::vector<Entry> entries = entries_of(item);
    if (entries.empty()) {
      if (item.entries.empty()) error(item.loc, "expected a statement, got an empty map");
      return std::nullopt;
    }
    const auto head = std::find_if(entries.begin(), entries.end(),
                                   [](const Entry& e) { return is_statement_name(e.key); });
    if (head == entries.end()) {
      report_unknown_statement(entries.front());
      return std::nullopt;
    }
    std::vector<Entry> companions;
    for (const Entry& entry : entries) {
      if (&entry != &*head) companions.push_back(entry);
    }
    return load_headed(*head, companions, depth);
  }

  void report_unknown_statement(const Entry& entry) {
    std::vector<std::string> valid;
    for (const OpSpec& spec : op_specs()) valid.emplace_back(spec.name);
    valid.insert(valid.end(), BLOCK_STATEMENTS.begin(), BLOCK_STATEMENTS.end());
    std::vector<std::string> known = valid;
    known.insert(known.end(), UNSUPPORTED_STATEMENTS.begin(), UNSUPPORTED_STATEMENTS.end());
    error(entry.key_node->loc, unknown_message("operation", entry.key, "", known, valid));
  }

  // A statement by its head key (an op, `repeat` or `if`); `companions` are the item's other keys.
  std::optional<Stmt> load_headed(const Entry& head, const std::vector<Entry>& companions,
                                  int32_t depth) {
    if (head.key == "repeat" || head.key == "if") {
      if (depth >= limits_.max_nesting) {
        error(head.key_node->loc,
              "blocks are nested deeper than the limit of " + std::to_string(limits_.max_nesting));
        return std::nullopt;
      }
      return head.key == "repeat" ? load_repeat(head, companions, depth + 1)
                                  : load_if(head, companions, depth + 1);
    }
    for (const Entry& extra : companions) report_stray_key(head, extra);
    if (const OpSpec* spec = find_op(head.key)) return load_op(*spec, head);
    if (is_statement_name(head.key)) {
      error(head.key_node->loc, quoted(head.key) + " is not supported yet");
    } else {
      report_unknown_statement(head);
    }
    return std::nullopt;
  }

  void report_stray_key(const Entry& head, const Entry& extra) {
    if (is_statement_name(extra.key)) {
      error(extra.key_node->loc, "one statement per list item: " + quoted(extra.key) +
                                     " needs its own '- ' (after " + quoted(head.key) + ")");
    } else {
      error(extra.key_node->loc, "unexpected key " + quoted(extra.key) + " next to " +
                                     quoted(head.key) + "; arguments go under the operation");
    }
  }

  // The companion keys of a block statement, by name; unknown ones are reported.
  std::map<std::string, const Entry*> block_keys(const Entry& head,
                                                 const std::vector<Entry>& companions,
                                                 const KeySet& keys) {
    std::map<std::string, const Entry*> found;
    const std::string where = " in " + quoted(head.key);
    KeySet with_head = keys;
    with_head.valid.push_back(head.key);
    for (const Entry& entry : companions) {
      if (known_entries({entry}, with_head, where).empty()) continue;
      found[entry.key] = &entry;
    }
    return found;
  }

  std::optional<Stmt> load_repeat(const Entry& head, const std::vector<Entry>& companions,
                                  int32_t depth) {
    const auto keys = block_keys(head, companions, KeySet{{"as", "do"}, {}});
    Stmt stmt;
    stmt.kind = StmtKind::REPEAT;
    stmt.loc = head.key_node->loc;
    bool ok = true;
    if (std::optional<Expr> count = expr_of(*head.value, Unit::NONE, "an integer", scope_)) {
      ok = check_minimum(*count, *head.value, "repeat count", 0);
      stmt.count = std::move(*count);
    } else {
      ok = false;
    }
    const size_t scope_size = scope_.size();
    if (keys.count("as") != 0) ok = declare_loop_variable(*keys.at("as")->value, stmt) && ok;
    if (keys.count("do") != 0) {
      load_block(*keys.at("do")->value, stmt.body, depth);
    } else {
      error(head.key_node->loc, "'repeat' requires 'do'");
      ok = false;
    }
    scope_.resize(scope_size);
    if (!ok) return std::nullopt;
    return stmt;
  }

  bool declare_loop_variable(const Node& node, Stmt& stmt) {
    const std::optional<std::string> name = string_of(node);
    if (!name || !check_name(node, "loop variable")) return false;
    const auto shadowed = std::find_if(scope_.begin(), scope_.end(),
                                       [&](const ExprName& n) { return n.name == *name; });
    if (shadowed != scope_.end()) {
      error(node.loc, "loop variable " + quoted(*name) + " shadows " +
                          describe_slot(shadowed->slot) + " " + quoted(*name));
      return false;
    }
    stmt.var_slot = static_cast<int32_t>(scenario_.slot_names.size());
    scenario_.slot_names.push_back(*name);
    scope_.push_back({*name, stmt.var_slot});
    return true;
  }

  std::string describe_slot(int32_t slot) const {
    if (slot < Scenario::FIRST_PARAM_SLOT) return "the built-in";
    if (slot < Scenario::FIRST_PARAM_SLOT + static_cast<int32_t>(scenario_.params.size())) {
      return "the parameter";
    }
    return "the enclosing loop variable";
  }

  std::optional<Stmt> load_if(const Entry& head, const std::vector<Entry>& companions,
                              int32_t depth) {
    const auto keys = block_keys(head, companions, KeySet{{"then", "else"}, {}});
    Stmt stmt;
    stmt.kind = StmtKind::IF;
    stmt.loc = head.key_node->loc;
    std::optional<Expr> cond = expr_of(*head.value, Unit::NONE, "a condition", scope_);
    if (keys.count("then") != 0) {
      load_block(*keys.at("then")->value, stmt.body, depth);
    } else {
      error(head.key_node->loc, "'if' requires 'then'");
    }
    if (keys.count("else") != 0) load_block(*keys.at("else")->value, stmt.else_body, depth);
    if (!cond || keys.count("then") == 0) return std::nullopt;
    stmt.cond = std::move(*cond);
    return stmt;
  }

  // ----- operations

  std::optional<Stmt> load_op(const OpSpec& spec, const Entry& head) {
    Stmt stmt;
    stmt.kind = StmtKind::OP;
    stmt.op = spec.kind;
    stmt.loc = head.key_node->loc;
    if (spec.form == OpForm::DURATION) {
      if (!load_duration(spec, head, stmt)) return std::nullopt;
      return stmt;
    }
    std::map<Arg, const Node*> args;
    // After an unknown argument (likely a misspelt required one) missing ones go unreported.
    const bool all_known = collect_args(spec, head, args);
    bool ok = all_known;
    for (Arg required : spec.required) {
      if (!all_known || args.count(required) != 0) continue;
      error(head.key_node->loc,
            quoted(spec.name) + " requires argument " + quoted(arg_name(required)));
      ok = false;
    }
    for (Arg arg : spec.args) {
      if (args.count(arg) != 0) ok = load_arg(arg, *args.at(arg), stmt) && ok;
    }
    if (stmt.op == OpKind::BARRIER) stmt.size = Expr::constant(dtype_bytes(stmt.dtype), stmt.loc);
    if (!ok) return std::nullopt;
    if (is_collective(stmt.op) || is_p2p(stmt.op)) group_used_.at(stmt.group) = true;
    return stmt;
  }

  bool load_duration(const OpSpec& spec, const Entry& head, Stmt& stmt) {
    if (head.value->kind == NodeKind::NUL) {
      error(head.key_node->loc, quoted(spec.name) + " requires a duration");
      return false;
    }
    std::optional<Expr> duration = expr_of(*head.value, Unit::NANOSECONDS, "a duration", scope_);
    if (!duration || !check_minimum(*duration, *head.value, "duration", 0)) return false;
    stmt.duration = std::move(*duration);
    return true;
  }

  // The argument nodes of an op: from a map, or the group of the short form `op: GROUP`.
  bool collect_args(const OpSpec& spec, const Entry& head, std::map<Arg, const Node*>& args) {
    const Node& value = *head.value;
    if (value.kind == NodeKind::NUL) return true;
    if (value.kind == NodeKind::SCALAR) {
      args[Arg::GROUP] = &value;
      return true;
    }
    if (value.kind != NodeKind::MAP) {
      error(value.loc, "expected a map of arguments or a group name, got " + type_name(value));
      return false;
    }
    bool ok = true;
    for (const Entry& entry : entries_of(value)) {
      const std::optional<Arg> arg = find_arg(spec, entry);
      if (arg) args[*arg] = entry.value;
      ok = ok && arg.has_value();
    }
    return ok;
  }

  std::optional<Arg> find_arg(const OpSpec& spec, const Entry& entry) {
    std::vector<std::string> valid;
    for (Arg arg : spec.args) valid.emplace_back(arg_name(arg));
    for (const ArgName& candidate : ARG_NAMES) {
      if (candidate.name != entry.key) continue;
      if (std::find(spec.args.begin(), spec.args.end(), candidate.arg) != spec.args.end()) {
        return candidate.arg;
      }
      error(entry.key_node->loc, quoted(spec.name) + " takes no argument " + quoted(entry.key) +
                                     "; valid arguments: " + join(sorted(valid)));
      return std::nullopt;
    }
    if (std::find(UNSUPPORTED_ARGS.begin(), UNSUPPORTED_ARGS.end(), entry.key) !=
        UNSUPPORTED_ARGS.end()) {
      error(entry.key_node->loc, quoted(entry.key) + " is not supported yet");
      return std::nullopt;
    }
    std::vector<std::string> known;
    for (const ArgName& candidate : ARG_NAMES) known.emplace_back(candidate.name);
    known.insert(known.end(), UNSUPPORTED_ARGS.begin(), UNSUPPORTED_ARGS.end());
    error(entry.key_node->loc,
          unknown_message("argument", entry.key, " for " + quoted(spec.name), known, valid));
    return std::nullopt;
  }

  bool load_arg(Arg arg, const Node& value, Stmt& stmt) {
    switch (arg) {
      case Arg::GROUP: return load_group_arg(value, stmt);
      case Arg::DTYPE: return load_dtype(value, stmt);
      case Arg::SIZE: {
        std::optional<Expr> size = expr_of(value, Unit::BYTES, "a size", scope_);
        if (!size || !check_minimum(*size, value, "size", 0)) return false;
        stmt.size = std::move(*size);
        return true;
      }
      case Arg::ROOT: {
        std::optional<Expr> root = expr_of(value, Unit::NONE, "a rank", scope_);
        if (!root) return false;
        check_member(*root, value, stmt.group);
        stmt.has_root = true;
        stmt.root = std::move(*root);
        return true;
      }
      case Arg::TO:
      case Arg::FROM: return load_peer(value, stmt);
      case Arg::TAG: {
        std::optional<std::string> tag = string_of(value);
        if (tag) stmt.tag = std::move(*tag);
        return tag.has_value();
      }
    }
    return false;
  }

  bool load_group_arg(const Node& value, Stmt& stmt) {
    const std::optional<std::string> name = string_of(value);
    if (!name) return false;
    std::vector<std::string> names;
    for (size_t i = 0; i < scenario_.groups.size(); ++i) {
      if (scenario_.groups[i].name == *name) {
        stmt.group = static_cast<uint32_t>(i);
        return true;
      }
      names.push_back(scenario_.groups[i].name);
    }
    std::string message = "unknown group " + quoted(*name);
    const std::string hint = closest_name(*name, names);
    if (!hint.empty()) message += " (did you mean " + quoted(hint) + "?)";
    error(value.loc, message + "; groups: " + join(names));
    return false;
  }

  bool load_dtype(const Node& value, Stmt& stmt) {
    const std::optional<std::string> name = string_of(value);
    if (!name) return false;
    std::vector<std::string> names;
    for (const DTypeName& entry : DTYPE_NAMES) {
      if (entry.name == *name) {
        stmt.dtype = entry.dtype;
        return true;
      }
      names.emplace_back(entry.name);
    }
    error(value.loc, invalid_value_message(*name, "dtype", names));
    return false;
  }

  bool load_peer(const Node& value, Stmt& stmt) {
    stmt.has_peer = true;
    if (stmt.op == OpKind::RECV && value.kind == NodeKind::SCALAR && value.value == "any") {
      stmt.peer_any = true;
      return true;
    }
    std::optional<Expr> peer = expr_of(value, Unit::NONE, "a rank", scope_);
    if (!peer) return false;
    check_member(*peer, value, stmt.group);
    stmt.peer = std::move(*peer);
    return true;
  }

  // ----- warnings

  void warn_unused() {
    std::vector<bool> used;
    for (const RankProgram& program : scenario_.programs) {
      for (const ThreadDef& thread : program) mark_used(thread.body, used);
    }
    for (size_t i = 0; i < scenario_.params.size(); ++i) {
      const size_t slot = Scenario::FIRST_PARAM_SLOT + i;
      if (slot < used.size() && used[slot]) continue;
      warning(scenario_.params[i].loc,
              "parameter " + quoted(scenario_.params[i].name) + " is never used");
    }
    for (size_t i = 1; i < scenario_.groups.size(); ++i) {
      if (group_used_[i]) continue;
      warning(scenario_.groups[i].loc,
              "group " + quoted(scenario_.groups[i].name) + " is never used");
    }
  }

  static void mark_used(const std::vector<Stmt>& body, std::vector<bool>& used) {
    for (const Stmt& stmt : body) {
      for (const Expr* expr :
           {&stmt.size, &stmt.peer, &stmt.root, &stmt.duration, &stmt.count, &stmt.cond}) {
        mark_used_slots(*expr, used);
      }
      mark_used(stmt.body, used);
      mark_used(stmt.else_body, used);
    }
  }

  std::string_view text_;
  std::string path_;
  std::span<const ParamOverride> overrides_;
  LoadLimits limits_;
  std::vector<Diagnostic> diagnostics_;
  Scenario scenario_;
  SourceLoc world_loc_;
  std::vector<ExprName> scope_;   // names in scope while loading the program
  std::vector<bool> group_used_;  // by group index
};

// Reads at most `max_bytes` + 1 bytes of a file.
std::optional<std::string> read_file(const std::string& path, int64_t max_bytes,
                                     std::string& error) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    error = std::generic_category().message(errno);
    return std::nullopt;
  }
  std::string text;
  std::array<char, 1 << 16> buffer{};
  while (static_cast<int64_t>(text.size()) <= max_bytes) {
    const size_t got = std::fread(buffer.data(), 1, buffer.size(), file);
    text.append(buffer.data(), got);
    if (got < buffer.size()) break;
  }
  const bool failed = std::ferror(file) != 0;
  const int failure = errno;
  std::fclose(file);
  if (failed) {
    error = std::generic_category().message(failure);
    return std::nullopt;
  }
  return text;
}

}  // namespace

LoadResult load_scenario_file(const std::string& path, std::span<const ParamOverride> overrides,
                              const LoadLimits& limits) {
  std::string problem;
  const std::optional<std::string> text = read_file(path, limits.max_file_bytes, problem);
  if (!text) {
    LoadResult result;
    result.diagnostics.push_back({path, {}, Severity::ERROR, "cannot read file: " + problem});
    return result;
  }
  return load_scenario_text(*text, path, overrides, limits);
}

LoadResult load_scenario_text(std::string_view text, const std::string& path,
                              std::span<const ParamOverride> overrides, const LoadLimits& limits) {
  try {
    return Loader(text, path, overrides, limits).run();
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: still a diagnostic, never a throw
    LoadResult result;
    result.diagnostics.push_back(
        {path, {}, Severity::ERROR, std::string("cannot load: ") + e.what()});
    return result;
  }
}

}  // namespace lockstep::sim
