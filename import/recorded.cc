// The recorded schedule: writing it as a trace, atomically, and the schedule-parting report.
#include "import/recorded.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/output_file.h"
#include "sim/trace_format.h"

namespace lockstep::import {

uint32_t RecordedTrace::intern(std::string_view name) {
  if (name.empty()) return 0;
  if (auto it = name_index.find(name); it != name_index.end()) return it->second;
  const auto index = static_cast<uint32_t>(names.size());
  names.emplace_back(name);
  name_index.emplace(names.back(), index);
  return index;
}

uint32_t RecordedTrace::add_group(std::string name, std::vector<int32_t> group_ranks) {
  std::sort(group_ranks.begin(), group_ranks.end());
  groups.push_back({std::move(name), std::move(group_ranks)});
  return static_cast<uint32_t>(groups.size() - 1);
}

namespace {

sim::Stmt stmt_of(const RecordedTrace& trace, sim::NamePool& pool, const RecordedOp& op) {
  sim::Stmt stmt;
  stmt.kind = sim::StmtKind::OP;
  stmt.op = op.kind;
  stmt.dtype = op.dtype;
  stmt.group = op.group;
  if (sim::has_splits(op.kind)) {
    const RecordedTrace::Splits& splits = trace.splits.at(op.splits - 1);
    if (sim::lists_sends(op.kind)) {
      for (const int64_t bytes : splits.send) stmt.set_extra().send_splits.push_back(sim::Expr::constant(bytes));
    }
    for (const int64_t bytes : splits.recv) stmt.set_extra().recv_splits.push_back(sim::Expr::constant(bytes));
  } else if (sim::is_collective(op.kind) || sim::is_p2p(op.kind)) {
    stmt.size = sim::Expr::constant(op.size);
  }
  if (op.kind == sim::OpKind::SEND || op.kind == sim::OpKind::RECV) {
    stmt.has_peer = true;
    stmt.peer = sim::Expr::constant(op.peer);
  }
  if (sim::has_root(op.kind)) {
    stmt.has_root = true;
    stmt.set_extra().root = sim::Expr::constant(op.peer);
  }
  if (op.kind == sim::OpKind::COMPUTE || op.kind == sim::OpKind::SLEEP) {
    stmt.duration = sim::Expr::constant(op.size);
  }
  if (op.handle != 0) stmt.handle = pool.intern(trace.names[op.handle]);
  if (op.tag != 0) stmt.tag = pool.intern(trace.names[op.tag]);
  return stmt;
}

// One rank's statements: consecutive ops with the same nccl_group, more than one, become one
// NCCL_GROUP statement (written as group_start, the ops, group_end).
sim::StmtList body_of(const RecordedTrace& trace, sim::NamePool& pool, int32_t rank) {
  const std::vector<RecordedOp>& ops = trace.ranks[static_cast<size_t>(rank)];
  sim::StmtList body;
  body.reserve(ops.size());
  for (size_t i = 0; i < ops.size();) {
    size_t end = i + 1;
    if (ops[i].nccl_group != 0) {
      while (end < ops.size() && ops[end].nccl_group == ops[i].nccl_group) ++end;
    }
    if (end - i == 1) {
      body.push_back(stmt_of(trace, pool, ops[i]));
      i = end;
      continue;
    }
    sim::Stmt group;
    group.kind = sim::StmtKind::NCCL_GROUP;
    for (size_t k = i; k < end; ++k) group.body.push_back(stmt_of(trace, pool, ops[k]));
    body.push_back(std::move(group));
    i = end;
  }
  return body;
}

}  // namespace

namespace {

void append_integer(int64_t value, std::string& out) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

// Whether the fast writer below knows the op's line (every op an importer makes).
bool fast_kind(sim::OpKind kind) {
  static_assert(static_cast<int>(sim::OpKind::CRASH) + 1 == static_cast<int>(sim::OpKind::INIT));
  // Split sizes go through the reference writer.
  return (sim::is_collective(kind) && !sim::has_splits(kind)) || sim::is_p2p(kind) ||
         kind == sim::OpKind::COMPUTE || kind == sim::OpKind::SLEEP || kind == sim::OpKind::WAIT;
}

// The fixed parts of op lines, escaped once.
struct LineParts {
  explicit LineParts(const RecordedTrace& trace) {
    for (const RecordedGroup& group : trace.groups) {
      std::string part = ", \"group\": ";
      sim::append_json_string(group.name, part);
      groups.push_back(std::move(part));
    }
    for (size_t k = 0; k <= static_cast<size_t>(sim::OpKind::CRASH); ++k) {
      std::string part = ", \"op\": ";
      sim::append_json_string(sim::op_kind_name(static_cast<sim::OpKind>(k)), part);
      ops.push_back(std::move(part));
    }
    for (size_t d = 0; d <= static_cast<size_t>(sim::DType::FP8_E5M2); ++d) {
      std::string part = ", \"dtype\": ";
      sim::append_json_string(sim::dtype_name(static_cast<sim::DType>(d)), part);
      dtypes.push_back(std::move(part));
    }
  }
  std::vector<std::string> groups, ops, dtypes;
};

// One op line as sim::write_trace writes stmt_of(op). Pinned to sim::write_trace by
// import_test.cc over every kind and field.
void append_op_line(const RecordedTrace& trace, const LineParts& parts, int32_t rank, const RecordedOp& op,
                    std::string& out) {
  const std::string_view handle = op.handle != 0 ? std::string_view(trace.names[op.handle]) : std::string_view();
  out += std::string_view("{\"rank\": ");
  append_integer(rank, out);
  out += parts.ops[static_cast<size_t>(op.kind)];
  if (op.kind == sim::OpKind::COMPUTE || op.kind == sim::OpKind::SLEEP) {
    out += std::string_view(", \"duration_ns\": ");
    append_integer(op.size, out);
  } else if (op.kind == sim::OpKind::WAIT) {
    if (!handle.empty()) {
      out += std::string_view(", \"handle\": ");
      sim::append_json_string(handle, out);
    }
  } else {
    if (op.group != 0) out += parts.groups[op.group];
    if (sim::has_root(op.kind)) {
      out += std::string_view(", \"root\": ");
      append_integer(op.peer, out);
    }
    if (sim::is_p2p(op.kind)) {
      out += op.kind == sim::OpKind::SEND ? std::string_view(", \"to\": ") : std::string_view(", \"from\": ");
      append_integer(op.peer, out);
    }
    if (op.kind != sim::OpKind::BARRIER) {
      out += std::string_view(", \"size\": ");
      append_integer(op.size, out);
    }
    if (op.dtype != sim::DType::BF16) out += parts.dtypes[static_cast<size_t>(op.dtype)];
    if (op.tag != 0 && !trace.names[op.tag].empty()) {
      out += std::string_view(", \"tag\": ");
      sim::append_json_string(trace.names[op.tag], out);
    }
    if (!handle.empty()) {
      out += std::string_view(", \"async\": ");
      sim::append_json_string(handle, out);
    }
  }
  out += std::string_view("}\n");
}

std::string flush(std::string& buffer, std::FILE* out) {
  if (!buffer.empty() && std::fwrite(buffer.data(), 1, buffer.size(), out) != buffer.size()) return std::strerror(errno);
  buffer.clear();
  return "";
}

// The trace's header as a scenario whose ranks run nothing (sim::write_trace writes its header
// line and checks its groups).
sim::Scenario header_scenario(const RecordedTrace& trace) {
  sim::Scenario base;
  base.name = trace.scenario;
  base.description = trace.description;
  base.source_url = trace.source;
  base.world = trace.world;
  base.semantics = trace.semantics;
  for (const RecordedGroup& group : trace.groups) {
    base.groups.push_back(sim::make_group(group.name, {}, group.ranks, trace.world));
  }
  return base;
}

}  // namespace

std::string write_recorded_trace_reference(const RecordedTrace& trace, std::FILE* out) {
  if (trace.world < 1) return "the trace has no ranks";
  if (trace.ranks.size() != static_cast<size_t>(trace.world)) return "the trace does not list every rank";
  sim::Scenario base = header_scenario(trace);
  base.programs.emplace_back();  // the empty program of every rank not being written
  base.rank_program.assign(static_cast<size_t>(trace.world), 0);
  std::string problem = sim::trace_write_problem(base);
  if (!problem.empty()) return problem;
  const std::string header = sim::write_trace(base);
  if (std::fwrite(header.data(), 1, header.size(), out) != header.size()) return std::strerror(errno);

  base.programs.emplace_back();
  for (int32_t rank = 0; rank < trace.world; ++rank) {
    if (trace.ranks[static_cast<size_t>(rank)].empty()) continue;
    sim::ThreadDef thread;
    thread.name = "main";
    thread.mutable_body() = body_of(trace, *base.names, rank);
    base.programs[1] = {std::move(thread)};
    base.rank_program[static_cast<size_t>(rank)] = 1;
    const std::string text = sim::write_trace(base);
    base.rank_program[static_cast<size_t>(rank)] = 0;
    const size_t first_line = text.find('\n') + 1;  // the header again
    const size_t size = text.size() - first_line;
    if (std::fwrite(text.data() + first_line, 1, size, out) != size) return std::strerror(errno);
  }
  return "";
}

std::string write_recorded_trace(const RecordedTrace& trace, std::FILE* out) {
  if (trace.world < 1) return "the trace has no ranks";
  if (trace.ranks.size() != static_cast<size_t>(trace.world)) return "the trace does not list every rank";
  for (const std::vector<RecordedOp>& ops : trace.ranks) {
    for (const RecordedOp& op : ops) {
      if (!fast_kind(op.kind) || op.group >= trace.groups.size() || op.handle >= trace.names.size() ||
          op.tag >= trace.names.size()) {
        return write_recorded_trace_reference(trace, out);
      }
    }
  }
  // The header through sim::write_trace (it also checks the groups); the op lines directly.
  sim::Scenario base = header_scenario(trace);
  base.programs.emplace_back();
  base.rank_program.assign(static_cast<size_t>(trace.world), 0);
  const std::string problem = sim::trace_write_problem(base);
  if (!problem.empty()) return problem;
  std::string buffer = sim::write_trace(base);
  constexpr size_t FLUSH_BYTES = size_t{1} << 20;
  buffer.reserve(FLUSH_BYTES + 4096);
  const LineParts parts(trace);
  for (int32_t rank = 0; rank < trace.world; ++rank) {
    const std::vector<RecordedOp>& ops = trace.ranks[static_cast<size_t>(rank)];
    for (size_t i = 0; i < ops.size();) {
      size_t end = i + 1;
      if (ops[i].nccl_group != 0) {
        while (end < ops.size() && ops[end].nccl_group == ops[i].nccl_group) ++end;
      }
      if (end - i == 1) {
        append_op_line(trace, parts, rank, ops[i], buffer);
      } else {
        // An NCCL group: its ops between group_start and group_end lines.
        buffer += std::string_view("{\"rank\": ");
        append_integer(rank, buffer);
        buffer += std::string_view(", \"op\": \"group_start\"}\n");
        for (size_t k = i; k < end; ++k) append_op_line(trace, parts, rank, ops[k], buffer);
        buffer += std::string_view("{\"rank\": ");
        append_integer(rank, buffer);
        buffer += std::string_view(", \"op\": \"group_end\"}\n");
      }
      i = end;
      if (buffer.size() >= FLUSH_BYTES) {
        const std::string failed = flush(buffer, out);
        if (!failed.empty()) return failed;
      }
    }
  }
  return flush(buffer, out);
}

std::string write_trace_file(const RecordedTrace& trace, const std::string& path) {
  sim::OutputFile file;  // whole or absent; a device or FIFO written in place (sim/output_file.h)
  std::string problem = file.open(path);
  if (problem.empty()) {
    problem = write_recorded_trace(trace, file.stream());
    if (problem.empty()) problem = file.commit();
  }
  return problem.empty() ? "" : fmt::format("cannot write {}: {}", path, problem);
}

std::string format_bytes(int64_t bytes) {
  // As `lockstep check` writes sizes (checker::format_size): the largest unit that divides the
  // size exactly, so that import's summary and check's explanation name an op by the same text.
  static constexpr const char* UNITS[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  int64_t value = bytes;
  while (unit + 1 < std::size(UNITS) && value != 0 && value % 1024 == 0) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{}{}", value, UNITS[unit]);
}

std::string describe_op(const RecordedTrace& trace, const RecordedOp& op) {
  std::string text(sim::op_kind_name(op.kind));
  if (op.kind == sim::OpKind::SEND) text += fmt::format(" to {}", op.peer);
  if (op.kind == sim::OpKind::RECV) text += fmt::format(" from {}", op.peer);
  if (sim::has_root(op.kind)) text += fmt::format(" root {}", op.peer);
  if (sim::is_collective(op.kind) || sim::is_p2p(op.kind)) {
    if (op.kind != sim::OpKind::BARRIER) text += " " + format_bytes(op.size);
    text += fmt::format(" {}", sim::dtype_name(op.dtype));
  }
  if (op.tag != 0) text += fmt::format(" tag {}", trace.names[op.tag]);
  return text;
}

namespace {

using Signature = std::tuple<sim::OpKind, int64_t, sim::DType, int32_t, uint32_t>;

// Ops with split sizes: their members send what their splits say (the importers write splits that agree).
Signature signature_of(const RecordedOp& op) {
  return {op.kind, sim::has_splits(op.kind) ? 0 : op.size, op.dtype, op.peer, op.tag};
}

}  // namespace

std::vector<std::string> schedule_partings(const RecordedTrace& trace) {
  std::vector<std::string> lines;
  const size_t groups = trace.groups.size();
  // Per group, per member (in ranks order): the indices of its collectives.
  std::vector<std::map<int32_t, std::vector<const RecordedOp*>>> collectives(groups);
  // Per (group, from, to): the sends of `from` and the receives of `to`.
  std::map<std::tuple<uint32_t, int32_t, int32_t>, std::pair<std::vector<const RecordedOp*>, std::vector<const RecordedOp*>>> p2p;
  for (uint32_t g = 0; g < groups; ++g) {
    for (int32_t rank : trace.groups[g].ranks) collectives[g][rank];
  }
  // Look-ups cached per rank (its groups) and per pair (the last one): millions of ops.
  std::unordered_map<uint32_t, std::vector<const RecordedOp*>*> rank_groups;
  using PairOps = std::pair<std::vector<const RecordedOp*>, std::vector<const RecordedOp*>>;
  std::tuple<uint32_t, int32_t, int32_t> last_key[2] = {{UINT32_MAX, -1, -1}, {UINT32_MAX, -1, -1}};
  PairOps* last_pair[2] = {nullptr, nullptr};  // [0] the last send's pair, [1] the last receive's
  const auto pair_of = [&](uint32_t g, int32_t from, int32_t to, bool recv) -> PairOps& {
    const std::tuple<uint32_t, int32_t, int32_t> key{g, from, to};
    if (last_pair[recv] == nullptr || key != last_key[recv]) {
      last_key[recv] = key;
      last_pair[recv] = &p2p[key];
    }
    return *last_pair[recv];
  };
  for (int32_t rank = 0; rank < trace.world; ++rank) {
    rank_groups.clear();
    for (const RecordedOp& op : trace.ranks[static_cast<size_t>(rank)]) {
      if (sim::is_collective(op.kind)) {
        std::vector<const RecordedOp*>*& slot = rank_groups[op.group];
        if (slot == nullptr) slot = &collectives[op.group][rank];
        slot->push_back(&op);
      } else if (op.kind == sim::OpKind::SEND) {
        pair_of(op.group, rank, op.peer, false).first.push_back(&op);
      } else if (op.kind == sim::OpKind::RECV) {
        pair_of(op.group, op.peer, rank, true).second.push_back(&op);
      }
    }
  }
  for (uint32_t g = 0; g < groups; ++g) {
    const auto& members = collectives[g];
    size_t longest = 0, shortest = SIZE_MAX;
    for (const auto& [rank, ops] : members) {
      longest = std::max(longest, ops.size());
      shortest = std::min(shortest, ops.size());
    }
    for (size_t k = 0; k < longest; ++k) {
      if (k < shortest) {
        // The common case first: every member issued the same k-th collective.
        const Signature first = signature_of(*members.begin()->second[k]);
        bool alike = true;
        for (const auto& [rank, ops] : members) {
          if (signature_of(*ops[k]) != first) {
            alike = false;
            break;
          }
        }
        if (alike) continue;
      }
      // Ranks by what they issued as their k-th collective on g (none: not issued).
      std::map<Signature, std::vector<int32_t>> issued;
      std::vector<int32_t> missing;
      std::map<Signature, const RecordedOp*> example;
      for (const auto& [rank, ops] : members) {
        if (k >= ops.size()) {
          missing.push_back(rank);
          continue;
        }
        issued[signature_of(*ops[k])].push_back(rank);
        example.emplace(signature_of(*ops[k]), ops[k]);
      }
      if (missing.empty() && issued.size() == 1) continue;
      std::string line = fmt::format("group {}: schedules part at collective #{}:", trace.groups[g].name, k + 1);
      bool first = true;
      for (const auto& [signature, ranks] : issued) {
        line += fmt::format("{} rank{} {} issued {}", first ? "" : ";", ranks.size() == 1 ? "" : "s",
                            sim::format_ranks(ranks), describe_op(trace, *example[signature]));
        first = false;
      }
      if (!missing.empty()) {
        line += fmt::format("{} rank{} {} never issued it", first ? "" : ";", missing.size() == 1 ? "" : "s",
                            sim::format_ranks(missing));
        // Where the missing ranks stopped on this group.
        std::map<size_t, std::vector<int32_t>> by_count;
        for (int32_t rank : missing) by_count[members.at(rank).size()].push_back(rank);
        std::string stops;
        for (const auto& [count, ranks] : by_count) {
          stops += fmt::format("{}{} stopped after {} collective{} on {}", stops.empty() ? " (" : "; ",
                               by_count.size() == 1 ? (ranks.size() == 1 ? "it" : "they") : sim::format_ranks(ranks),
                               count, count == 1 ? "" : "s", trace.groups[g].name);
        }
        line += stops + ")";
      }
      lines.push_back(std::move(line));
      break;
    }
  }
  for (const auto& [key, pair] : p2p) {
    const auto& [g, from, to] = key;
    const auto& [sends, recvs] = pair;
    const size_t common = std::min(sends.size(), recvs.size());
    size_t k = 0;
    while (k < common && sends[k]->size == recvs[k]->size && sends[k]->dtype == recvs[k]->dtype) ++k;
    if (k < common) {
      lines.push_back(fmt::format("group {}: p2p {} -> {} parts at message #{}: rank {} sent {}, rank {} receives {}",
                                  trace.groups[g].name, from, to, k + 1, from, describe_op(trace, *sends[k]), to,
                                  describe_op(trace, *recvs[k])));
    } else if (sends.size() != recvs.size()) {
      lines.push_back(fmt::format("group {}: p2p {} -> {} parts at message #{}: rank {} posted {} send{}, rank {} posted {} receive{}",
                                  trace.groups[g].name, from, to, common + 1, from, sends.size(),
                                  sends.size() == 1 ? "" : "s", to, recvs.size(), recvs.size() == 1 ? "" : "s"));
    }
  }
  return lines;
}

}  // namespace lockstep::import
