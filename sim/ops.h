// The op table: every operation once. Its name in scenarios and traces, the names PyTorch
// (Flight Recorder, torch.distributed) and NCCL (its API and its logs) give it, the fields it
// takes, how its members match, what it costs, and whether the Promela export models it. The
// YAML loader, the trace reader and writer, the importers, the recorder's merge, the cost model
// and the replay plan all ask this table; adding an op is a row here, plus what is new about it
// (docs/ARCHITECTURE.md, "Adding an op").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lockstep::sim {

enum class OpKind : uint8_t {
  // collectives (on a communicator; the k-th of each member match)
  ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALL_TO_ALL, ALL_TO_ALL_SINGLE, ALLGATHER_V,
  GATHER, SCATTER, BARRIER,
  // point to point
  SEND, RECV,
  // host and device
  COMPUTE, SLEEP, SYNC, WAIT, NEW_GROUP, EXIT, CRASH,
  // initialisation (`launch:`): init_process_group, a blocking rendezvous over the world
  INIT,
};
inline constexpr size_t OP_KIND_COUNT = static_cast<size_t>(OpKind::INIT) + 1;

enum class OpClass : uint8_t { COLLECTIVE, P2P, HOST };

// What an op line may carry besides its rank, op and thread. Loaders read them in this order
// (a group before the ranks that must belong to it, a dtype before a size that defaults to it).
enum class Field : uint8_t {
  GROUP, DTYPE, SIZE, ROOT, TO, FROM, TAG, STREAM, ASYNC, DURATION, HANDLE, NAME, RANKS,
  SEND_SPLITS,  // all_to_all_single: bytes to each member of the group, in member order
  RECV_SPLITS,  // all_to_all_single, allgather_v: bytes from each member of the group, in member order
};
inline constexpr size_t FIELD_COUNT = static_cast<size_t>(Field::RECV_SPLITS) + 1;
using FieldSet = uint32_t;
constexpr FieldSet field_bit(Field field) { return FieldSet{1} << static_cast<unsigned>(field); }

// A field's name in scenario YAML and in traces (which give durations in nanoseconds).
struct FieldName {
  std::string_view yaml;
  std::string_view trace;
};
inline constexpr std::array<FieldName, FIELD_COUNT> FIELD_NAMES = {{
    {"group", "group"},   {"dtype", "dtype"},       {"size", "size"},
    {"root", "root"},     {"to", "to"},             {"from", "from"},
    {"tag", "tag"},       {"stream", "stream"},     {"async", "async"},
    {"duration", "duration_ns"}, {"handle", "handle"}, {"name", "name"},
    {"ranks", "ranks"},   {"send_splits", "send_splits"}, {"recv_splits", "recv_splits"},
}};

// How a statement is written in YAML: the value after `op:`.
enum class YamlForm : uint8_t {
  ARGS,       // a map of arguments, or the short form `op: GROUP`, or nothing
  DURATION,   // `op: DURATION`
  COMPUTE,    // `op: DURATION` or a map of arguments
  HANDLE,     // `wait: HANDLE`
  SYNC,       // `sync` or `sync: STREAM`
  NEW_GROUP,  // `new_group: {name, ranks}`
  BARE,       // `exit`, `crash`: no value
};

// How the members of one collective must agree (docs/semantics.md, "Matching").
enum class Agreement : uint8_t {
  NONE,        // not a collective
  SAME,        // every member issues the same kind, size, dtype, root and tag
  SPLITS,      // as SAME without the size; what member a sends to b is what b receives from a
};

// The alpha-beta shape of its transfer (sim/cost.h), over a group of n ranks and S bytes.
enum class CostShape : uint8_t {
  NONE,       // no transfer
  ALLREDUCE,  // ring: 2(n-1) steps, 2(n-1)/n S; tree: 2 log2 n steps, 2 S
  SHARDED,    // n-1 steps, (n-1)/n S each rank moves
  WHOLE,      // pipelined ring from or to a root: n-1 steps, S
  POINT,      // one step, S
};

struct OpInfo {
  OpKind kind;
  std::string_view name;  // in scenarios, traces and reports
  OpClass op_class;
  YamlForm form;
  FieldSet fields;        // accepted on an op line (the YAML map of an ARGS or COMPUTE form)
  FieldSet required;
  Agreement agreement;
  CostShape cost;
  // NCCL: the API call without "nccl" (as NCCL's logs name it too), and a second spelling.
  std::array<std::string_view, 2> nccl;
  // NCCL's count is per rank where lockstep's size is the whole buffer (the gathered output,
  // the scattered input), as PyTorch's all_gather_into_tensor and reduce_scatter_tensor.
  bool nccl_count_per_rank;
  // PyTorch's names for it: Flight Recorder profiling names ("nccl:" dropped), ProcessGroup
  // methods and torch.distributed functions.
  std::array<std::string_view, 7> torch;
  bool promela;           // export/promela models it (else the export refuses it by name)
};

