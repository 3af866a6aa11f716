#include "checker/bug_class.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "checker/rank_set.h"
#include "sim/strategy.h"

namespace lockstep::checker {

namespace {

std::string source_of(const sim::Scenario& scenario, const sim::OpRecord& rec) {
  return rec.op.stmt ? scenario.location(rec.op.stmt->loc) : scenario.path;
}

// An op without its rank or sequence number: kind, group, source.
std::string op_shape(const sim::Scenario& scenario, const sim::OpRecord& rec) {
  std::string group;
  if (sim::is_collective(rec.op.kind) || sim::is_p2p(rec.op.kind)) group = scenario.groups[rec.op.group].name;
  return fmt::format("{}/{}/{}", sim::op_kind_name(rec.op.kind), group, source_of(scenario, rec));
}

// Each rank's first stuck op (an index into bug.stuck), -1 for none.
std::vector<int32_t> stuck_by_rank(const Bug& bug) {
  std::vector<int32_t> out(bug.rank_status.size(), -1);
  for (size_t i = bug.stuck.size(); i-- > 0;) {
    const auto r = static_cast<size_t>(bug.stuck[i].rank);
    if (r >= out.size()) out.resize(r + 1, -1);
    out[r] = static_cast<int32_t>(i);
  }
  return out;
}

const sim::StuckOp* stuck_of(const Bug& bug, const std::vector<int32_t>& by_rank, int32_t rank) {
  const auto r = static_cast<size_t>(rank);
  return r < by_rank.size() && by_rank[r] >= 0 ? &bug.stuck[static_cast<size_t>(by_rank[r])] : nullptr;
}

// The role of a rank that a stuck op waits for: how it ended, or the op it is stuck in.
std::string role_of(const sim::Scenario& scenario, const Bug& bug, const std::vector<int32_t>& by_rank, int32_t rank) {
  const auto r = static_cast<size_t>(rank);
  const sim::RankStatus status = r < bug.rank_status.size() ? bug.rank_status[r] : sim::RankStatus::BLOCKED;
  if (status != sim::RankStatus::BLOCKED && status != sim::RankStatus::RUNNING) {
    return std::string(sim::rank_status_name(status));
  }
  if (const sim::StuckOp* s = stuck_of(bug, by_rank, rank)) return "in " + op_shape(scenario, s->op);
  return std::string(sim::rank_status_name(status));
}

}  // namespace

std::string bug_class_key(const sim::Scenario& scenario, const Bug& bug) {
  std::string key = std::string(sim::verdict_name(bug.kind)) + "|";
  if (bug.mismatch) {
    std::string a = op_shape(scenario, bug.mismatch->op_a);
    std::string b = op_shape(scenario, bug.mismatch->op_b);
    if (b < a) std::swap(a, b);
    return key + bug.mismatch->field + "|" + a + "|" + b;
  }
  // Each stuck op's shape with the roles of the ranks it waits for; a set, so that how many
  // ranks wait, and which, does not matter.
  const std::vector<int32_t> by_rank = stuck_by_rank(bug);
  std::set<std::string> ops;
  for (const sim::StuckOp& s : bug.stuck) {
    std::set<std::string> never;
    std::set<std::string> behind;
    for (int32_t r : s.waiting_for) {
      const bool missing = std::find(s.never_issued.begin(), s.never_issued.end(), r) != s.never_issued.end();
      (missing ? never : behind).insert(role_of(scenario, bug, by_rank, r));
    }
    std::string text = s.thread + "/" + op_shape(scenario, s.op) + " never:";
    for (const std::string& role : never) text += role + ";";
    text += " behind:";
    for (const std::string& role : behind) text += role + ";";
    ops.insert(std::move(text));
  }
  for (const std::string& op : ops) key += op + "|";
  if (bug.cycle.size() > 1) {
    // The cycle's shape: its ranks' stuck ops, rotated to the least rotation.
    std::vector<std::string> shape;
    for (size_t i = 0; i + 1 < bug.cycle.size(); ++i) {
      const sim::StuckOp* s = stuck_of(bug, by_rank, bug.cycle[i]);
      shape.push_back(s ? op_shape(scenario, s->op) : std::string("?"));
    }
    std::vector<std::string> best = shape;
    for (size_t i = 1; i < shape.size(); ++i) {
      std::rotate(shape.begin(), shape.begin() + 1, shape.end());
      if (shape < best) best = shape;
    }
    key += "cycle:";
    for (const std::string& s : best) key += s + ">";
  }
  return key;
}

std::vector<BugClass> group_bugs(const std::vector<Bug>& bugs) {
  std::vector<BugClass> classes;
  std::map<std::string, size_t> index;
  auto size_of = [&](size_t i) {
    std::set<int32_t> never;
    for (const sim::StuckOp& s : bugs[i].stuck) never.insert(s.never_issued.begin(), s.never_issued.end());
    return std::make_tuple(never.size(), bugs[i].stuck.size(), i);
  };
  for (size_t i = 0; i < bugs.size(); ++i) {
    auto [it, inserted] = index.emplace(bugs[i].class_key, classes.size());
    if (inserted) {
      classes.push_back(BugClass{bugs[i].kind, {}, i});
    }
    BugClass& c = classes[it->second];
    c.members.push_back(i);
    if (size_of(i) < size_of(c.representative)) c.representative = i;
  }
  return classes;
}

namespace {

void collect_chooses(const std::vector<sim::Stmt>& body, std::vector<const sim::Stmt*>& out);

void collect_one(const sim::Stmt& stmt, std::vector<const sim::Stmt*>& out) {
  if (stmt.kind == sim::StmtKind::CHOOSE) out.push_back(&stmt);
  collect_chooses(stmt.body, out);
  collect_chooses(stmt.extra().else_body, out);
  for (const sim::Branch& b : stmt.branches) collect_chooses(b.body, out);
}

void collect_chooses(const std::vector<sim::Stmt>& body, std::vector<const sim::Stmt*>& out) {
  for (const sim::Stmt& stmt : body) collect_one(stmt, out);
}

std::string ordinal(uint32_t n) {
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return fmt::format("{}{}", n, suffix);
}

}  // namespace

std::vector<std::string> describe_choices(const sim::Scenario& scenario, const Bug& bug) {
  // What each branch choice says, and the ranks that made it, in the order first made.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int32_t>> ranks;
  std::map<std::pair<int32_t, std::string>, uint32_t> times;  // per rank and choose: how many so far
  for (const sim::Option& c : bug.choices) {
    if (c.kind != sim::ChoiceKind::BRANCH || c.rank < 0 || c.rank >= scenario.world || c.detail < 0) continue;
    const sim::RankProgram& program = scenario.program_of(c.rank);
    if (c.thread < 0 || static_cast<size_t>(c.thread) >= program.size()) continue;
    const sim::ThreadDef& thread = program[static_cast<size_t>(c.thread)];
    std::vector<const sim::Stmt*> chooses;
    for (const sim::Stmt& stmt : thread.body()) collect_one(stmt, chooses);
    for (const sim::Define& d : scenario.defines) collect_chooses(d.body, chooses);
    std::erase_if(chooses, [&](const sim::Stmt* s) { return s->branches.size() <= static_cast<size_t>(c.detail); });
    std::string what;
    std::string label;
    if (!chooses.empty()) {
      label = chooses.front()->branches[static_cast<size_t>(c.detail)].label;
      for (const sim::Stmt* s : chooses) {
        if (s->branches[static_cast<size_t>(c.detail)].label != label) label.clear();
      }
    }
    const std::string branch = label.empty() ? fmt::format("branch {}", c.detail + 1)
                                             : fmt::format("branch {} (`{}`)", c.detail + 1, label);
    const std::string where = chooses.size() == 1 ? "the choose at " + scenario.location(chooses.front()->loc)
                                                  : fmt::format("a choose of thread {}", thread.name);
    const uint32_t n = ++times[{c.rank, where}];
    what = fmt::format("took {} of {}{}", branch, where, n > 1 ? fmt::format(", the {} time", ordinal(n)) : "");
    if (!ranks.count(what)) order.push_back(what);
    ranks[what].push_back(c.rank);
  }
  std::vector<std::string> out;
  for (const std::string& what : order) out.push_back(format_ranks(ranks[what]) + " " + what);
  return out;
}

}  // namespace lockstep::checker
