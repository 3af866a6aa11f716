#include "gpu_validation/replay_coordinator.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <tuple>
#include <utility>

#include <fmt/format.h>

namespace lockstep::gpu {

namespace {

using sim::OpKind;

// Every operation statement inside an NCCL group (ncclGroupStart/End), with its group statement
// and its position in the group's body.
struct GroupMember {
  const sim::Stmt* group = nullptr;
  size_t position = 0;
};

void collect_nccl_groups(std::span<const sim::Stmt> body, std::map<const sim::Stmt*, GroupMember>& out) {
  for (const sim::Stmt& s : body) {
    if (s.kind == sim::StmtKind::NCCL_GROUP) {
      for (size_t i = 0; i < s.body.size(); ++i) out[&s.body[i]] = {&s, i};
    }
    collect_nccl_groups(s.body, out);
    collect_nccl_groups(s.extra().else_body, out);
    for (const sim::Branch& b : s.branches) collect_nccl_groups(b.body, out);
  }
}

// A communication op's plan kind has its lockstep name; the rest complete locally
// (init_process_group too: the workers start initialised, build_plan).
PlanKind plan_kind(OpKind kind) {
  return parse_plan_kind(sim::op_kind_name(kind)).value_or(PlanKind::LOCAL);
}

void add(std::vector<uint32_t>& to, const std::vector<uint32_t>& from) { to.insert(to.end(), from.begin(), from.end()); }

void normalize(std::vector<uint32_t>& deps) {
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
}

// The dependencies of one rank's ops: lockstep's stream semantics (docs/semantics.md) as
// "posted only after these completed". A stream runs its kernels in order; a synchronous
// communication op waits for prior work on `main` and `main` waits for it; `async: H` leaves
// out the second edge until `wait: H`; the host blocks on barrier, sync and new_group, so every
// later op waits for them; the ops of an NCCL group hold one place on the stream of the first.
std::vector<PlanOp> plan_rank(const std::vector<sim::OpRecord>& records, const sim::Semantics& sem,
                              const std::map<const sim::Stmt*, GroupMember>& nccl_groups, int32_t& next_batch) {
  std::vector<PlanOp> ops;
  std::map<std::string, std::vector<uint32_t>> last;  // per stream: the ops its next kernel waits for
  std::map<std::string, std::vector<uint32_t>> host_of;  // per host thread: the ops it blocked on
  std::map<std::string, uint32_t> handles;
  // The open NCCL group: its statement, the last position seen, its first stream, its members.
  const sim::Stmt* open_group = nullptr;
  size_t open_position = 0;
  std::string open_stream;
  bool open_sync = false;
  std::vector<uint32_t> open_members, open_deps;
  auto close_group = [&] {
    if (open_group == nullptr) return;
    last[open_stream] = open_members;
    if (open_sync) last["main"] = open_members;
    open_group = nullptr;
    open_members.clear();
  };
  for (const sim::OpRecord& rec : records) {
    const sim::OpInstance& in = rec.op;
    PlanOp op;
    const auto i = static_cast<uint32_t>(ops.size());
    op.index = rec.index;
    op.kind = plan_kind(in.kind);
    op.name = std::string(sim::op_kind_name(in.kind));
    op.group = in.group;
    op.size_bytes = in.size_bytes;
    if (const sim::SplitSizes* splits = rec.splits.get()) {
      op.send_splits = splits->send;
      op.recv_splits = splits->receive;
    }
    op.dtype = static_cast<uint32_t>(in.dtype);
    op.dtype_bytes = sim::dtype_bytes(in.dtype);
    op.peer = in.peer;
    op.root = in.root;
    op.seq = rec.seq;
    const sim::Stmt* stmt = in.stmt;
    if (stmt != nullptr) op.tag = tag_hash(stmt->tag.str());
    if (in.kind == OpKind::RECV && in.peer < 0) op.match = rec.matched_peer;
    op.stream = rec.stream.empty() ? "main" : rec.stream;
    op.eager = in.kind == OpKind::SEND && sem.sends_eagerly(in.size_bytes);
    // Threads of a rank share its streams; each blocks only itself (barrier, sync, new_group).
    std::vector<uint32_t>& host = host_of[rec.thread];
    op.gates = host;  // what the host waits for before it issues this op
    normalize(op.gates);
    const bool async = stmt != nullptr && !stmt->handle.empty() && (sim::is_collective(in.kind) || sim::is_p2p(in.kind));

    const auto member = stmt != nullptr ? nccl_groups.find(stmt) : nccl_groups.end();
    const bool in_group = member != nccl_groups.end();
    if (in_group && open_group == member->second.group && member->second.position > open_position) {
      // The next op of the open NCCL group: posted with the first, on its place of the stream.
      open_position = member->second.position;
      op.batch = next_batch - 1;
      op.deps = open_deps;
      open_sync = open_sync || !async;
      open_members.push_back(i);
      if (async) handles[stmt->handle] = i;
      ops.push_back(std::move(op));
      continue;
    }
    close_group();

    if (sim::is_collective(in.kind) || sim::is_p2p(in.kind)) {
      add(op.deps, last[rec.stream]);
      if (rec.stream != "main") add(op.deps, last["main"]);
      add(op.deps, host);
      if (in_group) {
        open_group = member->second.group;
        open_position = member->second.position;
        open_stream = rec.stream;
        open_sync = !async;
        open_members = {i};
        open_deps = op.deps;
        normalize(open_deps);
        op.batch = next_batch++;
      } else {
        last[rec.stream] = {i};
        if (!async) last["main"] = {i};
      }
      if (async) handles[stmt->handle] = i;
      if (in.kind == OpKind::BARRIER) host = {i};  // enqueued, then the host waits for it
    } else if (in.kind == OpKind::COMPUTE) {
      add(op.deps, last[rec.stream]);
      add(op.deps, host);
      last[rec.stream] = {i};
    } else if (in.kind == OpKind::WAIT) {
      // `main` waits for the handle's op from here on; the host does not block.
      if (stmt != nullptr) {
        if (auto h = handles.find(stmt->handle); h != handles.end()) last["main"].push_back(h->second);
      }
      add(op.deps, host);
    } else if (in.kind == OpKind::SYNC) {
      if (stmt != nullptr && !stmt->stream.empty()) {
        add(op.deps, last[stmt->stream]);
      } else {
        for (const auto& [stream, front] : last) add(op.deps, front);
      }
      add(op.deps, host);
      host = {i};
    } else if (in.kind == OpKind::NEW_GROUP) {
      op.new_group = stmt != nullptr ? stmt->new_group : 0;
      add(op.deps, host);
      host = {i};
    } else {  // sleep, exit, crash: when the host gets there
      add(op.deps, host);
    }
    normalize(op.deps);
    ops.push_back(std::move(op));
  }
  return ops;
}

// comm_concurrency: each communication op's place in the rank's order of kernel starts in the
// model (by virtual start time, then issue order; ops that never started come last, unordered).
void number_starts(const std::vector<sim::OpRecord>& records, std::vector<PlanOp>& ops) {
  std::vector<std::pair<int64_t, uint32_t>> started;
  for (size_t i = 0; i < ops.size(); ++i) {
    const sim::OpRecord& rec = records[i];
    if (!holds_slot(ops, i)) continue;
    if (rec.start_ns >= 0 && rec.state != sim::KernelState::QUEUED) started.emplace_back(rec.start_ns, static_cast<uint32_t>(i));
  }
  std::sort(started.begin(), started.end());
  for (size_t k = 0; k < started.size(); ++k) ops[started[k].second].start = static_cast<uint32_t>(k);
}

std::string join_ranks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

std::string describe(const FrontierOp& op) {
  const std::string seq = op.seq > 0 ? fmt::format(" #{}", op.seq) : std::string();
  if (op.kind == "send") return fmt::format("send to rank {}{} on {}", op.peer, seq, op.group);
  if (op.kind == "recv") {
    return op.peer >= 0 ? fmt::format("recv from rank {}{} on {}", op.peer, seq, op.group)
                        : fmt::format("recv from any on {}", op.group);
  }
  if (op.kind == "new_group") return fmt::format("new_group #{}", op.seq);
  return fmt::format("{}{} on {}", op.kind, seq, op.group);
}

std::string describe_observed(int32_t rank, const FrontierOp& op) {
  return fmt::format("rank {} {} (op {})", rank, describe(op), op.index);
}

std::string describe_predicted(const PredictedOp& op) { return fmt::format("rank {} {} (op {})", op.rank, op.what, op.index); }

}  // namespace

PlanResult build_plan(const sim::Scenario& scenario, const sim::ExecutionResult& result, const std::string& backend) {
  PlanResult out;
  const sim::Semantics& sem = scenario.semantics;
  if (backend == "nccl") {
    for (const std::vector<sim::OpRecord>& ops : result.ops) {
      for (const sim::OpRecord& rec : ops) {
        if (rec.op.kind == OpKind::RECV && rec.op.peer < 0 && rec.matched_peer < 0) {
          out.cannot_express = fmt::format(
              "cannot express: an unmatched recv from any ({}); NCCL has no wildcard receive (ncclRecv names its "
              "peer: a matched one receives from the sender the schedule chose)",
              rec.op.stmt != nullptr ? fmt::format("{}:{}:{}", scenario.path, rec.op.stmt->loc.line, rec.op.stmt->loc.col)
                                     : std::string("a recorded op"));
          return out;
        }
      }
    }
  }
  if (scenario.launch.given) {
    // The replay starts one process per rank itself, each with its rank and the world size:
    // init_process_group is done before the first op. A launch that is anything else is the
    // bug, and it is not replayed.
    std::string problem;
    std::vector<int> seen(static_cast<size_t>(scenario.world), 0);
    const sim::LaunchProcess* first = scenario.launch.processes.empty() ? nullptr : &scenario.launch.processes.front();
    for (const sim::LaunchProcess& p : scenario.launch.processes) {
      const std::string at = fmt::format("{}:{}:{}", scenario.path, p.loc.line, p.loc.col);
      if (!problem.empty()) break;
      if (p.rank < 0 || p.rank >= scenario.world) {
        problem = fmt::format("a process passes rank {}, outside the world of {} ({})", p.rank, scenario.world, at);
      } else if (++seen[static_cast<size_t>(p.rank)] > 1) {
        problem = fmt::format("two processes pass rank {} ({})", p.rank, at);
      } else if (p.world_size != scenario.world) {
        problem = fmt::format("a process passes world_size {} in a world of {} ({})", p.world_size, scenario.world, at);
      } else if (first != nullptr && (p.init_method != first->init_method || p.backend != first->backend)) {
        problem = fmt::format("processes disagree on the init method or backend ({})", at);
      }
    }
    for (size_t r = 0; r < seen.size() && problem.empty(); ++r) {
      if (seen[r] == 0) problem = fmt::format("no process is started for rank {}", r);
    }
    if (!problem.empty()) {
      out.cannot_express = fmt::format(
          "cannot express: a broken launch: {}; the {} replay starts exactly one process per rank, with its rank and "
          "the world size, and initialises them before the first op",
          problem, backend);
      return out;
    }
  }
  std::map<const sim::Stmt*, GroupMember> nccl_groups;
  for (const sim::RankProgram& program : scenario.programs) {
    for (const sim::ThreadDef& thread : program) collect_nccl_groups(thread.body(), nccl_groups);
  }
  for (const sim::Define& define : scenario.defines) collect_nccl_groups(define.body, nccl_groups);

  Plan plan;
  plan.world = scenario.world;
  plan.comm_concurrency = sem.comm_concurrency;
  for (const sim::GroupDef& g : scenario.groups) plan.groups.push_back({g.name, g.comm_of_rank});
  int32_t next_batch = 0;
  for (int32_t r = 0; r < scenario.world; ++r) {
    const std::vector<sim::OpRecord> none;
    const std::vector<sim::OpRecord>& records =
        static_cast<size_t>(r) < result.ops.size() ? result.ops[static_cast<size_t>(r)] : none;
    plan.ranks.push_back(plan_rank(records, sem, nccl_groups, next_batch));
    if (sem.comm_concurrency > 0) number_starts(records, plan.ranks.back());
  }
  order_issues(plan, result);
  out.plan = std::move(plan);
  return out;
}

size_t order_issues(Plan& plan, const sim::ExecutionResult& result) {
  // A graph of events: per op its issue (I), its posting (P: issued and every dependency done)
  // and its completion (F: posted, and every partner posted), plus one node per collective that
  // stands for "every member posted". Steps are the issue events in a topological order, the
  // earliest issue time first.
  std::vector<size_t> base;
  size_t total = 0;
  for (const std::vector<PlanOp>& ops : plan.ranks) {
    base.push_back(total);
    total += ops.size();
  }
  const size_t op_nodes = 3 * total;
  std::vector<std::vector<uint32_t>> out(op_nodes);
  std::vector<uint32_t> in(op_nodes, 0);
  auto issue = [&](size_t r, size_t i) { return static_cast<uint32_t>(3 * (base[r] + i)); };
  auto posted = [&](size_t r, size_t i) { return issue(r, i) + 1; };
  auto done = [&](size_t r, size_t i) { return issue(r, i) + 2; };
  auto edge = [&](uint32_t from, uint32_t to) {
    out[from].push_back(to);
    ++in[to];
  };
  auto new_node = [&] {
    out.emplace_back();
    in.push_back(0);
    return static_cast<uint32_t>(out.size() - 1);
  };
  using Member = std::pair<size_t, size_t>;  // rank, op
  std::map<std::tuple<uint32_t, int32_t, uint32_t>, std::vector<Member>> collectives;  // group, comm, seq
  std::map<uint32_t, std::vector<Member>> new_groups;                                  // seq
  std::map<std::tuple<uint32_t, int32_t, int32_t>, std::vector<Member>> sends, recvs;  // group, from, to
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const std::vector<PlanOp>& ops = plan.ranks[r];
    for (size_t i = 0; i < ops.size(); ++i) {
      const PlanOp& op = ops[i];
      if (i > 0) edge(issue(r, i - 1), issue(r, i));
      edge(issue(r, i), posted(r, i));
      for (const uint32_t d : op.deps) edge(done(r, d), posted(r, i));
      edge(posted(r, i), done(r, i));
      for (const uint32_t g : op.gates) edge(done(r, g), issue(r, i));
      const auto rank = static_cast<int32_t>(r);
      if (op.kind == PlanKind::NEW_GROUP) {
        new_groups[op.seq].push_back({r, i});
      } else if (op.kind == PlanKind::SEND) {
        sends[{op.group, rank, op.peer}].push_back({r, i});
      } else if (op.kind == PlanKind::RECV) {
        recvs[{op.group, op.peer >= 0 ? op.peer : op.match, rank}].push_back({r, i});
      } else if (plan_kind_communicates(op.kind)) {
        collectives[{op.group, plan.groups[op.group].comm_of_rank[r], op.seq}].push_back({r, i});
      }
    }
  }
  // A collective completes once every member posted its op; one that lacks a member never does.
  auto rendezvous = [&](const std::vector<Member>& members, size_t expected) {
    const uint32_t all = new_node();
    for (const auto& [r, i] : members) {
      edge(posted(r, i), all);
      edge(all, done(r, i));
    }
    if (members.size() < expected) ++in[all];  // never
  };
  for (const auto& [key, members] : collectives) {
    const auto& [group, comm, seq] = key;
    const auto expected = static_cast<size_t>(
        std::count(plan.groups[group].comm_of_rank.begin(), plan.groups[group].comm_of_rank.end(), comm));
    rendezvous(members, expected);
  }
  for (const auto& [seq, members] : new_groups) rendezvous(members, plan.ranks.size());
  // Point to point: the k-th send from a rank to another pairs with the k-th receive of it
  // there (MPI's and NCCL's order per pair). A synchronous send completes once its receive was
  // posted, an eager one without it; a receive once its send was posted.
  for (const auto& [key, list] : sends) {
    const auto& [group, from, to] = key;
    const auto found = recvs.find({group, from, to});
    for (size_t k = 0; k < list.size(); ++k) {
      const auto& [r, i] = list[k];
      if (plan.ranks[r][i].eager) continue;
      if (found != recvs.end() && k < found->second.size()) {
        edge(posted(found->second[k].first, found->second[k].second), done(r, i));
      } else {
        ++in[done(r, i)];  // never received
      }
    }
  }
  for (const auto& [key, list] : recvs) {
    const auto& [group, from, to] = key;
    const auto found = sends.find({group, from, to});
    for (size_t k = 0; k < list.size(); ++k) {
      const auto& [r, i] = list[k];
      if (std::get<1>(key) < 0) continue;  // an unmatched wildcard: any sender
      if (found != sends.end() && k < found->second.size()) {
        edge(posted(found->second[k].first, found->second[k].second), done(r, i));
      } else {
        ++in[done(r, i)];  // nothing sent
      }
    }
  }

