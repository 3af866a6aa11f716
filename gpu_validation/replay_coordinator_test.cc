#include "gpu_validation/replay_coordinator.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "sim/engine.h"
#include "sim/loader.h"
#include "tests/testing.h"

namespace lockstep::gpu {

namespace {

using Timed = testing::TimedRun;
using testing::timed_run;

Frontier frontier(int32_t rank, FrontierStatus status, std::vector<FrontierOp> ops = {}) {
  Frontier f;
  f.rank = rank;
  f.pid = 100 + rank;
  f.status = status;
  f.ops = std::move(ops);
  return f;
}

}  // namespace

TEST_CASE("replay plan: a synchronous send holds back the recv behind it on its stream") {
  const Timed t = timed_run("scenarios/corpus/head-to-head-sends.yaml");
  const PlanResult plan = build_plan(t.scenario, t.result, "mpi");
  REQUIRE(plan.plan);
  REQUIRE(plan.plan->ranks.size() == 2);
  const std::vector<PlanOp>& ops = plan.plan->ranks[0];
  REQUIRE(ops.size() == 3);
  CHECK(ops[0].kind == PlanKind::LOCAL);  // compute
  CHECK(ops[1].kind == PlanKind::SEND);
  CHECK(ops[1].peer == 1);
  CHECK(ops[1].deps == std::vector<uint32_t>{0});  // prior work on main
  CHECK(ops[2].kind == PlanKind::RECV);
  CHECK(ops[2].deps == std::vector<uint32_t>{1});  // the send, on the same stream and through main
  CHECK(ops[1].batch == -1);
}

TEST_CASE("replay plan: the ops of an NCCL group are one batch posted together") {
  const Timed t = timed_run("scenarios/corpus/head-to-head-sends-fixed.yaml");
  const PlanResult plan = build_plan(t.scenario, t.result, "mpi");
  REQUIRE(plan.plan);
  const std::vector<PlanOp>& ops = plan.plan->ranks[1];
  REQUIRE(ops.size() == 3);
  CHECK(ops[1].kind == PlanKind::SEND);
  CHECK(ops[2].kind == PlanKind::RECV);
  CHECK(ops[1].batch >= 0);
  CHECK(ops[1].batch == ops[2].batch);
  CHECK(ops[1].deps == ops[2].deps);
}

TEST_CASE("replay plan: the text form round trips") {
  const Timed t = timed_run("scenarios/corpus/uneven-batches.yaml");
  const PlanResult plan = build_plan(t.scenario, t.result, "mpi");
  REQUIRE(plan.plan);
  const std::string text = format_plan(*plan.plan);
  std::string error;
  const std::optional<Plan> back = parse_plan(text, error);
  REQUIRE_MESSAGE(back, error);
  CHECK(format_plan(*back) == text);
  CHECK(back->ranks[3].size() + 2 == back->ranks[0].size());  // rank 3 runs one batch fewer
  CHECK_FALSE(parse_plan("lockstep-replay-plan 4\nworld 2\nbogus\n", error));
  CHECK(error == "plan line 3: unexpected 'bogus'");
  CHECK_FALSE(parse_plan("lockstep-replay-plan 2\nworld 2\n", error));
  CHECK(error == "not a lockstep replay plan (version 3)");
}

TEST_CASE("replay plan: comm_concurrency grants slots in the model's start order") {
  const Timed order = timed_run("scenarios/corpus/comm-launch-order.yaml");
  const PlanResult plan = build_plan(order.scenario, order.result, "mpi");
  REQUIRE(plan.plan);
  CHECK(plan.plan->comm_concurrency == 1);
  // Rank 0 issues tp then dp and starts tp; rank 1 issues dp then tp and starts dp. Neither
  // second op ever started.
  const std::vector<PlanOp>& r0 = plan.plan->ranks[0];
  const std::vector<PlanOp>& r1 = plan.plan->ranks[1];
  REQUIRE(r0.size() >= 3);
  REQUIRE(r1.size() >= 3);
  CHECK(r0[1].name == "allreduce");
  CHECK(r0[1].start == 0);
  CHECK(r0[2].start == UINT32_MAX);
  CHECK(r1[1].name == "reduce_scatter");
  CHECK(r1[1].start == 0);
  CHECK(r1[2].start == UINT32_MAX);
  std::string error;
  const std::optional<Plan> back = parse_plan(format_plan(*plan.plan), error);
  REQUIRE_MESSAGE(back, error);
  CHECK(format_plan(*back) == format_plan(*plan.plan));
}

TEST_CASE("replay plan: tags are part of the seeded data") {
  CHECK(tag_hash("") == 0);
  CHECK(tag_hash("val/loss") != tag_hash("val/acc_rare"));
  CHECK(seeded_value(1, 3, 0, 7, tag_hash("val/loss"), 1000) != seeded_value(1, 3, 0, 7, tag_hash("val/acc_rare"), 1000));
  const Timed tagged = timed_run("scenarios/corpus/logging-rank-dependent-keys-fixed.yaml");
  const PlanResult with_tags = build_plan(tagged.scenario, tagged.result, "mpi");
  REQUIRE(with_tags.plan);
  bool some_tag = false;
  for (const PlanOp& op : with_tags.plan->ranks[0]) some_tag = some_tag || op.tag != 0;
  CHECK(some_tag);
}

TEST_CASE("replay plan: a wildcard receive takes the schedule's sender, and NCCL cannot express an unmatched one") {
  Timed race = timed_run("scenarios/examples/wildcard-race.yaml");
  const PlanResult plan = build_plan(race.scenario, race.result, "nccl");
  REQUIRE(plan.plan);
  const PlanOp& wildcard = plan.plan->ranks[0][0];
  CHECK(wildcard.kind == PlanKind::RECV);
  CHECK(wildcard.peer == -1);
  CHECK(wildcard.match == 1);  // the timed run: rank 1's send comes first
  race.result.ops[0][0].matched_peer = -1;
  const PlanResult unmatched = build_plan(race.scenario, race.result, "nccl");
  CHECK_FALSE(unmatched.plan);
  CHECK(unmatched.cannot_express.rfind("cannot express: an unmatched recv from any (scenarios/examples/wildcard-race.yaml:", 0) == 0);
  CHECK(build_plan(race.scenario, race.result, "mpi").plan);
}

TEST_CASE("replay plan: after a mismatch the solo run gives every rank's whole sequence") {
  const Timed t = timed_run("scenarios/corpus/allreduce-size-differs.yaml");
  REQUIRE(t.result.end == sim::ExecutionEnd::MISMATCH);
  const FullSequences full = full_sequences(t.scenario, t.result, {}, {});
  REQUIRE_MESSAGE(full.result, full.why);
  CHECK(full.solo != nullptr);
  for (const std::vector<sim::OpRecord>& ops : full.result->ops) CHECK(ops.size() == 3);  // compute, reduce_scatter, allreduce
  // The op each rank issues k-th is the same as in the real run.
  for (size_t r = 0; r < t.result.ops.size(); ++r) {
    for (size_t i = 0; i < t.result.ops[r].size(); ++i) {
      CHECK(full.result->ops[r][i].op.kind == t.result.ops[r][i].op.kind);
      CHECK(full.result->ops[r][i].seq == t.result.ops[r][i].seq);
    }
  }
}

TEST_CASE("replay plan: the solo run follows the execution's choose branches") {
  // Every rank has tokens in the timed run; the branch choices say rank 0 has none.
  const Timed t = timed_run("scenarios/corpus/moe-no-tokens-skips-all-to-all.yaml");
  sim::ExecutionResult mismatch = t.result;
  mismatch.end = sim::ExecutionEnd::MISMATCH;
  mismatch.mismatch = sim::MismatchInfo{};
  mismatch.ops.assign(mismatch.ops.size(), {});  // as if stopped before any op was issued
  const std::vector<sim::Option> choices = {{sim::ChoiceKind::BRANCH, 0, 0, 1, 0}};
  const FullSequences full = full_sequences(t.scenario, mismatch, choices, {});
  REQUIRE_MESSAGE(full.result, full.why);
  CHECK(full.solo != nullptr);
  CHECK(full.result->ops[0].size() + 3 == full.result->ops[1].size());  // no all-to-alls, no expert compute
}

TEST_CASE("replay plan: a p2p mismatch the solo run cannot complete is replayed up to the mismatch") {
  const Timed t = timed_run("scenarios/corpus/p2p-fifo-wrong-order.yaml");
  REQUIRE(t.result.end == sim::ExecutionEnd::MISMATCH);
  const FullSequences full = full_sequences(t.scenario, t.result, {}, {});
  REQUIRE_MESSAGE(full.result, full.why);
  CHECK(full.cut);
  CHECK(full.solo == nullptr);
}

TEST_CASE("replay verdict: the predicted stuck ops, exactly, confirm a hang") {
  const Timed t = timed_run("scenarios/corpus/uneven-batches.yaml");
  const Prediction p = predict(t.scenario, checker::analyze(t.scenario, t.result));
  REQUIRE(p.stuck.size() == 3);
  std::vector<std::optional<Frontier>> seen;
  for (int32_t r = 0; r < 3; ++r) seen.push_back(frontier(r, FrontierStatus::STUCK, {{5, "allreduce", "world", 3, -1, ""}}));
  seen.push_back(frontier(3, FrontierStatus::COMPLETED));
  const ReplayOutcome confirmed = compare_frontiers(p, seen, "mpi");
  CHECK(confirmed.verdict == ReplayVerdict::CONFIRMED);
  CHECK(confirmed.headline ==
        "CONFIRMED (mpi): hang: rank 0 allreduce #3 on world (op 5); rank 1 allreduce #3 on world (op 5); rank 2 "
        "allreduce #3 on world (op 5) hung, matches prediction");

  // Stuck one op earlier on rank 1: a frontier mismatch, and both differences are named.
  seen[1] = frontier(1, FrontierStatus::STUCK, {{3, "allreduce", "world", 2, -1, ""}});
  const ReplayOutcome elsewhere = compare_frontiers(p, seen, "mpi");
  CHECK(elsewhere.verdict == ReplayVerdict::UNDECIDED);
  CHECK(elsewhere.headline.rfind("UNDECIDED (mpi): hung elsewhere: ", 0) == 0);
  CHECK(std::find(elsewhere.details.begin(), elsewhere.details.end(),
                  "predicted, not observed: rank 1 allreduce #3 on world (op 5)") != elsewhere.details.end());
  CHECK(std::find(elsewhere.details.begin(), elsewhere.details.end(),
                  "observed, not predicted: rank 1 allreduce #2 on world (op 3)") != elsewhere.details.end());

  // A rank that never reported decides nothing.
  seen[2] = std::nullopt;
  CHECK(compare_frontiers(p, seen, "mpi").headline == "UNDECIDED (mpi): rank 2 never reported a frontier");
}

TEST_CASE("replay verdict: completion with correct data is not reproduced, wrong data is not") {
  Prediction none;
  std::vector<std::optional<Frontier>> seen = {frontier(0, FrontierStatus::COMPLETED), frontier(1, FrontierStatus::COMPLETED)};
  const ReplayOutcome ok = compare_frontiers(none, seen, "mpi");
  CHECK(ok.verdict == ReplayVerdict::NOT_REPRODUCED);
  CHECK(ok.headline == "NOT REPRODUCED (mpi): every rank completed, data correct");
  seen[1] = frontier(1, FrontierStatus::FAILED, {{1, "allreduce", "world", 1, -1, "wrong data: element 0 is 3, expected 4"}});
  const ReplayOutcome bad = compare_frontiers(none, seen, "mpi");
  CHECK(bad.verdict == ReplayVerdict::UNDECIDED);
  CHECK(bad.headline ==
        "UNDECIDED (mpi): rank 1 allreduce #1 on world (op 1) failed: wrong data: element 0 is 3, expected 4 (the "
        "model predicted completion)");
}

TEST_CASE("replay verdict: a mismatch is confirmed by an error or a hang at the mismatched op") {
  const Timed t = timed_run("scenarios/corpus/allreduce-size-differs.yaml");
  Prediction p = predict(t.scenario, checker::analyze(t.scenario, t.result));
  REQUIRE(p.kind == sim::Verdict::MISMATCH);
  const FullSequences full = full_sequences(t.scenario, t.result, {}, {});
  REQUIRE(full.solo != nullptr);
  const PlanResult plan = build_plan(*full.solo, *full.result, "mpi");
  REQUIRE(plan.plan);
  locate_mismatch(p, *plan.plan);
  CHECK(p.mismatch_index == std::vector<int64_t>{2, 2, -1, -1});  // pp is {0, 1}: ranks 2 and 3 have no part
  std::vector<std::optional<Frontier>> seen = {
      frontier(0, FrontierStatus::FAILED, {{2, "allreduce", "pp", 1, -1, "MPI error: MPI_ERR_TRUNCATE: message truncated"}}),
      frontier(1, FrontierStatus::STUCK, {{2, "allreduce", "pp", 1, -1, ""}}),
      frontier(2, FrontierStatus::COMPLETED), frontier(3, FrontierStatus::COMPLETED)};
  CHECK(compare_frontiers(p, seen, "mpi").verdict == ReplayVerdict::CONFIRMED);
  // What follows the mismatch (a rank out of step waiting), or happens on ranks with no part in
  // it, is its aftermath.
  seen[2] = frontier(2, FrontierStatus::STUCK, {{1, "reduce_scatter", "dp", 1, -1, ""}});
  CHECK(compare_frontiers(p, seen, "mpi").verdict == ReplayVerdict::CONFIRMED);
  // Stuck before its own op in the mismatch: something else went wrong first.
  seen[1] = frontier(1, FrontierStatus::STUCK, {{1, "reduce_scatter", "dp", 1, -1, ""}});
  const ReplayOutcome before = compare_frontiers(p, seen, "mpi");
  CHECK(before.verdict == ReplayVerdict::UNDECIDED);
  CHECK(before.headline.find("but rank 1 reduce_scatter #1 on dp (op 1) hung before its own op in the mismatch") !=
        std::string::npos);
}

TEST_CASE("frontier files round trip, problem text included") {
  Frontier f = frontier(3, FrontierStatus::FAILED, {{7, "recv", "pp", 2, 1, "wrong size: received 4 elements, expected 8"}});
  f.completed = 6;
  f.total = 9;
  const std::optional<Frontier> back = parse_frontier(format_frontier(f));
  REQUIRE(back);
  CHECK(format_frontier(*back) == format_frontier(f));
  CHECK(back->ops[0].problem == "wrong size: received 4 elements, expected 8");
  CHECK_FALSE(parse_frontier("garbage"));
}

}  // namespace lockstep::gpu

