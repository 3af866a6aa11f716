// The scenario model: plain values, produced by the loader (sim/loader.h) and read by the
// engine. Nothing here knows YAML.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "sim/diagnostic.h"
#include "sim/ops.h"
#include "sim/stmt_arena.h"

namespace lockstep::sim {

// ---------------------------------------------------------------------------------------------
// Compact building blocks. A recorded schedule holds millions of statements (issue 3: 1,024
// ranks x 1,000 ops must load in well under a second), so a statement is kept small: rare parts
// live behind one pointer and names are interned.

// A copyable owning pointer: deep-copies its value, null until first written.
template <typename T>
class Box {
 public:
  Box() = default;
  Box(const Box& other) : ptr_(other.ptr_ ? std::make_unique<T>(*other.ptr_) : nullptr) {}
  Box(Box&&) noexcept = default;
  Box& operator=(const Box& other) {
    if (this != &other) ptr_ = other.ptr_ ? std::make_unique<T>(*other.ptr_) : nullptr;
    return *this;
  }
  Box& operator=(Box&&) noexcept = default;
  ~Box() = default;

  const T* get() const { return ptr_.get(); }
  // The value, made on first use.
  T& make() {
    if (!ptr_) ptr_ = std::make_unique<T>();
    return *ptr_;
  }

 private:
  std::unique_ptr<T> ptr_;
};

// An interned name (a tag, stream or handle): one pointer; empty when null. The text lives in
// the NamePool of the scenario that made it (or is a string literal's, see Name(const char*)).
class Name {
 public:
  Name() = default;
  // For literals and other storage that outlives the scenario.
  explicit Name(const std::string* interned) : text_(interned) {}

  bool empty() const { return text_ == nullptr || text_->empty(); }
  const std::string& str() const { return text_ != nullptr ? *text_ : empty_string(); }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  operator std::string_view() const { return str(); }    // NOLINT(google-explicit-constructor)
  friend bool operator==(const Name& a, const Name& b) { return a.str() == b.str(); }
  friend bool operator==(const Name& a, std::string_view b) { return a.str() == b; }

 private:
  static const std::string& empty_string();
  const std::string* text_ = nullptr;
};

// The names of one scenario. Shared by copies of the scenario (names are immutable), and safe
// to intern from several threads.
class NamePool {
 public:
  Name intern(std::string_view text);

 private:
  std::mutex mutex_;
  std::deque<std::string> texts_;  // stable addresses
  std::unordered_map<std::string_view, const std::string*> index_;
};

class InputFile;

// The text of a scenario's file, for diagnostics and counterexamples: never changed once loaded
// and shared by the scenario's copies. A string, or a trace's file mapped read-only
// (sim/input_file.h): a large trace is neither copied nor zeroed.
class SourceText {
 public:
  SourceText() = default;
  SourceText(std::string text);  // NOLINT(google-explicit-constructor)
  explicit SourceText(InputFile file);

  std::string_view view() const { return view_; }
  operator std::string_view() const { return view_; }  // NOLINT(google-explicit-constructor)
  size_t size() const { return view_.size(); }
  bool empty() const { return view_.empty(); }
  friend bool operator==(const SourceText& a, std::string_view b) { return a.view_ == b; }

 private:
  std::shared_ptr<const void> owner_;  // a std::string or an InputFile
  std::string_view view_;
};

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

struct Expr;

// The arguments of an expression node: a vector that costs one null pointer when empty (most
// expressions of a recorded schedule are constants).
class ExprList {
 public:
  size_t size() const;  // defined below Expr: clang instantiates vector<Expr>::size() here
  bool empty() const { return size() == 0; }
  const Expr& operator[](size_t i) const;
  Expr& operator[](size_t i);
  const Expr& at(size_t i) const;
  const Expr* begin() const;
  const Expr* end() const;
  void push_back(Expr expr);

 private:
  Box<std::vector<Expr>> items_;
};

struct Expr {
  ExprOp op = ExprOp::CONST;
  int64_t value = 0;
  SourceLoc loc;
  ExprList args;

