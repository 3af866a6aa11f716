// The trace loader: operation lines read by the JSON reader (those the fast path does not take),
// their arguments, NCCL group markers and waits.
#include "sim/trace_loader.h"

#include <algorithm>

namespace lockstep::sim::trace {

bool TraceLoader::load_op_line(std::string_view text) {
  // (load tried fast_op_line on this line already.)
  if (!reader_.read_object(text, members_)) {
    error({line_, reader_.error_col()}, reader_.error_message());
    return true;
  }
  if (++ops_ > limits_.max_ops) {
    error({line_, 1}, "trace exceeds the limit of " + std::to_string(limits_.max_ops) +
                          " operations (raise it with --max-ops)");
    return false;
  }
  LineKeys keys;
  if (!sort_keys(keys)) return true;
  const OpSpec* spec = op_of(keys);
  const std::optional<int32_t> rank = line_rank(keys);
  if (spec == nullptr) return true;
  if (!check_args(*spec, keys)) return true;
  if (spec == &GROUP_START_SPEC || spec == &GROUP_END_SPEC) {
    if (rank.has_value() && place(*rank, keys)) load_group_mark(*spec, keys);
    return true;
  }
  const bool placed = rank.has_value() && place(*rank, keys);
  placed_ = placed;
  if (placed && !check_in_nccl_group(*spec, keys)) return true;
  Stmt& stmt = placed ? new_op() : (scratch_ = Stmt{});
  stmt.kind = StmtKind::OP;
  stmt.op = spec->kind;
  stmt.loc = at(*keys.member[static_cast<size_t>(Key::OP)]);
  pending_name_.clear();
  const bool ok = load_args(keys, stmt, rank.value_or(-1)) && placed;
  if (!ok) {
    if (placed) drop_op();
    return true;
  }
  if (!pending_name_.empty()) commit_pending();
  return true;
}

void TraceLoader::load_group_mark(const OpSpec& spec, const LineKeys& keys) {
  OpenGroup& group = open_group();
  if (&spec == &GROUP_START_SPEC) {
    if (group.depth++ > 0) return;
    RecordedBody& body = recorded();
    group.stmt = static_cast<uint32_t>(body.ops.size());
    group.loc = at(keys.get(Key::OP)->value);
    Stmt& stmt = new_side_stmt(body);
    stmt.kind = StmtKind::NCCL_GROUP;
    stmt.loc = at(*keys.get(Key::OP));
    return;
  }
  if (group.depth == 0) {
    error(at(keys.get(Key::OP)->value), "group_end without a group_start on rank " +
                                           std::to_string(ranks_[current_state_].rank) +
                                           thread_words(current_thread_));
    return;
  }
  --group.depth;
}

std::string TraceLoader::thread_words(uint32_t thread) const {
  const std::string& name = ranks_[current_state_].program[thread].name;
  return name == "main" ? std::string() : ", thread " + quoted(name);
}

void TraceLoader::check_groups_closed() {
  for (uint32_t s = 0; s < ranks_.size(); ++s) {
    current_state_ = s;
    const RankState& rs = ranks_[s];
    for (uint32_t t = 0; t < rs.open.size(); ++t) {
      if (rs.open[t].depth == 0) continue;
      error(rs.open[t].loc, "group_start on rank " + std::to_string(rs.rank) + thread_words(t) +
                                " has no matching group_end");
    }
  }
}

bool TraceLoader::sort_keys(LineKeys& keys) {
  bool ok = true;
  for (const JsonMember& member : members_) {
    bool known = false;
    const Key key = find_key(member.key, known);
    if (!known) {
      keys.unknown.push_back(&member);
      continue;
    }
    const JsonMember*& slot = keys.member[static_cast<size_t>(key)];
    if (slot != nullptr) {
      report_duplicate(member, slot->col);
      ok = false;
      continue;
    }
    slot = &member;
  }
  return ok;
}

const OpSpec* TraceLoader::op_of(const LineKeys& keys) {
  const JsonMember* op = keys.get(Key::OP);
  if (op == nullptr) {
    error({line_, 1}, "missing required key 'op'");
    return nullptr;
  }
  if (!expect_kind(op->value, JsonKind::STRING, "an operation name")) return nullptr;
  if (const OpSpec* spec = find_op(op->value.text)) return spec;
  if (op->value.text == GROUP_START) return &GROUP_START_SPEC;
  if (op->value.text == GROUP_END) return &GROUP_END_SPEC;
  const std::vector<std::string> names = op_line_names();
  error(at(op->value), unknown_message("operation", op->value.text, "", names, names));
  return nullptr;
}

std::optional<int32_t> TraceLoader::line_rank(const LineKeys& keys) {
  const JsonMember* rank = keys.get(Key::RANK);
  if (rank == nullptr) {
    error({line_, 1}, "missing required key 'rank'");
    return std::nullopt;
  }
  return rank_of(rank->value);
}

bool TraceLoader::check_args(const OpSpec& spec, const LineKeys& keys) {
  bool ok = true;
  const auto valid = [&] {
    const std::vector<std::string> names = arg_names(spec.args);
    return names.empty() ? std::string("none") : join(sorted(names));
  };
  for (size_t i = static_cast<size_t>(Key::GROUP); i < KEY_COUNT; ++i) {
    const JsonMember* member = keys.member[i];
    if (member == nullptr || (spec.args & (KeySet{1} << i)) != 0) continue;
    error(at(*member), quoted(spec.name) + " takes no argument " + quoted(member->key) +
                           "; valid arguments: " + valid());
    ok = false;
  }
  if (!keys.unknown.empty()) {
    const std::vector<std::string> known(KEY_NAMES.begin(), KEY_NAMES.end());
    for (const JsonMember* member : keys.unknown) {
      error(at(*member), "unknown argument " + quoted(member->key) + " for " +
                             quoted(spec.name) + did_you_mean(member->key, known) +
                             "; valid arguments: " + valid());
    }
    return false;  // a misspelt argument: missing ones go unreported
  }
  for (size_t i = static_cast<size_t>(Key::GROUP); i < KEY_COUNT; ++i) {
    if ((spec.required & (KeySet{1} << i)) == 0 || keys.member[i] != nullptr) continue;
    error(at(*keys.get(Key::OP)), quoted(spec.name) + " requires argument " +
                                      quoted(KEY_NAMES[i]));
    ok = false;
  }
  return ok;
}

bool TraceLoader::load_args(const LineKeys& keys, Stmt& stmt, int32_t rank) {
  bool ok = true;
  bool group_known = true;
  if (const JsonMember* group = keys.get(Key::GROUP)) {
    ok = load_group(group->value, stmt, rank, group_known);
  } else if (is_collective(stmt.op) || is_p2p(stmt.op)) {
    group_used_[0] = true;
  }
  for (size_t i = static_cast<size_t>(Key::SIZE); i < KEY_COUNT; ++i) {
    if (keys.member[i] == nullptr) continue;
    ok = load_arg(static_cast<Key>(i), keys.member[i]->value, stmt) && ok;
  }
  if (stmt.op == OpKind::NEW_GROUP) ok = load_new_group(keys, stmt, rank) && ok;
  if (stmt.op == OpKind::BARRIER) stmt.size = Expr::constant(dtype_bytes(stmt.dtype), stmt.loc);
  if (ok && group_known && rank >= 0 && (is_collective(stmt.op) || is_p2p(stmt.op))) {
    ok = check_members(stmt, rank, keys.get(Key::GROUP));
  }
  if (ok && group_known && rank >= 0 && has_splits(stmt.op)) {
    const std::vector<int32_t>* comm = scenario_.groups[stmt.group].comm_for(rank);
    for (Key key : {Key::SEND_SPLITS, Key::RECV_SPLITS}) {
      if (keys.get(key) == nullptr) continue;  // not taken by the op (a missing required key failed above)
      const std::vector<Expr>& splits =
          key == Key::SEND_SPLITS ? stmt.extra().send_splits : stmt.extra().recv_splits;
      if (comm == nullptr || splits.size() == comm->size()) continue;
      error(at(keys.get(key)->value), "expected " + std::to_string(comm->size()) + " sizes in " +
                                           quoted(key_name(key)) + ", one per member of group " +
                                           quoted(scenario_.groups[stmt.group].name) + ", got " +
                                           std::to_string(splits.size()));
      ok = false;
    }
  }
  return ok;
}

bool TraceLoader::load_splits(const JsonValue& value, std::string_view name, std::vector<Expr>& out) {
  if (!expect_kind(value, JsonKind::ARRAY, "an array of sizes in bytes")) return false;
  out.clear();
  for (const JsonValue& item : value.items) {
    Expr size;
    if (!load_expr(item, "a size in bytes", name, size)) return false;
    out.push_back(size);
  }
  return true;
}

bool TraceLoader::load_arg(Key key, const JsonValue& value, Stmt& stmt) {
  switch (key) {
    case Key::SIZE: return load_expr(value, "a size in bytes", "size", stmt.size);
    case Key::DURATION: return load_expr(value, "a duration in nanoseconds", "duration", stmt.duration);
    case Key::DTYPE: return load_dtype(value, stmt);
    case Key::ROOT: return load_rank_expr(value, stmt.set_extra().root, stmt.has_root);
    case Key::TO: return load_rank_expr(value, stmt.peer, stmt.has_peer);
    case Key::FROM: return load_from(value, stmt);
    case Key::TAG: return load_string(value, "tag", stmt.tag);
    case Key::STREAM: return load_string(value, "stream", stmt.stream);
    case Key::ASYNC: return load_async(value, stmt);
    case Key::HANDLE: return load_wait(value, stmt);
    case Key::SEND_SPLITS: return load_splits(value, "send_splits", stmt.set_extra().send_splits);
    case Key::RECV_SPLITS: return load_splits(value, "recv_splits", stmt.set_extra().recv_splits);
    case Key::RANK: case Key::OP: case Key::THREAD: case Key::GROUP:
    case Key::NAME: case Key::RANKS: return true;  // see load_args
  }
  return true;
}

bool TraceLoader::load_expr(const JsonValue& value, std::string_view what, std::string_view name, Expr& out) {
  const std::optional<int64_t> number = integer_of(value, what, name, 0);
  if (number) out = Expr::constant(*number, at(value));
  return number.has_value();
}

bool TraceLoader::load_rank_expr(const JsonValue& value, Expr& out, bool& has) {
  const std::optional<int32_t> rank = rank_of(value);
  if (rank) {
    out = Expr::constant(*rank, at(value));
    has = true;
  }
  return rank.has_value();
}

bool TraceLoader::load_from(const JsonValue& value, Stmt& stmt) {
  if (value.kind != JsonKind::STRING) return load_rank_expr(value, stmt.peer, stmt.has_peer);
  if (value.text == "any") {
    stmt.has_peer = true;
    stmt.peer_any = true;
    stmt.peer = Expr::constant(0, at(value));
    return true;
  }
  error(at(value), "expected a rank or \"any\", got the string " + quoted(value.text));
  return false;
}

bool TraceLoader::load_string(const JsonValue& value, std::string_view key, Name& out) {
  const std::optional<std::string_view> text = name_of(value, key);
  if (text) out = scenario_.names->intern(*text);
  return text.has_value();
}

bool TraceLoader::load_dtype(const JsonValue& value, Stmt& stmt) {
  if (!expect_kind(value, JsonKind::STRING, "a string")) return false;
  if (const std::optional<DType> dtype = parse_dtype(value.text)) {
    stmt.dtype = *dtype;
    return true;
  }
  error(at(value), dtype_error(value.text));
  return false;
}

bool TraceLoader::load_async(const JsonValue& value, Stmt& stmt) {
  if (!load_string(value, "async", stmt.handle)) return false;
  if (placed_) {
    std::vector<uint32_t>& threads = ranks_[current_state_].handles[stmt.handle.str()];
    if (std::find(threads.begin(), threads.end(), current_thread_) == threads.end()) {
      threads.push_back(current_thread_);
    }
  }
  return true;
}

bool TraceLoader::load_wait(const JsonValue& value, Stmt& stmt) {
  if (!load_string(value, "handle", stmt.handle)) return false;
  if (!placed_) return true;
  const RankState& rs = ranks_[current_state_];
  const auto found = rs.handles.find(stmt.handle.str());
  if (found == rs.handles.end() ||
      std::find(found->second.begin(), found->second.end(), current_thread_) ==
          found->second.end()) {
    pending_waits_.push_back({current_state_, current_thread_, stmt.handle.str(), at(value)});
  }
  return true;
}

void TraceLoader::check_wait(const PendingWait& wait) {
  const RankState& rs = ranks_[wait.state];
  const auto found = rs.handles.find(wait.handle);
  const std::string who =
      "rank " + std::to_string(rs.rank) + " waits on handle " + quoted(wait.handle);
  if (found == rs.handles.end()) {
    std::vector<std::string> issued;
    for (const auto& [handle, threads] : rs.handles) issued.push_back(handle);
    error(wait.loc, who + " that it never issues with async" + did_you_mean(wait.handle, issued));
  } else if (found->second.size() == 1 && found->second.front() == wait.thread) {
    error(wait.loc, who + " before its thread issues it (async) at a later line");
  }
}

}  // namespace lockstep::sim::trace