namespace lockstep::gpu {

TEST_CASE("replay verdict: ops the model left queued may show as outstanding on a GPU, nothing else may") {
  const Timed t = timed_run("scenarios/corpus/head-to-head-sends.yaml");
  Prediction p = predict(t.scenario, checker::analyze(t.scenario, t.result));
  note_queued(p, t.scenario, t.result);
  REQUIRE(p.queued.size() == 2);  // each rank's recv, behind its send on the stream
  CHECK(p.queued[0].index == 2);
  std::vector<std::optional<Frontier>> seen = {
      frontier(0, FrontierStatus::STUCK, {{1, "send", "world", 1, 1, ""}, {2, "recv", "world", 1, 1, ""}}),
      frontier(1, FrontierStatus::STUCK, {{1, "send", "world", 1, 0, ""}})};
  const ReplayOutcome confirmed = compare_frontiers(p, seen, "nccl");
  CHECK(confirmed.verdict == ReplayVerdict::CONFIRMED);
  CHECK(confirmed.headline ==
        "CONFIRMED (nccl): deadlock: rank 0 send to rank 1 #1 on world (op 1); rank 1 send to rank 0 #1 on world (op 1) "
        "hung, matches prediction");
  CHECK(std::find(confirmed.details.begin(), confirmed.details.end(),
                  "also outstanding, queued behind them in the model too: rank 0 recv from rank 1 #1 on world (op 2)") !=
        confirmed.details.end());
  // Only the queued op, not the one the model says is stuck: not confirmed.
  seen[1] = frontier(1, FrontierStatus::STUCK, {{2, "recv", "world", 1, 0, ""}});
  CHECK(compare_frontiers(p, seen, "nccl").verdict == ReplayVerdict::UNDECIDED);
}

}  // namespace lockstep::gpu

