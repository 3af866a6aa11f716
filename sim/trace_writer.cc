// The trace writer: a recorded scenario in its canonical JSON Lines form.
#include "sim/trace_format.h"

#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <span>

#include "sim/semantics_table.h"
#include "sim/trace_tables.h"

namespace lockstep::sim {

namespace trace {
namespace {

void write_integer(int64_t value, std::string& out) {
  std::array<char, 24> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  out.append(buffer.data(), result.ptr);
}

// Appends `, "key": ` (or `{"key": ` for the first key of an object).
void write_key(std::string_view key, bool& first, std::string& out) {
  out += first ? "{\"" : ", \"";
  first = false;
  out += key;
  out += "\": ";
}

void write_ranks(const std::vector<int32_t>& ranks, std::string& out) {
  out += '[';
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    write_integer(ranks[i], out);
  }
  out += ']';
}

void write_semantics(const Scenario& s, std::string& out) {
  const Semantics defaults;
  const Semantics& sem = s.semantics;
  const Link default_link;
  std::string body;
  bool first = true;
  for (const SemanticsSetting& setting : semantics_settings()) {
    const int64_t value = setting.get(sem);
    if (value == setting.get(defaults)) continue;
    write_key(setting.trace_key, first, body);
    switch (setting.kind) {
      case SettingKind::CHOICE: append_json_string(setting.choices[static_cast<size_t>(value)], body); break;
      case SettingKind::FLAG: body += value != 0 ? "true" : "false"; break;
      case SettingKind::BYTES:
      case SettingKind::COUNT:
      case SettingKind::DURATION: write_integer(value, body); break;
    }
  }
  if (s.link.latency_ns != default_link.latency_ns ||
      s.link.bandwidth_bytes_per_s != default_link.bandwidth_bytes_per_s) {
    write_key("link", first, body);
    body += "{\"latency_ns\": ";
    write_integer(s.link.latency_ns, body);
    body += ", \"bandwidth_bytes_per_s\": ";
    write_integer(std::llround(s.link.bandwidth_bytes_per_s), body);
    body += '}';
  }
  if (first) return;
  out += ", \"semantics\": ";
  out += body;
  out += '}';
}

void write_header(const Scenario& s, std::string& out) {
  bool first = true;
  write_key("lockstep_trace", first, out);
  write_integer(TRACE_FORMAT_VERSION, out);
  write_key("scenario", first, out);
  append_json_string(s.name, out);
  if (!s.description.empty()) {
    write_key("description", first, out);
    append_json_string(s.description, out);
  }
  if (!s.source_url.empty()) {
    write_key("source", first, out);
    append_json_string(s.source_url, out);
  }
  if (s.expect) {
    write_key("expect", first, out);
    append_json_string(verdict_name(*s.expect), out);
  }
  write_key("world", first, out);
  write_integer(s.world, out);
  bool first_group = true;
  for (size_t g = 1; g < s.groups.size(); ++g) {
    if (s.groups[g].from_new_group) continue;
    out += first_group ? ", \"groups\": {" : ", ";
    first_group = false;
    append_json_string(s.groups[g].name, out);
    out += ": ";
    write_ranks(s.groups[g].comms.front(), out);
  }
  if (!first_group) out += '}';
  write_semantics(s, out);
  out += "}\n";
}

// `{"rank": R, "thread": T, "op": ` (the thread left out when it is main).
void write_line_start(int32_t rank, const ThreadDef& thread, bool& first, std::string& out) {
  write_key("rank", first, out);
  write_integer(rank, out);
  if (thread.name != "main") {
    write_key("thread", first, out);
    append_json_string(thread.name, out);
  }
  write_key("op", first, out);
}

void write_op(const Scenario& s, int32_t rank, const ThreadDef& thread, const Stmt& stmt,
              std::string& out) {
  bool first = true;
  write_line_start(rank, thread, first, out);
  if (stmt.kind == StmtKind::NCCL_GROUP) {
    append_json_string(GROUP_START, out);
    out += "}\n";
    for (const Stmt& op : stmt.body) write_op(s, rank, thread, op, out);
    first = true;
    write_line_start(rank, thread, first, out);
    append_json_string(GROUP_END, out);
    out += "}\n";
    return;
  }
  const KeySet args = spec_of(stmt.op).args;
  const auto takes = [&](Key key) { return (args & bit(key)) != 0; };
  append_json_string(op_kind_name(stmt.op), out);
  if (takes(Key::GROUP) && stmt.group != 0) {
    write_key("group", first, out);
    append_json_string(s.groups[stmt.group].name, out);
  }
  if (takes(Key::ROOT) && stmt.has_root) {
    write_key("root", first, out);
    write_integer(stmt.extra().root.value, out);
  }
  if ((takes(Key::TO) || takes(Key::FROM)) && stmt.has_peer) {
    write_key(takes(Key::TO) ? "to" : "from", first, out);
    if (stmt.peer_any) append_json_string("any", out);
    else write_integer(stmt.peer.value, out);
  }
  if (takes(Key::SIZE)) {
    write_key("size", first, out);
    write_integer(stmt.size.value, out);
  }
  if (takes(Key::DTYPE) && stmt.dtype != DType::BF16) {
    write_key("dtype", first, out);
    append_json_string(dtype_name(stmt.dtype), out);
  }
  for (const auto& [key, text] : {std::pair{Key::TAG, &stmt.tag}, std::pair{Key::STREAM, &stmt.stream},
                                  std::pair{Key::ASYNC, &stmt.handle}, std::pair{Key::HANDLE, &stmt.handle}}) {
    if (!takes(key) || text->empty()) continue;
    write_key(key_name(key), first, out);
    append_json_string(text->str(), out);
  }
  if (takes(Key::DURATION)) {
    write_key("duration_ns", first, out);
    write_integer(stmt.duration.value, out);
  }
  for (const auto& [key, splits] : {std::pair{Key::SEND_SPLITS, &stmt.extra().send_splits},
                                    std::pair{Key::RECV_SPLITS, &stmt.extra().recv_splits}}) {
    if (!takes(key)) continue;
    write_key(key_name(key), first, out);
    out += '[';
    for (size_t i = 0; i < splits->size(); ++i) {
      if (i > 0) out += ", ";
      write_integer((*splits)[i].value, out);
    }
    out += ']';
  }
  if (stmt.op == OpKind::NEW_GROUP) {
    const GroupDef& group = s.groups[stmt.new_group];
    write_key("name", first, out);
    append_json_string(group.name, out);
    write_key("ranks", first, out);
    write_ranks(group.comms.front(), out);
  }
  out += "}\n";
}

std::string body_problem(const Scenario& s, std::span<const Stmt> body, bool in_group = false) {
  for (const Stmt& stmt : body) {
    const std::string where = s.location(stmt.loc) + ": ";
    if (stmt.kind == StmtKind::NCCL_GROUP && !in_group) {
      std::string problem = body_problem(s, stmt.body, true);
      if (!problem.empty()) return problem;
      continue;
    }
    if (stmt.kind != StmtKind::OP) return where + "a statement other than an operation";
    if (in_group && !is_collective(stmt.op) && !is_p2p(stmt.op)) {
      return where + "an operation other than communication in an NCCL group";
    }
    if (in_group && !stmt.handle.empty()) return where + "an async operation in an NCCL group";
    for (const Expr* expr : {&stmt.size, &stmt.peer, &stmt.extra().root, &stmt.duration}) {
      if (!expr->is_constant()) return where + "an expression that is not a constant";
    }
    for (const std::vector<Expr>* splits : {&stmt.extra().send_splits, &stmt.extra().recv_splits}) {
      for (const Expr& expr : *splits) {
        if (!expr.is_constant()) return where + "an expression that is not a constant";
      }
    }
    if (stmt.group >= s.groups.size()) return where + "an undefined group";
    if (stmt.op == OpKind::NEW_GROUP &&
        (stmt.new_group >= s.groups.size() || !s.groups[stmt.new_group].from_new_group)) {
      return where + "a new_group without its group";
    }
  }
  return "";
}

}  // namespace
}  // namespace trace