  // Kahn's algorithm: the other events as soon as they are ready, the ready issue events by
  // (issue time, rank, index).
  using Key = std::tuple<int64_t, size_t, size_t>;
  auto key_of = [&](size_t r, size_t i) {
    const int64_t at = r < result.ops.size() && i < result.ops[r].size() ? result.ops[r][i].issue_ns : 0;
    return Key{at, r, i};
  };
  std::set<Key> ready;
  std::vector<uint32_t> work;
  std::vector<char> taken(total, 0);
  std::vector<size_t> next_of(plan.ranks.size(), 0);  // per rank: its first op without a step
  auto on_ready = [&](uint32_t node) {
    if (node < op_nodes && node % 3 == 0) {
      const size_t flat = node / 3;
      const size_t r = static_cast<size_t>(std::upper_bound(base.begin(), base.end(), flat) - base.begin()) - 1;
      if (!taken[flat]) ready.insert(key_of(r, flat - base[r]));
    } else {
      work.push_back(node);
    }
  };
  for (uint32_t n = 0; n < in.size(); ++n) {
    if (in[n] == 0) on_ready(n);
  }
  auto release = [&](uint32_t node) {
    for (const uint32_t to : out[node]) {
      if (in[to] > 0 && --in[to] == 0) on_ready(to);
    }
  };
  auto drain = [&] {
    while (!work.empty()) {
      const uint32_t n = work.back();
      work.pop_back();
      release(n);
    }
  };
  uint32_t step = 0;
  size_t forced = 0;
  auto take = [&](size_t r, size_t i) {
    ready.erase(key_of(r, i));
    taken[base[r] + i] = 1;
    plan.ranks[r][i].step = step++;
    next_of[r] = i + 1;
    release(issue(r, i));
  };
  while (step < total) {
    drain();
    size_t r = 0, i = 0;
    if (!ready.empty()) {
      std::tie(std::ignore, r, i) = *ready.begin();
    } else {
      // Nothing is ready: a wait the recorded ops cannot satisfy. The rank whose next op comes
      // first in time goes on.
      std::optional<Key> best;
      for (size_t k = 0; k < plan.ranks.size(); ++k) {
        if (next_of[k] < plan.ranks[k].size() && (!best || key_of(k, next_of[k]) < *best)) best = key_of(k, next_of[k]);
      }
      if (!best) break;
      std::tie(std::ignore, r, i) = *best;
      ++forced;
    }
    take(r, i);
    // The rest of its NCCL group: issued with it.
    const int32_t batch = plan.ranks[r][i].batch;
    while (batch >= 0 && i + 1 < plan.ranks[r].size() && plan.ranks[r][i + 1].batch == batch) {
      drain();
      take(r, ++i);
    }
  }
  return forced;
}