  static Expr constant(int64_t v, SourceLoc at = {}) { return Expr{ExprOp::CONST, v, at, {}}; }
  bool is_constant() const { return op == ExprOp::CONST; }
};

inline size_t ExprList::size() const { return items_.get() ? items_.get()->size() : 0; }

// ---------------------------------------------------------------------------------------------
// Operations (OpKind and what each takes: the op table, sim/ops.h) and statements.

enum class DType : uint8_t {
  INT8, UINT8, INT32, UINT32, INT64, UINT64, FP16, BF16, FP32, FP64, FP8_E4M3, FP8_E5M2,
};
std::string_view dtype_name(DType dtype);     // canonical PyTorch name: "bf16", "fp32", ...
uint32_t dtype_bytes(DType dtype);
// A dtype by any of its spellings (PyTorch names and aliases: "bf16", "bfloat16", "float", ...).
std::optional<DType> parse_dtype(std::string_view name);
// The error for a dtype no spelling matches: "invalid value 'bfloat' for 'dtype' (did you mean
// 'bf16'?); valid values: ...". A name that starts like bfloat16 suggests bf16 (by letters alone
// `bfloat` is closest to `float`).
std::string dtype_error(std::string_view name);
// Every accepted spelling, for "valid values" in diagnostics.
std::vector<std::string> dtype_spellings();

enum class StmtKind : uint8_t {
  OP,          // one operation (fields op..new_group)
  REPEAT,      // count, var_slot, body
  IF,          // cond, body (then), else_body
  CHOOSE,      // branches; agreed (group) — a nondeterministic choice the checker explores
  CALL,        // callee, args — a `define`d block
  NCCL_GROUP,  // body: ops issued between ncclGroupStart and ncclGroupEnd
};

struct Stmt;

struct Branch {
  std::string label;
  SourceLoc loc;
  std::vector<Stmt> body;
};

// The rarer parts of a statement (control flow, rooted collectives), behind one pointer.
struct StmtExtra {
  Expr root;                // OP: global rank (broadcast, reduce, gather, scatter)
  Expr count;               // REPEAT
  int32_t var_slot = -1;    // REPEAT: slot of `as: VAR`, -1 when absent
  Expr cond;                // IF
  uint32_t callee = 0;      // CALL: index into Scenario::defines
  std::vector<Expr> args;   // CALL: one per parameter of the define, evaluated in the caller
  std::vector<Stmt> else_body;  // IF: else
  // OP all_to_all_single: bytes to and from each member of its group, in member order
  std::vector<Expr> send_splits;
  std::vector<Expr> recv_splits;
};

struct Stmt {
  StmtKind kind = StmtKind::OP;
  OpKind op = OpKind::COMPUTE;  // OP
  DType dtype = DType::BF16;
  bool has_peer = false;    // send: `to`, recv: `from`
  bool peer_any = false;    // recv: {from: any}
  bool has_root = false;    // the root is in extra()
  bool agreed = false;      // CHOOSE: every member of `group` (this rank's communicator) takes
                            // the same branch
  bool aborts_queued = false;  // EXIT, CRASH: `{queued_work: abort}`, ending before queued GPU
                               // work is meant (sim/queued_work.h warns of it otherwise)
  uint32_t group = 0;       // index into Scenario::groups (collectives, p2p; CHOOSE: agreed)
  uint32_t new_group = 0;   // NEW_GROUP: the group (index into Scenario::groups) it creates
  SourceLoc loc;            // the position of the statement's key (`allreduce`, `repeat`, ...)

  Expr size;                // bytes (collectives and p2p)
  Expr peer;                // global rank
  Expr duration;            // nanoseconds (compute, sleep)
  Name tag;                 // logical identity, empty when not given
  Name stream;              // `stream:` (a kernel's stream; SYNC: the stream, empty = all)
  Name handle;              // `async: H` on a communication op; WAIT: the handle waited for

  std::vector<Branch> branches;  // CHOOSE
  std::vector<Stmt> body;        // repeat: do; if: then; nccl group: its ops

  // The rare parts: read them with extra(), write them with set_extra().
  const StmtExtra& extra() const {
    static const StmtExtra none;
    return extra_.get() != nullptr ? *extra_.get() : none;
  }
  StmtExtra& set_extra() { return extra_.make(); }

 private:
  Box<StmtExtra> extra_;
};

// ---------------------------------------------------------------------------------------------
// Semantics settings (docs/semantics.md). Defaults follow PyTorch's ProcessGroupNCCL.

enum class P2pMode : uint8_t { RENDEZVOUS, EAGER };
enum class P2pComm : uint8_t { GROUP, PAIR };

enum class Algorithm : uint8_t { RING, TREE };

// The alpha-beta model of a link (docs/semantics.md, "Time").
struct Link {
  int64_t latency_ns = 5'000;            // alpha, per algorithm step
  double bandwidth_bytes_per_s = 100e9;  // per rank's link
};

struct Semantics {
  P2pMode p2p = P2pMode::RENDEZVOUS;
  int64_t eager_limit_bytes = 0;       // p2p: eager completes sends of at most this size
  P2pComm p2p_comm = P2pComm::GROUP;
  int64_t comm_concurrency = 0;        // 0 = unlimited
  bool launch_order_implicit = false;
  int64_t timeout_ns = 600'000'000'000;  // 10 min
  Algorithm allreduce_algorithm = Algorithm::RING;  // `algorithm: ring|tree`

