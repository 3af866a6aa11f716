#include "checker/minimize.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "checker/counterexample.h"
#include "sim/trace_format.h"

namespace lockstep::checker {

namespace {

constexpr uint32_t NO_OP = UINT32_MAX;

// Where op `id` of the scenario lives: program_of(rank)[thread].body[pos].
struct OpRef {
  int32_t rank = -1;
  uint32_t thread = 0;
  uint32_t pos = 0;
};

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

class Minimizer {
 public:
  Minimizer(const sim::Scenario& scenario, const Bug& bug, const MinimizeOptions& options)
      : sc_(scenario), bug_(bug), options_(options) {}

  MinimizeResult run();

 private:
  // The op id of `stmt` issued by `rank` in the scenario; NO_OP when it is not one of its ops.
  uint32_t id_in_scenario(int32_t rank, const sim::Stmt* stmt) const;
  // The bug as op ids: its kind, then its stuck (or mismatched) ops as rank:id. "" when an op
  // is not found.
  std::string identity(const Bug& bug, const std::function<uint32_t(int32_t, const sim::Stmt*)>& locate) const;
  std::string write(const std::vector<char>& keep) const;
  bool test(const std::vector<char>& keep);
  // ddmin over `units` (each a set of op ids): removes chunks, large ones first, while the bug
  // stays. True when something was removed.
  bool ddmin(std::vector<std::vector<uint32_t>> units);
  // The units still present: ids not removed, units with a signature op left out.
  std::vector<std::vector<uint32_t>> live(const std::vector<std::vector<uint32_t>>& units) const;