sim::Scenario solo_scenario(const sim::Scenario& scenario) {
  sim::Scenario solo = scenario;
  for (sim::GroupDef& g : solo.groups) {
    g.comms.clear();
    for (size_t r = 0; r < g.comm_of_rank.size(); ++r) {
      if (g.comm_of_rank[r] < 0) continue;
      g.comm_of_rank[r] = static_cast<int32_t>(g.comms.size());
      g.comms.push_back({static_cast<int32_t>(r)});
    }
  }
  return solo;
}

namespace {

// The solo run follows the execution's choices that belong to one rank: at its k-th choice of
// a `choose` branch, the branch it took k-th in the execution, and likewise for which of its
// host threads steps next; where none applies (a rank past the point it had reached), the
// earliest option, as `lockstep run` would. full_sequences checks the result against the
// recorded ops.
class SoloStrategy final : public sim::Strategy {
 public:
  explicit SoloStrategy(const std::vector<sim::Option>& choices) {
    for (const sim::Option& o : choices) {
      if (o.kind == sim::ChoiceKind::BRANCH && o.rank >= 0) branches_[o.rank].push_back(o.detail);
      if (o.kind == sim::ChoiceKind::THREAD && o.rank >= 0) threads_[o.rank].push_back(o.thread);
    }
  }
  size_t choose(const sim::ChoicePoint& point) override {
    for (size_t i = 0; i < point.options.size(); ++i) {
      const sim::Option& o = point.options[i];
      if (o.kind == sim::ChoiceKind::BRANCH && take(branches_, o.rank, o.detail)) return i;
      if (o.kind == sim::ChoiceKind::THREAD && take(threads_, o.rank, o.thread)) return i;
    }
    return timed_.choose(point);
  }

