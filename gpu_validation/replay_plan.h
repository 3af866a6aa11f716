// The replay plan: what each worker process of a hardware replay runs (gpu_validation/), and
// the frontier each worker reports back. Plain data and a line-oriented text format, with no
// dependency on the simulator, so that a worker (MPI today, NCCL later) links only this.
//
// The launcher (lockstep replay --mpi|--nccl) derives the plan from an execution the engine
// recorded (replay_coordinator.h); every worker reads the whole plan and runs its rank's ops, each
// issued only once the coordinator granted its step of the global issue order (grant_channel.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::gpu {

// Op kinds by their lockstep names ("allreduce", "send", "compute", ...).
enum class PlanKind : uint8_t {
  ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALL_TO_ALL, ALL_TO_ALL_SINGLE, ALLGATHER_V, GATHER, SCATTER,
  BARRIER, SEND, RECV,
  NEW_GROUP,  // a host rendezvous of every world rank (MPI: an all-gather of the group's id)
  LOCAL,      // compute, sleep, wait, sync: completes when its dependencies have
  EXIT, CRASH,
};
std::string_view plan_kind_name(PlanKind kind);
std::optional<PlanKind> parse_plan_kind(std::string_view name);
bool plan_kind_communicates(PlanKind kind);  // collectives, p2p and new_group

// One op of a rank, in its issue order.
struct PlanOp {
  uint32_t index = 0;        // the op's index in the rank's issue order (as in the counterexample)
  // The op's place in the recorded execution's global issue order (0-based, over every rank):
  // under granted order the worker issues it only once the coordinator granted this step.
  uint32_t step = 0;
  PlanKind kind = PlanKind::LOCAL;
  std::string name;          // the lockstep op name ("compute", "sync", "allreduce", ...)
  uint32_t group = 0;        // index into Plan::groups
  int64_t size_bytes = 0;
  uint32_t dtype = 0;        // sim::DType's value: part of the seeded data, so a dtype mismatch shows
  uint32_t dtype_bytes = 1;  // element width: 1, 2, 4 or 8
  int32_t peer = -1;         // send: destination; recv: source, -1 = any (global ranks)
  int32_t root = -1;         // global rank
  uint32_t seq = 0;          // per-communicator sequence number (p2p: per source and destination)
  uint32_t new_group = 0;    // NEW_GROUP: the group it creates
  int32_t batch = -1;        // ops of one NCCL group share a batch id: they are posted together
  uint32_t tag = 0;          // a hash of the op's `tag` (0: none): part of the seeded data, so a
                             // logical mismatch (two tags paired) shows as wrong data
  bool eager = false;        // a send under `p2p: eager` within eager_limit: completes without its receiver
  // Plan::comm_concurrency > 0: the place of this communication op in the rank's order of
  // kernel starts in the model (UINT32_MAX: it never started); the worker grants its K slots in
  // this order.
  uint32_t start = UINT32_MAX;
  // RECV from any: the sender the execution matched it with (-1: unmatched), which the worker
  // receives from, so that the replay takes the schedule's match rather than a race's.
  int32_t match = -1;
  std::string stream = "main";  // the lockstep stream it runs on (the NCCL worker's CUDA stream)
  // Ops (indices into the rank's op list) that must complete before this one is posted: its
  // stream's previous work, the compute stream's work for a synchronous op, the op a host
  // blocked on (barrier, sync, new_group), ...
  std::vector<uint32_t> deps;
  // Among deps, the ops the host blocks on before it issues this one (barrier, sync, new_group on
  // its thread): the op is issued only once they completed. The others only hold back its posting
  // (the kernel's start), not its issue.
  std::vector<uint32_t> gates;
  // ALL_TO_ALL_SINGLE, ALLGATHER_V: bytes to and from each member of its group, in member order
  std::vector<int64_t> send_splits;
  std::vector<int64_t> recv_splits;
};

struct PlanGroup {
  std::string name;
  std::vector<int32_t> comm_of_rank;  // per world rank: which communicator of the group, -1 = none

  // The world ranks in `rank`'s communicator of this group, in rank order (as MPI_Comm_split
  // and ncclCommSplit number them); none when `rank` is in none.
  std::vector<int32_t> members_with(int32_t rank) const;
};