namespace lockstep::gpu {

namespace {

// Rank 0 waits in a barrier, then sends; rank 1 computes, joins the barrier, then receives.
constexpr const char* BARRIER_THEN_P2P = R"(scenario: barrier-then-p2p
world: 2
program:
  - if: "rank == 0"
    then:
      - barrier: world
      - send: {to: 1, size: 1MiB}
    else:
      - compute: 50ms
      - barrier: world
      - recv: {from: 0, size: 1MiB}
)";

std::vector<uint32_t> steps_of(const Plan& plan, size_t rank) {
  std::vector<uint32_t> steps;
  for (const PlanOp& op : plan.ranks[rank]) steps.push_back(op.step);
  return steps;
}

}  // namespace

TEST_CASE("issue order: a host blocked on a barrier issues nothing before every member issued the barrier") {
  const sim::Scenario scenario = testing::scenario_from(BARRIER_THEN_P2P);
  sim::Engine engine(scenario, {});
  sim::TimedStrategy timed;
  sim::ExecutionResult result = engine.run(timed);
  PlanResult plan = build_plan(scenario, result, "mpi");
  REQUIRE(plan.plan);
  CHECK(plan.plan->ranks[0][1].gates == std::vector<uint32_t>{0});  // the send waits for the barrier
  CHECK(plan.plan->ranks[1][1].gates.empty());                      // the barrier does not wait for the compute
  // By time: rank 0's barrier, rank 1's compute and barrier at 0, then the send and the recv.
  CHECK(steps_of(*plan.plan, 0) == std::vector<uint32_t>{0, 3});
  CHECK(steps_of(*plan.plan, 1) == std::vector<uint32_t>{1, 2, 4});
  // Without times (every op issued at 0), the order by rank alone would put rank 0's send
  // before rank 1's barrier, which the send waits for: the wait keeps it after.
  for (std::vector<sim::OpRecord>& ops : result.ops) {
    for (sim::OpRecord& rec : ops) rec.issue_ns = 0;
  }
  CHECK(order_issues(*plan.plan, result) == 0);
  CHECK(steps_of(*plan.plan, 0) == std::vector<uint32_t>{0, 3});
  CHECK(steps_of(*plan.plan, 1) == std::vector<uint32_t>{1, 2, 4});
  CHECK(step_owners(*plan.plan) == std::vector<int32_t>{0, 1, 1, 0, 1});
}

