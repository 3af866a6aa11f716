// Building an engine for a scenario (groups, communicators, threads and their fibers, interned
// names) and resetting it for each execution.
#include "sim/engine_impl.h"

#include <cstdio>
#include <span>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace lockstep::sim {

namespace {

// What a block can reach (through calls too; `seen` marks defines): `exit` or `crash`, and a
// wildcard receive.
struct Reaches {
  bool exit = false;
  bool wildcard = false;
};
void scan_block(const Scenario& sc, std::span<const Stmt> block, std::vector<bool>& seen, Reaches& out) {
  for (const Stmt& stmt : block) {
    if (out.exit && out.wildcard) return;
    if (stmt.kind == StmtKind::OP && (stmt.op == OpKind::EXIT || stmt.op == OpKind::CRASH)) out.exit = true;
    if (stmt.kind == StmtKind::OP && stmt.op == OpKind::RECV && stmt.peer_any) out.wildcard = true;
    scan_block(sc, stmt.body, seen, out);
    scan_block(sc, stmt.extra().else_body, seen, out);
    for (const Branch& branch : stmt.branches) scan_block(sc, branch.body, seen, out);
    if (stmt.kind == StmtKind::CALL && !seen[stmt.extra().callee]) {
      seen[stmt.extra().callee] = true;
      scan_block(sc, sc.defines[stmt.extra().callee].body, seen, out);
    }
  }
}

}  // namespace

Engine::Impl::Impl(const Scenario& scenario, EngineOptions opts)
    : sc(scenario),
      options(opts),
      stacks(opts.limits.fiber_stack_bytes),
      count_comm(scenario.semantics.comm_concurrency > 0 || opts.track_state) {
  options.checkpoints = options.checkpoints && ProgramFiber::snapshots_supported();
  if (EventLog* log = options.log) {
    if (log->level() >= LogLevel::WARN) log_warn = log;
    if (log->level() >= LogLevel::INFO) log_info = log;
    if (log->level() >= LogLevel::DEBUG) log_debug = log;
  }
  std::vector<bool> program_may_exit;
  for (const RankProgram& program : sc.programs) {
    Reaches reaches;
    for (const ThreadDef& thread : program) {
      std::vector<bool> seen(sc.defines.size(), false);
      scan_block(sc, thread.body(), seen, reaches);
    }
    program_may_exit.push_back(reaches.exit);
    has_wildcards = has_wildcards || reaches.wildcard;
  }
  rank_may_exit.resize(static_cast<size_t>(sc.world));
  for (int32_t r = 0; r < sc.world; ++r) {
    rank_may_exit[static_cast<size_t>(r)] = program_may_exit[sc.rank_program[static_cast<size_t>(r)]];
    any_may_exit = any_may_exit || rank_may_exit[static_cast<size_t>(r)];
  }
  member_pos.resize(sc.groups.size());
  comm_base.resize(sc.groups.size());
  uint32_t total = 0;
  for (size_t g = 0; g < sc.groups.size(); ++g) {
    comm_base[g] = total;
    total += static_cast<uint32_t>(sc.groups[g].comms.size());
    member_pos[g].assign(static_cast<size_t>(sc.world), -1);
    for (const std::vector<int32_t>& comm : sc.groups[g].comms) {
      for (size_t i = 0; i < comm.size(); ++i) member_pos[g][static_cast<size_t>(comm[i])] = static_cast<int32_t>(i);
    }
  }
  comm_count = total;
  intern("main");  // id 0 (MAIN_NAME)
  for (const GroupDef& group : sc.groups) group_stream_name.push_back(intern(group.stream_name()));
  ranks.resize(static_cast<size_t>(sc.world));
  // Which programs' stacks need a guard page (program_needs_guard), once per program text.
  std::unordered_map<const Stmt*, bool> guard_of;
  std::vector<bool> guarded;
  size_t guarded_count = 0;
  for (int32_t r = 0; r < sc.world; ++r) {
    for (const ThreadDef& def : sc.program_of(r)) {
      const std::span<const Stmt> body = def.body();
      const auto [it, added] = guard_of.try_emplace(body.data(), false);
      if (added) it->second = program_needs_guard(sc, body);
      guarded.push_back(it->second);
      guarded_count += it->second ? 1 : 0;
    }
  }
  setup_error = stack_mapping_problem(guarded_count, guarded.size() - guarded_count);
  for (int32_t r = 0; r < sc.world; ++r) {
    Rank& rank = ranks[static_cast<size_t>(r)];
    rank.threads.first = static_cast<uint32_t>(threads.size());
    for (const ThreadDef& def : sc.program_of(r)) {
      Thread thread;
      thread.rank = static_cast<uint32_t>(r);
      thread.local = static_cast<uint32_t>(rank.threads.size());
      thread_names.push_back(def.name);
      thread_stream_names.push_back(def.stream.empty() ? MAIN_NAME : intern(def.stream));
      // Past the mapping bound no fiber is made: run() reports the bound instead.
      if (!setup_error) {
        fibers.push_back(std::make_unique<ProgramFiber>(sc, def.body(), r, stacks, options.limits,
                                                        guarded[threads.size()]));
      }
      ++rank.threads.count;
      threads.push_back(std::move(thread));
    }
  }
  comms.resize(comm_count);
  next_actor = static_cast<uint32_t>(threads.size());
  if (options.ids != nullptr) options.ids->set_threads(next_actor);
  if (options.symmetry) find_rank_classes();
}