 private:
  static bool take(std::map<int32_t, std::vector<int32_t>>& queues, int32_t rank, int32_t value) {
    auto it = queues.find(rank);
    if (it == queues.end() || it->second.empty() || it->second.front() != value) return false;
    it->second.erase(it->second.begin());
    return true;
  }

  std::map<int32_t, std::vector<int32_t>> branches_, threads_;
  sim::TimedStrategy timed_;
};

// Whether every rank's ops in `whole` begin with the ops it issued in `prefix` (kind,
// communicator sequence number, size, statement).
bool extends(const sim::ExecutionResult& prefix, const sim::ExecutionResult& whole) {
  for (size_t r = 0; r < prefix.ops.size(); ++r) {
    if (r >= whole.ops.size() || whole.ops[r].size() < prefix.ops[r].size()) return false;
    for (size_t i = 0; i < prefix.ops[r].size(); ++i) {
      const sim::OpRecord& a = prefix.ops[r][i];
      const sim::OpRecord& b = whole.ops[r][i];
      const bool same_place = (a.op.stmt == nullptr) == (b.op.stmt == nullptr) &&
                              (a.op.stmt == nullptr || a.op.stmt->loc == b.op.stmt->loc);
      if (a.op.kind != b.op.kind || a.seq != b.seq || a.op.size_bytes != b.op.size_bytes || !same_place) {
        return false;
      }
    }
  }
  return true;
}

// The members of a mismatched collective (or new_group) that had not issued their op in
// `result` when the model stopped; empty when the recorded ops hold everything the mismatch
// needs (a p2p mismatch: both ops are there).
std::vector<int32_t> missing_from_mismatch(const sim::Scenario& scenario, const sim::ExecutionResult& result) {
  std::vector<int32_t> missing;
  const sim::MismatchInfo& m = *result.mismatch;
  if (!sim::is_collective(m.op_a.op.kind) && m.op_a.op.kind != OpKind::NEW_GROUP) return missing;
  const sim::GroupDef& g = scenario.groups[m.group];
  const bool over_world = m.op_a.op.kind == OpKind::NEW_GROUP;
  const int32_t comm = over_world ? 0 : g.comm_of_rank[static_cast<size_t>(m.rank_a)];
  for (int32_t r = 0; r < scenario.world; ++r) {
    if (!over_world && g.comm_of_rank[static_cast<size_t>(r)] != comm) continue;
    bool issued = false;
    if (static_cast<size_t>(r) < result.ops.size()) {
      for (const sim::OpRecord& rec : result.ops[static_cast<size_t>(r)]) {
        const bool same = over_world ? rec.op.kind == OpKind::NEW_GROUP : rec.op.group == m.group && sim::is_collective(rec.op.kind);
        issued = issued || (same && rec.seq == m.seq);
      }
    }
    if (!issued) missing.push_back(r);
  }
  return missing;
}

}  // namespace