TEST_CASE("issue order: the ops of an NCCL group take consecutive steps, and every corpus plan is one order") {
  const Timed fixed = timed_run("scenarios/corpus/head-to-head-sends-fixed.yaml");
  const PlanResult plan = build_plan(fixed.scenario, fixed.result, "mpi");
  REQUIRE(plan.plan);
  for (const std::vector<PlanOp>& ops : plan.plan->ranks) {
    REQUIRE(ops.size() == 3);
    CHECK(ops[2].step == ops[1].step + 1);  // send and recv of one group
  }
  for (const char* name : {"scenarios/corpus/pipeline-1f1b-pp4-mb8.yaml", "scenarios/corpus/zero3-3d-step.yaml",
                           "scenarios/corpus/new-group-fixed.yaml", "scenarios/examples/wildcard-gather.yaml"}) {
    const Timed t = timed_run(name);
    PlanResult p = build_plan(t.scenario, t.result, "mpi");
    REQUIRE(p.plan);
    INFO(name);
    CHECK(order_issues(*p.plan, t.result) == 0);  // nothing had to be forced
    CHECK_FALSE(step_owners(*p.plan).empty());
    std::string error;
    const std::optional<Plan> back = parse_plan(format_plan(*p.plan), error);
    REQUIRE_MESSAGE(back, error);
    CHECK(step_owners(*back) == step_owners(*p.plan));
  }
}