void Engine::Impl::reset() {
  for (size_t t = 0; t < threads.size(); ++t) {
    Thread& thread = threads[t];
    fibers[t]->restart();  // a suspended program is cancelled
    thread.state = ThreadState::RUNNABLE;
    thread.waits.clear();
    thread.clock_ns = 0;
    thread.position = 0;
    thread.vclock = 0;
    thread.issued = 0;
    thread.choose_key = NO_KEY;
  }
  const size_t group_count = sc.groups.size();
  for (Rank& rank : ranks) {
    rank.streams.clear();
    rank.streams.add().reset(MAIN_NAME);
    rank.stream_count = 1;
    rank.heads[MAIN_STREAM] = StreamHead{};
    rank.more_heads.clear();
    rank.wake = false;
    rank.named_streams.clear();
    rank.handles.clear();
    rank.launch_order.clear();
    rank.running_comm = 0;
    rank.new_groups = 0;
    rank.live_threads = static_cast<uint32_t>(rank.threads.size());
    rank.status = rank.live_threads == 0 ? RankStatus::FINISHED : RankStatus::RUNNING;  // a recorded rank with no ops
    rank.issued = 0;
    rank.end_ns = 0;
    rank.ending = false;
    rank.end_waits.clear();
    rank.slot_vclock = 0;
  }
  rank_groups.assign(ranks.size() * group_count, RankGroup{});
  kernels.clear();
  dep_pool.clear();
  for (Comm& comm : comms) comm.reset();
  new_group_calls.reset();
  mismatched_slots.clear();
  mismatched_sends.clear();
  split_values.clear();
  send_queue.clear();
  recv_queue.clear();
  agreed_branch.clear();
  ready.clear();
  dirty_ranks.clear();
  dirty_flag.assign(static_cast<size_t>(sc.world), false);
  live_kernels.clear();
  timed_out.clear();
  vclocks.assign(1, 0);
  kernel_vclocks.clear();
  kernel_local.clear();
  steps = 0;
  result = ExecutionResult{};
  stopped = false;
  ops_issued = 0;
  longest_comm_ns = 0;
}

// The memory mappings the threads' stacks add, against what vm.max_map_count leaves (with
// room for the rest of the process): checked before any stack is made, so that a world too
// large ends with the bound named instead of std::bad_alloc.
std::optional<Diagnostic> Engine::Impl::stack_mapping_problem(size_t guarded, size_t unguarded) const {
  constexpr size_t RESERVED_MAPPINGS = 4096;  // the allocator, kernel chunks, libraries
  const size_t needed = stacks.mappings_for(guarded, unguarded);
  if (needed < 1024) return std::nullopt;  // far below any system's bound
  size_t max_maps = 65530;
  if (std::FILE* file = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long long value = 0;
    if (std::fscanf(file, "%llu", &value) == 1) max_maps = static_cast<size_t>(value);
    std::fclose(file);
  }
  size_t used = 0;
  if (std::FILE* file = std::fopen("/proc/self/maps", "r")) {
    for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) used += c == '\n' ? 1 : 0;
    std::fclose(file);
  }
  if (used + needed + RESERVED_MAPPINGS <= max_maps) return std::nullopt;
  return Diagnostic{sc.path, {}, Severity::ERROR,
                    fmt::format("{} host threads need {} memory mappings for their stacks ({} of them guard-paged: a "
                                "program whose calls can recur or whose blocks nest deeper than {}), more than the {} "
                                "that vm.max_map_count ({}) leaves to this process",
                                guarded + unguarded, needed, guarded, MAX_UNGUARDED_DEPTH,
                                max_maps > used + RESERVED_MAPPINGS ? max_maps - used - RESERVED_MAPPINGS : 0, max_maps)};
}

}  // namespace lockstep::sim