FullSequences full_sequences(const sim::Scenario& scenario, const sim::ExecutionResult& result,
                             const std::vector<sim::Option>& choices, sim::EngineOptions options) {
  FullSequences out;
  if (result.end != sim::ExecutionEnd::MISMATCH || !result.mismatch) {
    out.result = result;
    return out;
  }
  options.record_ops = true;
  auto solo = std::make_shared<const sim::Scenario>(solo_scenario(scenario));
  sim::Engine engine(*solo, options);
  SoloStrategy strategy(choices);
  sim::ExecutionResult alone = engine.run(strategy);
  if (alone.end == sim::ExecutionEnd::COMPLETED && extends(result, alone)) {
    out.result = std::move(alone);
    out.solo = std::move(solo);
    return out;
  }
  const std::vector<int32_t> missing = missing_from_mismatch(scenario, result);
  if (missing.empty()) {
    out.result = result;
    out.cut = true;
    return out;
  }
  const sim::MismatchInfo& m = *result.mismatch;
  const std::string what = m.op_a.op.kind == OpKind::NEW_GROUP
                               ? fmt::format("new_group #{}", m.seq)
                               : fmt::format("{} #{} on {}", sim::op_kind_name(m.op_a.op.kind), m.seq, scenario.groups[m.group].name);
  out.why = fmt::format(
      "cannot express: the mismatch ({} differs in {}) blocks rank{} {} before issuing it, and a "
      "run of each rank alone, which would give their ops, {}",
      what, m.field, missing.size() == 1 ? "" : "s", join_ranks(missing),
      alone.end == sim::ExecutionEnd::COMPLETED ? "takes other steps than the execution did"
                                                : "cannot pass what needs partners (point-to-point, new_group)");
  return out;
}

Prediction predict(const sim::Scenario& scenario, const std::optional<checker::Bug>& bug) {
  Prediction p;
  if (!bug) return p;
  p.kind = bug->kind;
  p.summary = bug->summary;
  for (const sim::StuckOp& s : bug->stuck) p.stuck.push_back({s.rank, s.op.index, sim::describe_op(scenario, s.op)});
  if (bug->mismatch) {
    const sim::MismatchInfo& m = *bug->mismatch;
    p.mismatched.push_back({m.rank_a, m.op_a.index, sim::describe_op(scenario, m.op_a)});
    p.mismatched.push_back({m.rank_b, m.op_b.index, sim::describe_op(scenario, m.op_b)});
    p.mismatch_group = scenario.groups[m.group].name;
    p.mismatch_seq = m.seq;
    p.mismatch_collective = sim::is_collective(m.op_a.op.kind);
  }
  return p;
}