namespace op_table {
inline constexpr FieldSet COMM =
    field_bit(Field::GROUP) | field_bit(Field::DTYPE) | field_bit(Field::TAG) |
    field_bit(Field::STREAM) | field_bit(Field::ASYNC);
inline constexpr FieldSet SIZED = COMM | field_bit(Field::SIZE);
inline constexpr FieldSet ROOTED = SIZED | field_bit(Field::ROOT);
inline constexpr FieldSet SIZE = field_bit(Field::SIZE);
inline constexpr FieldSet SIZE_ROOT = SIZE | field_bit(Field::ROOT);
inline constexpr FieldSet SPLITS = field_bit(Field::SEND_SPLITS) | field_bit(Field::RECV_SPLITS);
inline constexpr FieldSet DURATION = field_bit(Field::DURATION);
}  // namespace op_table

// In OpKind order.
inline constexpr std::array<OpInfo, OP_KIND_COUNT> OPS = {{
    {OpKind::ALLREDUCE, "allreduce", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::SIZED,
     op_table::SIZE, Agreement::SAME, CostShape::ALLREDUCE, {"AllReduce", ""}, false,
     {"all_reduce", "allreduce", "all_reduce_coalesced", "allreduce_coalesced"}, true},
    {OpKind::ALLGATHER, "allgather", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::SIZED,
     op_table::SIZE, Agreement::SAME, CostShape::SHARDED, {"AllGather", ""}, true,
     {"all_gather", "allgather", "_all_gather_base", "_allgather_base",
      "all_gather_into_tensor_coalesced", "allgather_into_tensor_coalesced"}, true},
    {OpKind::REDUCE_SCATTER, "reduce_scatter", OpClass::COLLECTIVE, YamlForm::ARGS,
     op_table::SIZED, op_table::SIZE, Agreement::SAME, CostShape::SHARDED,
     {"ReduceScatter", ""}, true,
     {"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced"}, true},
    {OpKind::BROADCAST, "broadcast", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::ROOTED,
     op_table::SIZE_ROOT, Agreement::SAME, CostShape::WHOLE, {"Broadcast", "Bcast"}, false,
     {"broadcast", "_broadcast_oop"}, true},
    {OpKind::REDUCE, "reduce", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::ROOTED,
     op_table::SIZE_ROOT, Agreement::SAME, CostShape::WHOLE, {"Reduce", ""}, false,
     {"reduce", "_reduce_oop"}, true},
    {OpKind::ALL_TO_ALL, "all_to_all", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::SIZED,
     op_table::SIZE, Agreement::SAME, CostShape::SHARDED, {"AllToAll", "AlltoAll"}, true,
     {"all_to_all", "all_to_all_base", "alltoall", "alltoall_base"}, true},
    // PyTorch's all_to_all_single with split sizes (MoE token routing): on NCCL a group of sends
    // and receives; member a's send_splits[b] must equal member b's recv_splits[a].
    {OpKind::ALL_TO_ALL_SINGLE, "all_to_all_single", OpClass::COLLECTIVE, YamlForm::ARGS,
     op_table::COMM | op_table::SPLITS, op_table::SPLITS, Agreement::SPLITS, CostShape::SHARDED,
     {"", ""}, false, {"all_to_all_single"}, false},
    // An all-gather of parts of different sizes (PyTorch's all_gather of unequal tensors, vLLM's
    // all_gatherv; on NCCL a group of broadcasts, one from each member): each member lists what
    // it receives from each, its own entry being what it sends, so member a's recv_splits[a] must
    // equal every member b's recv_splits[a].
    {OpKind::ALLGATHER_V, "allgather_v", OpClass::COLLECTIVE, YamlForm::ARGS,
     op_table::COMM | field_bit(Field::RECV_SPLITS), field_bit(Field::RECV_SPLITS), Agreement::SPLITS,
     CostShape::SHARDED, {"", ""}, false, {}, false},
    {OpKind::GATHER, "gather", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::ROOTED,
     op_table::SIZE_ROOT, Agreement::SAME, CostShape::SHARDED, {"Gather", ""}, true,
     {"gather"}, true},
    {OpKind::SCATTER, "scatter", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::ROOTED,
     op_table::SIZE_ROOT, Agreement::SAME, CostShape::SHARDED, {"Scatter", ""}, true,
     {"scatter"}, true},
    {OpKind::BARRIER, "barrier", OpClass::COLLECTIVE, YamlForm::ARGS, op_table::COMM, 0,
     Agreement::SAME, CostShape::ALLREDUCE, {"", ""}, false, {"barrier", "all_reduce_barrier"},
     true},
    {OpKind::SEND, "send", OpClass::P2P, YamlForm::ARGS,
     op_table::SIZED | field_bit(Field::TO), op_table::SIZE | field_bit(Field::TO),
     Agreement::NONE, CostShape::POINT, {"Send", ""}, false, {"send"}, true},
    {OpKind::RECV, "recv", OpClass::P2P, YamlForm::ARGS,
     op_table::SIZED | field_bit(Field::FROM), op_table::SIZE | field_bit(Field::FROM),
     Agreement::NONE, CostShape::POINT, {"Recv", ""}, false, {"recv"}, true},
    {OpKind::COMPUTE, "compute", OpClass::HOST, YamlForm::COMPUTE,
     op_table::DURATION | field_bit(Field::STREAM), op_table::DURATION, Agreement::NONE,
     CostShape::NONE, {"", ""}, false, {}, true},
    {OpKind::SLEEP, "sleep", OpClass::HOST, YamlForm::DURATION, op_table::DURATION,
     op_table::DURATION, Agreement::NONE, CostShape::NONE, {"", ""}, false, {}, true},
    {OpKind::SYNC, "sync", OpClass::HOST, YamlForm::SYNC, field_bit(Field::STREAM), 0,
     Agreement::NONE, CostShape::NONE, {"", ""}, false, {}, true},
    {OpKind::WAIT, "wait", OpClass::HOST, YamlForm::HANDLE, field_bit(Field::HANDLE),
     field_bit(Field::HANDLE), Agreement::NONE, CostShape::NONE, {"", ""}, false, {}, true},
    {OpKind::NEW_GROUP, "new_group", OpClass::HOST, YamlForm::NEW_GROUP,
     field_bit(Field::NAME) | field_bit(Field::RANKS),
     field_bit(Field::NAME) | field_bit(Field::RANKS), Agreement::NONE, CostShape::NONE,
     {"", ""}, false, {}, true},
    {OpKind::EXIT, "exit", OpClass::HOST, YamlForm::BARE, 0, 0, Agreement::NONE,
     CostShape::NONE, {"", ""}, false, {}, true},
    {OpKind::CRASH, "crash", OpClass::HOST, YamlForm::BARE, 0, 0, Agreement::NONE,
     CostShape::NONE, {"", ""}, false, {}, true},
    // Not a statement: the launch section's processes call it (no YAML or trace name).
    {OpKind::INIT, "init_process_group", OpClass::HOST, YamlForm::BARE, 0, 0, Agreement::NONE,
     CostShape::NONE, {"", ""}, false, {}, true},
}};

