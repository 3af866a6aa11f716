// The scenario loader: defines, programs (`program`, `threads`, `ranks`), statements and
// operations with their arguments.
#include "sim/yaml_loader.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>

namespace lockstep::sim::yaml {

void Loader::load_defines(const Entry& entry) {
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

void Loader::declare_define_params(const Node& list, Define& def) {
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

void Loader::load_program(const Entry& entry) {
  ThreadDef thread{"main", entry.key_node->loc, {}};
  owner_ = 0;
  load_block(*entry.value, thread.mutable_body(), 0);
  scenario_.programs.emplace_back().push_back(std::move(thread));  // no initializer list: it copies
  scenario_.rank_program.assign(static_cast<size_t>(std::max(scenario_.world, 0)), 0);
}

void Loader::load_threads(const Entry& entry) {
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

void Loader::load_ranks(const Entry& entry) {
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

std::vector<std::pair<int32_t, int32_t>> Loader::rank_set_of(const Node& key) {
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

template <typename Body>
void Loader::load_block(const Node& list, Body& out, int32_t depth) {
  if (!expect_kind(list, NodeKind::LIST, "a list of statements")) return;
  out.reserve(out.size() + list.items.size());
  for (const Node* item : list.items) {
    // Built in place: a Stmt is large, and recorded schedules have millions.
    if (!load_statement(*item, depth, out.emplace_back())) out.pop_back();
  }
}

bool Loader::load_statement(const Node& item, int32_t depth, Stmt& stmt) {
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

void Loader::report_unknown_statement(const Entry& entry) {
  std::vector<std::string> valid;
  for (const OpInfo& op : OPS) {
    if (op.kind != OpKind::INIT) valid.emplace_back(op.name);
  }
  valid.insert(valid.end(), BLOCK_STATEMENTS.begin(), BLOCK_STATEMENTS.end());
  error(entry.key_node->loc, unknown_message("operation", entry.key, "", valid));
}

bool Loader::load_headed(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                 Stmt& stmt) {
  const OpInfo* spec = find_op(head.key);
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

void Loader::report_stray_key(const Entry& head, const Entry& extra) {
  const OpInfo* spec = find_op(head.key);
  if (is_statement_name(extra.key) && (spec == nullptr || !takes_arg(*spec, extra.key))) {
    error(extra.key_node->loc, "one statement per list item: " + quoted(extra.key) +
                                   " needs its own '- ' (after " + quoted(head.key) + ")");
  } else {
    error(extra.key_node->loc, "unexpected key " + quoted(extra.key) + " next to " +
                                   quoted(head.key) + "; arguments go under the operation");
  }
}

std::map<std::string, const Entry*> Loader::block_keys(const Entry& head,
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

bool Loader::load_repeat(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
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

bool Loader::declare_loop_variable(const Node& node, Stmt& stmt) {
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

std::string Loader::describe_slot(int32_t slot) const {
  if (slot < 0 || static_cast<size_t>(slot) >= slot_kinds_.size()) return "the name";
  return slot_kinds_[static_cast<size_t>(slot)];
}

bool Loader::load_if(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
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

bool Loader::load_choose(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
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

bool Loader::load_call(const Entry& head, const std::vector<Entry>& companions, Stmt& stmt) {
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

bool Loader::load_nccl_group(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
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

bool Loader::load_op(const OpInfo& spec, const Entry& head, Stmt& stmt) {
  stmt.kind = StmtKind::OP;
  stmt.op = spec.kind;
  stmt.loc = head.key_node->loc;
  const Node& value = *head.value;
  switch (spec.form) {
    case YamlForm::DURATION:
      if (!load_duration(spec, head, stmt)) return false;
      return true;
    case YamlForm::COMPUTE:
      if (value.kind != NodeKind::MAP) {
        if (!load_duration(spec, head, stmt)) return false;
        return true;
      }
      break;
    case YamlForm::HANDLE: {
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
    case YamlForm::SYNC:
      if (value.kind == NodeKind::NUL) return true;
      if (!expect_kind(value, NodeKind::SCALAR, "a stream name") ||
          !check_name(value, "stream", false)) {
        return false;
      }
      stmt.stream = scenario_.names->intern(value.value);
      return true;
    case YamlForm::NEW_GROUP: {
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
    case YamlForm::BARE: {
      if (value.kind == NodeKind::NUL) return true;
      if (value.kind != NodeKind::MAP) {
        error(value.loc, quoted(spec.name) + " takes no value, or {queued_work: abort}");
        return false;
      }
      // `{queued_work: abort}`: ending before the GPU work queued so far is meant (no warning,
      // sim/queued_work.h); it is what `exit` and `crash` do anyway.
      bool ok = true;
      for (const Entry& entry : known_entries(entries_of(value), {"queued_work"}, " in " + quoted(spec.name))) {
        if (entry.value->kind != NodeKind::SCALAR || entry.value->value != "abort") {
          error(entry.value->loc, "invalid value for 'queued_work'; valid values: abort");
          ok = false;
          continue;
        }
        stmt.aborts_queued = true;
      }
      return ok;
    }
    case YamlForm::ARGS: break;
  }
  std::array<const Node*, FIELD_COUNT> args{};
  // After an unknown argument (likely a misspelt required one) missing ones go unreported.
  const bool all_known = collect_args(spec, head, args);
  bool ok = all_known;
  for (size_t f = 0; f < FIELD_COUNT; ++f) {
    if ((spec.required & field_bit(static_cast<Field>(f))) == 0) continue;
    if (!all_known || args[f] != nullptr) continue;
    error(head.key_node->loc,
          quoted(spec.name) + " requires argument " + quoted(arg_name(static_cast<Field>(f))));
    ok = false;
  }
  for (size_t f = 0; f < FIELD_COUNT; ++f) {
    if (const Node* node = args[f]) ok = load_arg(static_cast<Field>(f), *node, stmt) && ok;
  }
  if (stmt.op == OpKind::BARRIER) stmt.size = Expr::constant(dtype_bytes(stmt.dtype), stmt.loc);
  if (!ok) return false;
  if (is_collective(stmt.op) || is_p2p(stmt.op)) group_used_.at(stmt.group) = true;
  if (!stmt.handle.empty()) {
    asyncs_.push_back({args[static_cast<size_t>(Field::ASYNC)]->value,
                       args[static_cast<size_t>(Field::ASYNC)]->loc, owner_});
  }
  return true;
}

bool Loader::load_duration(const OpInfo& spec, const Entry& head, Stmt& stmt) {
  if (head.value->kind == NodeKind::NUL) {
    error(head.key_node->loc, quoted(spec.name) + " requires a duration");
    return false;
  }
  return load_duration_value(*head.value, stmt);
}

bool Loader::load_duration_value(const Node& value, Stmt& stmt) {
  std::optional<Expr> duration = expr_of(value, Unit::NANOSECONDS, "a duration", scope_);
  if (!duration || !check_minimum(*duration, value, "duration", 0)) return false;
  stmt.duration = std::move(*duration);
  return true;
}

bool Loader::collect_args(const OpInfo& spec, const Entry& head,
                  std::array<const Node*, FIELD_COUNT>& args) {
  const Node& value = *head.value;
  if (value.kind == NodeKind::NUL) return true;
  if (value.kind == NodeKind::SCALAR) {
    args[static_cast<size_t>(Field::GROUP)] = &value;
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
    const std::optional<Field> arg = find_arg(spec, Entry{key.value, &key, value.items[i + 1]});
    if (arg) args[static_cast<size_t>(*arg)] = value.items[i + 1];
    ok = ok && arg.has_value();
  }
  return ok;
}

bool Loader::accept_key(const Node& map, size_t i) {
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

std::optional<Field> Loader::find_arg(const OpInfo& spec, const Entry& entry) {
  for (size_t f = 0; f < FIELD_COUNT; ++f) {
    if (FIELD_NAMES[f].yaml != entry.key) continue;
    if ((yaml_fields(spec) & field_bit(static_cast<Field>(f))) != 0) return static_cast<Field>(f);
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

std::vector<std::string> Loader::valid_args(const OpInfo& spec) {
  std::vector<std::string> valid;
  for (size_t f = 0; f < FIELD_COUNT; ++f) {
    if ((yaml_fields(spec) & field_bit(static_cast<Field>(f))) != 0) valid.emplace_back(FIELD_NAMES[f].yaml);
  }
  return sorted(valid);
}

bool Loader::load_arg(Field arg, const Node& value, Stmt& stmt) {
  switch (arg) {
    case Field::GROUP: {
      const std::optional<uint32_t> group = group_of(value);
      if (group) stmt.group = *group;
      return group.has_value();
    }
    case Field::DTYPE: return load_dtype(value, stmt);
    case Field::SIZE: {
      std::optional<Expr> size = expr_of(value, Unit::BYTES, "a size", scope_);
      if (!size || !check_minimum(*size, value, "size", 0)) return false;
      stmt.size = std::move(*size);
      return true;
    }
    case Field::ROOT: {
      std::optional<Expr> root = expr_of(value, Unit::NONE, "a rank", scope_);
      if (!root) return false;
      check_member(*root, value, stmt.group);
      stmt.has_root = true;
      stmt.set_extra().root = std::move(*root);
      return true;
    }
    case Field::TO:
    case Field::FROM: return load_peer(value, stmt);
    case Field::TAG: {
      std::optional<std::string> tag = string_of(value);
      if (tag) stmt.tag = scenario_.names->intern(*tag);
      return tag.has_value();
    }
    case Field::STREAM:
      if (!expect_kind(value, NodeKind::SCALAR, "a stream name") ||
          !check_name(value, "stream", false)) {
        return false;
      }
      stmt.stream = scenario_.names->intern(value.value);
      return true;
    case Field::ASYNC:
      if (!expect_kind(value, NodeKind::SCALAR, "a handle name") ||
          !check_name(value, "handle", false)) {
        return false;
      }
      stmt.handle = scenario_.names->intern(value.value);
      return true;
    case Field::DURATION: return load_duration_value(value, stmt);
    case Field::SEND_SPLITS: return load_splits(value, stmt, stmt.set_extra().send_splits);
    case Field::RECV_SPLITS: return load_splits(value, stmt, stmt.set_extra().recv_splits);
    case Field::HANDLE:
    case Field::NAME:
    case Field::RANKS: break;  // read by their statements' forms
  }
  return false;
}

bool Loader::load_splits(const Node& value, const Stmt& stmt, std::vector<Expr>& out) {
  if (!expect_kind(value, NodeKind::LIST, "a list of sizes, one per member of the group")) return false;
  // Where every communicator of the group has the same size, a list of another length is
  // wrong on every rank; the interpreter checks the others on the rank that issues the op.
  const GroupDef& group = scenario_.groups.at(stmt.group);
  const size_t members = group.comms.empty() ? 0 : group.comms.front().size();
  const bool uniform = std::all_of(group.comms.begin(), group.comms.end(),
                                   [&](const std::vector<int32_t>& comm) { return comm.size() == members; });
  if (uniform && value.items.size() != members) {
    error(value.loc, "expected " + std::to_string(members) + " sizes, one per member of group " +
                         quoted(group.name) + ", got " + std::to_string(value.items.size()));
    return false;
  }
  bool ok = true;
  out.clear();
  for (const Node* item : value.items) {
    std::optional<Expr> size = expr_of(*item, Unit::BYTES, "a size", scope_);
    if (!size || !check_minimum(*size, *item, "size", 0)) {
      ok = false;
      continue;
    }
    out.push_back(std::move(*size));
  }
  return ok;
}

bool Loader::load_dtype(const Node& value, Stmt& stmt) {
  if (!expect_kind(value, NodeKind::SCALAR, "a string")) return false;
  if (const std::optional<DType> dtype = parse_dtype(value.value)) {
    stmt.dtype = *dtype;
    return true;
  }
  error(value.loc, dtype_error(value.value));
  return false;
}

bool Loader::load_peer(const Node& value, Stmt& stmt) {
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

}  // namespace lockstep::sim::yaml
