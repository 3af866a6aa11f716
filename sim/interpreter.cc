#include "sim/interpreter.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "sim/expr.h"

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define LOCKSTEP_ASAN 1
#elif defined(__has_feature)       // clang (the fuzz targets)
#if __has_feature(address_sanitizer)
#define LOCKSTEP_ASAN 1
#endif
#endif
#if defined(LOCKSTEP_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define LOCKSTEP_ASAN_FIBERS 1
#endif

namespace lockstep::sim {

namespace ctx = boost::context;

// ---------------------------------------------------------------------------------------------
// StackPool

StackPool::StackPool(size_t stack_bytes) {
  page_bytes_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  stack_bytes_ = (std::max<size_t>(stack_bytes, 16 * 1024) + page_bytes_ - 1) / page_bytes_ * page_bytes_;
}

StackPool::~StackPool() {
#ifdef LOCKSTEP_ASAN_FIBERS
  // A fiber's outermost frames (Boost's entry function) never return, so their redzones stay
  // poisoned; unpoisoned here, so that memory mapped later at this address (a kernel chunk)
  // does not read as a stack to ASan.
  for (void* base : free_) __asan_unpoison_memory_region(static_cast<char*>(base) + page_bytes_, stack_bytes_);
  for (void* slab : slabs_) __asan_unpoison_memory_region(slab, SLAB_STACKS * stack_bytes_);
#endif
  for (void* base : free_) ::munmap(base, stack_bytes_ + page_bytes_);
  for (void* slab : slabs_) ::munmap(slab, SLAB_STACKS * stack_bytes_);
}

ctx::stack_context StackPool::allocate(bool guarded) {
  ctx::stack_context sctx;
  sctx.size = stack_bytes_;
  if (!guarded) {
    if (free_slab_.empty()) {
      void* slab = ::mmap(nullptr, SLAB_STACKS * stack_bytes_, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (slab == MAP_FAILED) throw std::bad_alloc();
      slabs_.push_back(slab);
      for (size_t i = SLAB_STACKS; i-- > 0;) free_slab_.push_back(static_cast<char*>(slab) + i * stack_bytes_);
    }
    sctx.sp = static_cast<char*>(free_slab_.back()) + stack_bytes_;
    free_slab_.pop_back();
    return sctx;
  }
  void* base = nullptr;
  if (!free_.empty()) {
    base = free_.back();
    free_.pop_back();
  } else {
    base = ::mmap(nullptr, stack_bytes_ + page_bytes_, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    // The lowest page is the guard: a stack overflow faults instead of corrupting memory.
    ::mprotect(base, page_bytes_, PROT_NONE);
  }
  sctx.sp = static_cast<char*>(base) + page_bytes_ + stack_bytes_;
  return sctx;
}

void StackPool::deallocate(ctx::stack_context& sctx, bool guarded) {
  if (!guarded) {
    free_slab_.push_back(static_cast<char*>(sctx.sp) - sctx.size);
    return;
  }
  void* base = static_cast<char*>(sctx.sp) - sctx.size - page_bytes_;
  free_.push_back(base);
}

size_t StackPool::mappings_for(size_t guarded, size_t unguarded) const {
  const size_t new_guarded = guarded > free_.size() ? guarded - free_.size() : 0;
  const size_t new_unguarded = unguarded > free_slab_.size() ? unguarded - free_slab_.size() : 0;
  return 2 * new_guarded + (new_unguarded + SLAB_STACKS - 1) / SLAB_STACKS;
}

namespace {

// The deepest nesting of blocks and calls below `block`, or UINT32_MAX when a call can recur
// (or the depth passes `limit`). `state` per define: 0 unseen, 1 on the path, 2 done, with its
// depth in `depth`.
uint32_t nesting_of(const Scenario& scenario, std::span<const Stmt> block, std::vector<uint8_t>& state,
                    std::vector<uint32_t>& depth, uint32_t level, uint32_t limit) {
  if (level > limit) return UINT32_MAX;
  uint32_t deepest = level;
  const auto deeper = [&](uint32_t d) {
    deepest = d == UINT32_MAX || deepest == UINT32_MAX ? UINT32_MAX : std::max(deepest, d);
  };
  for (const Stmt& stmt : block) {
    if (deepest == UINT32_MAX) break;
    switch (stmt.kind) {
      case StmtKind::OP:
        break;
      case StmtKind::CALL: {
        const uint32_t callee = stmt.extra().callee;
        if (callee >= scenario.defines.size() || state[callee] == 1) return UINT32_MAX;  // recursion
        if (state[callee] == 0) {
          state[callee] = 1;
          depth[callee] = nesting_of(scenario, scenario.defines[callee].body, state, depth, 0, limit);
          state[callee] = 2;
        }
        deeper(depth[callee] == UINT32_MAX ? UINT32_MAX : level + 1 + depth[callee]);
        break;
      }
      default:
        deeper(nesting_of(scenario, stmt.body, state, depth, level + 1, limit));
        if (stmt.kind == StmtKind::IF) deeper(nesting_of(scenario, stmt.extra().else_body, state, depth, level + 1, limit));
        for (const Branch& branch : stmt.branches) deeper(nesting_of(scenario, branch.body, state, depth, level + 1, limit));
        break;
    }
  }
  return deepest > limit ? UINT32_MAX : deepest;
}

}  // namespace

bool program_needs_guard(const Scenario& scenario, std::span<const Stmt> body) {
  std::vector<uint8_t> state(scenario.defines.size(), 0);
  std::vector<uint32_t> depth(scenario.defines.size(), 0);
  return nesting_of(scenario, body, state, depth, 0, MAX_UNGUARDED_DEPTH) == UINT32_MAX;
}

// ---------------------------------------------------------------------------------------------
// ProgramFiber

namespace {

// Thrown inside the fiber to stop the program; caught at the fiber's top.
struct ProgramFailure {};

// The slots a block writes itself: loop variables, through nested blocks but not calls.
void add_loop_slots(std::span<const Stmt> block, std::vector<int32_t>& out) {
  for (const Stmt& stmt : block) {
    if (stmt.kind == StmtKind::REPEAT && stmt.extra().var_slot >= 0) out.push_back(stmt.extra().var_slot);
    if (stmt.kind == StmtKind::CALL) continue;
    add_loop_slots(stmt.body, out);
    add_loop_slots(stmt.extra().else_body, out);
    for (const Branch& branch : stmt.branches) add_loop_slots(branch.body, out);
  }
}

}  // namespace

ProgramFiber::ProgramFiber(const Scenario& scenario, std::span<const Stmt> body, int32_t rank,
                           StackPool& stacks, const EngineLimits& limits, bool guarded)
    : scenario_(scenario), body_(body), limits_(limits), initial_env_(scenario.slot_names.size(), 0),
      stacks_(stacks), rank_(rank), guarded_(guarded) {
  initial_env_[Scenario::SLOT_RANK] = rank;
  initial_env_[Scenario::SLOT_WORLD] = scenario.world;
  for (size_t i = 0; i < scenario.params.size(); ++i) {
    initial_env_[Scenario::FIRST_PARAM_SLOT + i] = scenario.params[i].value;
  }
  // Mesh coordinates, Megatron order: the first dimension varies fastest.
  int64_t stride = 1;
  for (const MeshDim& dim : scenario.mesh) {
    if (dim.coord_slot >= 0) initial_env_[static_cast<size_t>(dim.coord_slot)] = (rank / stride) % dim.size;
    if (dim.size_slot >= 0) initial_env_[static_cast<size_t>(dim.size_slot)] = dim.size;
    stride *= dim.size;
  }
  live_.env = initial_env_;
  stack_ = stacks_.allocate(guarded_);
  start_fiber();
}

void ProgramFiber::start_fiber() {
  fiber_ = ctx::fiber(std::allocator_arg, OwnedStack(stack_), [this](ctx::fiber&& engine) {
    engine_ = std::move(engine);
#ifdef LOCKSTEP_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &live_.engine_stack_bottom, &live_.engine_stack_size);
#endif
    try {
      if (!cancel_ && run_block(body_)) live_.end = State::FINISHED;
    } catch (const ProgramFailure&) {
      live_.end = State::FAILED;
    }
    live_.ended = true;
    // Nothing else is caught: no other exception is thrown in the program.
    leave_program();
    return std::move(engine_);
  });
}

ProgramFiber::~ProgramFiber() {
  if (!live_.ended) {
    // Suspended: let it return from its own frames, with every switch annotated.
    cancel_ = true;
    switch_to_program();
  }
  stacks_.deallocate(stack_, guarded_);
}

void ProgramFiber::restart() {
  if (live_.state == State::NOT_STARTED) {
    // Never resumed: its environment is still the initial one.
    return;
  }
  if (!live_.ended) {
    cancel_ = true;
    switch_to_program();
    cancel_ = false;
  }
  std::copy(initial_env_.begin(), initial_env_.end(), live_.env.begin());
  live_.saved.clear();
  live_.call_depth = 0;
  live_.group_ops.clear();
  live_.splits.clear();
  live_.choose = nullptr;
  live_.branch = 0;
  live_.head = 0;
  live_.queued = 0;
  live_.steps_ahead = 0;
  live_.ended = false;
  live_.end = State::FINISHED;
  live_.state = State::NOT_STARTED;
  start_fiber();
}

// A suspended fiber is a boost::context::fiber holding one pointer: the context it saved on its own
// stack, where its used stack begins. Boost offers no access to it; the object is copied as the
// bytes it is (a layout checked here), which is all a checkpoint needs of it.
namespace {

void* context_of(const ctx::fiber& fiber) {
  static_assert(sizeof(ctx::fiber) == sizeof(void*), "boost::context::fiber is one context pointer");
  void* context = nullptr;
  std::memcpy(&context, static_cast<const void*>(&fiber), sizeof context);
  return context;
}

void set_context(ctx::fiber& fiber, void* context) {
  std::memcpy(static_cast<void*>(&fiber), &context, sizeof context);
}

}  // namespace

bool ProgramFiber::snapshots_supported() {
#ifdef LOCKSTEP_ASAN_FIBERS
  return __asan_get_current_fake_stack() == nullptr;
#else
  return true;
#endif
}

size_t ProgramFiber::snapshot_bytes() const {
  const void* context = context_of(fiber_);
  return context == nullptr
             ? 0
             : static_cast<size_t>(static_cast<const char*>(stack_.sp) - static_cast<const char*>(context));
}

void ProgramFiber::save(Snapshot& out) const {
  out.live = live_;
  out.context = context_of(fiber_);
  if (out.context == nullptr) {
    out.stack.clear();
    return;
  }
  const size_t bytes = snapshot_bytes();
#ifdef LOCKSTEP_ASAN_FIBERS
  // The frames' redzones are poisoned; the copy reads them too. Unpoisoned, the suspended frames
  // only lose their overflow checks.
  __asan_unpoison_memory_region(out.context, bytes);
#endif
  const auto* from = static_cast<const std::byte*>(out.context);
  out.stack.assign(from, from + bytes);
}

void ProgramFiber::restore(const Snapshot& in) {
  assert(!cancel_);
  live_ = in.live;
#ifdef LOCKSTEP_ASAN_FIBERS
  // The frames of the state left behind are abandoned with their redzones poisoned, where the
  // restored frames (or a restarted program's) keep their variables: both regions unpoisoned.
  __asan_unpoison_memory_region(static_cast<char*>(stack_.sp) - snapshot_bytes(), snapshot_bytes());
  __asan_unpoison_memory_region(static_cast<char*>(stack_.sp) - in.stack.size(), in.stack.size());
#endif
  // Whatever the fiber holds now lives on the same stack and is overwritten, not unwound.
  set_context(fiber_, in.context);
  if (in.context == nullptr) return;
  std::memcpy(in.context, in.stack.data(), in.stack.size());
}

void ProgramFiber::advance() {
  assert(live_.state == State::NOT_STARTED || live_.state == State::READY);
  if (live_.state == State::READY) ++live_.head;
  if (live_.head == live_.queued) {
    live_.head = 0;
    live_.queued = 0;
    live_.splits.clear();
    if (!live_.ended) switch_to_program();  // the program queues more actions, or ends
  }
  live_.state = live_.head < live_.queued ? State::READY : live_.end;
}

void ProgramFiber::switch_to_program() {
#ifdef LOCKSTEP_ASAN_FIBERS
  void* engine_fake = nullptr;
  __sanitizer_start_switch_fiber(&engine_fake, static_cast<char*>(stack_.sp) - stack_.size, stack_.size);
  fiber_ = std::move(fiber_).resume();
  __sanitizer_finish_switch_fiber(engine_fake, nullptr, nullptr);
#else
  fiber_ = std::move(fiber_).resume();
#endif
}

void ProgramFiber::switch_to_engine() {
#ifdef LOCKSTEP_ASAN_FIBERS
  __sanitizer_start_switch_fiber(&live_.fake_stack, live_.engine_stack_bottom, live_.engine_stack_size);
  engine_ = std::move(engine_).resume();
  __sanitizer_finish_switch_fiber(live_.fake_stack, &live_.engine_stack_bottom, &live_.engine_stack_size);
#else
  engine_ = std::move(engine_).resume();
#endif
}

// The operation is evaluated in its queue slot, not copied there: this runs once per op.
bool ProgramFiber::emit_op(const Stmt& stmt) {
  evaluate_op(stmt, live_.queue[live_.queued].op);
  return emit(Action::OP);
}

bool ProgramFiber::emit(Action action) {
  live_.queue[live_.queued].action = action;
  ++live_.queued;
  if (action == Action::OP && live_.queued < LOOKAHEAD) return true;
  return suspend();
}

bool ProgramFiber::suspend() {
  switch_to_engine();
  live_.steps_ahead = 0;
  return !cancel_;
}

void ProgramFiber::leave_program() {
#ifdef LOCKSTEP_ASAN_FIBERS
  // A null save slot tells ASan this fiber's stack is done with.
  __sanitizer_start_switch_fiber(nullptr, live_.engine_stack_bottom, live_.engine_stack_size);
#endif
}

void ProgramFiber::fail(SourceLoc loc, std::string message) {
  live_.failure = Diagnostic{scenario_.path, loc, Severity::ERROR, std::move(message)};
  throw ProgramFailure{};
}

int64_t ProgramFiber::eval_tree(const Expr& expr) {
  try {
    return eval_expr(expr, live_.env);
  } catch (const EvalError& error) {
    fail(error.loc, fmt::format("{} (on rank {})", error.what(), rank_));
  }
}

bool ProgramFiber::run_block(std::span<const Stmt> block) {
  for (const Stmt& stmt : block) {
    if (!step_ahead()) return false;
    switch (stmt.kind) {
      case StmtKind::OP:
        if (!emit_op(stmt)) return false;
        break;
      case StmtKind::NCCL_GROUP:
        live_.group_ops.clear();
        for (const Stmt& op : stmt.body) evaluate_op(op, live_.group_ops.emplace_back());
        if (!emit(Action::NCCL_GROUP)) return false;
        break;
      case StmtKind::REPEAT: {
        const StmtExtra& repeat = stmt.extra();
        const int64_t count = eval(repeat.count);
        if (count < 0) fail(repeat.count.loc, fmt::format("repeat count {} is negative (on rank {})", count, rank_));
        if (count > limits_.max_repeat) {
          fail(repeat.count.loc, fmt::format("repeat count {} exceeds the limit of {} iterations (on rank {}; raise it "
                                           "with --max-repeat)", count, limits_.max_repeat, rank_));
        }
        for (int64_t i = 0; i < count; ++i) {
          if (repeat.var_slot >= 0) live_.env[static_cast<size_t>(repeat.var_slot)] = i;
          if (!step_ahead() || !run_block(stmt.body)) return false;
        }
        break;
      }
      case StmtKind::IF:
        if (!run_block(eval(stmt.extra().cond) != 0 ? stmt.body : stmt.extra().else_body)) return false;
        break;
      case StmtKind::CHOOSE:
        if (!run_choose(stmt)) return false;
        break;
      case StmtKind::CALL:
        if (!run_call(stmt)) return false;
        break;
    }
  }
  return true;
}

bool ProgramFiber::run_choose(const Stmt& stmt) {
  live_.choose = &stmt;
  live_.branch = 0;
  if (!emit(Action::CHOOSE)) return false;
  return run_block(stmt.branches.at(live_.branch).body);
}

const std::vector<int32_t>& ProgramFiber::written_slots(uint32_t callee) {
  if (written_.empty()) {
    written_.resize(scenario_.defines.size());
    written_known_.assign(scenario_.defines.size(), false);
  }
  if (!written_known_[callee]) {
    const Define& define = scenario_.defines[callee];
    std::vector<int32_t>& slots = written_[callee];
    slots = define.param_slots;
    add_loop_slots(define.body, slots);
    written_known_[callee] = true;
  }
  return written_[callee];
}

bool ProgramFiber::run_call(const Stmt& stmt) {
  const StmtExtra& call = stmt.extra();
  const Define& define = scenario_.defines.at(call.callee);
  if (live_.call_depth >= limits_.max_call_depth) {
    fail(stmt.loc, fmt::format("call of '{}' exceeds the limit of {} nested calls (on rank {}; raise it with "
                               "--max-call-depth)", define.name, limits_.max_call_depth, rank_));
  }
  // The arguments are all evaluated before any is bound (one may read a slot another rebinds,
  // in a recursive call), onto live_.saved, followed by the values the call's own writes will
  // replace: a call may recurse, so its slots are restored after it. No allocation per call.
  const size_t saved_at = live_.saved.size();
  for (const Expr& arg : call.args) live_.saved.push_back(eval(arg));
  const size_t arg_count = call.args.size();
  const std::vector<int32_t>& slots = written_slots(call.callee);
  for (int32_t slot : slots) live_.saved.push_back(live_.env[static_cast<size_t>(slot)]);
  for (size_t i = 0; i < arg_count && i < define.param_slots.size(); ++i) {
    live_.env[static_cast<size_t>(define.param_slots[i])] = live_.saved[saved_at + i];
  }
  ++live_.call_depth;
  if (!run_block(define.body)) return false;
  --live_.call_depth;
  for (size_t j = 0; j < slots.size(); ++j) live_.env[static_cast<size_t>(slots[j])] = live_.saved[saved_at + arg_count + j];
  live_.saved.resize(saved_at);
  return true;
}

// An op with split sizes (has_splits): its sizes to and from each member, after the queue's
// others in live_.splits. An all_to_all_single's size is the larger of what it sends and
// receives in all. An op without `send_splits` (allgather_v) sends every member its own entry of
// `recv_splits`; its size is what it receives in all (the gathered output, as allgather's).
void ProgramFiber::evaluate_splits(const Stmt& stmt, const std::vector<int32_t>& comm, OpInstance& op) {
  op.duration_ns = static_cast<int64_t>(live_.splits.size());
  int64_t sent = 0;
  int64_t received = 0;
  const bool sends_own = !lists_sends(stmt.op);
  if (sends_own) live_.splits.resize(live_.splits.size() + comm.size());  // filled from recv_splits below
  for (const std::vector<Expr>* list : {&stmt.extra().send_splits, &stmt.extra().recv_splits}) {
    const bool sends = list == &stmt.extra().send_splits;
    if (sends && sends_own) continue;
    if (list->size() != comm.size()) {
      fail(stmt.loc, fmt::format("{} has {} sizes but group '{}' has {} members on rank {}", sends ? "send_splits" : "recv_splits",
                                 list->size(), scenario_.groups[stmt.group].name, comm.size(), rank_));
    }
    for (const Expr& expr : *list) {
      const int64_t bytes = eval(expr);
      if (bytes < 0) fail(expr.loc, fmt::format("size {} is negative (on rank {})", bytes, rank_));
      (sends ? sent : received) += bytes;
      live_.splits.push_back(bytes);
    }
  }
  if (sends_own) {
    const auto at = static_cast<size_t>(op.duration_ns);
    const auto own = static_cast<size_t>(std::lower_bound(comm.begin(), comm.end(), rank_) - comm.begin());
    std::fill_n(live_.splits.begin() + static_cast<std::ptrdiff_t>(at), comm.size(), live_.splits[at + comm.size() + own]);
    op.size_bytes = received;
    return;
  }
  op.size_bytes = std::max(sent, received);
}

void ProgramFiber::evaluate_op(const Stmt& stmt, OpInstance& op) {
  const int32_t rank = rank_;
  op = OpInstance{};
  op.kind = stmt.op;
  op.group = stmt.group;
  op.dtype = stmt.dtype;
  op.stmt = &stmt;
  const GroupDef& group = scenario_.groups[stmt.group];
  const std::vector<int32_t>* comm = group.comm_for(rank);
  auto in_group = [&](int64_t r) {
    return comm != nullptr && std::binary_search(comm->begin(), comm->end(), static_cast<int32_t>(r));
  };
  auto check_rank = [&](const Expr& expr, int64_t value, std::string_view role) {
    if (value < 0 || value >= scenario_.world) {
      fail(expr.loc, fmt::format("{} {} is outside the world of {} ranks (on rank {})", role, value,
                                 scenario_.world, rank));
    }
    if (!in_group(value)) {
      fail(expr.loc, fmt::format("{} {} is not a member of group '{}' (on rank {})", role, value,
                                 group.name, rank));
    }
  };

  if (stmt.op == OpKind::COMPUTE || stmt.op == OpKind::SLEEP) {
    op.duration_ns = eval(stmt.duration);
    if (op.duration_ns < 0) {
      fail(stmt.duration.loc, fmt::format("duration {} ns is negative (on rank {})", op.duration_ns, rank));
    }
  } else if (is_collective(stmt.op) || is_p2p(stmt.op)) {
    if (comm == nullptr) {  // comm_for(rank) is the communicator containing rank, if any
      fail(stmt.loc, fmt::format("rank {} issues {} on group '{}' but is not a member of it",
                                 rank, op_kind_name(stmt.op), group.name));
    }
    op.size_bytes = eval(stmt.size);
    if (op.size_bytes < 0) {
      fail(stmt.size.loc, fmt::format("size {} is negative (on rank {})", op.size_bytes, rank));
    }
    if (stmt.has_root) {
      const Expr& root_expr = stmt.extra().root;
      const int64_t root = eval(root_expr);
      check_rank(root_expr, root, "root");
      op.root = static_cast<int32_t>(root);
    }
    if (has_splits(stmt.op) && comm != nullptr) evaluate_splits(stmt, *comm, op);
    if (stmt.has_peer && !stmt.peer_any) {
      const int64_t peer = eval(stmt.peer);
      check_rank(stmt.peer, peer, stmt.op == OpKind::SEND ? "destination" : "source");
      if (peer == rank) {
        fail(stmt.peer.loc, fmt::format("rank {} {} itself", rank,
                                        stmt.op == OpKind::SEND ? "sends to" : "receives from"));
      }
      op.peer = static_cast<int32_t>(peer);
    }
  }
}

}  // namespace lockstep::sim
