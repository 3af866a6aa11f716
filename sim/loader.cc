// Scenario YAML -> Scenario. A YAML tree of our own is built from yaml-cpp's events (every node
// keeps its position and duplicate keys stay visible); the loader walks that tree with tables of
// known keys, statements, operations and arguments, and collects every problem as a diagnostic.
#include "sim/loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#include "sim/expr.h"
#include "sim/input_file.h"
#include "sim/semantics_table.h"
#include "sim/utf8.h"

namespace lockstep::sim {

namespace {

// ---------------------------------------------------------------------------------------------
// Generic helpers.

// "unknown THING 'name'WHERE (did you mean 'x'?); valid THINGs: a, b, c" (the list sorted).
std::string unknown_message(std::string_view thing, std::string_view name, std::string_view where,
                            const std::vector<std::string>& valid) {
  return "unknown " + std::string(thing) + " " + quoted(name) + std::string(where) +
         did_you_mean(name, valid) + "; valid " + std::string(thing) + "s: " + join(sorted(valid));
}


// Words of the expression language that no parameter or variable may take.
bool is_reserved_word(std::string_view name) {
  static constexpr std::array<std::string_view, 6> words = {"true", "false", "any",
                                                            "min",  "max",   "abs"};
  return std::find(words.begin(), words.end(), name) != words.end();
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

struct Node {
  NodeKind kind = NodeKind::NUL;
  SourceLoc loc;
  size_t pos = 0;                  // byte offset in the text
  std::string_view value;                 // SCALAR: in the text or the tree's string store
  std::span<const Node* const> items;     // LIST: the items; MAP: key, value, key, value, ...
                                          // (in order, duplicates kept); in the tree's arena
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

// Owns the nodes (stable addresses), their lists of children and the scalar values that are not
// slices of the text. Nodes and lists are handed out front to back from blocks that double in
// size, up to 64 MiB: a recorded schedule's tree has millions of nodes, and allocating them a
// few at a time (a std::deque's 512-byte blocks) was a fifth of loading its YAML's user time.
// (Huge pages for the blocks halved the system time too, but on this project's virtual machine
// one run in a few then spent a second backing them: docs/trace-format.md.)
class Tree {
 public:
  // Moves stack[from..] into the tree (the stack is cut back to `from`).
  std::span<const Node* const> children(std::vector<const Node*>& stack, size_t from) {
    const size_t count = stack.size() - from;
    if (count == 0) return {};
    auto** out = static_cast<const Node**>(allocate(count * sizeof(const Node*), alignof(const Node*)));
    std::copy(stack.begin() + static_cast<std::ptrdiff_t>(from), stack.end(), out);
    stack.resize(from);
    return {out, count};
  }

  Node* make(NodeKind kind, SourceLoc loc, size_t pos) {
    Node* node = new (allocate(sizeof(Node), alignof(Node))) Node;
    node->kind = kind;
    node->loc = loc;
    node->pos = pos;
    return node;
  }
  std::string_view store(std::string value) { return strings_.emplace_back(std::move(value)); }

 private:
  static_assert(std::is_trivially_destructible_v<Node>, "nodes are dropped with their blocks");
  static constexpr size_t FIRST_BLOCK = size_t{64} << 10;
  static constexpr size_t LARGEST_BLOCK = size_t{64} << 20;

  void* allocate(size_t bytes, size_t align) {
    size_t skip = (align - reinterpret_cast<uintptr_t>(next_) % align) % align;
    if (next_ == nullptr || skip + bytes > free_) {
      new_block(bytes + align);
      skip = (align - reinterpret_cast<uintptr_t>(next_) % align) % align;
    }
    char* out = next_ + skip;
    next_ = out + bytes;
    free_ -= skip + bytes;
    return out;
  }

  void new_block(size_t at_least) {
    const size_t size = std::max(at_least, std::clamp(2 * last_block_, FIRST_BLOCK, LARGEST_BLOCK));
    last_block_ = size;
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    next_ = blocks_.back().get();
    free_ = size;
  }

  std::deque<std::string> strings_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  size_t free_ = 0;
  size_t last_block_ = 0;
};

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
    const Node* root = nullptr;
  };

  TreeBuilder(Tree& tree, uint64_t max_weight) : tree_(tree), max_weight_(max_weight) {}

  std::vector<Document> documents;
  std::vector<YamlProblem> problems;

  void OnDocumentStart(const YAML::Mark& mark) override {
    documents.push_back({to_loc(mark), nullptr});
    open_.clear();
    stack_.clear();
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Node* node = tree_.make(NodeKind::NUL, to_loc(mark), position(mark));
    // An empty value's mark is wherever the next token starts: point at its key instead.
    if (!open_.empty() && open_.back().key != nullptr) {
      node->loc = open_.back().key->loc;
      node->pos = open_.back().key->pos;
    }
    finish(node, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto found = anchors_.find(anchor);
    if (found != anchors_.end()) {
      add(found->second.node, found->second.weight);
      return;
    }
    problems.push_back({to_loc(mark), "an alias may not refer to a node that contains it"});
    add(tree_.make(NodeKind::NUL, to_loc(mark), position(mark)));
  }

  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                const std::string& value) override {
    Node* node = tree_.make(NodeKind::SCALAR, to_loc(mark), position(mark));
    node->value = tree_.store(value);
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
    Node* node;
    YAML::anchor_t anchor;
    size_t first;        // its children: stack_[first..]
    const Node* key;     // a map's key waiting for its value
    uint64_t weight = 1;  // nodes below, aliases expanded
  };

  struct Anchored {
    const Node* node;
    uint64_t weight;
  };

  static size_t position(const YAML::Mark& mark) { return static_cast<size_t>(std::max(mark.pos, 0)); }

  void open(NodeKind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    open_.push_back({tree_.make(kind, to_loc(mark), position(mark)), anchor, stack_.size(), nullptr, 1});
  }

  void close() {
    if (open_.empty()) return;
    const Open done = open_.back();
    open_.pop_back();
    done.node->items = tree_.children(stack_, done.first);
    finish(done.node, done.anchor, done.weight);
  }

  void finish(const Node* node, YAML::anchor_t anchor, uint64_t weight = 1) {
    if (anchor != YAML::NullAnchor) anchors_[anchor] = {node, weight};
    add(node, weight);
  }

  void add(const Node* node, uint64_t node_weight = 1) {
    if (open_.empty()) {
      if (!documents.empty()) documents.back().root = node;
      return;
    }
    Open& parent = open_.back();
    stack_.push_back(node);
    if (parent.node->kind == NodeKind::MAP) parent.key = parent.key == nullptr ? node : nullptr;
    const uint64_t weight = parent.weight + node_weight;
    parent.weight = weight < parent.weight ? UINT64_MAX : weight;
    if (parent.weight > max_weight_ && !too_heavy_) {
      too_heavy_ = true;
      problems.push_back({node->loc, "aliases expand the document beyond the limit of " +
                                         std::to_string(max_weight_) + " nodes"});
    }
  }

  Tree& tree_;
  uint64_t max_weight_;
  bool too_heavy_ = false;
  std::vector<Open> open_;
  std::vector<const Node*> stack_;  // children of the open nodes
  std::map<YAML::anchor_t, Anchored> anchors_;
};

// ---------------------------------------------------------------------------------------------
// Tables: statements, operations and their arguments.

enum class Arg : uint8_t { GROUP, SIZE, DTYPE, ROOT, TAG, TO, FROM, STREAM, ASYNC, DURATION };

struct ArgName {
  std::string_view name;
  Arg arg;
};

constexpr std::array<ArgName, 10> ARG_NAMES = {{
    {"group", Arg::GROUP},
    {"size", Arg::SIZE},
    {"dtype", Arg::DTYPE},
    {"root", Arg::ROOT},
    {"tag", Arg::TAG},
    {"to", Arg::TO},
    {"from", Arg::FROM},
    {"stream", Arg::STREAM},
    {"async", Arg::ASYNC},
    {"duration", Arg::DURATION},
}};

std::string_view arg_name(Arg arg) {
  for (const ArgName& entry : ARG_NAMES) {
    if (entry.arg == arg) return entry.name;
  }
  return "?";
}

enum class OpForm : uint8_t {
  ARGS,       // a map of arguments, or the short form `op: GROUP`, or nothing
  DURATION,   // `op: DURATION`
  COMPUTE,    // `op: DURATION` or a map of arguments
  HANDLE,     // `wait: HANDLE`
  SYNC,       // `sync` or `sync: STREAM`
  NEW_GROUP,  // `new_group: {name, ranks}`
  BARE,       // `exit`, `crash`: no value
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
  static const std::vector<Arg> plain = {GROUP, DTYPE, SIZE, TAG, STREAM, ASYNC};
  static const std::vector<Arg> rooted = {GROUP, DTYPE, SIZE, ROOT, TAG, STREAM, ASYNC};
  static const std::vector<OpSpec> specs = {
      {"allreduce", OpKind::ALLREDUCE, OpForm::ARGS, plain, {SIZE}},
      {"allgather", OpKind::ALLGATHER, OpForm::ARGS, plain, {SIZE}},
      {"reduce_scatter", OpKind::REDUCE_SCATTER, OpForm::ARGS, plain, {SIZE}},
      {"all_to_all", OpKind::ALL_TO_ALL, OpForm::ARGS, plain, {SIZE}},
      {"broadcast", OpKind::BROADCAST, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"reduce", OpKind::REDUCE, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"gather", OpKind::GATHER, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"scatter", OpKind::SCATTER, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"barrier", OpKind::BARRIER, OpForm::ARGS, {GROUP, DTYPE, TAG, STREAM, ASYNC}, {}},
      {"send", OpKind::SEND, OpForm::ARGS, {GROUP, DTYPE, SIZE, TO, TAG, STREAM, ASYNC}, {TO, SIZE}},
      {"recv", OpKind::RECV, OpForm::ARGS, {GROUP, DTYPE, SIZE, FROM, TAG, STREAM, ASYNC},
       {FROM, SIZE}},
      {"compute", OpKind::COMPUTE, OpForm::COMPUTE, {DURATION, STREAM}, {DURATION}},
      {"sleep", OpKind::SLEEP, OpForm::DURATION, {}, {}},
      {"wait", OpKind::WAIT, OpForm::HANDLE, {}, {}},
      {"sync", OpKind::SYNC, OpForm::SYNC, {}, {}},
      {"new_group", OpKind::NEW_GROUP, OpForm::NEW_GROUP, {}, {}},
      {"exit", OpKind::EXIT, OpForm::BARE, {}, {}},
      {"crash", OpKind::CRASH, OpForm::BARE, {}, {}},
  };
  return specs;
}

const OpSpec* find_op(std::string_view name) {
  static const std::unordered_map<std::string_view, const OpSpec*> by_name = [] {
    std::unordered_map<std::string_view, const OpSpec*> specs;
    for (const OpSpec& spec : op_specs()) specs.emplace(spec.name, &spec);
    return specs;
  }();
  const auto found = by_name.find(name);
  return found == by_name.end() ? nullptr : found->second;
}

bool takes_arg(const OpSpec& spec, std::string_view name) {
  return std::any_of(spec.args.begin(), spec.args.end(),
                     [&](Arg arg) { return arg_name(arg) == name; });
}

// Statements that hold other statements (`group` is an NCCL group).
constexpr std::array<std::string_view, 5> BLOCK_STATEMENTS = {"repeat", "if", "choose", "call",
                                                              "group"};

bool is_block_statement(std::string_view name) {
  return std::find(BLOCK_STATEMENTS.begin(), BLOCK_STATEMENTS.end(), name) !=
         BLOCK_STATEMENTS.end();
}

bool is_statement_name(std::string_view name) {
  return find_op(name) != nullptr || is_block_statement(name);
}


struct BandwidthUnit {
  std::string_view suffix;
  double bytes_per_s;
};

constexpr std::array<BandwidthUnit, 12> BANDWIDTH_UNITS = {{
    {"B/s", 1.0},
    {"KB/s", 1e3},
    {"MB/s", 1e6},
    {"GB/s", 1e9},
    {"TB/s", 1e12},
    {"KiB/s", 1024.0},
    {"MiB/s", 1024.0 * 1024},
    {"GiB/s", 1024.0 * 1024 * 1024},
    {"TiB/s", 1024.0 * 1024 * 1024 * 1024},
    {"Mbps", 1e6 / 8},
    {"Gbps", 1e9 / 8},
    {"Tbps", 1e12 / 8},
}};

// ---------------------------------------------------------------------------------------------
// The loader.

// One key of a map, with the key and value nodes.
struct Entry {
  std::string_view key;
  const Node* key_node = nullptr;
  const Node* value = nullptr;
};

// An `async: H` or a `wait: H`, in a program (or -1: in a define, shared by every program).
struct HandleUse {
  std::string_view name;
  SourceLoc loc;
  int32_t owner = -1;
};

class Loader {
 public:
  // `source` is the file's text, which a loaded scenario keeps (shared, not copied).
  Loader(SourceText source, const std::string& path, std::span<const ParamOverride> overrides,
         const LoadLimits& limits)
      : source_(std::move(source)), text_(source_.view()), path_(path), overrides_(overrides), limits_(limits) {}

