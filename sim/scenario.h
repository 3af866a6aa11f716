// The scenario model: plain values, produced by the loader (sim/loader.h) and read by the
// engine. Nothing here knows YAML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/diagnostic.h"

namespace lockstep::sim {

// ---------------------------------------------------------------------------------------------
// Expressions. Compiled by the loader: identifiers are resolved to environment slots (see
// Scenario::slot_names), literals with units are converted to bytes or nanoseconds.

enum class ExprOp : uint8_t {
  CONST,  // value
  VAR,    // value = environment slot
  NEG, NOT, ABS,                      // one argument
  ADD, SUB, MUL, DIV, MOD,            // two arguments; DIV and MOD truncate toward zero
  LT, LE, GT, GE, EQ, NE, AND, OR,    // two arguments; results are 0 or 1
  MIN, MAX,                           // two or more arguments
  COND,                               // three arguments: c ? a : b
};

struct Expr {
  ExprOp op = ExprOp::CONST;
  int64_t value = 0;
  SourceLoc loc;
  std::vector<Expr> args;

  static Expr constant(int64_t v, SourceLoc at = {}) { return Expr{ExprOp::CONST, v, at, {}}; }
  bool is_constant() const { return op == ExprOp::CONST; }
};

// ---------------------------------------------------------------------------------------------
// Operations and statements.

enum class OpKind : uint8_t {
  // collectives (on a communicator; the k-th of each member match)
  ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALL_TO_ALL, GATHER, SCATTER, BARRIER,
  // point to point
  SEND, RECV,
  // host and device
  COMPUTE, SLEEP, SYNC, WAIT, NEW_GROUP, EXIT, CRASH,
};

std::string_view op_kind_name(OpKind kind);  // "allreduce", "reduce_scatter", "send", ...
bool is_collective(OpKind kind);
bool is_p2p(OpKind kind);
bool has_root(OpKind kind);                   // broadcast, reduce, gather, scatter

enum class DType : uint8_t {
  INT8, UINT8, INT32, UINT32, INT64, UINT64, FP16, BF16, FP32, FP64, FP8_E4M3, FP8_E5M2,
};
std::string_view dtype_name(DType dtype);     // canonical PyTorch name: "bf16", "fp32", ...
uint32_t dtype_bytes(DType dtype);

enum class StmtKind : uint8_t {
  OP,       // one operation (fields op..duration)
  REPEAT,   // count, var_slot, body
  IF,       // cond, body (then), else_body
};

struct Stmt {
  StmtKind kind = StmtKind::OP;
  SourceLoc loc;  // the position of the statement's key (`allreduce`, `repeat`, ...)

  // OP
  OpKind op = OpKind::COMPUTE;
  uint32_t group = 0;       // index into Scenario::groups (collectives and p2p)
  Expr size;                // bytes (collectives and p2p)
  DType dtype = DType::BF16;
  bool has_peer = false;    // send: `to`, recv: `from`
  bool peer_any = false;    // recv: {from: any}
  Expr peer;                // global rank
  bool has_root = false;
  Expr root;                // global rank (broadcast, reduce, gather, scatter)
  std::string tag;          // logical identity, "" when not given
  Expr duration;            // nanoseconds (compute, sleep)

  // REPEAT
  Expr count;
  int32_t var_slot = -1;    // slot of `as: VAR`, -1 when absent

  // IF
  Expr cond;

  std::vector<Stmt> body;       // repeat: do; if: then
  std::vector<Stmt> else_body;  // if: else
};

// ---------------------------------------------------------------------------------------------
// Semantics settings (SPEC §4). Defaults follow PyTorch's ProcessGroupNCCL.

enum class P2pMode : uint8_t { RENDEZVOUS, EAGER };
enum class P2pComm : uint8_t { GROUP, PAIR };

struct Semantics {
  P2pMode p2p = P2pMode::RENDEZVOUS;
  int64_t eager_limit_bytes = 0;       // p2p: eager completes sends of at most this size
  P2pComm p2p_comm = P2pComm::GROUP;
  int64_t comm_concurrency = 0;        // 0 = unlimited
  bool launch_order_implicit = false;
  int64_t timeout_ns = 600'000'000'000;  // 10 min
};

// ---------------------------------------------------------------------------------------------
// The scenario.

enum class Verdict : uint8_t { OK, DEADLOCK, HANG, MISMATCH, TIMEOUT, INCONCLUSIVE };
std::string_view verdict_name(Verdict verdict);
std::optional<Verdict> parse_verdict(std::string_view name);

struct Param {
  std::string name;
  int64_t value = 0;
  SourceLoc loc;
  bool overridden = false;  // set by -D name=value
};

struct GroupDef {
  std::string name;
  SourceLoc loc;
  std::vector<int32_t> ranks;  // global ranks, ascending; groups[0] is `world`
};

struct ThreadDef {
  std::string name;  // `program:` is one thread named "main"
  SourceLoc loc;
  std::vector<Stmt> body;
};

struct Scenario {
  std::string path;  // as the user named it
  std::string text;  // the file's text, for diagnostics and counterexamples
  std::string name;
  std::string description;
  std::string source_url;
  std::optional<Verdict> expect;
  SourceLoc expect_loc;

  int32_t world = 0;
  std::vector<Param> params;
  std::vector<GroupDef> groups;  // groups[0] is world
  Semantics semantics;
  std::vector<ThreadDef> threads;

  // The environment of a rank's program: slot 0 = rank, 1 = world, 2.. = params in order,
  // then loop variables. Expressions refer to slots.
  std::vector<std::string> slot_names;

  static constexpr int32_t SLOT_RANK = 0;
  static constexpr int32_t SLOT_WORLD = 1;
  static constexpr int32_t FIRST_PARAM_SLOT = 2;

  std::string location(SourceLoc loc) const { return format_location(path, loc); }
};

}  // namespace lockstep::sim