size_t compact_sizes(Plan& plan, int64_t cap_bytes) {
  std::set<int64_t> large;
  int64_t quantum = 8 * 64;
  for (const PlanGroup& g : plan.groups) {
    std::map<int32_t, int64_t> members;
    for (const int32_t c : g.comm_of_rank) {
      if (c >= 0) ++members[c];
    }
    for (const auto& [comm, n] : members) quantum = std::lcm(quantum, n * 8);
  }
  for (const std::vector<PlanOp>& ops : plan.ranks) {
    for (const PlanOp& op : ops) {
      if (op.size_bytes > cap_bytes) large.insert(op.size_bytes);
      for (const std::vector<int64_t>* splits : {&op.send_splits, &op.recv_splits}) {
        for (int64_t bytes : *splits) {
          if (bytes > cap_bytes) large.insert(bytes);
        }
      }
    }
  }
  const int64_t base = (cap_bytes / quantum + 1) * quantum;
  std::map<int64_t, int64_t> to;
  int64_t next = base;
  for (const int64_t size : large) {
    to[size] = next;
    next += quantum;
  }
  size_t changed = 0;
  for (std::vector<PlanOp>& ops : plan.ranks) {
    for (PlanOp& op : ops) {
      if (auto it = to.find(op.size_bytes); it != to.end()) {
        op.size_bytes = it->second;
        ++changed;
      }
      // Split sizes map as sizes do, so that what agreed agrees still and what did not does not.
      for (std::vector<int64_t>* splits : {&op.send_splits, &op.recv_splits}) {
        for (int64_t& bytes : *splits) {
          if (auto it = to.find(bytes); it != to.end()) bytes = it->second;
        }
      }
    }
  }
  return changed;
}

void note_queued(Prediction& p, const sim::Scenario& scenario, const sim::ExecutionResult& result) {
  if (p.kind != sim::Verdict::DEADLOCK && p.kind != sim::Verdict::HANG) return;
  for (size_t r = 0; r < result.ops.size(); ++r) {
    for (const sim::OpRecord& rec : result.ops[r]) {
      if ((sim::is_collective(rec.op.kind) || sim::is_p2p(rec.op.kind)) && rec.state == sim::KernelState::QUEUED) {
        p.queued.push_back({static_cast<int32_t>(r), rec.index, sim::describe_op(scenario, rec)});
      }
    }
  }
}

void locate_mismatch(Prediction& p, const Plan& plan) {
  p.mismatch_index.assign(static_cast<size_t>(plan.world), -1);
  if (p.kind != sim::Verdict::MISMATCH) return;
  if (p.mismatch_collective && !p.mismatched.empty()) {
    // The members of the mismatched communicator (a group name may stand for several, one per
    // mesh coordinate).
    size_t group = plan.groups.size();
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      if (plan.groups[g].name == p.mismatch_group) group = g;
    }
    if (group == plan.groups.size()) return;
    const std::vector<int32_t>& comm_of = plan.groups[group].comm_of_rank;
    const int32_t comm = comm_of[static_cast<size_t>(p.mismatched.front().rank)];
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      if (comm_of[r] != comm) continue;
      for (const PlanOp& op : plan.ranks[r]) {
        const bool collective = plan_kind_communicates(op.kind) && op.kind != PlanKind::SEND && op.kind != PlanKind::RECV &&
                                op.kind != PlanKind::NEW_GROUP;
        if (collective && plan.groups[op.group].name == p.mismatch_group && op.seq == p.mismatch_seq) {
          p.mismatch_index[r] = op.index;
          break;
        }
      }
    }
  }
  for (const PredictedOp& m : p.mismatched) {
    if (m.rank >= 0 && m.rank < plan.world) p.mismatch_index[static_cast<size_t>(m.rank)] = m.index;
  }
}

namespace {

std::string describe_next(int32_t rank, const FrontierNext& next) {
  return fmt::format("rank {} op {} ({})", rank, next.op.index, describe(next.op));
}

// Why the global issue order stopped at step `grants.issued`: who holds that step's grant and
// why it never issued it, and who waits for theirs. Empty when every step was issued.
std::string stall_account(const GrantStats& grants, const std::vector<std::optional<Frontier>>& frontiers) {
  if (grants.issued >= grants.steps) return {};
  std::string holder;
  const int32_t r = grants.holder;
  const Frontier* f = r >= 0 && static_cast<size_t>(r) < frontiers.size() && frontiers[static_cast<size_t>(r)]
                          ? &*frontiers[static_cast<size_t>(r)]
                          : nullptr;
  std::string state;
  if (f == nullptr || f->status == FrontierStatus::RUNNING) {
    state = "which never reported";
  } else if (f->status == FrontierStatus::EXITED || f->status == FrontierStatus::CRASHED) {
    state = std::string("which ") + (f->status == FrontierStatus::EXITED ? "exited" : "crashed");
  } else {
    std::string in, failed;
    for (const FrontierOp& op : f->ops) {
      if (op.problem.empty()) {
        in += fmt::format("{}{} (op {})", in.empty() ? "" : ", ", describe(op), op.index);
      } else {
        failed += fmt::format("{}{} (op {}) failed ({})", failed.empty() ? "" : " and whose ", describe(op), op.index, op.problem);
      }
    }
    if (!failed.empty()) state = "whose " + failed;
    if (!in.empty()) state += (state.empty() ? "stuck in " : " and stuck in ") + in;
    if (state.empty()) state = "with nothing outstanding";
  }
  std::string what = f != nullptr && f->next && f->next->step == grants.issued
                         ? fmt::format("op {} ({})", f->next->op.index, describe(f->next->op))
                         : std::string("its op");
  std::string text = fmt::format("the issue order stopped at step {} of {}: rank {}, {}, never issued {}", grants.issued,
                                 grants.steps, r, state, what);
  for (size_t k = 0; k < frontiers.size(); ++k) {
    const auto rank = static_cast<int32_t>(k);
    if (rank == r || !frontiers[k] || !frontiers[k]->next || frontiers[k]->next->granted) continue;
    text += fmt::format("; rank {} waits for its grant of op {} ({})", rank, frontiers[k]->next->op.index,
                        describe(frontiers[k]->next->op));
  }
  return text;
}

}  // namespace