TEST_CASE("replay verdict: a step never issued is explained, and no hang is confirmed past it") {
  const Timed t = timed_run("scenarios/corpus/uneven-batches.yaml");
  const Prediction p = predict(t.scenario, checker::analyze(t.scenario, t.result));
  // Rank 1 stuck one all-reduce early holds the grant of its compute (op 4, step 9); rank 0
  // waits for the grant of its op 4 (step 10).
  Frontier r0 = frontier(0, FrontierStatus::STUCK);
  r0.next = FrontierNext{10, false, {4, "compute", "world", 0, -1, ""}};
  Frontier r1 = frontier(1, FrontierStatus::STUCK, {{3, "allreduce", "world", 2, -1, ""}});
  r1.next = FrontierNext{9, true, {4, "compute", "world", 0, -1, ""}};
  std::vector<std::optional<Frontier>> seen = {r0, r1, frontier(2, FrontierStatus::COMPLETED),
                                               frontier(3, FrontierStatus::COMPLETED)};
  GrantStats grants;
  grants.steps = 22;
  grants.issued = 9;
  grants.holder = 1;
  const ReplayOutcome out = compare_frontiers(p, seen, "mpi", &grants);
  CHECK(out.verdict == ReplayVerdict::UNDECIDED);
  CHECK(out.headline ==
        "UNDECIDED (mpi): hung elsewhere: rank 1 allreduce #2 on world (op 3); the issue order stopped at step 9 of 22: "
        "rank 1, stuck in allreduce #2 on world (op 3), never issued op 4 (compute on world); rank 0 waits for its grant "
        "of op 4 (compute on world); the model predicted hang: " + p.summary);
  CHECK(std::find(out.details.begin(), out.details.end(), "waits for its grant: rank 0 op 4 (compute on world), step 10") !=
        out.details.end());
  // The predicted ops stuck, but a rank never issued an op the model issued: not confirmed.
  std::vector<std::optional<Frontier>> predicted;
  for (int32_t r = 0; r < 3; ++r) predicted.push_back(frontier(r, FrontierStatus::STUCK, {{5, "allreduce", "world", 3, -1, ""}}));
  Frontier waiting = frontier(3, FrontierStatus::STUCK);
  waiting.next = FrontierNext{21, false, {3, "allreduce", "world", 2, -1, ""}};
  predicted.push_back(waiting);
  grants.issued = 21;
  grants.holder = 3;
  CHECK(compare_frontiers(p, predicted, "mpi", &grants).verdict == ReplayVerdict::UNDECIDED);
  predicted[3] = frontier(3, FrontierStatus::COMPLETED);
  grants.issued = 22;
  grants.holder = -1;
  CHECK(compare_frontiers(p, predicted, "mpi", &grants).verdict == ReplayVerdict::CONFIRMED);
}

