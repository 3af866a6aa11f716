// A host thread's program, interpreted inside a Boost.Context fiber. The fiber walks the
// statement tree (repeat, if, ...) and queues the operations it meets, a few at a time (see
// ProgramFiber::advance), handing them to the engine; the engine applies them one by one as
// the thread may take its next step, and resumes the fiber when the queue is used up.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include "sim/diagnostic.h"
#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::sim {

// Fiber stacks of one size, recycled across executions (the checker runs many). A stack with
// a guard page below it is a mapping of its own, and the guard splits it in two: the kernel's
// vm.max_map_count (65,530) would end a run at ~32,000 threads. So only a program whose stack
// depth has no static bound (a call that can recur, or blocks nested past
// MAX_UNGUARDED_DEPTH) gets one; every other program's stack is carved from a slab of
// SLAB_STACKS stacks, one mapping for them all, its depth far below the stack's size.
class StackPool {
 public:
  static constexpr size_t SLAB_STACKS = 256;
  explicit StackPool(size_t stack_bytes);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  boost::context::stack_context allocate(bool guarded);
  void deallocate(boost::context::stack_context& sctx, bool guarded);
  // The memory mappings that allocating this many more stacks of each kind adds (at most).
  size_t mappings_for(size_t guarded, size_t unguarded) const;

 private:
  size_t stack_bytes_;  // usable bytes, a multiple of the page size
  size_t page_bytes_;
  std::vector<void*> free_;        // guarded: base addresses (guard page first)
  std::vector<void*> free_slab_;   // unguarded: the lowest address of each free stack
  std::vector<void*> slabs_;       // each SLAB_STACKS * stack_bytes_
};

// Nesting (blocks, calls) past which a program's stack gets a guard page: 128 levels take a
// few tens of KiB of a 1 MiB stack (interpreter_test measures it).
inline constexpr uint32_t MAX_UNGUARDED_DEPTH = 128;

// Whether a program's stack must be guard-paged: a `call` in it can recur (directly or not), or
// its blocks and calls nest deeper than MAX_UNGUARDED_DEPTH. Linear in the program's size.
bool program_needs_guard(const Scenario& scenario, std::span<const Stmt> body);

// The StackAllocator Boost.Context is given: the program's own stack, which it keeps from its
// construction to its destruction (a checkpoint's copy of a suspended program is restored into the
// same addresses, so no other program may have used them in between).
class OwnedStack {
 public:
  explicit OwnedStack(const boost::context::stack_context& stack) : stack_(stack) {}
  boost::context::stack_context allocate() { return stack_; }
  void deallocate(boost::context::stack_context&) {}  // returned to the pool by ~ProgramFiber

 private:
  boost::context::stack_context stack_;
};

class ProgramFiber {
 public:
  enum class State : uint8_t { NOT_STARTED, READY, FINISHED, FAILED };
  // What a READY program wants next.
  enum class Action : uint8_t {
    OP,          // issue pending()
    NCCL_GROUP,  // issue group_ops() together
    CHOOSE,      // pick a branch of choose_stmt(), then set_branch()
  };

  // `guarded`: the program's stack gets a guard page (program_needs_guard).
  ProgramFiber(const Scenario& scenario, std::span<const Stmt> body, int32_t rank,
               StackPool& stacks, const EngineLimits& limits, bool guarded = true);
  ~ProgramFiber();
  ProgramFiber(const ProgramFiber&) = delete;
  ProgramFiber& operator=(const ProgramFiber&) = delete;

  // Back to the start of the program (NOT_STARTED), for the next execution: a suspended
  // program is cancelled first. The checker runs many executions of one engine, and
  // constructing fibers anew for each was a large part of an execution's fixed cost.
  void restart();

  // Moves to the program's next action (READY), the end of its program (FINISHED), or its
  // failure (FAILED: an expression error or a bound). The program runs ahead of the engine: each
  // resumption of the fiber evaluates up to LOOKAHEAD operations into a queue, which later
  // calls consume without a switch. Nothing the engine does changes what a program evaluates
  // (its only input is a `choose` branch, and a `choose` or an NCCL group ends a batch), so
  // running ahead shows the engine the same actions; a failure queued behind operations is
  // reported only when the engine reaches it, as before.
  void advance();

  State state() const { return live_.state; }
  Action action() const { return live_.queue[live_.head].action; }
  const OpInstance& pending() const { return live_.queue[live_.head].op; }
  const std::vector<OpInstance>& group_ops() const { return live_.group_ops; }
  // An op with split sizes (has_splits) of the queue or group_ops(): its sizes sent to each
  // member of its group, then those received from each.
  std::span<const int64_t> splits(const OpInstance& op) const {
    const auto at = static_cast<size_t>(op.duration_ns);
    return {live_.splits.data() + at, 2 * op.stmt->extra().recv_splits.size()};
  }
  const Stmt& choose_stmt() const { return *live_.choose; }
  void set_branch(uint32_t branch) { live_.branch = branch; }
  const Diagnostic& failure() const { return live_.failure; }