  // Whether a send of `bytes` completes without its receive (docs/semantics.md, "Matching"): the one
  // rule the engine, the Promela export and the replay plan all apply.
  bool sends_eagerly(int64_t bytes) const { return p2p == P2pMode::EAGER && bytes <= eager_limit_bytes; }
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

// A group name and the communicators it stands for. `world` and explicit groups are one
// communicator; a mesh dimension is one communicator per coordinate of the other dimensions
// (the name `tp` means, on each rank, the tp communicator that contains it).
struct GroupDef {
  std::string name;
  SourceLoc loc;
  std::vector<std::vector<int32_t>> comms;  // each: global ranks, ascending
  std::vector<int32_t> comm_of_rank;        // size world: index into comms, -1 if not a member
  int32_t mesh_dim = -1;                    // index into Scenario::mesh, -1 if not a dimension
  bool from_new_group = false;              // exists on a rank only after its new_group op

  // The communicator `rank` belongs to, or null.
  const std::vector<int32_t>* comm_for(int32_t rank) const {
    if (rank < 0 || static_cast<size_t>(rank) >= comm_of_rank.size() || comm_of_rank[static_cast<size_t>(rank)] < 0) return nullptr;
    return &comms[static_cast<size_t>(comm_of_rank[static_cast<size_t>(rank)])];
  }
  bool single() const { return comms.size() == 1; }
  // The stream its collectives (and p2p on the group's communicator) run on: "comm:NAME".
  std::string stream_name() const { return "comm:" + name; }
};

// A group that is one communicator over `ranks` (ascending) in a world of `world` ranks.
GroupDef make_group(std::string name, SourceLoc loc, std::vector<int32_t> ranks, int32_t world);

// One dimension of `mesh:`, in Megatron order (the first dimension varies fastest).
struct MeshDim {
  std::string name;
  SourceLoc loc;
  int32_t size = 1;
  int32_t coord_slot = -1;  // environment slot of the coordinate (`tp`)
  int32_t size_slot = -1;   // environment slot of the size (`tp_size`)
  uint32_t group = 0;       // the group the dimension defines
};

// `define: {NAME: ...}`: a block with parameters, run by `call`.
struct Define {
  std::string name;
  SourceLoc loc;
  std::vector<std::string> params;
  std::vector<int32_t> param_slots;  // environment slots the arguments are bound to
  std::vector<Stmt> body;
};

// A thread's statements (its top level; nested bodies are plain vectors).
using StmtList = std::vector<Stmt, StmtAllocator<Stmt>>;

// One operation of a recorded thread as the trace loader's scanner leaves it: 40 bytes instead
// of a 200-byte Stmt, in one flat array per thread (docs/trace-format.md, "How a trace is
// read"). Every position is on the op's line. An op the scanner does not take (a line with a
// tag, stream or handle, an NCCL group, a wait, a new_group, anything read by the general
// path) is a whole Stmt in the thread's side table instead.
struct RecordedOp {
  // SIDE: the op is RecordedBody::stmts[value] (the other fields unused).
  enum Flag : uint8_t { SIZE = 1, DURATION = 2, PEER = 4, PEER_ANY = 8, ROOT = 16, SIDE = 32 };
  // The largest column a record keeps for a value or a peer; a line with one further right
  // is a side-table statement.
  static constexpr uint32_t MAX_VALUE_COL = UINT16_MAX;

  int64_t value = 0;        // SIZE: bytes; DURATION: nanoseconds; SIDE: the statement's index
  uint32_t line = 0;
  uint32_t col = 0;         // of the operation's key (Stmt::loc)
  int32_t peer = 0;         // PEER: to or from (0 with PEER_ANY); ROOT: the root
  uint32_t group = 0;
  uint16_t value_col = 0;
  uint16_t peer_col = 0;
  OpKind op = OpKind::COMPUTE;
  DType dtype = DType::BF16;
  uint8_t flags = 0;

  bool side() const { return (flags & SIDE) != 0; }
  size_t side_index() const { return static_cast<size_t>(value); }
  // The statement the op stands for (not side()).
  Stmt to_stmt() const;
};
// A large trace holds a million of them: 32 bytes each, half a cache line.
static_assert(sizeof(RecordedOp) == 32);

// A recorded thread's operations, made by the trace loader: turned into the thread's statements
// when they are first read (ThreadDef::body), once, then dropped.
struct RecordedBody {
  std::vector<RecordedOp, StmtAllocator<RecordedOp>> ops;
  std::vector<Stmt> stmts;            // the side table (RecordedOp::SIDE)
  std::shared_ptr<StmtArena> arena;   // where the statements are made, when set
  std::once_flag built;
};

struct ThreadDef {
  std::string name;  // `program:` is one thread named "main"
  SourceLoc loc;
  // The thread's current stream (`threads: {T: {stream: S, do: [...]}}`): where its compute
  // runs and what its communication chains with. Empty: the rank's stream `main`, which every
  // thread without one shares (docs/semantics.md, "Streams, kernels, host threads").
  std::string stream;