  LoadResult run() {
    LoadResult result;
    if (text_.size() > static_cast<uint64_t>(limits_.max_file_bytes)) {
      error({}, "file exceeds the limit of " + std::to_string(limits_.max_file_bytes) +
                    " bytes (raise it with --max-file-bytes)");
    } else if (const Node* root = parse_yaml()) {
      load_top_level(*root);
    }
    finish_diagnostics();
    const bool failed = has_error();
    result.diagnostics = std::move(diagnostics_);
    // The text lives in the scenario; the result keeps a copy only for its diagnostics (a
    // recorded schedule's YAML was copied twice more, a tenth of its load).
    if (failed || !result.diagnostics.empty()) result.text = std::string(text_);
    if (!failed) {
      scenario_.path = path_;
      scenario_.text = std::move(source_);
      result.scenario = std::move(scenario_);
    }
    return result;
  }

 private:
  using KeyLoader = void (Loader::*)(const Entry&);
  using Step = void (Loader::*)();

  struct TopLevelKey {
    std::string_view name;
    bool required;
    KeyLoader load;
    Step after = nullptr;  // runs whether or not the key is present
  };

  // In the order they are loaded: later keys depend on earlier ones (mesh and world, params,
  // groups, defines).
  static const std::vector<TopLevelKey>& top_level_keys() {
    static const std::vector<TopLevelKey> keys = {
        {"scenario", true, &Loader::load_name},
        {"description", false, &Loader::load_description},
        {"source", false, &Loader::load_source},
        {"expect", false, &Loader::load_expect},
        {"mesh", false, &Loader::load_mesh},
        {"world", false, &Loader::load_world, &Loader::finish_world},
        {"params", false, &Loader::load_params, &Loader::bind_params},
        {"groups", false, &Loader::load_groups, &Loader::create_new_groups},
        {"link", false, &Loader::load_link},
        {"semantics", false, &Loader::load_semantics},
        {"launch", false, &Loader::load_launch},
        {"define", false, &Loader::load_defines},
        {"program", false, &Loader::load_program},
        {"threads", false, &Loader::load_threads},
        {"ranks", false, &Loader::load_ranks},
    };
    return keys;
  }

