// Scenario YAML -> Scenario: the public entry points (files read or mapped, diagnostics bounded),
// and the Loader's top level: parsing with yaml-cpp, the top-level keys, expressions.
#include "sim/loader.h"

#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <map>
#include <span>
#include <sstream>
#include <system_error>
#include <tuple>

#include "sim/input_file.h"
#include "sim/utf8.h"
#include "sim/yaml_loader.h"
#include "sim/yaml_syntax.h"

namespace lockstep::sim {

namespace yaml {

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

LoadResult Loader::run() {
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

const std::vector<Loader::TopLevelKey>& Loader::top_level_keys() {
  static const std::vector<TopLevelKey> keys = {
      {"scenario", true, &Loader::load_name},
      {"description", false, &Loader::load_description},
      {"source", false, &Loader::load_source},
      {"expect", false, &Loader::load_expect},
      // Parameters (and -D) come first: the world and the mesh sizes may be expressions over them.
      {"params", false, &Loader::load_params, &Loader::apply_overrides},
      {"mesh", false, &Loader::load_mesh},
      {"world", false, &Loader::load_world, &Loader::finish_world},
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

bool Loader::is_program_key(std::string_view key) {
  return key == "program" || key == "threads" || key == "ranks";
}

void Loader::error(SourceLoc at, std::string message) {
  diagnostics_.push_back({path_, at, Severity::ERROR, std::move(message)});
}

void Loader::warning(SourceLoc at, std::string message) {
  diagnostics_.push_back({path_, at, Severity::WARNING, std::move(message)});
}

bool Loader::has_error() const {
  return std::any_of(diagnostics_.begin(), diagnostics_.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::ERROR; });
}

void Loader::finish_diagnostics() {
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

const Node* Loader::parse_yaml() {
  const uint64_t max_weight = std::max<uint64_t>(uint64_t{1} << 20, 2 * uint64_t{text_.size()});
  TreeBuilder builder(tree_, max_weight);
  try {
    std::istringstream stream{std::string(text_)};
    YAML::Parser parser(stream);
    while (builder.documents.size() < 2 && parser.HandleNextDocument(builder)) {
    }
  } catch (const YAML::Exception& e) {
    const SourceLoc at = to_loc(e.mark);
    error(at, yaml_syntax_message(lower_first(e.msg), text_, at));
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

bool Loader::expect_kind(const Node& node, NodeKind kind, std::string_view what) {
  if (node.kind == kind) return true;
  error(node.loc, "expected " + std::string(what) + ", got " + type_name(node));
  return false;
}

std::vector<Entry> Loader::entries_of(const Node& map) {
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

std::vector<Entry> Loader::known_entries(const std::vector<Entry>& entries,
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

std::optional<std::string> Loader::string_of(const Node& node) {
  if (!expect_kind(node, NodeKind::SCALAR, "a string")) return std::nullopt;
  return std::string(node.value);
}

std::pair<SourceLoc, bool> Loader::scalar_start(const Node& node) const {
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

Node Loader::scalar_part(const Node& node, size_t offset, size_t length) const {
  const auto [loc, exact] = scalar_start(node);
  Node part;
  part.kind = NodeKind::SCALAR;
  part.value = node.value.substr(offset, length);
  part.loc = loc;
  part.pos = text_.size();  // no place in the text: scalar_start gives loc as it is
  if (exact) {
    part.pos = node.pos + (text_[node.pos] == '"' || text_[node.pos] == '\'' ? 1 : 0) + offset;
    part.loc.col += static_cast<uint32_t>(offset);
  }
  return part;
}

bool Loader::is_plain_literal(std::string_view text) {
  return !text.empty() && text[0] >= '0' && text[0] <= '9' &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '.';
         });
}

std::optional<Expr> Loader::expr_of(const Node& node, Unit unit, std::string_view what,
                            std::span<const ExprName> names, bool any_unit) {
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

std::optional<int64_t> Loader::value_of_params(const Node& node, std::string_view what, bool with_world) {
  std::vector<ExprName> names;
  std::vector<int64_t> env;
  for (const Param& param : scenario_.params) {
    names.push_back({param.name, static_cast<int32_t>(env.size())});
    env.push_back(param.value);
  }
  if (with_world) {
    names.push_back({"world", static_cast<int32_t>(env.size())});
    env.push_back(scenario_.world);
  }
  const std::optional<Expr> expr = expr_of(node, Unit::NONE, what, names);
  if (!expr) return std::nullopt;
  std::vector<bool> used;
  mark_used_slots(*expr, used);
  used.resize(std::min(used.size(), scenario_.params.size()));
  params_in_sizes_.resize(std::max(params_in_sizes_.size(), used.size()));
  for (size_t i = 0; i < used.size(); ++i) params_in_sizes_[i] = params_in_sizes_[i] || used[i];
  try {
    return eval_expr(*expr, env);
  } catch (const EvalError& e) {
    error(e.loc, e.what());
    return std::nullopt;
  }
}

std::optional<int64_t> Loader::size_of_params(const Node& node, std::string_view name) {
  const std::optional<int64_t> size = value_of_params(node, "an integer or an expression over the parameters", false);
  if (!size) return std::nullopt;
  const int64_t value = *size;
  if (value < 1) {
    error(node.loc, std::string(name) + " must be positive, got " + std::to_string(value));
    return std::nullopt;
  }
  return value;
}

std::optional<int64_t> Loader::constant_of(const Node& node, Unit unit, std::string_view what,
                                   std::string_view name, int64_t min) {
  const std::optional<Expr> expr = expr_of(node, unit, what, {});
  if (!expr) return std::nullopt;
  if (!check_minimum(*expr, node, name, min)) return std::nullopt;
  return expr->value;
}

bool Loader::check_minimum(const Expr& expr, const Node& node, std::string_view name, int64_t min) {
  if (!expr.is_constant() || expr.value >= min) return true;
  const std::string bound = min == 0 ? " must not be negative" : " must be positive";
  error(node.loc, std::string(name) + bound + ", got " + std::to_string(expr.value));
  return false;
}

const Entry* Loader::top(std::string_view name) const {
  const auto found =
      std::find_if(top_.begin(), top_.end(), [&](const Entry& e) { return e.key == name; });
  return found == top_.end() ? nullptr : &*found;
}

void Loader::load_top_level(const Node& root) {
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

void Loader::choose_program() {
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

void Loader::load_name(const Entry& entry) {
  if (auto name = string_of(*entry.value)) {
    if (name->empty()) error(entry.value->loc, "the scenario name is empty");
    scenario_.name = std::move(*name);
  }
}

void Loader::load_description(const Entry& entry) {
  if (auto text = string_of(*entry.value)) scenario_.description = std::move(*text);
}

void Loader::load_source(const Entry& entry) {
  if (auto text = string_of(*entry.value)) scenario_.source_url = std::move(*text);
}

void Loader::load_expect(const Entry& entry) {
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

std::string Loader::invalid_value_message(std::string_view value, std::string_view key,
                                         const std::vector<std::string>& valid) {
  return "invalid value " + quoted(value) + " for " + quoted(key) + did_you_mean(value, valid) +
         "; valid values: " + join(sorted(valid));
}

std::string Loader::world_limit_hint() const {
  return " (raise it with --max-world)";
}

void Loader::load_world(const Entry& entry) {
  world_loc_ = entry.key_node->loc;
  world_node_ = entry.value;
  const std::optional<int64_t> world = size_of_params(*entry.value, "world");
  if (!world) return;
  if (*world > limits_.max_world) {
    error(entry.value->loc, "world " + std::to_string(*world) + " exceeds the limit of " +
                                std::to_string(limits_.max_world) + " ranks" +
                                world_limit_hint());
    return;
  }
  scenario_.world = static_cast<int32_t>(*world);
}

}  // namespace yaml

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
    return yaml::Loader(std::move(text), path, overrides, limits).run();
  });
}

LoadResult load_scenario_text(std::string_view text, const std::string& path,
                              std::span<const ParamOverride> overrides, const LoadLimits& limits) {
  return load_text_with(SourceText(std::string(text)), path, [&](SourceText&& owned) {
    return yaml::Loader(std::move(owned), path, overrides, limits).run();
  });
}

}  // namespace lockstep::sim
