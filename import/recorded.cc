// The recorded schedule: writing it as a trace, atomically, and the schedule-parting report.
#include "import/recorded.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "sim/trace_format.h"

namespace lockstep::import {

uint32_t RecordedTrace::intern(std::string_view name) {
  if (name.empty()) return 0;
  for (size_t i = names.size(); i-- > 1;) {
    if (names[i] == name) return static_cast<uint32_t>(i);
  }
  names.emplace_back(name);
  return static_cast<uint32_t>(names.size() - 1);
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
  if (sim::is_collective(op.kind) || sim::is_p2p(op.kind)) stmt.size = sim::Expr::constant(op.size);
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

// One rank's statements: NCCL groups of several ops become async ops on streams of their own
// and a wait for each.
std::vector<sim::Stmt> body_of(const RecordedTrace& trace, sim::NamePool& pool, int32_t rank) {
  const std::vector<RecordedOp>& ops = trace.ranks[static_cast<size_t>(rank)];
  uint32_t groups = 0;  // this rank's NCCL groups so far
  std::vector<sim::Stmt> body;
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
    std::vector<sim::Name> handles;
    ++groups;
    for (size_t k = i; k < end; ++k) {
      sim::Stmt stmt = stmt_of(trace, pool, ops[k]);
      stmt.stream = pool.intern(fmt::format("nccl_group.{}", k - i));
      stmt.handle = pool.intern(fmt::format("g{}.{}", groups, k - i));
      handles.push_back(stmt.handle);
      body.push_back(std::move(stmt));
    }
    for (const sim::Name& handle : handles) {
      sim::Stmt wait;
      wait.kind = sim::StmtKind::OP;
      wait.op = sim::OpKind::WAIT;
      wait.handle = handle;
      body.push_back(std::move(wait));
    }
    i = end;
  }
  return body;
}

}  // namespace

std::string write_recorded_trace(const RecordedTrace& trace, std::FILE* out) {
  if (trace.world < 1) return "the trace has no ranks";
  if (trace.ranks.size() != static_cast<size_t>(trace.world)) return "the trace does not list every rank";
  sim::Scenario base;
  base.name = trace.scenario;
  base.description = trace.description;
  base.source_url = trace.source;
  base.world = trace.world;
  base.semantics = trace.semantics;
  for (const RecordedGroup& group : trace.groups) {
    base.groups.push_back(sim::make_group(group.name, {}, group.ranks, trace.world));
  }
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
    thread.body = body_of(trace, *base.names, rank);
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

std::string write_trace_file(const RecordedTrace& trace, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path temp = target.parent_path() / (target.filename().string() + ".lockstep-tmp");
  std::FILE* out = std::fopen(temp.c_str(), "wb");
  if (out == nullptr) return fmt::format("cannot write {}: {}", temp.string(), std::strerror(errno));
  std::string problem = write_recorded_trace(trace, out);
  if (std::fclose(out) != 0 && problem.empty()) problem = std::strerror(errno);
  std::error_code ec;
  if (problem.empty()) {
    fs::rename(temp, target, ec);
    if (!ec) return "";
    problem = ec.message();
  }
  fs::remove(temp, ec);
  return fmt::format("cannot write {}: {}", path, problem);
}

std::string format_bytes(int64_t bytes) {
  static constexpr const char* UNITS[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{}B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  value /= 1024;
  while (value >= 1024 && unit + 1 < std::size(UNITS)) {
    value /= 1024;
    ++unit;
  }
  if (value == static_cast<double>(static_cast<int64_t>(value))) return fmt::format("{}{}", static_cast<int64_t>(value), UNITS[unit]);
  return fmt::format("{:.1f}{}", value, UNITS[unit]);
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

Signature signature_of(const RecordedOp& op) { return {op.kind, op.size, op.dtype, op.peer, op.tag}; }

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
  for (int32_t rank = 0; rank < trace.world; ++rank) {
    for (const RecordedOp& op : trace.ranks[static_cast<size_t>(rank)]) {
      if (sim::is_collective(op.kind)) collectives[op.group][rank].push_back(&op);
      else if (op.kind == sim::OpKind::SEND) p2p[{op.group, rank, op.peer}].first.push_back(&op);
      else if (op.kind == sim::OpKind::RECV) p2p[{op.group, op.peer, rank}].second.push_back(&op);
    }
  }
  for (uint32_t g = 0; g < groups; ++g) {
    const auto& members = collectives[g];
    size_t longest = 0;
    for (const auto& [rank, ops] : members) longest = std::max(longest, ops.size());
    for (size_t k = 0; k < longest; ++k) {
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