constexpr const OpInfo& op_info(OpKind kind) { return OPS[static_cast<size_t>(kind)]; }

constexpr bool ops_in_kind_order() {
  for (size_t i = 0; i < OPS.size(); ++i) {
    if (static_cast<size_t>(OPS[i].kind) != i) return false;
  }
  return true;
}
static_assert(ops_in_kind_order(), "OPS is indexed by OpKind");

constexpr bool takes(const OpInfo& op, Field field) { return (op.fields & field_bit(field)) != 0; }

constexpr std::string_view op_kind_name(OpKind kind) { return op_info(kind).name; }
constexpr bool is_collective(OpKind kind) { return op_info(kind).op_class == OpClass::COLLECTIVE; }
constexpr bool is_p2p(OpKind kind) { return op_info(kind).op_class == OpClass::P2P; }
constexpr bool has_root(OpKind kind) { return takes(op_info(kind), Field::ROOT); }  // broadcast, ...
// Ops whose members exchange sizes per pair (all_to_all_single, allgather_v): each instance keeps
// the bytes it sends to and expects from each member of its group. One that takes no
// `send_splits` sends each member its own entry of `recv_splits`.
constexpr bool has_splits(OpKind kind) { return op_info(kind).agreement == Agreement::SPLITS; }
// Of them, those whose members list what they send to each (all_to_all_single).
constexpr bool lists_sends(OpKind kind) { return takes(op_info(kind), Field::SEND_SPLITS); }

// The op a scenario or trace names (`init_process_group` is none), or null.
const OpInfo* find_op_named(std::string_view name);
// The op PyTorch names so (a Flight Recorder profiling name without "nccl:"), or null.
const OpInfo* find_torch_op(std::string_view name);
// The op NCCL names so ("AllReduce", "Bcast"; the API call without "nccl"), or null.
const OpInfo* find_nccl_op(std::string_view name);

}  // namespace lockstep::sim
