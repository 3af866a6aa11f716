// The backend-independent half of a hardware replay (docs/replay.md): from an execution the
// engine recorded to the plan each worker runs (the dependencies that stand for lockstep's
// streams, synchronous ops, async handles, host blocking and NCCL groups), from a bug to the
// prediction, and from the workers' frontiers to the verdict. The MPI backend
// (mpi_launcher.h, mpi_replay.cc) uses it; an NCCL backend shares it as is: only the worker and
// the launch differ.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checker/analysis.h"
#include "gpu_validation/grant_channel.h"
#include "gpu_validation/replay_plan.h"
#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::gpu {

struct PlanResult {
  std::optional<Plan> plan;
  std::string cannot_express;  // set when the backend cannot express a semantic the execution uses
};

// The per-rank plan of `result` (recorded with record_ops, e.g. by checker::replay_execution):
// every issued op in issue order, with the ops each must wait for before it is posted.
// `backend` names the backend in the cannot-express text ("mpi").
PlanResult build_plan(const sim::Scenario& scenario, const sim::ExecutionResult& result, const std::string& backend);

// Numbers every op of `plan` with its step of the global issue order (PlanOp::step), from
// `result`, the execution the plan was built from (its ops, rank by rank, are the plan's): by
// virtual issue time, but never before what the op's issue waited for in the model -- a host
// blocked on a barrier, sync or new_group issues nothing until it completed, and its completion
// needed its partners' ops issued (and what they waited for) -- then by rank and issue index.
// The ops of an NCCL group take consecutive steps. When the recorded ops alone cannot satisfy an
// op's wait (a replay past a mismatch, from the solo run), that rank's next op is taken where
// its time puts it. Returns how many ops were placed so.
size_t order_issues(Plan& plan, const sim::ExecutionResult& result);

// A mismatched op never completes in the model, so ranks that wait for it (on the host, or
// behind it on a stream) have no ops recorded past that point; a replay needs their whole
// sequences. This copy of `scenario` puts
// every rank alone in each of its communicators: each rank runs its program to the end
// without a partner (collectives complete alone, no mismatch can occur), and the op each
// rank issues k-th on a communicator is the same as in the real world. Only for programs whose
// ops do not depend on other ranks: a point-to-point op there is a run-time error, and the
// caller then gives up (see full_sequences).
sim::Scenario solo_scenario(const sim::Scenario& scenario);

// Every rank's op sequence for a replay of `result` (`choices`: the execution's choices).
// Unless it ended at a mismatch, `result` itself. After a mismatch, the solo run
// (solo_scenario), which follows the execution's `choose` branches; when that run cannot
// complete (p2p, new_group), `result` itself if every op the mismatch involves was issued in it
// (the replay then stops there: `cut`); else nothing, with `why`.
struct FullSequences {
  std::optional<sim::ExecutionResult> result;
  // From the solo run: the scenario it ran (its ops point into it): build the plan from it,
  // then restore the real groups.
  std::shared_ptr<const sim::Scenario> solo;
  bool cut = false;   // the recorded ops, cut at the mismatch
  std::string why;
};
FullSequences full_sequences(const sim::Scenario& scenario, const sim::ExecutionResult& result,
                             const std::vector<sim::Option>& choices, sim::EngineOptions options);

// Shrinks the plan's data for a quick replay (LOCKSTEP_REPLAY_COMPACT): sizes up to `cap_bytes`
// stay; the larger ones, in ascending order, become cap + 1 quantum, cap + 2 quanta, ... (a
// quantum a multiple of every communicator size and of 8 bytes), so that every two sizes of the
// plan still compare as they did: equal stay equal, a mismatch stays one. On MPI a size changes
// nothing else (sends are synchronous at any size). Returns how many sizes changed.
size_t compact_sizes(Plan& plan, int64_t cap_bytes);

// What the model says the hardware will do.
struct PredictedOp {
  int32_t rank = -1;
  uint32_t index = 0;
  std::string what;  // "allreduce #3 on world"
};

struct Prediction {
  std::optional<sim::Verdict> kind;  // nullopt: every rank completes
  std::string summary;
  std::vector<PredictedOp> stuck;     // deadlock, hang: the ops the ranks are stuck in
  std::vector<PredictedOp> mismatched;  // mismatch: the two ops
  std::string mismatch_group;         // mismatch of a collective: its group and sequence number
  uint32_t mismatch_seq = 0;
  bool mismatch_collective = false;
  // Mismatch: per rank, the issue index of its op in the mismatched collective (or of the
  // mismatched p2p op), -1 where it has none (locate_mismatch fills it from the plan).
  std::vector<int64_t> mismatch_index;
  // Deadlock, hang: communication ops issued but never started in the model (queued behind a
  // stuck one, or waiting for a free connection). A GPU backend launches them and cannot tell
  // queued from running, so they may show among the stuck ops without contradicting it.
  std::vector<PredictedOp> queued;
};

Prediction predict(const sim::Scenario& scenario, const std::optional<checker::Bug>& bug);

// Fills prediction.queued from the execution the prediction is about.
void note_queued(Prediction& prediction, const sim::Scenario& scenario, const sim::ExecutionResult& result);

// Fills prediction.mismatch_index from the plan the workers run.
void locate_mismatch(Prediction& prediction, const Plan& plan);

enum class ReplayVerdict : uint8_t {
  CONFIRMED,       // the predicted bug happened where predicted (exit 1)
  NOT_REPRODUCED,  // every rank completed with correct data (exit 0)
  UNDECIDED,       // anything else: it hung elsewhere, failed elsewhere, never reported (exit 3)
};

struct ReplayOutcome {
  ReplayVerdict verdict = ReplayVerdict::UNDECIDED;
  std::string headline;             // "CONFIRMED: ..." / "NOT REPRODUCED: ..." / "UNDECIDED: ..."
  std::vector<std::string> details;  // one line each
};

// Compares the workers' frontiers (per rank; nullopt: the rank reported nothing) with the
// prediction. `backend` names the backend in the text ("mpi"). `grants`: how far the global
// issue order got (nullptr under free order); a hang is confirmed only when every op the model
// issued was issued, and a step that never was is explained (who holds its grant and where that
// rank is stuck, who waits for theirs).
ReplayOutcome compare_frontiers(const Prediction& prediction, const std::vector<std::optional<Frontier>>& frontiers,
                                const std::string& backend, const GrantStats* grants = nullptr);

}  // namespace lockstep::gpu
