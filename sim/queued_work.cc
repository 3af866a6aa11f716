// The queued-work lint (queued_work.h): a walk over each thread's statements that keeps the GPU
// work the host has issued and not waited for, as the engine queues it (sim/engine_threads.cc,
// sim/engine_streams.cc): a kernel on its stream; a synchronous communication op that the
// current stream then waits for; `wait: H`, which makes the current stream (not the host) wait.
// Where paths meet (if, choose, a loop's iterations) the work queued on any of them is kept.
#include "sim/queued_work.h"

#include <algorithm>
#include <map>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace lockstep::sim {
namespace {

// One op issued and not waited for.
struct Queued {
  const Stmt* op = nullptr;
  std::string_view handle;                // `async: H`
  std::vector<std::string_view> covered;  // streams whose `sync: S` waits for it
  bool chained = false;                   // the thread's current stream waits for it
  bool every_path = true;                 // queued on every path that reaches this point

  bool covered_by(std::string_view stream) const {
    return std::find(covered.begin(), covered.end(), stream) != covered.end();
  }
  void cover(std::string_view stream) {
    if (!covered_by(stream)) covered.push_back(stream);
  }
};

// What is queued at a point of a program; unreachable after `exit` or `crash`.
struct State {
  bool reachable = true;
  std::vector<Queued> queued;  // one per op (an op in a loop is its latest instance)

  Queued* find(const Stmt* op) { return const_cast<Queued*>(std::as_const(*this).find(op)); }
  const Queued* find(const Stmt* op) const {
    for (const Queued& q : queued) {
      if (q.op == op) return &q;
    }
    return nullptr;
  }
  friend bool operator==(const State& a, const State& b) {
    if (a.reachable != b.reachable || a.queued.size() != b.queued.size()) return false;
    for (size_t i = 0; i < a.queued.size(); ++i) {
      const Queued& x = a.queued[i];
      const Queued& y = b.queued[i];
      if (x.op != y.op || x.chained != y.chained || x.every_path != y.every_path || x.covered != y.covered) return false;
    }
    return true;
  }
};

bool before(const Stmt* a, const Stmt* b) {
  return std::tie(a->loc.line, a->loc.col) < std::tie(b->loc.line, b->loc.col) ||
         (a->loc == b->loc && std::less<const Stmt*>()(a, b));
}

// The state where two paths meet: what either queued, waited for only where both waited.
State join(const State& a, const State& b) {
  if (!a.reachable) return b;
  if (!b.reachable) return a;
  State out;
  out.queued = a.queued;
  for (Queued& q : out.queued) {
    if (const Queued* other = b.find(q.op)) {
      q.chained = q.chained && other->chained;
      q.every_path = q.every_path && other->every_path;
      std::vector<std::string_view> both;
      for (std::string_view s : q.covered) {
        if (other->covered_by(s)) both.push_back(s);
      }
      q.covered = std::move(both);
    } else {
      q.every_path = false;
    }
  }
  for (const Queued& q : b.queued) {
    if (out.find(q.op) != nullptr) continue;
    out.queued.push_back(q);
    out.queued.back().every_path = false;
  }
  std::sort(out.queued.begin(), out.queued.end(), [](const Queued& x, const Queued& y) { return before(x.op, y.op); });
  return out;
}

class Walk {
 public:
  explicit Walk(const Scenario& scenario) : sc_(scenario) {
    for (const GroupDef& group : scenario.groups) comm_streams_.push_back(group.stream_name());
  }

  void thread(const ThreadDef& thread) {
    current_ = thread.stream.empty() ? std::string_view("main") : std::string_view(thread.stream);
    run(thread.body(), State{});
  }