  const sim::Scenario& sc_;
  const Bug& bug_;
  const MinimizeOptions& options_;
  std::vector<OpRef> refs_;
  std::vector<std::vector<uint32_t>> first_id_;  // [rank][thread]: id of the thread's first op
  sim::Scenario shell_;                          // the scenario without its programs
  std::string target_;
  std::vector<char> keep_;
  std::vector<char> signature_op_;
  uint64_t rechecks_ = 0;
  bool budget_hit_ = false;
};

uint32_t Minimizer::id_in_scenario(int32_t rank, const sim::Stmt* stmt) const {
  if (rank < 0 || rank >= sc_.world || stmt == nullptr) return NO_OP;
  const sim::RankProgram& program = sc_.program_of(rank);
  const std::less<const sim::Stmt*> before;
  for (size_t t = 0; t < program.size(); ++t) {
    const sim::StmtList& body = program[t].body();
    if (body.empty() || before(stmt, body.data()) || !before(stmt, body.data() + body.size())) continue;
    return first_id_[static_cast<size_t>(rank)][t] + static_cast<uint32_t>(stmt - body.data());
  }
  return NO_OP;
}

std::string Minimizer::identity(const Bug& bug, const std::function<uint32_t(int32_t, const sim::Stmt*)>& locate) const {
  std::string out(sim::verdict_name(bug.kind));
  std::vector<std::pair<int32_t, uint32_t>> ops;
  auto add = [&](int32_t rank, const sim::OpRecord& rec) {
    const uint32_t id = locate(rank, rec.op.stmt);
    ops.emplace_back(rank, id);
    return id != NO_OP;
  };
  if (bug.mismatch) {
    out += "|" + bug.mismatch->field;
    if (!add(bug.mismatch->rank_a, bug.mismatch->op_a) || !add(bug.mismatch->rank_b, bug.mismatch->op_b)) return "";
  }
  for (const sim::StuckOp& s : bug.stuck) {
    if (!add(s.rank, s.op)) return "";
  }
  if (!bug.mismatch) std::sort(ops.begin(), ops.end());  // a mismatch's two ops keep their roles
  for (const auto& [rank, id] : ops) out += fmt::format("|{}:{}", rank, id);
  return out;
}

std::string Minimizer::write(const std::vector<char>& keep) const {
  sim::Scenario out = shell_;
  // Groups: world, then those a kept op uses, in their order (no unused header group is written).
  std::vector<char> used(sc_.groups.size(), 0);
  used[0] = 1;
  for (size_t id = 0; id < refs_.size(); ++id) {
    if (!keep[id]) continue;
    const OpRef& ref = refs_[id];
    const sim::Stmt& stmt = sc_.program_of(ref.rank)[ref.thread].body()[ref.pos];
    used[stmt.group] = 1;
    if (stmt.op == sim::OpKind::NEW_GROUP) used[stmt.new_group] = 1;
  }
  std::vector<uint32_t> remap(sc_.groups.size(), 0);
  out.groups.clear();
  for (size_t g = 0; g < sc_.groups.size(); ++g) {
    if (!used[g]) continue;
    remap[g] = static_cast<uint32_t>(out.groups.size());
    out.groups.push_back(sc_.groups[g]);
  }
  out.group_link.assign(out.groups.size(), std::nullopt);
  out.programs.assign(1, {});  // program 0: no ops
  out.rank_program.assign(static_cast<size_t>(sc_.world), 0);
  size_t id = 0;
  for (int32_t rank = 0; rank < sc_.world; ++rank) {
    sim::RankProgram program;
    for (const sim::ThreadDef& thread : sc_.program_of(rank)) {
      sim::ThreadDef copy{thread.name, thread.loc, {}};
      for (const sim::Stmt& stmt : thread.body()) {
        if (keep[id++]) {
          copy.mutable_body().push_back(stmt);
          copy.mutable_body().back().group = remap[stmt.group];
          if (stmt.op == sim::OpKind::NEW_GROUP) copy.mutable_body().back().new_group = remap[stmt.new_group];
        }
      }
      if (!copy.body().empty()) program.push_back(std::move(copy));
    }
    if (program.empty()) continue;
    out.rank_program[static_cast<size_t>(rank)] = static_cast<uint32_t>(out.programs.size());
    out.programs.push_back(std::move(program));
  }
  return sim::write_trace(out);
}

bool Minimizer::test(const std::vector<char>& keep) {
  if (rechecks_ >= options_.budget) {
    budget_hit_ = true;
    return false;
  }
  ++rechecks_;
  std::vector<uint32_t> kept;  // line L of the trace (from 2) is op kept[L - 2]
  for (uint32_t id = 0; id < keep.size(); ++id) {
    if (keep[id]) kept.push_back(id);
  }
  const sim::LoadResult loaded = sim::load_trace_text(write(keep), options_.path, {}, options_.limits);
  if (!loaded.ok()) return false;
  CheckOptions check = options_.check;
  check.progress = nullptr;
  const CheckResult result = check_scenario(*loaded.scenario, check);
  if (result.error) return false;
  auto locate = [&](int32_t rank, const sim::Stmt* stmt) -> uint32_t {
    if (stmt == nullptr || stmt->loc.line < 2 || stmt->loc.line - 2 >= kept.size()) return NO_OP;
    const uint32_t id = kept[stmt->loc.line - 2];
    return refs_[id].rank == rank ? id : NO_OP;
  };
  for (const Bug& bug : result.bugs) {
    if (identity(bug, locate) == target_) return true;
  }
  return false;
}

std::vector<std::vector<uint32_t>> Minimizer::live(const std::vector<std::vector<uint32_t>>& units) const {
  std::vector<std::vector<uint32_t>> out;
  for (const std::vector<uint32_t>& unit : units) {
    std::vector<uint32_t> left;
    bool signature = false;
    for (uint32_t id : unit) {
      if (!keep_[id]) continue;
      signature |= signature_op_[id] != 0;
      left.push_back(id);
    }
    if (!signature && !left.empty()) out.push_back(std::move(left));
  }
  return out;
}

bool Minimizer::ddmin(std::vector<std::vector<uint32_t>> units) {
  bool removed = false;
  size_t n = 2;
  while (!units.empty() && !budget_hit_) {
    n = std::min(n, units.size());
    bool reduced = false;
    for (size_t i = 0; i < n && !budget_hit_; ++i) {
      const size_t begin = i * units.size() / n, end = (i + 1) * units.size() / n;
      std::vector<char> candidate = keep_;
      for (size_t u = begin; u < end; ++u) {
        for (uint32_t id : units[u]) candidate[id] = 0;
      }
      if (test(candidate)) {
        keep_ = std::move(candidate);
        units.erase(units.begin() + static_cast<std::ptrdiff_t>(begin), units.begin() + static_cast<std::ptrdiff_t>(end));
        n = std::max<size_t>(n - 1, 2);
        reduced = removed = true;
        break;
      }
    }
    if (!reduced) {
      if (n >= units.size()) break;
      n = std::min(2 * n, units.size());
    }
  }
  return removed;
}

MinimizeResult Minimizer::run() {
  MinimizeResult result;
  if (std::string problem = sim::trace_write_problem(sc_); !problem.empty()) {
    result.refused = fmt::format("--minimize applies to recorded schedules only, and {} is not one ({})", sc_.path, problem);
    return result;
  }
  // Op ids are top-level statements and trace lines (below): NCCL groups are not cut yet.
  for (const sim::RankProgram& program : sc_.programs) {
    for (const sim::ThreadDef& thread : program) {
      for (const sim::Stmt& stmt : thread.body()) {
        if (stmt.kind != sim::StmtKind::NCCL_GROUP) continue;
        result.refused = fmt::format("--minimize does not cut schedules with NCCL groups yet ({})", sc_.location(stmt.loc));
        return result;
      }
    }
  }
  // Op ids in the order a trace lists the ops: rank, thread, position.
  first_id_.resize(static_cast<size_t>(sc_.world));
  std::set<int32_t> ranks_with_ops;
  for (int32_t rank = 0; rank < sc_.world; ++rank) {
    const sim::RankProgram& program = sc_.program_of(rank);
    for (uint32_t t = 0; t < program.size(); ++t) {
      first_id_[static_cast<size_t>(rank)].push_back(static_cast<uint32_t>(refs_.size()));
      for (uint32_t pos = 0; pos < program[t].body().size(); ++pos) refs_.push_back({rank, t, pos});
      if (!program[t].body().empty()) ranks_with_ops.insert(rank);
    }
  }
  result.ops_before = refs_.size();
  result.ranks_before = ranks_with_ops.size();
  auto locate = [&](int32_t rank, const sim::Stmt* stmt) { return id_in_scenario(rank, stmt); };
  target_ = identity(bug_, locate);
  if (target_.empty()) {
    result.refused = "the bug's ops are not ops of the scenario";
    return result;
  }
  shell_ = sc_;
  shell_.programs.clear();
  shell_.expect = bug_.kind;
  shell_.name = sc_.name + "-min";
  shell_.description = fmt::format("{} minimized by lockstep check --minimize: {}", sc_.path, bug_.summary);

  signature_op_.assign(refs_.size(), 0);
  if (bug_.mismatch) {
    signature_op_[id_in_scenario(bug_.mismatch->rank_a, bug_.mismatch->op_a.op.stmt)] = 1;
    signature_op_[id_in_scenario(bug_.mismatch->rank_b, bug_.mismatch->op_b.op.stmt)] = 1;
  }
  for (const sim::StuckOp& s : bug_.stuck) signature_op_[id_in_scenario(s.rank, s.op.op.stmt)] = 1;

  // The bug's execution: which ops match (removed together) and its causal past.
  bool diverged = false;
  const sim::ExecutionResult replayed = replay_execution(sc_, bug_.choices, engine_options_for(options_.check), diverged);
  std::vector<uint32_t> parent(refs_.size());
  std::iota(parent.begin(), parent.end(), 0u);
  auto root = [&](uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto join = [&](uint32_t a, uint32_t b) {
    if (a == NO_OP || b == NO_OP) return;
    a = root(a);
    b = root(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  };
  auto id_of = [&](const OpId& op) -> uint32_t {
    if (op.rank < 0 || static_cast<size_t>(op.rank) >= replayed.ops.size()) return NO_OP;
    const std::vector<sim::OpRecord>& ops = replayed.ops[static_cast<size_t>(op.rank)];
    if (op.index >= ops.size() || ops[op.index].index != op.index) return NO_OP;
    return id_in_scenario(op.rank, ops[op.index].op.stmt);
  };
  for (const std::vector<OpId>& set : matched_sets(sc_, replayed)) {
    for (const OpId& member : set) join(id_of(set.front()), id_of(member));
  }
  // A wait goes with the async op it waits for.
  for (size_t r = 0; r < replayed.ops.size(); ++r) {
    std::map<std::string, uint32_t> async_op;
    for (const sim::OpRecord& rec : replayed.ops[r]) {
      if (!rec.op.stmt || rec.op.stmt->handle.empty()) continue;
      const uint32_t id = id_in_scenario(static_cast<int32_t>(r), rec.op.stmt);
      if (rec.op.kind == sim::OpKind::WAIT) {
        if (auto it = async_op.find(rec.op.stmt->handle.str()); it != async_op.end()) join(it->second, id);
      } else {
        async_op[rec.op.stmt->handle.str()] = id;
      }
    }
  }
  std::map<uint32_t, std::vector<uint32_t>> classes;
  for (uint32_t id = 0; id < refs_.size(); ++id) classes[root(id)].push_back(id);
  std::vector<std::vector<uint32_t>> units;
  for (auto& [first, members] : classes) units.push_back(std::move(members));
  std::vector<char> in_past(refs_.size(), 0);
  const std::vector<std::vector<bool>> past = causal_past(sc_, replayed, causal_seeds(bug_, replayed));
  for (size_t r = 0; r < replayed.ops.size(); ++r) {
    for (size_t i = 0; i < replayed.ops[r].size(); ++i) {
      const uint32_t id = id_in_scenario(static_cast<int32_t>(r), replayed.ops[r][i].op.stmt);
      if (past[r][i] && id != NO_OP) in_past[id] = 1;
    }
  }

  // The whole schedule, written as a trace, must show the bug; then: everything outside the
  // causal past at once; then ddmin over matched sets (large chunks first, down to one set),
  // over whole ranks, over single ops; again while a round removes something.
  keep_.assign(refs_.size(), 1);
  if (!test(keep_)) {
    if (!budget_hit_) result.refused = "the schedule written as a trace does not show the same bug";
    else result.refused = "the budget allows no re-check";
    return result;
  }
  std::vector<char> cut = keep_;
  for (uint32_t id = 0; id < refs_.size(); ++id) cut[id] = in_past[id] || signature_op_[id];
  if (cut != keep_ && test(cut)) keep_ = std::move(cut);
  for (bool changed = true; changed && !budget_hit_;) {
    changed = ddmin(live(units));
    std::vector<std::vector<uint32_t>> ranks(static_cast<size_t>(sc_.world));
    for (uint32_t id = 0; id < refs_.size(); ++id) ranks[static_cast<size_t>(refs_[id].rank)].push_back(id);
    changed |= ddmin(live(ranks));
    std::vector<std::vector<uint32_t>> singles;
    for (uint32_t id = 0; id < refs_.size(); ++id) singles.push_back({id});
    changed |= ddmin(live(singles));
  }

  result.trace = write(keep_);
  result.rechecks = rechecks_;
  result.budget_hit = budget_hit_;
  std::set<int32_t> ranks_left;
  for (uint32_t id = 0; id < refs_.size(); ++id) {
    if (!keep_[id]) continue;
    const OpRef& ref = refs_[id];
    ranks_left.insert(ref.rank);
    result.sources.push_back(sc_.location(sc_.program_of(ref.rank)[ref.thread].body()[ref.pos].loc));
  }
  result.ops_after = result.sources.size();
  result.ranks_after = ranks_left.size();
  return result;
}

}  // namespace

MinimizeResult minimize_bug(const sim::Scenario& scenario, const Bug& bug, const MinimizeOptions& options) {
  return Minimizer(scenario, bug, options).run();
}

std::string minimize_summary(const MinimizeResult& result, uint64_t budget) {
  std::string out = fmt::format("minimized: {} rank{}, {} op{} of {} ranks, {} ops ({} re-check{})",
                                with_commas(result.ranks_after), result.ranks_after == 1 ? "" : "s",
                                with_commas(result.ops_after), result.ops_after == 1 ? "" : "s",
                                with_commas(result.ranks_before), with_commas(result.ops_before),
                                with_commas(result.rechecks), result.rechecks == 1 ? "" : "s");
  if (result.budget_hit) {
    out += fmt::format("; stopped at the budget of {} re-checks (--minimize-budget)", with_commas(budget));
  }
  return out;
}

}  // namespace lockstep::checker