  static bool is_program_key(std::string_view key) {
    return key == "program" || key == "threads" || key == "ranks";
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

  // Sorted by position (stable); a node shared through an alias (or visited twice) reports once.
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

  const Node* parse_yaml() {
    const uint64_t max_weight = std::max<uint64_t>(uint64_t{1} << 20, 2 * uint64_t{text_.size()});
    TreeBuilder builder(tree_, max_weight);
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
    if (builder.documents.empty() || builder.documents[0].root == nullptr ||
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
    entries.reserve(map.items.size() / 2);
    std::map<std::string_view, uint32_t> first_line;  // only for large maps
    const bool large = map.items.size() > 32;
    for (size_t i = 0; i + 1 < map.items.size(); i += 2) {
      const Node* key = map.items[i];
      const Node* value = map.items[i + 1];
      if (key->kind != NodeKind::SCALAR) {
        error(key->loc, "expected a string key, got " + type_name(*key));
        continue;
      }
      if (key->value == "<<") {
        error(key->loc, "yaml merge keys ('<<') are not supported");
        continue;
      }
      bool duplicate = false;
      uint32_t first = 0;
      if (large) {
        const auto [it, inserted] = first_line.emplace(key->value, key->loc.line);
        duplicate = !inserted;
        first = it->second;
      } else {
        for (const Entry& seen : entries) {
          if (seen.key != key->value) continue;
          duplicate = true;
          first = seen.key_node->loc.line;
          break;
        }
      }
      if (duplicate) {
        error(key->loc, "duplicate key " + quoted(key->value) + " (first given at line " +
                            std::to_string(first) + ")");
        continue;
      }
      entries.push_back({key->value, key, value});
    }
    return entries;
  }

  // Reports every key not in `valid`; returns the others.
  std::vector<Entry> known_entries(const std::vector<Entry>& entries,
                                   const std::vector<std::string>& valid, std::string_view where) {
    std::vector<Entry> accepted;
    for (const Entry& entry : entries) {
      if (std::find(valid.begin(), valid.end(), entry.key) != valid.end()) {
        accepted.push_back(entry);
      } else {
        error(entry.key_node->loc, unknown_message("key", entry.key, where, valid));
      }
    }
    return accepted;
  }

  std::optional<std::string> string_of(const Node& node) {
    if (!expect_kind(node, NodeKind::SCALAR, "a string")) return std::nullopt;
    return std::string(node.value);
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

  static bool is_plain_literal(std::string_view text) {
    return !text.empty() && text[0] >= '0' && text[0] <= '9' &&
           std::all_of(text.begin(), text.end(), [](char c) {
             return std::isalnum(static_cast<unsigned char>(c)) || c == '.';
           });
  }

  std::optional<Expr> expr_of(const Node& node, Unit unit, std::string_view what,
                              std::span<const ExprName> names, bool any_unit = false) {
    if (!expect_kind(node, NodeKind::SCALAR, what)) return std::nullopt;
    const auto [loc, exact] = scalar_start(node);
    // A literal (`4MiB`, `20ms`) compiles to the same constant wherever it is: recorded
    // schedules repeat a few of them a million times.
    const bool literal = !any_unit && is_plain_literal(node.value);
    auto& cache = literal_cache_[static_cast<size_t>(unit)];
    if (literal) {
      const auto found = cache.find(node.value);
      if (found != cache.end()) return Expr::constant(found->second, loc);
    }
    ExprSource source;
    source.text = node.value;
    source.file = path_;
    source.loc = loc;
    source.exact_columns = exact;
    source.unit = unit;
    source.any_unit = any_unit;
    source.names = names;
    const size_t before = diagnostics_.size();
    std::optional<Expr> expr = parse_expr(source, diagnostics_);
    if (literal && expr && expr->is_constant() && diagnostics_.size() == before) {
      cache.emplace(node.value, expr->value);
    }
    return expr;
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

  const Entry* top(std::string_view name) const {
    const auto found =
        std::find_if(top_.begin(), top_.end(), [&](const Entry& e) { return e.key == name; });
    return found == top_.end() ? nullptr : &*found;
  }

  void load_top_level(const Node& root) {
    if (!expect_kind(root, NodeKind::MAP, "a map of scenario keys")) return;
    root_loc_ = root.loc;
    std::vector<std::string> valid;
    for (const TopLevelKey& key : top_level_keys()) valid.emplace_back(key.name);
    top_ = known_entries(entries_of(root), valid, "");
    choose_program();
    for (const TopLevelKey& key : top_level_keys()) {
      const Entry* found = top(key.name);
      if (found != nullptr && (!is_program_key(key.name) || key.name == program_key_)) {
        (this->*key.load)(*found);
      } else if (found == nullptr && key.required) {
        error(root.loc, "missing required key " + quoted(key.name));
      }
      if (key.after != nullptr) (this->*key.after)();
    }
    if (program_key_.empty()) {
      error(root.loc, "missing required key 'program' (or 'threads' or 'ranks')");
    }
    scenario_.group_link.resize(scenario_.groups.size());
    check_handles();
    if (!has_error()) warn_unused();
  }

  // Exactly one of `program`, `threads` and `ranks`: the first in the file is loaded.
  void choose_program() {
    std::vector<const Entry*> present;
    for (std::string_view name : {"program", "threads", "ranks"}) {
      if (const Entry* entry = top(name)) present.push_back(entry);
    }
    std::sort(present.begin(), present.end(), [](const Entry* a, const Entry* b) {
      return std::pair(a->key_node->loc.line, a->key_node->loc.col) <
             std::pair(b->key_node->loc.line, b->key_node->loc.col);
    });
    if (present.empty()) return;
    program_key_ = present[0]->key;
    for (size_t i = 1; i < present.size(); ++i) {
      error(present[i]->key_node->loc,
            quoted(present[i]->key) + " cannot be combined with " + quoted(present[0]->key) +
                " (line " + std::to_string(present[0]->key_node->loc.line) +
                "); a scenario has one of 'program', 'threads' or 'ranks'");
    }
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
    return "invalid value " + quoted(value) + " for " + quoted(key) + did_you_mean(value, valid) +
           "; valid values: " + join(sorted(valid));
  }

  std::string world_limit_hint() const {
    return " (raise it with --max-world)";
  }

  void load_world(const Entry& entry) {
    world_loc_ = entry.key_node->loc;
    world_node_ = entry.value;
    const std::optional<int64_t> world =
        constant_of(*entry.value, Unit::NONE, "an integer", "world", 1);
    if (!world) return;
    if (*world > limits_.max_world) {
      error(entry.value->loc, "world " + std::to_string(*world) + " exceeds the limit of " +
                                  std::to_string(limits_.max_world) + " ranks" +
                                  world_limit_hint());
      return;
    }
    scenario_.world = static_cast<int32_t>(*world);
  }

  // ----- mesh

  void load_mesh(const Entry& entry) {
    mesh_given_ = true;
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of mesh dimensions")) return;
    const std::vector<Entry> dims = entries_of(*entry.value);
    if (dims.empty() && entry.value->items.empty()) {
      error(entry.value->loc, "the mesh has no dimensions");
    }
    int64_t product = 1;
    bool ok = !dims.empty();
    for (const Entry& dim : dims) {
      if (!check_name(*dim.key_node, "mesh dimension")) {
        ok = false;
        continue;
      }
      if (dim.key == "rank" || dim.key == "world") {
        error(dim.key_node->loc, "mesh dimension " + quoted(dim.key) +
                                     " clashes with the built-in name " + quoted(dim.key));
        ok = false;
        continue;
      }
      MeshDim mesh_dim;
      mesh_dim.name = std::string(dim.key);
      mesh_dim.loc = dim.key_node->loc;
      const std::optional<int64_t> size =
          constant_of(*dim.value, Unit::NONE, "an integer", "mesh size", 1);
      if (!size) {
        ok = false;
      } else if (ok && (__builtin_mul_overflow(product, *size, &product) ||
                        product > limits_.max_world)) {
        error(dim.value->loc, "the mesh has more ranks than the limit of " +
                                  std::to_string(limits_.max_world) + world_limit_hint());
        ok = false;
      } else {
        mesh_dim.size = static_cast<int32_t>(*size);
      }
      scenario_.mesh.push_back(std::move(mesh_dim));
    }
    mesh_world_ = ok ? static_cast<int32_t>(product) : 0;
  }

  // `world` from the mesh (or checked against it), then groups[0] = world and the mesh groups.
  void finish_world() {
    if (mesh_given_) {
      if (world_node_ == nullptr) {
        scenario_.world = mesh_world_;
      } else if (scenario_.world > 0 && mesh_world_ > 0 && scenario_.world != mesh_world_) {
        std::string names;
        std::string sizes;
        for (const MeshDim& dim : scenario_.mesh) {
          names += (names.empty() ? "" : " * ") + dim.name;
          sizes += (sizes.empty() ? "" : " * ") + std::to_string(dim.size);
        }
        error(world_node_->loc, "world " + std::to_string(scenario_.world) +
                                    " does not match the mesh: " + names + " = " + sizes + " = " +
                                    std::to_string(mesh_world_));
      }
    } else if (world_node_ == nullptr) {
      error(root_loc_, "missing required key 'world'");
    }
    std::vector<int32_t> ranks(static_cast<size_t>(scenario_.world));
    for (int32_t rank = 0; rank < scenario_.world; ++rank) ranks[static_cast<size_t>(rank)] = rank;
    scenario_.groups.push_back(make_group("world", world_loc_, std::move(ranks), scenario_.world));
    group_used_.push_back(true);
    define_mesh_groups();
  }

  // One group per dimension: a communicator for each combination of the other coordinates.
  void define_mesh_groups() {
    const int32_t world = scenario_.world;
    const bool build = mesh_world_ > 0 && mesh_world_ == world;
    int64_t stride = 1;
    for (size_t d = 0; d < scenario_.mesh.size(); ++d) {
      MeshDim& dim = scenario_.mesh[d];
      GroupDef group;
      group.name = dim.name;
      group.loc = dim.loc;
      group.mesh_dim = static_cast<int32_t>(d);
      group.comm_of_rank.assign(static_cast<size_t>(std::max(world, 0)), -1);
      if (build) {
        for (int64_t rank = 0; rank < world; ++rank) {
          if ((rank / stride) % dim.size != 0) continue;
          const auto comm = static_cast<int32_t>(group.comms.size());
          std::vector<int32_t> members;
          members.reserve(static_cast<size_t>(dim.size));
          for (int64_t k = 0; k < dim.size; ++k) {
            const int64_t member = rank + k * stride;
            members.push_back(static_cast<int32_t>(member));
            group.comm_of_rank[static_cast<size_t>(member)] = comm;
          }
          group.comms.push_back(std::move(members));
        }
      }
      stride *= dim.size;
      dim.group = static_cast<uint32_t>(scenario_.groups.size());
      scenario_.groups.push_back(std::move(group));
      group_used_.push_back(true);
    }
  }

  // ----- names: parameters, groups, variables

  // Reports a name that is not an identifier, or (for names used in expressions) is a reserved
  // word; `what` is e.g. "parameter".
  bool check_name(const Node& node, std::string_view what, bool in_expressions = true) {
    if (node.kind != NodeKind::SCALAR) return expect_kind(node, NodeKind::SCALAR, "a name");
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
      scenario_.params.push_back({std::string(param.key), value->value, param.key_node->loc, false});
    }
  }

  int32_t add_slot(std::string name, std::string kind) {
    scenario_.slot_names.push_back(std::move(name));
    slot_kinds_.push_back(std::move(kind));
    return static_cast<int32_t>(scenario_.slot_names.size()) - 1;
  }

  int32_t find_slot(std::string_view name) const {
    for (size_t slot = 0; slot < scenario_.slot_names.size(); ++slot) {
      if (scenario_.slot_names[slot] == name) return static_cast<int32_t>(slot);
    }
    return -1;
  }

  // Applies the -D overrides and puts rank, world, the parameters and the mesh variables in scope.
  void bind_params() {
    scenario_.slot_names.clear();
    slot_kinds_.clear();
    add_slot("rank", "the built-in");
    add_slot("world", "the built-in");
    for (const Param& param : scenario_.params) add_slot(param.name, "the parameter");
    for (const ParamOverride& override_ : overrides_) apply_override(override_);
    for (MeshDim& dim : scenario_.mesh) {
      for (const bool is_size : {false, true}) {
        const std::string name = is_size ? dim.name + "_size" : dim.name;
        const int32_t clash = find_slot(name);
        if (clash >= 0) {
          error(dim.loc, std::string(is_size ? "mesh variable " : "mesh dimension ") +
                             quoted(name) + " clashes with " + slot_kinds_[static_cast<size_t>(clash)] +
                             " " + quoted(name));
        }
        (is_size ? dim.size_slot : dim.coord_slot) = add_slot(name, "the mesh variable");
      }
    }
    base_scope_.clear();
    for (size_t slot = 0; slot < scenario_.slot_names.size(); ++slot) {
      base_scope_.push_back({scenario_.slot_names[slot], static_cast<int32_t>(slot)});
    }
    scope_ = base_scope_;
  }

  void apply_override(const ParamOverride& override_) {
    const std::string flag = "-D " + override_.name + "=" + override_.value;
    const auto param = std::find_if(scenario_.params.begin(), scenario_.params.end(),
                                    [&](const Param& p) { return p.name == override_.name; });
    if (param == scenario_.params.end()) {
      std::vector<std::string> names;
      for (const Param& p : scenario_.params) names.push_back(p.name);
      std::string message =
          "unknown parameter " + quoted(override_.name) + " in " + flag + did_you_mean(override_.name, names);
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

  const MeshDim* mesh_dim_named(std::string_view name) const {
    for (const MeshDim& dim : scenario_.mesh) {
      if (dim.name == name) return &dim;
    }
    return nullptr;
  }

  void load_groups(const Entry& entry) {
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of groups")) return;
    for (const Entry& group : entries_of(*entry.value)) {
      if (group.key == "world") {
        error(group.key_node->loc, "group 'world' is predefined and may not be redefined");
        continue;
      }
      if (!check_name(*group.key_node, "group", false)) continue;
      if (mesh_dim_named(group.key) != nullptr) {
        error(group.key_node->loc, "group " + quoted(group.key) +
                                       " clashes with the mesh dimension " + quoted(group.key));
        continue;
      }
      std::vector<int32_t> ranks;
      if (expect_kind(*group.value, NodeKind::LIST, "a list of ranks")) {
        ranks = load_group_ranks(group.key, *group.value);
      }
      scenario_.groups.push_back(
          make_group(std::string(group.key), group.key_node->loc, std::move(ranks), scenario_.world));
      group_used_.push_back(false);
    }
  }

  std::vector<int32_t> load_group_ranks(std::string_view name, const Node& list) {
    std::vector<int32_t> ranks;
    for (const Node* item : list.items) {
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

  std::string world_ranks() const {
    const int32_t world = scenario_.world;
    return world == 1 ? "0" : world == 2 ? "0, 1" : "0-" + std::to_string(world - 1);
  }

  // Reports a rank outside [0, world); with an unknown world only negative ranks.
  bool check_in_world(int64_t rank, const Node& at) {
    const int32_t world = scenario_.world;
    if (rank >= 0 && (world == 0 || rank < world)) return true;
    if (world == 0) {
      error(at.loc, "rank " + std::to_string(rank) + " is negative");
    } else {
      error(at.loc, "rank " + std::to_string(rank) + " is outside the world (ranks " +
                        world_ranks() + ")");
    }
    return false;
  }

  // A constant peer or root: in the world and a member of `group`.
  void check_member(const Expr& rank, const Node& at, uint32_t group) {
    if (!rank.is_constant() || !check_in_world(rank.value, at)) return;
    const GroupDef& def = scenario_.groups.at(group);
    // Only a single-communicator group has a membership that does not depend on the rank.
    if (group == 0 || !def.single() || def.comm_for(static_cast<int32_t>(rank.value)) != nullptr) {
      return;
    }
    error(at.loc, "rank " + std::to_string(rank.value) + " is not a member of group " +
                      quoted(def.name) + " (ranks " + format_ranks(def.comms.front()) + ")");
  }

  // The index of the group a node names; reports unknown names.
  std::optional<uint32_t> group_of(const Node& value) {
    if (!expect_kind(value, NodeKind::SCALAR, "a group name")) return std::nullopt;
    for (size_t i = 0; i < scenario_.groups.size(); ++i) {
      if (scenario_.groups[i].name == value.value) return static_cast<uint32_t>(i);
    }
    std::vector<std::string> names;
    for (const GroupDef& group : scenario_.groups) names.push_back(group.name);
    error(value.loc, "unknown group " + quoted(value.value) + did_you_mean(value.value, names) +
                         "; groups: " + join(names));
    return std::nullopt;
  }

  // ----- new_group: every communicator a program creates, found before any statement is loaded
  // (a later op may name it wherever it sits)

  void create_new_groups() {
    if (text_.find("new_group") == std::string_view::npos) return;
    std::vector<const Entry*> sections;
    for (std::string_view name : {"define", "program", "threads", "ranks"}) {
      const Entry* entry = top(name);
      if (entry != nullptr && (!is_program_key(name) || name == program_key_)) {
        sections.push_back(entry);
      }
    }
    std::sort(sections.begin(), sections.end(), [](const Entry* a, const Entry* b) {
      return a->key_node->loc.line < b->key_node->loc.line;
    });
    for (const Entry* section : sections) {
      if (section->key == "ranks" && section->value->kind == NodeKind::MAP) {
        for (size_t i = 0; i + 1 < section->value->items.size(); i += 2) {
          find_new_groups(*section->value->items[i + 1], section->value->items[i], 0);
        }
      } else {
        find_new_groups(*section->value, nullptr, 0);
      }
    }
  }

  // `owner`: the key of a recorded program, or null for the rank template.
  void find_new_groups(const Node& node, const Node* owner, int32_t depth) {
    if (depth > 1000) return;
    for (size_t i = 0; i < node.items.size(); ++i) {
      const Node& child = *node.items[i];
      if (node.kind == NodeKind::LIST && child.kind == NodeKind::MAP) {
        for (size_t k = 0; k + 1 < child.items.size(); k += 2) {
          const Node& key = *child.items[k];
          if (key.kind == NodeKind::SCALAR && key.value == "new_group") {
            declare_new_group(key, *child.items[k + 1], owner);
            break;
          }
        }
      }
      if (node.kind == NodeKind::MAP && i % 2 == 0) continue;
      find_new_groups(child, owner, depth + 1);
    }
  }

  void declare_new_group(const Node& key, const Node& value, const Node* owner) {
    if (new_group_of_.count(&value) != 0) return;  // an alias of one already seen
    new_group_of_[&value] = -1;
    if (!expect_kind(value, NodeKind::MAP, "a map {name, ranks}")) return;
    const Node* name_node = nullptr;
    const Node* ranks_node = nullptr;
    bool ok = true;
    for (const Entry& entry : entries_of(value)) {
      if (entry.key == "name") {
        name_node = entry.value;
      } else if (entry.key == "ranks") {
        ranks_node = entry.value;
      } else {
        error(entry.key_node->loc,
              unknown_message("argument", entry.key, " for 'new_group'", {"name", "ranks"}));
        ok = false;
      }
    }
    for (const auto& [node, arg] : {std::pair(name_node, "name"), std::pair(ranks_node, "ranks")}) {
      if (node == nullptr && ok) error(key.loc, "'new_group' requires argument " + quoted(arg));
    }
    if (name_node == nullptr || ranks_node == nullptr) return;
    if (!expect_kind(*name_node, NodeKind::SCALAR, "a group name") ||
        !check_name(*name_node, "group", false)) {
      ok = false;
    }
    std::vector<int32_t> ranks;
    if (expect_kind(*ranks_node, NodeKind::LIST, "a list of ranks")) {
      const size_t before = diagnostics_.size();
      ranks = load_group_ranks(name_node->value, *ranks_node);
      ok = ok && diagnostics_.size() == before;
    } else {
      ok = false;
    }
    if (!ok) return;
    const std::string_view name = name_node->value;
    for (size_t i = 0; i < scenario_.groups.size(); ++i) {
      const GroupDef& group = scenario_.groups[i];
      if (group.name != name) continue;
      const std::string clash = "new_group name " + quoted(name) + " clashes with ";
      if (i == 0) {
        error(name_node->loc, clash + "the predefined group 'world'");
      } else if (group.mesh_dim >= 0) {
        error(name_node->loc, clash + "the mesh dimension " + quoted(name));
      } else if (!group.from_new_group) {
        error(name_node->loc, clash + "the group " + quoted(name) + " (line " +
                                  std::to_string(group.loc.line) + ")");
      } else if (group.comms.front() == ranks) {
        // The same group written twice (in two branches, or in two ranks' records): one group.
        // A rank that runs both creates it twice, which the engine reports.
        new_group_of_[&value] = static_cast<int32_t>(i);
      } else {
        error(name_node->loc, "new_group name " + quoted(name) + " reused with other ranks (first created at line " +
                                  std::to_string(group.loc.line) + ")");
      }
      return;
    }
    GroupDef group = make_group(std::string(name), key.loc, std::move(ranks), scenario_.world);
    group.from_new_group = true;
    new_group_of_[&value] = static_cast<int32_t>(scenario_.groups.size());
    new_group_owner_[scenario_.groups.size()] = owner;
    scenario_.groups.push_back(std::move(group));
    group_used_.push_back(true);
  }

  // ----- launch (docs/scenario-language.md, "Launch")

  // `launch:` defaults (backend, init, world_size) and `processes:`, a list of entries
  // {rank, world_size, backend, init}; `rank` may be a range "A-B" (one process per rank).
  // Ranks outside a process's own world size, duplicates and disagreeing world sizes are what
  // the engine models (docs/semantics.md, "Initialisation"), not static errors.
  void load_launch(const Entry& entry) {
    Launch& launch = scenario_.launch;
    launch.given = true;
    launch.loc = entry.key_node->loc;
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of launch settings")) return;
    const std::vector<std::string> keys = {"backend", "init", "world_size", "processes"};
    std::string backend = "nccl";
    std::string init = "env://";
    int64_t world_size = scenario_.world;
    const Node* processes = nullptr;
    for (const Entry& setting : known_entries(entries_of(*entry.value), keys, " in 'launch'")) {
      if (setting.key == "backend") {
        if (auto value = launch_backend(*setting.value)) backend = *value;
      } else if (setting.key == "init") {
        if (auto value = launch_init(*setting.value)) init = *value;
      } else if (setting.key == "world_size") {
        if (auto value = launch_world_size(*setting.value)) world_size = *value;
      } else {
        processes = setting.value;
      }
    }
    if (scenario_.world <= 0) return;  // reported already
    if (processes == nullptr) {  // one process per rank
      for (int32_t r = 0; r < scenario_.world; ++r) {
        add_process(r, world_size, backend, init, entry.key_node->loc);
      }
      return;
    }
    if (!expect_kind(*processes, NodeKind::LIST, "a list of processes")) return;
    if (processes->items.empty()) {
      error(processes->loc, "'processes' starts no process; list at least one");
      return;
    }
    const int64_t max_processes = 2 * static_cast<int64_t>(scenario_.world);
    const std::vector<std::string> process_keys = {"rank", "world_size", "backend", "init"};
    for (const Node* item : processes->items) {
      if (!expect_kind(*item, NodeKind::MAP, "a process: {rank: R, world_size: W, backend: B, init: URL}")) continue;
      std::optional<std::pair<int64_t, int64_t>> ranks;
      int64_t own_world = world_size;
      std::string own_backend = backend;
      std::string own_init = init;
      bool ok = true;
      bool has_rank = false;
      for (const Entry& key : known_entries(entries_of(*item), process_keys, " in a launch process")) {
        if (key.key == "rank") {
          has_rank = true;
          ranks = launch_ranks(*key.value);
          ok = ok && ranks.has_value();
        } else if (key.key == "world_size") {
          const auto value = launch_world_size(*key.value);
          ok = ok && value.has_value();
          if (value) own_world = *value;
        } else if (key.key == "backend") {
          const auto value = launch_backend(*key.value);
          ok = ok && value.has_value();
          if (value) own_backend = *value;
        } else {
          const auto value = launch_init(*key.value);
          ok = ok && value.has_value();
          if (value) own_init = *value;
        }
      }
      if (!has_rank) {
        error(item->loc, "a launch process needs 'rank' (the rank it passes to init_process_group)");
        continue;
      }
      if (!ok) continue;
      for (int64_t r = ranks->first; r <= ranks->second; ++r) {
        if (static_cast<int64_t>(launch.processes.size()) >= max_processes) {
          error(item->loc, "launch starts more than " + std::to_string(max_processes) +
                               " processes (twice the world of " + std::to_string(scenario_.world) + ")");
          return;
        }
        if (r < own_world && r >= scenario_.world) {
          error(item->loc, "process rank " + std::to_string(r) + " (world_size " + std::to_string(own_world) +
                               ") has no program: the scenario's world is " + std::to_string(scenario_.world) +
                               " (ranks 0-" + std::to_string(scenario_.world - 1) + ")");
          ok = false;
          break;
        }
        add_process(static_cast<int32_t>(r), own_world, own_backend, own_init, item->loc);
      }
    }
    if (has_error() || launch.processes.empty()) return;
    // Processes that all agree on a smaller world than the scenario's: the scenario is wrong.
    bool joins = false;
    int64_t agreed = -1;
    bool all_agree = true;
    for (const LaunchProcess& p : launch.processes) {
      if (p.rank >= p.world_size) continue;  // it raises at init (modelled)
      joins = true;
      if (agreed < 0) agreed = p.world_size;
      all_agree = all_agree && p.world_size == agreed;
    }
    if (!joins) {
      error(processes->loc, "no launched process can join: every rank is outside its own world_size");
    } else if (all_agree && agreed < scenario_.world) {
      error(processes->loc, "every process that joins passes world_size " + std::to_string(agreed) +
                                ", fewer than the scenario's world of " + std::to_string(scenario_.world) +
                                "; set 'world: " + std::to_string(agreed) + "' if that is the job");
    }
  }

  void add_process(int32_t rank, int64_t world_size, const std::string& backend, const std::string& init,
                   SourceLoc loc) {
    LaunchProcess& p = scenario_.launch.processes.emplace_back();
    p.rank = rank;
    p.world_size = static_cast<int32_t>(world_size);
    p.backend = backend;
    p.init_method = init;
    p.loc = loc;
    p.stmt.kind = StmtKind::OP;
    p.stmt.op = OpKind::INIT;
    p.stmt.loc = loc;
    p.stmt.group = 0;
  }

  std::optional<std::string> launch_backend(const Node& node) {
    static const std::vector<std::string> backends = {"nccl", "gloo"};
    const std::optional<std::string> value = string_of(node);
    if (!value) return std::nullopt;
    if (std::find(backends.begin(), backends.end(), *value) != backends.end()) return value;
    error(node.loc, invalid_value_message(*value, "backend", backends));
    return std::nullopt;
  }

  std::optional<std::string> launch_init(const Node& node) {
    static const std::vector<std::string> schemes = {"env://", "tcp://", "file://"};
    const std::optional<std::string> value = string_of(node);
    if (!value) return std::nullopt;
    for (const std::string& scheme : schemes) {
      if (value->rfind(scheme, 0) == 0 && (scheme == "env://" ? value->size() == scheme.size() : value->size() > scheme.size())) {
        return value;
      }
    }
    const size_t colon = value->find("://");
    const std::string scheme = colon == std::string::npos ? *value : value->substr(0, colon + 3);
    error(node.loc, "invalid init method " + quoted(*value) + did_you_mean(scheme, schemes) +
                        "; valid init methods: env://, tcp://HOST:PORT, file://PATH");
    return std::nullopt;
  }

  std::optional<int64_t> launch_world_size(const Node& node) {
    const std::optional<int64_t> value = constant_of(node, Unit::NONE, "an integer", "world_size", 1);
    if (!value) return std::nullopt;
    if (*value > limits_.max_world) {
      error(node.loc, "world_size " + std::to_string(*value) + " exceeds the limit of " +
                          std::to_string(limits_.max_world) + " ranks" + world_limit_hint());
      return std::nullopt;
    }
    return value;
  }

  // An integer rank, or a range "A-B" (inclusive).
  std::optional<std::pair<int64_t, int64_t>> launch_ranks(const Node& node) {
    if (node.kind == NodeKind::SCALAR) {
      const std::string_view text = node.value;
      const size_t dash = text.find('-', 1);
      if (dash != std::string_view::npos) {
        int64_t a = 0, b = 0;
        const auto [pa, ea] = std::from_chars(text.data(), text.data() + dash, a);
        const auto [pb, eb] = std::from_chars(text.data() + dash + 1, text.data() + text.size(), b);
        if (ea != std::errc() || eb != std::errc() || pa != text.data() + dash || pb != text.data() + text.size() ||
            a < 0 || b < a) {
          error(node.loc, "invalid rank range " + quoted(text) + "; write 'A-B' with 0 <= A <= B");
          return std::nullopt;
        }
        if (b >= limits_.max_world) {
          error(node.loc, "rank " + std::to_string(b) + " exceeds the limit of " + std::to_string(limits_.max_world) +
                              " ranks" + world_limit_hint());
          return std::nullopt;
        }
        return std::pair(a, b);
      }
    }
    const std::optional<int64_t> rank = constant_of(node, Unit::NONE, "an integer", "rank", 0);
    if (!rank) return std::nullopt;
    if (*rank >= limits_.max_world) {
      error(node.loc, "rank " + std::to_string(*rank) + " exceeds the limit of " + std::to_string(limits_.max_world) +
                          " ranks" + world_limit_hint());
      return std::nullopt;
    }
    return std::pair(*rank, *rank);
  }

  // ----- link

  void load_link(const Entry& entry) {
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of link settings")) return;
    const std::vector<Entry> entries = entries_of(*entry.value);
    for (const Entry& setting : entries) {
      if (setting.key == "latency" || setting.key == "bandwidth") {
        load_link_setting(setting, scenario_.link);
      }
    }
    scenario_.group_link.assign(scenario_.groups.size(), std::nullopt);
    std::vector<std::string> valid = {"bandwidth", "latency"};
    for (const GroupDef& group : scenario_.groups) valid.push_back(group.name);
    for (const Entry& setting : entries) {
      if (setting.key == "latency" || setting.key == "bandwidth") continue;
      const auto group = std::find_if(scenario_.groups.begin(), scenario_.groups.end(),
                                      [&](const GroupDef& g) { return g.name == setting.key; });
      if (group == scenario_.groups.end()) {
        error(setting.key_node->loc, unknown_message("key", setting.key, " in 'link'", valid) +
                                         " (a group's own link is 'GROUP: {latency, bandwidth}')");
        continue;
      }
      if (!expect_kind(*setting.value, NodeKind::MAP, "a map {latency, bandwidth}")) continue;
      Link link = scenario_.link;
      const std::string where = " in the link of " + quoted(setting.key);
      for (const Entry& field :
           known_entries(entries_of(*setting.value), {"bandwidth", "latency"}, where)) {
        load_link_setting(field, link);
      }
      scenario_.group_link[static_cast<size_t>(group - scenario_.groups.begin())] = link;
    }
  }

  void load_link_setting(const Entry& setting, Link& link) {
    if (setting.key == "latency") {
      if (auto ns = constant_of(*setting.value, Unit::NANOSECONDS, "a duration", "latency", 0)) {
        link.latency_ns = *ns;
      }
    } else if (auto bandwidth = bandwidth_of(*setting.value)) {
      link.bandwidth_bytes_per_s = *bandwidth;
    }
  }

  // "100GB/s", "12.5 GiB/s", "400Gbps": bytes per second.
  std::optional<double> bandwidth_of(const Node& node) {
    if (!expect_kind(node, NodeKind::SCALAR, "a bandwidth")) return std::nullopt;
    const std::string_view text = node.value;
    size_t digits = 0;
    while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) != 0 ||
                                    text[digits] == '.')) {
      ++digits;
    }
    double number = 0;
    const auto [end, failure] = std::from_chars(text.data(), text.data() + digits, number);
    if (digits == 0 || failure != std::errc() || end != text.data() + digits) {
      error(node.loc, "invalid bandwidth " + quoted(text) +
                          "; expected a number and a unit, e.g. 100GB/s or 400Gbps");
      return std::nullopt;
    }
    std::string_view unit = text.substr(digits);
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (unit.empty()) {
      error(node.loc, "bandwidth needs a unit (e.g. 100GB/s)");
      return std::nullopt;
    }
    std::vector<std::string> units;
    for (const BandwidthUnit& candidate : BANDWIDTH_UNITS) {
      if (candidate.suffix == unit) {
        const double bytes_per_s = number * candidate.bytes_per_s;
        if (!(bytes_per_s > 0)) {
          error(node.loc, "bandwidth must be positive, got " + quoted(text));
          return std::nullopt;
        }
        return bytes_per_s;
      }
      units.emplace_back(candidate.suffix);
    }
    error(node.loc, "unknown bandwidth unit " + quoted(unit) + did_you_mean(unit, units) +
                        "; bandwidth units: " + join(units));
    return std::nullopt;
  }

  // ----- semantics

  void load_semantics(const Entry& entry) {
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of semantics settings")) return;
    for (const Entry& item : entries_of(*entry.value)) {
      const Node& value = *item.value;
      const SemanticsSetting* setting = find_setting(item.key, true);
      if (item.key == "link") {
        error(item.key_node->loc, "'link' is a top-level key, not a semantics setting");
        continue;
      }
      if (setting == nullptr) {
        error(item.key_node->loc, unknown_message("key", item.key, " in semantics", setting_keys(true)));
        continue;
      }
      const std::string_view key = setting->yaml_key;
      std::optional<int64_t> got;
      switch (setting->kind) {
        case SettingKind::CHOICE:
        case SettingKind::FLAG:
          if (auto index = choice_of(value, key, setting->choices)) got = static_cast<int64_t>(*index);
          break;
        case SettingKind::BYTES: got = constant_of(value, Unit::BYTES, "a size", key, setting->minimum); break;
        case SettingKind::COUNT: got = constant_of(value, Unit::NONE, "an integer", key, setting->minimum); break;
        case SettingKind::DURATION: got = constant_of(value, Unit::NANOSECONDS, "a duration", key, setting->minimum); break;
      }
      if (got) setting->set(scenario_.semantics, *got);
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

  // ----- define

  void load_defines(const Entry& entry) {
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map of defines")) return;
    std::vector<const Node*> bodies;
    for (const Entry& define : entries_of(*entry.value)) {
      if (!check_name(*define.key_node, "define", false)) continue;
      Define def;
      def.name = std::string(define.key);
      def.loc = define.key_node->loc;
      const Node* body = nullptr;
      const Node& value = *define.value;
      if (value.kind == NodeKind::LIST) {
        body = &value;
      } else if (value.kind == NodeKind::MAP) {
        const std::string where = " in define " + quoted(define.key);
        for (const Entry& part : known_entries(entries_of(value), {"do", "params"}, where)) {
          if (part.key == "do") {
            body = part.value;
          } else {
            declare_define_params(*part.value, def);
          }
        }
        if (body == nullptr) error(define.key_node->loc, "define " + quoted(define.key) + " requires 'do'");
      } else {
        error(value.loc, "expected a list of statements or a map {params, do}, got " +
                             type_name(value));
      }
      scenario_.defines.push_back(std::move(def));
      bodies.push_back(body);
      define_called_.push_back(false);
    }
    for (size_t i = 0; i < bodies.size(); ++i) {
      if (bodies[i] == nullptr) continue;
      Define& def = scenario_.defines[i];
      scope_ = base_scope_;
      for (size_t p = 0; p < def.params.size(); ++p) {
        scope_.push_back({def.params[p], def.param_slots[p]});
      }
      owner_ = -1;
      std::vector<Stmt> body;
      load_block(*bodies[i], body, 0);
      scenario_.defines[i].body = std::move(body);
    }
    scope_ = base_scope_;
  }

  void declare_define_params(const Node& list, Define& def) {
    if (!expect_kind(list, NodeKind::LIST, "a list of parameter names")) return;
    for (const Node* item : list.items) {
      if (!expect_kind(*item, NodeKind::SCALAR, "a parameter name") ||
          !check_name(*item, "define parameter")) {
        continue;
      }
      const std::string name(item->value);
      if (std::find(def.params.begin(), def.params.end(), name) != def.params.end()) {
        error(item->loc, "define parameter " + quoted(name) + " is listed twice");
        continue;
      }
      const auto shadowed = std::find_if(base_scope_.begin(), base_scope_.end(),
                                         [&](const ExprName& n) { return n.name == name; });
      if (shadowed != base_scope_.end()) {
        error(item->loc, "define parameter " + quoted(name) + " shadows " +
                             describe_slot(shadowed->slot) + " " + quoted(name));
        continue;
      }
      def.params.push_back(name);
      def.param_slots.push_back(add_slot(name, "the define parameter"));
    }
  }

  // ----- programs

  void load_program(const Entry& entry) {
    ThreadDef thread{"main", entry.key_node->loc, {}};
    owner_ = 0;
    load_block(*entry.value, thread.mutable_body(), 0);
    scenario_.programs.emplace_back().push_back(std::move(thread));  // no initializer list: it copies
    scenario_.rank_program.assign(static_cast<size_t>(std::max(scenario_.world, 0)), 0);
  }

  void load_threads(const Entry& entry) {
    RankProgram program;
    owner_ = 0;
    if (expect_kind(*entry.value, NodeKind::MAP, "a map of threads")) {
      if (entry.value->items.empty()) error(entry.value->loc, "'threads' has no threads");
      for (const Entry& thread : entries_of(*entry.value)) {
        if (!check_name(*thread.key_node, "thread", false)) continue;
        ThreadDef def{std::string(thread.key), thread.key_node->loc, {}};
        // A list of statements, or {stream: S, do: [...]}: a thread with a current stream of
        // its own (torch.cuda.stream(S) around its body).
        const Node* body = thread.value;
        if (thread.value->kind == NodeKind::MAP) {
          body = nullptr;
          const std::string where = " in thread " + quoted(thread.key);
          for (const Entry& part : known_entries(entries_of(*thread.value), {"do", "stream"}, where)) {
            if (part.key == "do") {
              body = part.value;
            } else if (expect_kind(*part.value, NodeKind::SCALAR, "a stream name") &&
                       check_name(*part.value, "stream", false)) {
              def.stream = std::string(part.value->value);
            }
          }
          if (body == nullptr) error(thread.key_node->loc, "thread " + quoted(thread.key) + " requires 'do'");
        } else if (thread.value->kind != NodeKind::LIST) {
          error(thread.value->loc, "expected a list of statements or a map {stream, do}, got " + type_name(*thread.value));
          body = nullptr;
        }
        if (body != nullptr) load_block(*body, def.mutable_body(), 0);
        program.push_back(std::move(def));
      }
    }
    scenario_.programs.push_back(std::move(program));
    scenario_.rank_program.assign(static_cast<size_t>(std::max(scenario_.world, 0)), 0);
  }

  // Recorded `ranks:`: a flat list of operations per rank set.
  void load_ranks(const Entry& entry) {
    recorded_ = true;
    const int32_t world = scenario_.world;
    scenario_.rank_program.assign(static_cast<size_t>(std::max(world, 0)), 0);
    if (!expect_kind(*entry.value, NodeKind::MAP, "a map from ranks to their operations")) return;
    std::vector<int32_t> key_of_rank(static_cast<size_t>(std::max(world, 0)), -1);
    bool all_sets_valid = true;  // else a rank may be missing only for that
    const std::vector<Entry> entries = entries_of(*entry.value);
    int64_t ops = 0;
    for (const Entry& ranks : entries) ops += static_cast<int64_t>(ranks.value->items.size());
    if (ops > limits_.max_ops) {
      error(entry.key_node->loc, "the recorded schedule has " + std::to_string(ops) +
                                     " operations, over the limit of " +
                                     std::to_string(limits_.max_ops) + " (raise it with --max-ops)");
      return;
    }
    scenario_.programs.reserve(entries.size());
    for (size_t k = 0; k < entries.size(); ++k) {
      const Entry& ranks = entries[k];
      const auto program = static_cast<uint32_t>(scenario_.programs.size());
      const size_t before = diagnostics_.size();
      const std::vector<std::pair<int32_t, int32_t>> set = rank_set_of(*ranks.key_node);
      all_sets_valid = all_sets_valid && diagnostics_.size() == before;
      bool reported = false;
      for (const auto& [first, last] : set) {
        for (int32_t rank = first; rank <= last; ++rank) {
          int32_t& key = key_of_rank[static_cast<size_t>(rank)];
          if (key >= 0 && !reported) {
            error(ranks.key_node->loc, "rank " + std::to_string(rank) +
                                           " is listed twice in 'ranks' (keys " +
                                           quoted(entries[static_cast<size_t>(key)].key) + " and " +
                                           quoted(ranks.key) + ")");
            reported = true;
          }
          if (key >= 0) continue;
          key = static_cast<int32_t>(k);
          scenario_.rank_program[static_cast<size_t>(rank)] = program;
        }
      }
      ThreadDef thread{"main", ranks.key_node->loc, {}};
      owner_ = static_cast<int32_t>(program);
      load_block(*ranks.value, thread.mutable_body(), 0);
      scenario_.programs.emplace_back().push_back(std::move(thread));  // no initializer list: it copies
    }
    std::vector<int32_t> missing;
    for (size_t rank = 0; rank < key_of_rank.size() && all_sets_valid; ++rank) {
      if (key_of_rank[rank] < 0) missing.push_back(static_cast<int32_t>(rank));
    }
    if (missing.size() == 1) {
      error(entry.key_node->loc,
            "rank " + std::to_string(missing[0]) + " has no program in 'ranks'");
    } else if (!missing.empty()) {
      error(entry.key_node->loc, "ranks " + format_ranks(missing) + " have no program in 'ranks'");
    }
  }

  // "0", "1-3", "4,6", "0-3, 8": inclusive ranges of ranks in the world.
  std::vector<std::pair<int32_t, int32_t>> rank_set_of(const Node& key) {
    std::vector<std::pair<int32_t, int32_t>> ranges;
    const std::string_view text = key.value;
    const auto bad = [&]() {
      error(key.loc, "invalid rank set " + quoted(text) +
                         " in 'ranks'; expected ranks and ranges such as 0, \"1-3\" or \"4,6\"");
      return std::vector<std::pair<int32_t, int32_t>>{};
    };
    size_t i = 0;
    const auto number = [&]() -> std::optional<int64_t> {
      while (i < text.size() && text[i] == ' ') ++i;
      const size_t begin = i;
      int64_t value = 0;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0 &&
             i - begin < 10) {
        value = value * 10 + (text[i] - '0');
        ++i;
      }
      if (i == begin || (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0)) {
        return std::nullopt;
      }
      while (i < text.size() && text[i] == ' ') ++i;
      return value;
    };
    for (;;) {
      const std::optional<int64_t> first = number();
      if (!first) return bad();
      std::optional<int64_t> last = first;
      if (i < text.size() && text[i] == '-') {
        ++i;
        last = number();
        if (!last) return bad();
      }
      if (*last < *first) {
        error(key.loc, "empty rank range " + quoted(text) + " in 'ranks' (" +
                           std::to_string(*first) + " > " + std::to_string(*last) + ")");
        return {};
      }
      const int32_t world = scenario_.world;
      for (const int64_t end : {*first, *last}) {
        if (world > 0 && end >= world) {
          error(key.loc, "rank " + std::to_string(end) + " in 'ranks' is outside the world (ranks " +
                             world_ranks() + ")");
          return {};
        }
      }
      if (world > 0) ranges.emplace_back(static_cast<int32_t>(*first), static_cast<int32_t>(*last));
      if (i == text.size()) return ranges;
      if (text[i] != ',') return bad();
      ++i;
    }
  }

  // ----- statements

  // Into a nested body (std::vector<Stmt>) or a thread's (StmtList).
  template <typename Body>
  void load_block(const Node& list, Body& out, int32_t depth) {
    if (!expect_kind(list, NodeKind::LIST, "a list of statements")) return;
    out.reserve(out.size() + list.items.size());
    for (const Node* item : list.items) {
      // Built in place: a Stmt is large, and recorded schedules have millions.
      if (!load_statement(*item, depth, out.emplace_back())) out.pop_back();
    }
  }

  bool load_statement(const Node& item, int32_t depth, Stmt& stmt) {
    if (item.kind == NodeKind::SCALAR) {  // `- barrier`: an operation with no arguments
      static const Node nothing;
      return load_headed(Entry{item.value, &item, &nothing}, {}, depth, stmt);
    }
    if (!expect_kind(item, NodeKind::MAP, "a statement")) return false;
    if (item.items.size() == 2 && item.items[0]->kind == NodeKind::SCALAR &&
        item.items[0]->value != "<<") {  // the common case: one key
      return load_headed(Entry{item.items[0]->value, item.items[0], item.items[1]}, {}, depth,
                         stmt);
    }
    const std::vector<Entry> entries = entries_of(item);
    if (entries.empty()) {
      if (item.items.empty()) error(item.loc, "expected a statement, got an empty map");
      return false;
    }
    // The head: the first operation, else the first block statement.
    auto head = std::find_if(entries.begin(), entries.end(),
                             [](const Entry& e) { return find_op(e.key) != nullptr; });
    if (head == entries.end()) {
      head = std::find_if(entries.begin(), entries.end(),
                          [](const Entry& e) { return is_block_statement(e.key); });
    }
    if (head == entries.end()) {
      report_unknown_statement(entries.front());
      return false;
    }
    std::vector<Entry> companions;
    for (const Entry& entry : entries) {
      if (&entry != &*head) companions.push_back(entry);
    }
    return load_headed(*head, companions, depth, stmt);
  }

  void report_unknown_statement(const Entry& entry) {
    std::vector<std::string> valid;
    for (const OpSpec& spec : op_specs()) valid.emplace_back(spec.name);
    valid.insert(valid.end(), BLOCK_STATEMENTS.begin(), BLOCK_STATEMENTS.end());
    error(entry.key_node->loc, unknown_message("operation", entry.key, "", valid));
  }

  // A statement by its head key; `companions` are the item's other keys.
  bool load_headed(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                   Stmt& stmt) {
    const OpSpec* spec = find_op(head.key);
    const bool block = spec == nullptr && is_block_statement(head.key);
    if (spec == nullptr && !block) {
      report_unknown_statement(head);
      return false;
    }
    const SourceLoc at = head.key_node->loc;
    if (in_nccl_group_) {
      if (head.key == "group") {
        error(at, "NCCL groups ('group:') may not be nested");
        return false;
      }
      if (spec == nullptr || !(is_collective(spec->kind) || is_p2p(spec->kind))) {
        error(at, "only communication operations may appear in an NCCL group ('group:'), got " +
                      quoted(head.key));
        return false;
      }
    }
    if (block && recorded_ && head.key != "group") {
      error(at, "control flow is not allowed in a recorded schedule ('ranks:'); use 'program:'");
      return false;
    }
    if (head.key == "call") return load_call(head, companions, stmt);
    if (block) {
      if (depth >= limits_.max_nesting) {
        error(at, "blocks are nested deeper than the limit of " +
                      std::to_string(limits_.max_nesting) + " (raise it with --max-nesting)");
        return false;
      }
      if (head.key == "repeat") return load_repeat(head, companions, depth + 1, stmt);
      if (head.key == "if") return load_if(head, companions, depth + 1, stmt);
      if (head.key == "choose") return load_choose(head, companions, depth + 1, stmt);
      return load_nccl_group(head, companions, depth + 1, stmt);
    }
    for (const Entry& extra : companions) report_stray_key(head, extra);
    return load_op(*spec, head, stmt);
  }

  void report_stray_key(const Entry& head, const Entry& extra) {
    const OpSpec* spec = find_op(head.key);
    if (is_statement_name(extra.key) && (spec == nullptr || !takes_arg(*spec, extra.key))) {
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
                                                 std::vector<std::string> valid) {
    std::map<std::string, const Entry*> found;
    const std::string where = " in " + quoted(head.key);
    valid.emplace_back(head.key);
    for (const Entry& entry : companions) {
      if (known_entries({entry}, valid, where).empty()) continue;
      found[std::string(entry.key)] = &entry;
    }
    return found;
  }

  bool load_repeat(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt) {
    const auto keys = block_keys(head, companions, {"as", "do"});
    stmt.kind = StmtKind::REPEAT;
    stmt.loc = head.key_node->loc;
    bool ok = true;
    if (std::optional<Expr> count = expr_of(*head.value, Unit::NONE, "an integer", scope_)) {
      ok = check_minimum(*count, *head.value, "repeat count", 0);
      if (ok && count->is_constant() && count->value > limits_.max_repeat) {
        error(head.value->loc, "repeat count " + std::to_string(count->value) +
                                   " exceeds the limit of " + std::to_string(limits_.max_repeat) +
                                   " (raise it with --max-repeat)");
        ok = false;
      }
      stmt.set_extra().count = std::move(*count);
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
    return ok;
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
    stmt.set_extra().var_slot = add_slot(*name, "the enclosing loop variable");
    scope_.push_back({*name, stmt.extra().var_slot});
    return true;
  }

  std::string describe_slot(int32_t slot) const {
    if (slot < 0 || static_cast<size_t>(slot) >= slot_kinds_.size()) return "the name";
    return slot_kinds_[static_cast<size_t>(slot)];
  }

  bool load_if(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt) {
    const auto keys = block_keys(head, companions, {"then", "else"});
    stmt.kind = StmtKind::IF;
    stmt.loc = head.key_node->loc;
    std::optional<Expr> cond = expr_of(*head.value, Unit::NONE, "a condition", scope_);
    if (keys.count("then") != 0) {
      load_block(*keys.at("then")->value, stmt.body, depth);
    } else {
      error(head.key_node->loc, "'if' requires 'then'");
    }
    if (keys.count("else") != 0) load_block(*keys.at("else")->value, stmt.set_extra().else_body, depth);
    if (!cond || keys.count("then") == 0) return false;
    stmt.set_extra().cond = std::move(*cond);
    return true;
  }

  bool load_choose(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt) {
    const auto keys = block_keys(head, companions, {"agreed"});
    stmt.kind = StmtKind::CHOOSE;
    stmt.loc = head.key_node->loc;
    bool ok = true;
    if (keys.count("agreed") != 0) {
      if (const std::optional<uint32_t> group = group_of(*keys.at("agreed")->value)) {
        stmt.agreed = true;
        stmt.group = *group;
        group_used_.at(*group) = true;
      } else {
        ok = false;
      }
    }
    if (!expect_kind(*head.value, NodeKind::MAP, "a map of branches {LABEL: [...], ...}")) {
      return false;
    }
    for (const Entry& branch : entries_of(*head.value)) {
      Branch loaded{std::string(branch.key), branch.key_node->loc, {}};
      load_block(*branch.value, loaded.body, depth);
      stmt.branches.push_back(std::move(loaded));
    }
    if (head.value->items.size() < 4) {
      error(head.key_node->loc, "'choose' needs at least two branches, got " +
                                    std::to_string(head.value->items.size() / 2));
      ok = false;
    }
    return ok;
  }

  bool load_call(const Entry& head, const std::vector<Entry>& companions, Stmt& stmt) {
    const auto keys = block_keys(head, companions, {"with"});
    stmt.kind = StmtKind::CALL;
    stmt.loc = head.key_node->loc;
    if (!expect_kind(*head.value, NodeKind::SCALAR, "the name of a define")) return false;
    const std::string_view name = head.value->value;
    std::vector<std::string> names;
    for (const Define& def : scenario_.defines) names.push_back(def.name);
    const auto found = std::find(names.begin(), names.end(), name);
    if (found == names.end()) {
      error(head.value->loc,
            "unknown define " + quoted(name) + did_you_mean(name, names) +
                (names.empty() ? "; the scenario has no 'define'" : "; defines: " + join(names)));
      return false;
    }
    const auto callee = static_cast<size_t>(found - names.begin());
    stmt.set_extra().callee = static_cast<uint32_t>(callee);
    define_called_[callee] = true;
    const Define& def = scenario_.defines[callee];
    std::vector<std::optional<Expr>> args(def.params.size());
    bool ok = true;
    if (keys.count("with") != 0) {
      const Node& with = *keys.at("with")->value;
      if (expect_kind(with, NodeKind::MAP, "a map of arguments")) {
        for (const Entry& arg : entries_of(with)) {
          const auto param = std::find(def.params.begin(), def.params.end(), arg.key);
          if (param == def.params.end()) {
            error(arg.key_node->loc,
                  "unknown argument " + quoted(arg.key) + " for " + quoted(def.name) +
                      did_you_mean(arg.key, def.params) +
                      (def.params.empty() ? "; " + quoted(def.name) + " takes no arguments"
                                          : "; parameters: " + join(def.params)));
            ok = false;
            continue;
          }
          args[static_cast<size_t>(param - def.params.begin())] =
              expr_of(*arg.value, Unit::NONE, "an integer, size or duration", scope_, true);
          ok = ok && args[static_cast<size_t>(param - def.params.begin())].has_value();
        }
      } else {
        ok = false;
      }
    }
    for (size_t p = 0; p < args.size(); ++p) {
      if (args[p]) {
        stmt.set_extra().args.push_back(std::move(*args[p]));
      } else if (ok) {
        error(head.key_node->loc, "call of " + quoted(def.name) + " is missing argument " +
                                      quoted(def.params[p]));
        ok = false;
      }
    }
    return ok;
  }

  bool load_nccl_group(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt) {
    for (const Entry& extra : companions) report_stray_key(head, extra);
    if (!expect_kind(*head.value, NodeKind::LIST, "a list of operations")) return false;
    stmt.kind = StmtKind::NCCL_GROUP;
    stmt.loc = head.key_node->loc;
    in_nccl_group_ = true;
    load_block(*head.value, stmt.body, depth);
    in_nccl_group_ = false;
    return true;
  }

  // ----- operations

  bool load_op(const OpSpec& spec, const Entry& head, Stmt& stmt) {
    stmt.kind = StmtKind::OP;
    stmt.op = spec.kind;
    stmt.loc = head.key_node->loc;
    const Node& value = *head.value;
    switch (spec.form) {
      case OpForm::DURATION:
        if (!load_duration(spec, head, stmt)) return false;
        return true;
      case OpForm::COMPUTE:
        if (value.kind != NodeKind::MAP) {
          if (!load_duration(spec, head, stmt)) return false;
          return true;
        }
        break;
      case OpForm::HANDLE: {
        if (value.kind == NodeKind::NUL) {
          error(stmt.loc, quoted(spec.name) + " requires a handle (the 'async' of an operation)");
          return false;
        }
        if (!expect_kind(value, NodeKind::SCALAR, "a handle") || !check_name(value, "handle", false)) {
          return false;
        }
        stmt.handle = scenario_.names->intern(value.value);
        waits_.push_back({value.value, value.loc, owner_});
        return true;
      }
      case OpForm::SYNC:
        if (value.kind == NodeKind::NUL) return true;
        if (!expect_kind(value, NodeKind::SCALAR, "a stream name") ||
            !check_name(value, "stream", false)) {
          return false;
        }
        stmt.stream = scenario_.names->intern(value.value);
        return true;
      case OpForm::NEW_GROUP: {
        const auto found = new_group_of_.find(&value);
        if (found == new_group_of_.end()) {
          error(stmt.loc, "'new_group' requires arguments 'name' and 'ranks'");
          return false;
        }
        if (found->second < 0) return false;
        stmt.new_group = static_cast<uint32_t>(found->second);
        stmt.group = 0;
        return true;
      }
      case OpForm::BARE:
        if (value.kind != NodeKind::NUL) {
          error(value.loc, quoted(spec.name) + " takes no value");
          return false;
        }
        return true;
      case OpForm::ARGS: break;
    }
    std::array<const Node*, ARG_NAMES.size()> args{};
    // After an unknown argument (likely a misspelt required one) missing ones go unreported.
    const bool all_known = collect_args(spec, head, args);
    bool ok = all_known;
    for (Arg required : spec.required) {
      if (!all_known || args[static_cast<size_t>(required)] != nullptr) continue;
      error(head.key_node->loc,
            quoted(spec.name) + " requires argument " + quoted(arg_name(required)));
      ok = false;
    }
    for (Arg arg : spec.args) {
      if (const Node* node = args[static_cast<size_t>(arg)]) ok = load_arg(arg, *node, stmt) && ok;
    }
    if (stmt.op == OpKind::BARRIER) stmt.size = Expr::constant(dtype_bytes(stmt.dtype), stmt.loc);
    if (!ok) return false;
    if (is_collective(stmt.op) || is_p2p(stmt.op)) group_used_.at(stmt.group) = true;
    if (!stmt.handle.empty()) {
      asyncs_.push_back({args[static_cast<size_t>(Arg::ASYNC)]->value,
                         args[static_cast<size_t>(Arg::ASYNC)]->loc, owner_});
    }
    return true;
  }

  bool load_duration(const OpSpec& spec, const Entry& head, Stmt& stmt) {
    if (head.value->kind == NodeKind::NUL) {
      error(head.key_node->loc, quoted(spec.name) + " requires a duration");
      return false;
    }
    return load_duration_value(*head.value, stmt);
  }

  bool load_duration_value(const Node& value, Stmt& stmt) {
    std::optional<Expr> duration = expr_of(value, Unit::NANOSECONDS, "a duration", scope_);
    if (!duration || !check_minimum(*duration, value, "duration", 0)) return false;
    stmt.duration = std::move(*duration);
    return true;
  }

  // The argument nodes of an op: from a map, or the group of the short form `op: GROUP`.
  bool collect_args(const OpSpec& spec, const Entry& head,
                    std::array<const Node*, ARG_NAMES.size()>& args) {
    const Node& value = *head.value;
    if (value.kind == NodeKind::NUL) return true;
    if (value.kind == NodeKind::SCALAR) {
      args[static_cast<size_t>(Arg::GROUP)] = &value;
      return true;
    }
    if (value.kind != NodeKind::MAP) {
      error(value.loc, "expected a map of arguments or a group name, got " + type_name(value));
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i + 1 < value.items.size(); i += 2) {  // as entries_of, without allocating
      const Node& key = *value.items[i];
      if (!accept_key(value, i)) continue;
      const std::optional<Arg> arg = find_arg(spec, Entry{key.value, &key, value.items[i + 1]});
      if (arg) args[static_cast<size_t>(*arg)] = value.items[i + 1];
      ok = ok && arg.has_value();
    }
    return ok;
  }

  // Whether the key at map.items[i] is a string seen first there; reports it otherwise.
  bool accept_key(const Node& map, size_t i) {
    const Node& key = *map.items[i];
    if (key.kind != NodeKind::SCALAR) {
      error(key.loc, "expected a string key, got " + type_name(key));
      return false;
    }
    if (key.value == "<<") {
      error(key.loc, "yaml merge keys ('<<') are not supported");
      return false;
    }
    for (size_t j = 0; j < i; j += 2) {
      const Node& seen = *map.items[j];
      if (seen.kind != NodeKind::SCALAR || seen.value != key.value) continue;
      error(key.loc, "duplicate key " + quoted(key.value) + " (first given at line " +
                         std::to_string(seen.loc.line) + ")");
      return false;
    }
    return true;
  }

  std::optional<Arg> find_arg(const OpSpec& spec, const Entry& entry) {
    for (const ArgName& candidate : ARG_NAMES) {
      if (candidate.name != entry.key) continue;
      if (std::find(spec.args.begin(), spec.args.end(), candidate.arg) != spec.args.end()) {
        return candidate.arg;
      }
      error(entry.key_node->loc, quoted(spec.name) + " takes no argument " + quoted(entry.key) +
                                     "; valid arguments: " + join(valid_args(spec)));
      return std::nullopt;
    }
    const std::vector<std::string> valid = valid_args(spec);
    error(entry.key_node->loc, "unknown argument " + quoted(entry.key) + " for " +
                                   quoted(spec.name) + did_you_mean(entry.key, valid) +
                                   "; valid arguments: " + join(valid));
    return std::nullopt;
  }

  static std::vector<std::string> valid_args(const OpSpec& spec) {
    std::vector<std::string> valid;
    for (Arg arg : spec.args) valid.emplace_back(arg_name(arg));
    return sorted(valid);
  }

  bool load_arg(Arg arg, const Node& value, Stmt& stmt) {
    switch (arg) {
      case Arg::GROUP: {
        const std::optional<uint32_t> group = group_of(value);
        if (group) stmt.group = *group;
        return group.has_value();
      }
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
        stmt.set_extra().root = std::move(*root);
        return true;
      }
      case Arg::TO:
      case Arg::FROM: return load_peer(value, stmt);
      case Arg::TAG: {
        std::optional<std::string> tag = string_of(value);
        if (tag) stmt.tag = scenario_.names->intern(*tag);
        return tag.has_value();
      }
      case Arg::STREAM:
        if (!expect_kind(value, NodeKind::SCALAR, "a stream name") ||
            !check_name(value, "stream", false)) {
          return false;
        }
        stmt.stream = scenario_.names->intern(value.value);
        return true;
      case Arg::ASYNC:
        if (!expect_kind(value, NodeKind::SCALAR, "a handle name") ||
            !check_name(value, "handle", false)) {
          return false;
        }
        stmt.handle = scenario_.names->intern(value.value);
        return true;
      case Arg::DURATION: return load_duration_value(value, stmt);
    }
    return false;
  }

  bool load_dtype(const Node& value, Stmt& stmt) {
    if (!expect_kind(value, NodeKind::SCALAR, "a string")) return false;
    if (const std::optional<DType> dtype = parse_dtype(value.value)) {
      stmt.dtype = *dtype;
      return true;
    }
    error(value.loc, invalid_value_message(value.value, "dtype", dtype_spellings()));
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

  // ----- handles: every `wait: H` needs an `async: H` in its program (or a define)

  void check_handles() {
    std::set<std::pair<int32_t, std::string_view>> asyncs;
    std::set<std::string_view> any_async;
    for (const HandleUse& use : asyncs_) {
      asyncs.emplace(use.owner, use.name);
      any_async.insert(use.name);
    }
    for (const HandleUse& use : waits_) {
      if (asyncs.count({use.owner, use.name}) != 0 || asyncs.count({-1, use.name}) != 0 ||
          (use.owner == -1 && any_async.count(use.name) != 0)) {
        continue;
      }
      std::vector<std::string> names;
      for (const auto& [owner, name] : asyncs) {
        if (owner == use.owner || owner == -1 || use.owner == -1) names.emplace_back(name);
      }
      names = sorted(names);
      error(use.loc, "unknown handle " + quoted(use.name) + did_you_mean(use.name, names) +
                         (names.empty() ? "; no operation has 'async'" : "; handles: " + join(names)));
    }
  }

  // ----- warnings

  void warn_unused() {
    std::vector<bool> used;
    if (!scenario_.params.empty()) {
      for (const RankProgram& program : scenario_.programs) {
        for (const ThreadDef& thread : program) mark_used(thread.body(), used);
      }
      for (const Define& def : scenario_.defines) mark_used(def.body, used);
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
    for (size_t i = 0; i < scenario_.defines.size(); ++i) {
      if (define_called_[i]) continue;
      warning(scenario_.defines[i].loc,
              "define " + quoted(scenario_.defines[i].name) + " is never called");
    }
    std::set<std::pair<int32_t, std::string_view>> waits;
    std::set<std::string_view> any_wait;
    for (const HandleUse& use : waits_) {
      waits.emplace(use.owner, use.name);
      any_wait.insert(use.name);
    }
    std::set<std::pair<int32_t, std::string_view>> warned;
    for (const HandleUse& use : asyncs_) {
      if (waits.count({use.owner, use.name}) != 0 || waits.count({-1, use.name}) != 0 ||
          (use.owner == -1 && any_wait.count(use.name) != 0) ||
          !warned.emplace(use.owner, use.name).second) {
        continue;
      }
      warning(use.loc, "handle " + quoted(use.name) + " is never waited for (no 'wait: " +
                           std::string(use.name) + "')");
    }
  }

  static void mark_used(std::span<const Stmt> body, std::vector<bool>& used) {
    for (const Stmt& stmt : body) {
      const StmtExtra& extra = stmt.extra();
      for (const Expr* expr :
           {&stmt.size, &stmt.peer, &extra.root, &stmt.duration, &extra.count, &extra.cond}) {
        mark_used_slots(*expr, used);
      }
      for (const Expr& arg : extra.args) mark_used_slots(arg, used);
      mark_used(stmt.body, used);
      mark_used(extra.else_body, used);
      for (const Branch& branch : stmt.branches) mark_used(branch.body, used);
    }
  }

  SourceText source_;
  std::string_view text_;
  std::string path_;
  std::span<const ParamOverride> overrides_;
  LoadLimits limits_;
  std::vector<Diagnostic> diagnostics_;
  Scenario scenario_;
  Tree tree_;
  std::vector<Entry> top_;             // the known top-level keys
  SourceLoc root_loc_;
  std::string_view program_key_;       // "program", "threads" or "ranks"
  SourceLoc world_loc_;
  const Node* world_node_ = nullptr;
  bool mesh_given_ = false;
  int32_t mesh_world_ = 0;             // the product of the mesh sizes; 0 when invalid
  std::vector<std::string> slot_kinds_;  // per slot: "the parameter", ...
  std::vector<ExprName> base_scope_;   // rank, world, params, mesh variables
  std::vector<ExprName> scope_;        // names in scope while loading a body
  std::vector<bool> group_used_;       // by group index
  std::vector<bool> define_called_;    // by define index
  std::map<const Node*, int32_t> new_group_of_;       // a new_group's value -> group, -1: invalid
  std::map<size_t, const Node*> new_group_owner_;     // group -> the recorded program creating it
  bool recorded_ = false;              // loading `ranks:`
  bool in_nccl_group_ = false;
  int32_t owner_ = 0;                  // the program being loaded; -1: a define
  std::vector<HandleUse> asyncs_;
  std::vector<HandleUse> waits_;
  std::array<std::unordered_map<std::string_view, int64_t>, 3> literal_cache_;  // by Unit
};

}  // namespace

std::optional<std::string> read_text_file(const std::string& path, int64_t max_bytes, std::string& error) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    error = std::generic_category().message(errno);
    return std::nullopt;
  }
  std::string text;
  size_t expected = 0;
  if (std::fseek(file, 0, SEEK_END) == 0) {
    const long size = std::ftell(file);
    if (size > 0 && size <= max_bytes) expected = static_cast<size_t>(size);
    std::rewind(file);
  }
  // Read straight into the string (the file's size first, then in chunks while it grows or
  // when its size is unknown), so that a large file is copied once.
  size_t chunk = expected + 1;
  while (static_cast<int64_t>(text.size()) <= max_bytes) {
    const size_t had = text.size();
    text.resize(had + chunk);
    const size_t got = std::fread(text.data() + had, 1, chunk, file);
    text.resize(had + got);
    if (got < chunk) break;
    chunk = size_t{1} << 16;
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

namespace {

// Keeps the first MAX_DIAGNOSTICS_SHOWN errors and warnings; the rest become one count each.
void bound_diagnostics(std::vector<Diagnostic>& diagnostics, const std::string& path) {
  size_t errors = 0, warnings = 0, kept = 0;
  for (Diagnostic& d : diagnostics) {
    size_t& seen = d.severity == Severity::ERROR ? errors : warnings;
    if (++seen > MAX_DIAGNOSTICS_SHOWN) continue;
    if (&diagnostics[kept] != &d) diagnostics[kept] = std::move(d);
    ++kept;
  }
  if (kept == diagnostics.size()) return;
  diagnostics.resize(kept);
  for (const auto& [count, severity, noun] : {std::tuple{errors, Severity::ERROR, "errors"},
                                              std::tuple{warnings, Severity::WARNING, "warnings"}}) {
    if (count > MAX_DIAGNOSTICS_SHOWN) {
      diagnostics.push_back({path, {}, severity, fmt::format("{} more {} not shown ({} in all)",
                                                             count - MAX_DIAGNOSTICS_SHOWN, noun, count)});
    }
  }
}

}  // namespace

LoadResult load_text_with(SourceText text, const std::string& path, const TextLoad& load) {
  // Scenarios and traces are UTF-8 (YAML and JSON require it): a file with an invalid byte is
  // refused here, so that no name, key or message made from it reaches a report (docs/scenario-language.md).
  if (const size_t bad = invalid_utf8_at(text.view()); bad != std::string_view::npos) [[unlikely]] {
    const std::string_view view = text.view();
    const size_t line_start = view.rfind('\n', bad == 0 ? std::string_view::npos : bad - 1);
    const size_t begin = line_start == std::string_view::npos ? 0 : line_start + 1;
    const size_t line_end = std::min(view.find('\n', bad), view.size());
    LoadResult result;
    result.text = std::string(view.substr(0, line_end));  // through the line shown
    const auto line = static_cast<uint32_t>(std::count(view.begin(), view.begin() + static_cast<ptrdiff_t>(begin), '\n') + 1);
    const auto col = static_cast<uint32_t>(bad - begin + 1);
    result.diagnostics.push_back({path, {line, col}, Severity::ERROR,
                                  fmt::format("invalid UTF-8 byte 0x{:02X}: a scenario or trace is UTF-8 text",
                                              static_cast<uint8_t>(view[bad]))});
    return result;
  }
  try {
    LoadResult result = load(std::move(text));
    bound_diagnostics(result.diagnostics, path);
    return result;
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: still a diagnostic, never a throw
    LoadResult result;
    result.diagnostics.push_back({path, {}, Severity::ERROR, std::string("cannot load: ") + e.what()});
    return result;
  }
}

LoadResult load_file_with(const std::string& path, int64_t max_bytes, const TextLoad& load) {
  // A regular file within the bound is mapped, not read: its pages are the page cache's, so a
  // large input costs no copy and no zeroed memory, and the scenario keeps the mapping as its
  // text. Anything else is read, with the same diagnostics.
  InputFile file;
  if (file.map(path, max_bytes)) return load_text_with(SourceText(std::move(file)), path, load);
  std::string problem;
  std::optional<std::string> text = read_text_file(path, max_bytes, problem);
  if (!text) {
    LoadResult result;
    result.diagnostics.push_back({path, {}, Severity::ERROR, "cannot read file: " + problem});
    return result;
  }
  return load_text_with(SourceText(std::move(*text)), path, load);
}

LoadResult load_scenario_file(const std::string& path, std::span<const ParamOverride> overrides,
                              const LoadLimits& limits) {
  return load_file_with(path, limits.max_file_bytes, [&](SourceText&& text) {
    return Loader(std::move(text), path, overrides, limits).run();
  });
}

LoadResult load_scenario_text(std::string_view text, const std::string& path,
                              std::span<const ParamOverride> overrides, const LoadLimits& limits) {
  return load_text_with(SourceText(std::string(text)), path, [&](SourceText&& owned) {
    return Loader(std::move(owned), path, overrides, limits).run();
  });
}

}  // namespace lockstep::sim
