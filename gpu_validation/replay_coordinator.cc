#include "gpu_validation/replay_coordinator.h"

#include <algorithm>
#include <map>
#include <set>
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

void collect_nccl_groups(const std::vector<sim::Stmt>& body, std::map<const sim::Stmt*, GroupMember>& out) {
  for (const sim::Stmt& s : body) {
    if (s.kind == sim::StmtKind::NCCL_GROUP) {
      for (size_t i = 0; i < s.body.size(); ++i) out[&s.body[i]] = {&s, i};
    }
    collect_nccl_groups(s.body, out);
    collect_nccl_groups(s.extra().else_body, out);
    for (const sim::Branch& b : s.branches) collect_nccl_groups(b.body, out);
  }
}

PlanKind plan_kind(OpKind kind) {
  switch (kind) {
    case OpKind::ALLREDUCE: return PlanKind::ALLREDUCE;
    case OpKind::ALLGATHER: return PlanKind::ALLGATHER;
    case OpKind::REDUCE_SCATTER: return PlanKind::REDUCE_SCATTER;
    case OpKind::BROADCAST: return PlanKind::BROADCAST;
    case OpKind::REDUCE: return PlanKind::REDUCE;
    case OpKind::ALL_TO_ALL: return PlanKind::ALL_TO_ALL;
    case OpKind::GATHER: return PlanKind::GATHER;
    case OpKind::SCATTER: return PlanKind::SCATTER;
    case OpKind::BARRIER: return PlanKind::BARRIER;
    case OpKind::SEND: return PlanKind::SEND;
    case OpKind::RECV: return PlanKind::RECV;
    case OpKind::NEW_GROUP: return PlanKind::NEW_GROUP;
    case OpKind::EXIT: return PlanKind::EXIT;
    case OpKind::CRASH: return PlanKind::CRASH;
    case OpKind::INIT: return PlanKind::LOCAL;  // init_process_group: replays start initialised
    case OpKind::COMPUTE: case OpKind::SLEEP: case OpKind::SYNC: case OpKind::WAIT: return PlanKind::LOCAL;
  }
  return PlanKind::LOCAL;
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
std::vector<PlanOp> plan_rank(const std::vector<sim::OpRecord>& records,
                              const std::map<const sim::Stmt*, GroupMember>& nccl_groups, int32_t& next_batch) {
  std::vector<PlanOp> ops;
  std::map<std::string, std::vector<uint32_t>> last;  // per stream: the ops its next kernel waits for
  std::vector<uint32_t> host;                         // ops the host blocked on
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
    op.dtype = static_cast<uint32_t>(in.dtype);
    op.dtype_bytes = sim::dtype_bytes(in.dtype);
    op.peer = in.peer;
    op.root = in.root;
    op.seq = rec.seq;
    const sim::Stmt* stmt = in.stmt;
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
  if (sem.comm_concurrency != 0) {
    out.cannot_express = fmt::format(
        "cannot express: comm_concurrency: {} (a bound on running communication kernels and their start order; "
        "{} progresses every posted request at once)",
        sem.comm_concurrency, backend);
    return out;
  }
  if (sem.p2p == sim::P2pMode::EAGER) {
    out.cannot_express = fmt::format(
        "cannot express: p2p: eager (eager_limit {} B); the {} replay sends with MPI_Issend, which completes only when "
        "matched (rendezvous)",
        sem.eager_limit_bytes, backend);
    return out;
  }
  for (int32_t r = 0; r < scenario.world; ++r) {
    if (scenario.program_of(r).size() > 1) {
      out.cannot_express = fmt::format(
          "cannot express: several host threads per rank (rank {} runs {}); the {} replay runs one issue order per rank",
          r, scenario.program_of(r).size(), backend);
      return out;
    }
  }
  std::map<const sim::Stmt*, GroupMember> nccl_groups;
  for (const sim::RankProgram& program : scenario.programs) {
    for (const sim::ThreadDef& thread : program) collect_nccl_groups(thread.body, nccl_groups);
  }
  for (const sim::Define& define : scenario.defines) collect_nccl_groups(define.body, nccl_groups);

  Plan plan;
  plan.world = scenario.world;
  for (const sim::GroupDef& g : scenario.groups) plan.groups.push_back({g.name, g.comm_of_rank});
  int32_t next_batch = 0;
  for (int32_t r = 0; r < scenario.world; ++r) {
    const std::vector<sim::OpRecord> none;
    const std::vector<sim::OpRecord>& records =
        static_cast<size_t>(r) < result.ops.size() ? result.ops[static_cast<size_t>(r)] : none;
    plan.ranks.push_back(plan_rank(records, nccl_groups, next_batch));
  }
  out.plan = std::move(plan);
  return out;
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

std::optional<sim::ExecutionResult> full_sequences(const sim::Scenario& solo, const sim::ExecutionResult& result,
                                                   sim::EngineOptions options, std::string& why) {
  if (result.end != sim::ExecutionEnd::MISMATCH) return result;
  options.record_ops = true;
  sim::Engine engine(solo, options);
  sim::TimedStrategy timed;
  sim::ExecutionResult alone = engine.run(timed);
  if (alone.end != sim::ExecutionEnd::COMPLETED) {
    why = "cannot express: the model stops at the first mismatch, so some ranks have no ops recorded past it, and "
          "their whole sequences cannot be derived without their partners (point-to-point ops, wildcards or "
          "agreed choices)";
    return std::nullopt;
  }
  return alone;
}

Prediction predict(const sim::Scenario& scenario, const std::optional<checker::Bug>& bug) {
  Prediction p;
  if (!bug) return p;
  p.kind = bug->kind;
  p.summary = bug->summary;
  for (const sim::StuckOp& s : bug->stuck) p.stuck.push_back({s.rank, s.op.index, checker::describe_op(scenario, s.op)});
  if (bug->mismatch) {
    const sim::MismatchInfo& m = *bug->mismatch;
    p.mismatched.push_back({m.rank_a, m.op_a.index, checker::describe_op(scenario, m.op_a)});
    p.mismatched.push_back({m.rank_b, m.op_b.index, checker::describe_op(scenario, m.op_b)});
    p.mismatch_group = scenario.groups[m.group].name;
    p.mismatch_seq = m.seq;
    p.mismatch_collective = sim::is_collective(m.op_a.op.kind);
  }
  return p;
}

ReplayOutcome compare_frontiers(const Prediction& prediction, const std::vector<std::optional<Frontier>>& frontiers,
                                const std::string& backend) {
  ReplayOutcome out;
  const std::string predicted_kind = prediction.kind ? std::string(sim::verdict_name(*prediction.kind)) : "ok";
  std::vector<int32_t> silent, completed, exited;
  std::vector<std::pair<int32_t, FrontierOp>> stuck, failed;
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
  }
  for (const auto& [rank, op] : stuck) out.details.push_back(fmt::format("stuck: {}", describe_observed(rank, op)));
  for (const auto& [rank, op] : failed) {
    out.details.push_back(fmt::format("failed: {}: {}", describe_observed(rank, op), op.problem));
  }
  if (!silent.empty()) {
    out.details.push_back(fmt::format("rank{} {} never reported (killed at the wall-clock limit, or the worker died)",
                                      silent.size() == 1 ? "" : "s", join_ranks(silent)));
  }
  if (!completed.empty()) out.details.push_back(fmt::format("completed: rank{} {}", completed.size() == 1 ? "" : "s", join_ranks(completed)));
  if (!exited.empty()) out.details.push_back(fmt::format("exited or crashed: rank{} {}", exited.size() == 1 ? "" : "s", join_ranks(exited)));

  if (!silent.empty()) {
    out.headline = fmt::format("UNDECIDED ({}): rank{} {} never reported a frontier", backend, silent.size() == 1 ? "" : "s",
                               join_ranks(silent));
    return out;
  }
  // A mismatch shows as an error, wrong data or a hang at one of the mismatched ops.
  auto at_mismatch = [&](int32_t rank, const FrontierOp& op) {
    for (const PredictedOp& m : prediction.mismatched) {
      if (m.rank == rank && m.index == op.index) return true;
    }
    return prediction.mismatch_collective && op.group == prediction.mismatch_group && op.seq == prediction.mismatch_seq &&
           op.kind != "send" && op.kind != "recv";
  };
  if (failed.empty() && stuck.empty()) {
    out.verdict = ReplayVerdict::NOT_REPRODUCED;
    out.headline = fmt::format("NOT REPRODUCED ({}): every rank completed, data correct", backend);
    if (prediction.kind) out.headline += fmt::format(" (the model predicted a {}: {})", predicted_kind, prediction.summary);
    return out;
  }
  if (prediction.kind == sim::Verdict::MISMATCH) {
    bool all_at = true;
    for (const auto& [rank, op] : failed) all_at = all_at && at_mismatch(rank, op);
    for (const auto& [rank, op] : stuck) all_at = all_at && at_mismatch(rank, op);
    const auto& first = failed.empty() ? stuck.front() : failed.front();
    if (all_at) {
      out.verdict = ReplayVerdict::CONFIRMED;
      out.headline = fmt::format("CONFIRMED ({}): mismatch: {} {} at the predicted op, as predicted ({})", backend,
                                 describe_observed(first.first, first.second),
                                 failed.empty() ? "hung" : "failed (" + first.second.problem + ")", prediction.summary);
      return out;
    }
    out.headline = fmt::format("UNDECIDED ({}): the model predicted a mismatch ({}), but {} {} elsewhere", backend,
                               prediction.summary, describe_observed(first.first, first.second),
                               failed.empty() ? "hung" : "failed");
    return out;
  }
  if (!failed.empty()) {
    const auto& [rank, op] = failed.front();
    out.headline = fmt::format("UNDECIDED ({}): {} failed: {} (the model predicted {})", backend, describe_observed(rank, op),
                               op.problem, prediction.kind ? predicted_kind + ": " + prediction.summary : "completion");
    return out;
  }
  // Hangs: the set of ops the ranks are stuck in against the prediction's.
  std::set<std::pair<int32_t, uint32_t>> observed, predicted;
  for (const auto& [rank, op] : stuck) observed.insert({rank, op.index});
  for (const PredictedOp& p : prediction.stuck) predicted.insert({p.rank, p.index});
  if (prediction.kind && (prediction.kind == sim::Verdict::DEADLOCK || prediction.kind == sim::Verdict::HANG) &&
      observed == predicted) {
    out.verdict = ReplayVerdict::CONFIRMED;
    std::string where;
    for (const auto& [rank, op] : stuck) where += (where.empty() ? "" : "; ") + describe_observed(rank, op);
    out.headline = fmt::format("CONFIRMED ({}): {}: {} hung, matches prediction", backend, predicted_kind, where);
    return out;
  }
  std::string where;
  for (const auto& [rank, op] : stuck) where += (where.empty() ? "" : "; ") + describe_observed(rank, op);
  out.headline = fmt::format("UNDECIDED ({}): hung elsewhere: {}; the model predicted {}", backend, where,
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