  // The exits reached with work queued, by position, each with what was queued there.
  std::vector<std::pair<const Stmt*, State>> exits() const {
    std::vector<std::pair<const Stmt*, State>> out(found_.begin(), found_.end());
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return before(a.first, b.first); });
    return out;
  }

 private:
  // Bounds the rounds of one loop's fixed point (each round only adds work or drops waits).
  static constexpr int MAX_ROUNDS = 64;

  State run(std::span<const Stmt> body, State state) {
    for (const Stmt& stmt : body) {
      if (!state.reachable) break;
      state = step(stmt, std::move(state));
    }
    return state;
  }

  State step(const Stmt& stmt, State state) {
    switch (stmt.kind) {
      case StmtKind::OP: op(stmt, state); return state;
      case StmtKind::NCCL_GROUP: return run(stmt.body, std::move(state));
      case StmtKind::IF: {
        const Expr& cond = stmt.extra().cond;
        if (cond.is_constant()) return run(cond.value != 0 ? stmt.body : stmt.extra().else_body, std::move(state));
        return join(run(stmt.body, state), run(stmt.extra().else_body, state));
      }
      case StmtKind::CHOOSE: {
        State out{false, {}};
        for (const Branch& branch : stmt.branches) out = join(out, run(branch.body, state));
        return out;
      }
      case StmtKind::REPEAT: {
        const Expr& count = stmt.extra().count;
        if (count.is_constant() && count.value <= 0) return state;
        // The state at the top of the body: the entry, joined with every iteration's end.
        State top = state;
        State end = run(stmt.body, top);
        for (int round = 0; round < MAX_ROUNDS; ++round) {
          State next = join(top, end);
          if (next == top) break;
          top = std::move(next);
          end = run(stmt.body, top);
        }
        return count.is_constant() ? end : join(state, end);
      }
      case StmtKind::CALL: {
        const uint32_t callee = stmt.extra().callee;
        if (callee >= sc_.defines.size() || std::find(calls_.begin(), calls_.end(), callee) != calls_.end()) {
          return state;  // a recursive call: its effect is the walk already under way
        }
        calls_.push_back(callee);
        State out = run(sc_.defines[callee].body, std::move(state));
        calls_.pop_back();
        return out;
      }
    }
    return state;
  }

  // The stream an op's kernel runs on; empty for p2p on per-pair streams (no `sync: S` names it).
  std::string_view stream_of(const Stmt& stmt) const {
    if (!stmt.stream.empty()) return stmt.stream;
    if (stmt.op == OpKind::COMPUTE) return current_;
    if (is_p2p(stmt.op) && sc_.semantics.p2p_comm == P2pComm::PAIR) return {};
    return stmt.group < comm_streams_.size() ? std::string_view(comm_streams_[stmt.group]) : std::string_view();
  }

  // A kernel enqueued on `stream`: the waits the current stream has taken on are its, when the
  // stream is the current one or a communication op links it (engine_streams.cc, link_synchronous).
  void enqueue(State& state, const Stmt& stmt, std::string_view stream, bool chained) {
    for (Queued& q : state.queued) {
      if (q.chained && !stream.empty()) q.cover(stream);
    }
    Queued* q = state.find(&stmt);
    if (q == nullptr) {
      state.queued.push_back(Queued{&stmt, {}, {}, false, true});
      q = &state.queued.back();
    }
    q->handle = stmt.handle;
    q->covered.clear();
    if (!stream.empty()) q->covered.push_back(stream);
    q->chained = chained;
    q->every_path = true;
  }

  void op(const Stmt& stmt, State& state) {
    switch (stmt.op) {
      case OpKind::COMPUTE: {
        const std::string_view s = stream_of(stmt);
        if (s == current_) {
          enqueue(state, stmt, s, true);
        } else {  // a kernel on another stream waits for nothing of the current one
          Queued* q = state.find(&stmt);
          if (q == nullptr) {
            state.queued.push_back(Queued{&stmt, {}, {s}, false, true});
          } else {
            *q = Queued{&stmt, {}, {s}, false, true};
          }
        }
        return;
      }
      case OpKind::SYNC: {
        const std::string_view only = stmt.stream;
        std::erase_if(state.queued, [&](const Queued& q) { return only.empty() || q.covered_by(only); });
        return;
      }
      case OpKind::WAIT:
        for (Queued& q : state.queued) {
          if (!q.handle.empty() && q.handle == std::string_view(stmt.handle)) q.chained = true;
        }
        return;
      case OpKind::EXIT:
      case OpKind::CRASH:
        if (!state.queued.empty() && !stmt.aborts_queued) {
          auto [it, fresh] = found_.try_emplace(&stmt, state);
          if (!fresh) it->second = join(it->second, state);
        }
        state = State{false, {}};
        return;
      case OpKind::SLEEP:
      case OpKind::NEW_GROUP:
      case OpKind::INIT:
        return;
      default:
        break;
    }
    // Collectives and point to point; the current stream waits for a synchronous one.
    const std::string_view s = stream_of(stmt);
    const bool async = !stmt.handle.empty();
    enqueue(state, stmt, s, !async || s == current_);
    if (stmt.op == OpKind::BARRIER) {  // the host waits for the barrier, whose stream waited for the rest
      const Stmt* barrier = &stmt;
      std::erase_if(state.queued, [&](const Queued& q) { return q.op == barrier || (!s.empty() && q.covered_by(s)); });
    }
  }

  const Scenario& sc_;
  std::vector<std::string> comm_streams_;  // by group: "comm:NAME"
  std::string_view current_;
  std::vector<uint32_t> calls_;
  std::map<const Stmt*, State> found_;  // an exit or crash -> what was queued there (paths joined)
};