// Where `rank` stands in `members` (its rank in their communicator), or -1.
int index_in(const std::vector<int32_t>& members, int32_t rank);

// How the workers issue their ops (`lockstep replay --order`): GRANTED, in the recorded execution's
// global issue order, each step granted by the coordinator once the previous one was issued; FREE,
// each rank on its own as soon as its host would (the order of the first versions).
enum class IssueOrder : uint8_t { GRANTED, FREE };

struct Plan {
  int32_t world = 0;
  int64_t comm_concurrency = 0;  // 0: unlimited; else at most this many communication ops in flight per rank
  IssueOrder order = IssueOrder::GRANTED;
  std::vector<PlanGroup> groups;
  std::vector<std::vector<PlanOp>> ranks;  // per rank
};

// Under comm_concurrency, whether op i of a rank holds one of its slots while in flight: a
// collective or p2p op (not an eager send), and of an NCCL group only its first op.
bool holds_slot(const std::vector<PlanOp>& ops, size_t i);

// A tag's FNV-1a hash folded to 32 bits (0 for none), as PlanOp::tag holds it.
uint32_t tag_hash(std::string_view tag);

// The seeded value of element `element` of rank `rank`'s contribution to an op (sequence number
// `seq`, dtype, tag), between 1 and `limit` (>= 1): what workers fill and check, so that every
// result is exactly predictable.
uint64_t seeded_value(int32_t rank, uint32_t seq, int64_t element, uint32_t dtype, uint32_t tag, uint64_t limit);

// The owner rank of every step of the global issue order (PlanOp::step), what the coordinator
// grants from; empty when some op's step is out of range or taken twice.
std::vector<int32_t> step_owners(const Plan& plan);

// The text form ("lockstep-replay-plan 3" first); parse_plan returns nullopt with `error` set.
std::string format_plan(const Plan& plan);
std::optional<Plan> parse_plan(const std::string& text, std::string& error);
// parse_plan of a file's contents (what each worker reads first).
std::optional<Plan> read_plan_file(const std::string& path, std::string& error);

// What a worker reports: a file per rank, written whole (temporary + rename) so the launcher
// never reads half of one. MPI itself may be stuck, so reports never go through it.
enum class FrontierStatus : uint8_t {
  RUNNING,    // started, not finished (or not yet decided)
  COMPLETED,  // every op completed and its data checked
  STUCK,      // ops outstanding and nothing progressed for the watchdog's time
  EXITED,     // reached `exit`
  CRASHED,    // reached `crash`
  FAILED,     // an MPI error or wrong data (see FrontierOp::problem)
};
std::string_view frontier_status_name(FrontierStatus status);

struct FrontierOp {
  uint32_t index = 0;  // issue index
  std::string kind;    // lockstep op name
  std::string group;
  uint32_t seq = 0;
  int32_t peer = -1;
  std::string problem;  // FAILED: what went wrong on this op ("MPI_ERR_TRUNCATE: ...", "wrong data: ...")
};

// The first op a rank has not issued yet, and the step of the global issue order it waits for.
struct FrontierNext {
  uint32_t step = 0;
  bool granted = false;  // the coordinator granted the step: the host waits for an op it blocks on
  FrontierOp op;
};

struct Frontier {
  int32_t rank = -1;
  int64_t pid = 0;
  FrontierStatus status = FrontierStatus::RUNNING;
  uint32_t completed = 0;         // ops completed
  uint32_t total = 0;             // ops in the plan
  std::vector<FrontierOp> ops;    // STUCK: the posted ops that never completed; FAILED: the failed op
  std::optional<FrontierNext> next;  // STUCK, FAILED: the first op not issued (none: every op was)
};

std::string format_frontier(const Frontier& frontier);
std::optional<Frontier> parse_frontier(const std::string& text);

// Writes `frontier` as DIR/frontier.RANK, whole or not at all (a temporary renamed over it), so
// that the coordinator never reads half of one.
void write_frontier(const std::string& dir, const Frontier& frontier);

// A worker's command line, `WORKER PLAN OUTDIR STALL_SECONDS`: the plan, or nullopt after a
// usage or plan error on stderr (the worker then exits 2).
std::optional<Plan> worker_plan(int argc, char** argv, const char* worker, const char* verb);

}  // namespace lockstep::gpu