  ThreadDef() = default;
  ThreadDef(std::string thread_name, SourceLoc at, StmtList stmts = {})
      : name(std::move(thread_name)), loc(at), body_(std::move(stmts)) {}
  // A copy has the statements (a recorded thread's are made first) and takes the heap.
  ThreadDef(const ThreadDef& other)
      : name(other.name), loc(other.loc), stream(other.stream), body_(other.body()) {}
  ThreadDef& operator=(const ThreadDef& other) {
    if (this != &other) *this = ThreadDef(other);
    return *this;
  }
  ThreadDef(ThreadDef&&) noexcept = default;
  ThreadDef& operator=(ThreadDef&&) noexcept = default;
  ~ThreadDef() = default;

  // The thread's statements. A recorded thread's are made here on first use (safe from
  // several threads at once).
  const StmtList& body() const {
    if (recorded_ != nullptr) build();
    return body_;
  }
  StmtList& mutable_body() {
    if (recorded_ != nullptr) {
      build();
      recorded_.reset();
    }
    return body_;
  }
  // Whether the thread may end its rank early: an `exit` or `crash` in a recorded thread's
  // operations (read without making its statements, so not while body() makes them on another
  // thread), true for any other thread.
  bool may_end_early() const;
  // The trace loader's: the thread's operations, made into statements on first use.
  void set_recorded(std::shared_ptr<RecordedBody> recorded) {
    body_.clear();
    recorded_ = std::move(recorded);
  }

 private:
  void build() const;

  mutable StmtList body_;
  std::shared_ptr<RecordedBody> recorded_;
};

// The host threads of a rank.
using RankProgram = std::vector<ThreadDef>;

// ---------------------------------------------------------------------------------------------
// `launch:` (docs/scenario-language.md, "Launch"): the processes that actually start, and what
// each passes to init_process_group. Absent: one process per rank with the right values, and
// initialisation is not modelled (no op, no cost).

struct LaunchProcess {
  int32_t rank = 0;           // the rank it believes it has
  int32_t world_size = 0;     // the world size it passes
  std::string backend;        // "nccl" or "gloo"
  std::string init_method;    // "env://", "tcp://HOST:PORT" or "file://PATH"
  SourceLoc loc;              // its entry under `launch: processes:`
  // The INIT statement its op records point at: kind OP, op INIT, loc = the entry.
  Stmt stmt;
};

struct Launch {
  bool given = false;
  SourceLoc loc;                         // the `launch` key
  std::vector<LaunchProcess> processes;  // in the order listed
};

struct Scenario {
  std::string path;  // as the user named it
  SourceText text;   // the file's text, for diagnostics and counterexamples
  std::string name;
  std::string description;
  std::string source_url;
  std::optional<Verdict> expect;
  SourceLoc expect_loc;

  int32_t world = 0;
  std::vector<Param> params;
  std::vector<MeshDim> mesh;
  std::vector<GroupDef> groups;  // groups[0] is world
  Semantics semantics;
  Link link;                               // `link:` default for every group
  std::vector<std::optional<Link>> group_link;  // per group (e.g. per mesh dimension), if set
  std::vector<Define> defines;
  Launch launch;
  std::shared_ptr<NamePool> names = std::make_shared<NamePool>();  // tags, streams, handles

  // What each rank runs: `program:` or `threads:` give one template for every rank
  // (programs.size() == 1); recorded `ranks:` give one program per listed rank set.
  std::vector<RankProgram> programs;
  std::vector<uint32_t> rank_program;  // size world: index into programs

  // The environment of a rank's program: slot 0 = rank, 1 = world, 2.. = params in order
  // (their final values, after -D), then mesh coordinates and sizes, define parameters and
  // loop variables. Expressions refer to slots.
  std::vector<std::string> slot_names;

  static constexpr int32_t SLOT_RANK = 0;
  static constexpr int32_t SLOT_WORLD = 1;
  static constexpr int32_t FIRST_PARAM_SLOT = 2;

  const RankProgram& program_of(int32_t rank) const { return programs[rank_program[static_cast<size_t>(rank)]]; }
  std::string location(SourceLoc loc) const { return format_location(path, loc); }
};

// The check both loaders (YAML and trace) make once every op is read: a warning for each group
// no op uses (`used`, by group index; world is never warned about).
void warn_unused_groups(const Scenario& scenario, const std::vector<bool>& used,
                        const std::function<void(SourceLoc, std::string)>& warning);

}  // namespace lockstep::sim

template <>
struct fmt::formatter<lockstep::sim::Name> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const lockstep::sim::Name& name, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(name), ctx);
  }
};