// Whether `body`, or a define it calls, holds an exit or crash: only such a thread is walked.
bool holds_an_end(const Scenario& sc, std::span<const Stmt> body, std::vector<char>& read) {
  const auto holds = [&](std::span<const Stmt> inner) { return holds_an_end(sc, inner, read); };
  for (const Stmt& stmt : body) {
    switch (stmt.kind) {
      case StmtKind::OP:
        if (stmt.op == OpKind::EXIT || stmt.op == OpKind::CRASH) return true;
        break;
      case StmtKind::NCCL_GROUP:
      case StmtKind::REPEAT:
        if (holds(stmt.body)) return true;
        break;
      case StmtKind::IF:
        if (holds(stmt.body) || holds(stmt.extra().else_body)) return true;
        break;
      case StmtKind::CHOOSE:
        for (const Branch& branch : stmt.branches) {
          if (holds(branch.body)) return true;
        }
        break;
      case StmtKind::CALL: {
        const uint32_t callee = stmt.extra().callee;
        if (callee < sc.defines.size() && read[callee] == 0) {
          read[callee] = 1;
          if (holds(sc.defines[callee].body)) return true;
        }
        break;
      }
    }
  }
  return false;
}

// The op to name: queued on every path if one is, else any; the latest in the file.
const Queued& to_name(const State& state) {
  const Queued* best = &state.queued.front();
  for (const Queued& q : state.queued) {
    if (std::tie(q.every_path, q.op->loc.line, q.op->loc.col) >
        std::tie(best->every_path, best->op->loc.line, best->op->loc.col)) {
      best = &q;
    }
  }
  return *best;
}

}  // namespace

void warn_exits_before_queued_work(const Scenario& scenario, std::string_view path,
                                   const std::function<void(SourceLoc, std::string)>& warning) {
  Walk walk(scenario);
  for (const RankProgram& program : scenario.programs) {
    for (const ThreadDef& thread : program) {
      std::vector<char> read(scenario.defines.size(), 0);
      if (thread.may_end_early() && holds_an_end(scenario, thread.body(), read)) walk.thread(thread);
    }
  }
  for (const auto& [exit, state] : walk.exits()) {
    const std::string_view name = op_kind_name(exit->op);
    const Queued& queued = to_name(state);
    const size_t others = state.queued.size() - 1;
    std::string what = fmt::format("{} at {}", op_kind_name(queued.op->op), format_location(path, queued.op->loc));
    if (others > 0) what += fmt::format(" and {} more", others);
    if (!queued.every_path) what += ", on some paths";
    warning(exit->loc, fmt::format("{} {} GPU work the host has not waited for ({}): the rank ends without "
                                   "waiting, and what has not run never runs; add 'sync' before it, or write "
                                   "'{}: {{queued_work: abort}}' if that is meant",
                                   name, queued.every_path ? "follows" : "may follow", what, name));
  }
}

}  // namespace lockstep::sim