  // Checkpoints (EngineOptions::checkpoints): everything the program's future depends on, taken
  // while it is not running (not started, suspended or ended): its variables, its queue, and its
  // fiber, whose used stack is copied. Nothing on a program's stack owns memory elsewhere (its
  // frames hold statement pointers, indices and values; the environment and the call stack are
  // members), so bytes copied back into the same addresses resume it as it was.
  struct Snapshot;
  void save(Snapshot& out) const;
  void restore(const Snapshot& in);
  // Bytes a snapshot of the program copies now (its used stack).
  size_t snapshot_bytes() const;
  // False where a program's locals may live off its stack: under ASan with
  // detect_stack_use_after_return, which moves them to a heap "fake stack".
  static bool snapshots_supported();

 private:
  void start_fiber();
  // Switches, annotated for AddressSanitizer where it is on.
  void switch_to_program();
  void switch_to_engine();
  void leave_program();  // the last switch out of a fiber whose program has ended
  // Queues an action for the engine, and hands the queue over when it is full or the action
  // needs the engine's answer (CHOOSE) or carries group_ops() (NCCL_GROUP). False when the
  // engine cancelled the program, which then returns all the way up (cheaper than unwinding by
  // an exception, as the checker drops suspended programs at the end of most executions).
  bool emit_op(const Stmt& stmt);  // evaluates the op into the queue, then emit(OP)
  bool emit(Action action);
  bool suspend();

  // Each returns false when the program was cancelled.
  bool run_block(std::span<const Stmt> block);
  bool run_call(const Stmt& stmt);
  bool run_choose(const Stmt& stmt);
  // The slots a call of the define writes itself (parameters, loop variables; not those of
  // the calls it makes, which restore their own): all a call has to save and restore.
  const std::vector<int32_t>& written_slots(uint32_t callee);
  void evaluate_op(const Stmt& stmt, OpInstance& op);  // writes every field of op
  void evaluate_splits(const Stmt& stmt, const std::vector<int32_t>& comm, OpInstance& op);
  // Constants (most sizes and durations) are read inline; the rest goes to eval_expr.
  int64_t eval(const Expr& expr) {
    if (expr.op == ExprOp::CONST) return expr.value;
    return eval_tree(expr);
  }
  int64_t eval_tree(const Expr& expr);
  [[noreturn]] void fail(SourceLoc loc, std::string message);

  const Scenario& scenario_;
  std::span<const Stmt> body_;  // the thread's statements (owned by the scenario)
  EngineLimits limits_;
  std::vector<int64_t> initial_env_;  // the environment at the start of the program
  std::vector<std::vector<int32_t>> written_;  // per define: written_slots, once computed
  std::vector<bool> written_known_;
  StackPool& stacks_;
  int32_t rank_ = 0;
  boost::context::fiber fiber_;   // the program, while suspended
  boost::context::fiber engine_;  // the engine, while the program runs
  struct Entry {
    OpInstance op;
    Action action = Action::OP;
  };
  static constexpr uint32_t LOOKAHEAD = 8;
  // Statements walked while actions wait in the queue, before the fiber hands them over anyway:
  // running ahead must never do unbounded work (an empty loop of 10^9 iterations) past a point
  // the engine may never come back to (the thread blocks forever, the execution ends).
  static constexpr uint32_t MAX_STEPS_AHEAD = 64;
  bool step_ahead() { return live_.queued == 0 || ++live_.steps_ahead < MAX_STEPS_AHEAD || suspend(); }
  // Where the program is, apart from its stack: what a checkpoint copies (Snapshot) besides the
  // used stack. Everything that changes as it runs belongs here.
  struct Live {
    std::vector<int64_t> env;
    std::vector<int64_t> saved;  // per call in progress: its arguments, then the values of its
                                 // written slots before it (restored on return)
    int32_t call_depth = 0;
    State state = State::NOT_STARTED;  // as the engine sees it
    State end = State::FINISHED;       // how the program ended, once ended
    bool ended = false;                // the program has returned (its fiber is done)
    uint32_t steps_ahead = 0;
    std::array<Entry, LOOKAHEAD> queue{};  // the actions evaluated ahead: [head, queued)
    uint32_t head = 0;
    uint32_t queued = 0;
    std::vector<OpInstance> group_ops;
    std::vector<int64_t> splits;  // all_to_all_single: the split sizes of the queue's and group_ops'
    const Stmt* choose = nullptr;
    uint32_t branch = 0;
    Diagnostic failure;
    void* fake_stack = nullptr;  // ASan bookkeeping of the side that switched away
    const void* engine_stack_bottom = nullptr;
    size_t engine_stack_size = 0;
  };
  Live live_;
  bool cancel_ = false;                  // set when the engine drops a suspended program: it returns
  bool guarded_ = true;                  // its stack has a guard page (a mapping of its own)
  boost::context::stack_context stack_;  // its own, from construction to destruction
};

struct ProgramFiber::Snapshot {
  Live live;
  void* context = nullptr;       // the suspended fiber (null: ended)
  std::vector<std::byte> stack;  // [context, top of stack)
};

}  // namespace lockstep::sim