std::string trace_write_problem(const Scenario& recorded) {
  if (recorded.world < 1) return "the scenario has no ranks";
  if (recorded.name.empty()) return "the scenario has no name";
  if (recorded.rank_program.size() != static_cast<size_t>(recorded.world)) {
    return "the scenario does not say which program each rank runs";
  }
  for (size_t g = 0; g < recorded.groups.size(); ++g) {
    const GroupDef& group = recorded.groups[g];
    if (!group.single() || group.mesh_dim >= 0) {
      return "group " + quoted(group.name) + " is not one communicator";
    }
    if (g < recorded.group_link.size() && recorded.group_link[g]) {
      return "group " + quoted(group.name) + " has its own link";
    }
  }
  for (const RankProgram& program : recorded.programs) {
    for (const ThreadDef& thread : program) {
      if (thread.name.empty()) return "a thread has no name";
      std::string problem = trace::body_problem(recorded, thread.body());
      if (!problem.empty()) return problem;
    }
  }
  return "";
}

std::string write_trace(const Scenario& recorded) {
  assert(trace_write_problem(recorded).empty());
  std::string out;
  trace::write_header(recorded, out);
  for (int32_t rank = 0; rank < recorded.world; ++rank) {
    for (const ThreadDef& thread : recorded.program_of(rank)) {
      for (const Stmt& stmt : thread.body()) trace::write_op(recorded, rank, thread, stmt, out);
    }
  }
  return out;
}

void append_json_string(std::string_view text, std::string& out) {
  static constexpr std::string_view HEX = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20) {
      out += "\\u00";
      out += HEX[byte >> 4];
      out += HEX[byte & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace lockstep::sim