ReplayOutcome compare_frontiers(const Prediction& prediction, const std::vector<std::optional<Frontier>>& frontiers,
                                const std::string& backend, const GrantStats* grants) {
  ReplayOutcome out;
  const std::string predicted_kind = prediction.kind ? std::string(sim::verdict_name(*prediction.kind)) : "ok";
  std::vector<int32_t> silent, completed, exited;
  std::vector<std::pair<int32_t, FrontierOp>> stuck, failed;
  std::vector<std::pair<int32_t, FrontierNext>> unissued;  // ranks that did not issue every op
  for (size_t r = 0; r < frontiers.size(); ++r) {
    const auto rank = static_cast<int32_t>(r);
    if (!frontiers[r] || frontiers[r]->status == FrontierStatus::RUNNING) {
      silent.push_back(rank);
      continue;
    }
    const Frontier& f = *frontiers[r];
    switch (f.status) {
      case FrontierStatus::COMPLETED: completed.push_back(rank); break;
      case FrontierStatus::EXITED: case FrontierStatus::CRASHED: exited.push_back(rank); break;
      case FrontierStatus::STUCK:
        for (const FrontierOp& op : f.ops) stuck.emplace_back(rank, op);
        break;
      case FrontierStatus::FAILED:  // failed ops have a problem; the others are stuck
        for (const FrontierOp& op : f.ops) (op.problem.empty() ? stuck : failed).emplace_back(rank, op);
        break;
      case FrontierStatus::RUNNING: break;
    }
    if (f.next && (f.status == FrontierStatus::STUCK || f.status == FrontierStatus::FAILED)) unissued.emplace_back(rank, *f.next);
  }
  for (const auto& [rank, op] : stuck) out.details.push_back(fmt::format("stuck: {}", describe_observed(rank, op)));
  for (const auto& [rank, op] : failed) {
    out.details.push_back(fmt::format("failed: {}: {}", describe_observed(rank, op), op.problem));
  }
  for (const auto& [rank, next] : unissued) {
    out.details.push_back(next.granted ? fmt::format("not issued: {}, step {}: its host waits for an op it blocks on",
                                                     describe_next(rank, next), next.step)
                                       : fmt::format("waits for its grant: {}, step {}", describe_next(rank, next), next.step));
  }
  if (!silent.empty()) {
    out.details.push_back(fmt::format("rank{} {} never reported (killed at the wall-clock limit, or the worker died)",
                                      silent.size() == 1 ? "" : "s", join_ranks(silent)));
  }
  if (!completed.empty()) out.details.push_back(fmt::format("completed: rank{} {}", completed.size() == 1 ? "" : "s", join_ranks(completed)));
  if (!exited.empty()) out.details.push_back(fmt::format("exited or crashed: rank{} {}", exited.size() == 1 ? "" : "s", join_ranks(exited)));
  // Ranks that all finished issued everything they had (a worker that does not report its
  // issues, as a test's fake, may leave the coordinator's count behind).
  const bool all_finished = completed.size() + exited.size() == frontiers.size();
  const std::string stall = grants != nullptr && !all_finished ? stall_account(*grants, frontiers) : std::string();
  if (!stall.empty()) out.details.push_back(stall);

  if (!silent.empty()) {
    out.headline = fmt::format("UNDECIDED ({}): rank{} {} never reported a frontier", backend, silent.size() == 1 ? "" : "s",
                               join_ranks(silent));
    return out;
  }
  // A mismatch shows as an error, wrong data or a hang at one of the mismatched ops.
  auto at_mismatch = [&](int32_t rank, const FrontierOp& op) {
    if (static_cast<size_t>(rank) < prediction.mismatch_index.size()) return prediction.mismatch_index[static_cast<size_t>(rank)] == op.index;
    for (const PredictedOp& m : prediction.mismatched) {
      if (m.rank == rank && m.index == op.index) return true;
    }
    return prediction.mismatch_collective && op.group == prediction.mismatch_group && op.seq == prediction.mismatch_seq &&
           op.kind != "send" && op.kind != "recv";
  };
  if (failed.empty() && stuck.empty() && unissued.empty()) {
    out.verdict = ReplayVerdict::NOT_REPRODUCED;
    out.headline = fmt::format("NOT REPRODUCED ({}): every rank completed, data correct", backend);
    if (prediction.kind) out.headline += fmt::format(" (the model predicted a {}: {})", predicted_kind, prediction.summary);
    return out;
  }
  if (prediction.kind == sim::Verdict::MISMATCH) {
    // Confirmed: some rank failed or hung at a mismatched op, and no rank failed or hung before
    // its own op in the mismatch, or never issued it (what comes after it, or on ranks with no
    // part in it, is the mismatch's aftermath: ranks out of step wait for each other).
    bool some_at = false, none_before = true;
    const std::pair<int32_t, FrontierOp>* offender = nullptr;
    auto index_of = [&](int32_t rank) {
      return static_cast<size_t>(rank) < prediction.mismatch_index.size() ? prediction.mismatch_index[static_cast<size_t>(rank)]
                                                                          : int64_t{-1};
    };
    auto judge = [&](const std::pair<int32_t, FrontierOp>& anomaly) {
      const auto& [rank, op] = anomaly;
      some_at = some_at || at_mismatch(rank, op);
      const int64_t m = index_of(rank);
      if (m >= 0 && op.index < m && none_before) {
        none_before = false;
        offender = &anomaly;
      }
    };
    for (const auto& anomaly : failed) judge(anomaly);
    for (const auto& anomaly : stuck) judge(anomaly);
    const std::pair<int32_t, FrontierNext>* never = nullptr;  // a rank that never issued its op in the mismatch
    for (const auto& u : unissued) {
      const int64_t m = index_of(u.first);
      if (never == nullptr && m >= 0 && u.second.op.index <= m) never = &u;
    }
    if (some_at && none_before && never == nullptr) {
      const auto& first = failed.empty() ? stuck.front() : failed.front();
      out.verdict = ReplayVerdict::CONFIRMED;
      out.headline = fmt::format("CONFIRMED ({}): mismatch: {} {} at the predicted op, as predicted ({})", backend,
                                 describe_observed(first.first, first.second),
                                 failed.empty() ? "hung" : "failed (" + first.second.problem + ")", prediction.summary);
      return out;
    }
    if (offender == nullptr && never != nullptr) {
      const auto& [rank, next] = *never;
      out.headline = fmt::format("UNDECIDED ({}): the model predicted a mismatch ({}), but rank {} never issued its op in "
                                 "the mismatch (op {}): it stopped before op {} ({}){}",
                                 backend, prediction.summary, rank, index_of(rank), next.op.index, describe(next.op),
                                 stall.empty() ? std::string() : "; " + stall);
      return out;
    }
    const auto& first = failed.empty() ? (stuck.empty() ? std::pair<int32_t, FrontierOp>{} : stuck.front()) : failed.front();
    const auto& shown = offender != nullptr ? *offender : first;
    out.headline = fmt::format("UNDECIDED ({}): the model predicted a mismatch ({}), but {} {} {}", backend,
                               prediction.summary, describe_observed(shown.first, shown.second),
                               shown.second.problem.empty() ? "hung" : "failed",
                               offender != nullptr ? "before its own op in the mismatch" : "elsewhere");
    if (!stall.empty()) out.headline += "; " + stall;
    return out;
  }
  if (!failed.empty()) {
    const auto& [rank, op] = failed.front();
    out.headline = fmt::format("UNDECIDED ({}): {} failed: {} (the model predicted {})", backend, describe_observed(rank, op),
                               op.problem, prediction.kind ? predicted_kind + ": " + prediction.summary : "completion");
    return out;
  }
  // Hangs: the set of ops the ranks are stuck in against the prediction's, with every op the
  // model issued issued (under granted order a step that never was means the hardware held
  // back something the model completed).
  std::set<std::pair<int32_t, uint32_t>> observed, predicted;
  for (const auto& [rank, op] : stuck) observed.insert({rank, op.index});
  for (const PredictedOp& p : prediction.stuck) predicted.insert({p.rank, p.index});
  std::set<std::pair<int32_t, uint32_t>> queued;
  for (const PredictedOp& q : prediction.queued) queued.insert({q.rank, q.index});
  bool covered = std::includes(observed.begin(), observed.end(), predicted.begin(), predicted.end());
  for (const auto& key : observed) covered = covered && (predicted.count(key) || queued.count(key));
  if (prediction.kind && (prediction.kind == sim::Verdict::DEADLOCK || prediction.kind == sim::Verdict::HANG) && covered &&
      unissued.empty()) {
    out.verdict = ReplayVerdict::CONFIRMED;
    std::string where;
    for (const auto& [rank, op] : stuck) {
      if (predicted.count({rank, op.index})) where += (where.empty() ? "" : "; ") + describe_observed(rank, op);
    }
    out.headline = fmt::format("CONFIRMED ({}): {}: {} hung, matches prediction", backend, predicted_kind, where);
    for (const auto& [rank, op] : stuck) {
      if (!predicted.count({rank, op.index})) {
        out.details.push_back("also outstanding, queued behind them in the model too: " + describe_observed(rank, op));
      }
    }
    return out;
  }
  std::string where;
  for (const auto& [rank, op] : stuck) where += (where.empty() ? "" : "; ") + describe_observed(rank, op);
  std::string account = stall;
  if (account.empty()) {
    for (const auto& [rank, next] : unissued) {
      account += fmt::format("{}{} never issued op {} ({}): its host waits for an op it blocks on", account.empty() ? "" : "; ",
                             fmt::format("rank {}", rank), next.op.index, describe(next.op));
    }
  }
  out.headline = fmt::format("UNDECIDED ({}): hung elsewhere: {}{}; the model predicted {}", backend,
                             where.empty() ? std::string("nothing outstanding") : where,
                             account.empty() ? std::string() : "; " + account,
                             prediction.kind ? predicted_kind + ": " + prediction.summary : "completion");
  for (const PredictedOp& p : prediction.stuck) {
    if (!observed.count({p.rank, p.index})) out.details.push_back("predicted, not observed: " + describe_predicted(p));
  }
  for (const auto& [rank, op] : stuck) {
    if (!predicted.count({rank, op.index})) out.details.push_back("observed, not predicted: " + describe_observed(rank, op));
  }
  return out;
}

}  // namespace lockstep::gpu