TEST_CASE("replay verdict: a rank that never issued its op in a mismatch leaves it undecided") {
  const Timed t = timed_run("scenarios/corpus/allreduce-size-differs.yaml");
  Prediction p = predict(t.scenario, checker::analyze(t.scenario, t.result));
  const FullSequences full = full_sequences(t.scenario, t.result, {}, {});
  REQUIRE(full.solo != nullptr);
  const PlanResult plan = build_plan(*full.solo, *full.result, "mpi");
  REQUIRE(plan.plan);
  locate_mismatch(p, *plan.plan);
  Frontier r1 = frontier(1, FrontierStatus::STUCK, {{1, "reduce_scatter", "dp", 1, -1, ""}});
  r1.next = FrontierNext{5, true, {2, "allreduce", "pp", 1, -1, ""}};
  std::vector<std::optional<Frontier>> seen = {
      frontier(0, FrontierStatus::FAILED, {{2, "allreduce", "pp", 1, -1, "MPI error: MPI_ERR_TRUNCATE: message truncated"}}),
      r1, frontier(2, FrontierStatus::COMPLETED), frontier(3, FrontierStatus::COMPLETED)};
  const ReplayOutcome out = compare_frontiers(p, seen, "mpi");
  CHECK(out.verdict == ReplayVerdict::UNDECIDED);
  CHECK(out.headline.find("but rank 1 reduce_scatter #1 on dp (op 1) hung before its own op in the mismatch") !=
        std::string::npos);
  seen[1] = frontier(1, FrontierStatus::STUCK);
  r1.next = FrontierNext{5, false, {2, "allreduce", "pp", 1, -1, ""}};
  seen[1]->next = r1.next;
  const ReplayOutcome never = compare_frontiers(p, seen, "mpi");
  CHECK(never.verdict == ReplayVerdict::UNDECIDED);
  CHECK(never.headline.find("but rank 1 never issued its op in the mismatch (op 2): it stopped before op 2 (allreduce #1 on pp)") !=
        std::string::npos);
}

}  // namespace lockstep::gpu
