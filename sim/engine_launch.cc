// Initialisation (`launch:`): the init_process_group rendezvous before any program runs.
#include "sim/engine_impl.h"

#include <algorithm>

#include <fmt/format.h>

namespace lockstep::sim {

OpRecord Engine::Impl::init_record(uint32_t p) const {
  const LaunchProcess& process = sc.launch.processes[p];
  OpRecord rec;
  rec.index = 0;
  rec.op.kind = OpKind::INIT;
  rec.op.group = 0;
  rec.op.stmt = &process.stmt;
  rec.thread = thread_name_of(static_cast<uint32_t>(process.rank));
  rec.seq = 1;
  rec.state = KernelState::RUNNING;
  rec.issue_ns = 0;
  rec.start_ns = 0;
  return rec;
}

std::string Engine::Impl::thread_name_of(uint32_t r) const {
  if (r < ranks.size() && !ranks[r].threads.empty()) return thread_names[ranks[r].threads[0]];
  return "main";
}

bool Engine::Impl::run_init() {
  const std::vector<LaunchProcess>& processes = sc.launch.processes;
  const uint32_t world = static_cast<uint32_t>(sc.world);
  std::vector<uint32_t> joined;
  for (uint32_t p = 0; p < processes.size(); ++p) {
    const LaunchProcess& process = processes[p];
    if (process.rank < process.world_size) {
      joined.push_back(p);
      if (log_info != nullptr && log_info->wants(process.rank)) {
        fmt::format_to(std::back_inserter(log_info->begin_line(0, process.rank, thread_name_of(static_cast<uint32_t>(process.rank)))),
                       "reached init_process_group on world (world_size {}, {}, {}) ({})", process.world_size,
                       process.backend, process.init_method, sc.location(process.loc));
        log_info->end_line();
      }
    } else if (log_warn != nullptr && log_warn->wants(process.rank)) {
      fmt::format_to(std::back_inserter(log_warn->begin_line(0, process.rank, "main")),
                     "init_process_group raised (NCCL WARN Invalid rank requested : {}/{}, ncclInvalidArgument): the "
                     "process ({}) exits without joining",
                     process.rank, process.world_size, sc.location(process.loc));
      log_warn->end_line();
    }
  }
  assert(!joined.empty());  // the loader rejects a launch where no process can join
  uint32_t reference = joined.front();
  for (uint32_t p : joined) {
    if (processes[p].rank == 0) {
      reference = p;
      break;
    }
  }
  const LaunchProcess& ref = processes[reference];
  auto disagree = [&](const char* field, uint32_t a, uint32_t b) {
    MismatchInfo info;
    info.group = 0;
    info.seq = 1;
    info.field = field;
    info.rank_a = processes[a].rank;
    info.op_a = init_record(a);
    info.rank_b = processes[b].rank;
    info.op_b = init_record(b);
    if (info.rank_a > info.rank_b) {
      std::swap(info.rank_a, info.rank_b);
      std::swap(info.op_a, info.op_b);
    }
    result.mismatch = std::move(info);
    result.end = ExecutionEnd::MISMATCH;
    return false;
  };
  for (uint32_t p : joined) {
    if (processes[p].world_size != ref.world_size) return end_init(joined, disagree("world_size", reference, p));
  }
  for (uint32_t p : joined) {
    if (processes[p].backend != ref.backend) return end_init(joined, disagree("backend", reference, p));
  }
  for (uint32_t p : joined) {
    if (processes[p].init_method != ref.init_method) return end_init(joined, disagree("init_method", reference, p));
  }
  std::vector<int32_t> claimed(world, -1);  // rank -> the process that joined as it
  for (uint32_t p : joined) {
    int32_t& first = claimed[static_cast<size_t>(processes[p].rank)];  // < world (loader)
    if (first >= 0) return end_init(joined, disagree("rank", static_cast<uint32_t>(first), p));
    first = static_cast<int32_t>(p);
  }
  const bool complete = static_cast<uint32_t>(ref.world_size) == world &&
                        std::find(claimed.begin(), claimed.end(), -1) == claimed.end();
  if (complete) return true;
  // A hang: every process that joined waits for the ranks no process joined as.
  std::vector<int32_t> missing;
  for (uint32_t r = 0; r < world; ++r) {
    if (claimed[r] < 0) missing.push_back(static_cast<int32_t>(r));
  }
  for (uint32_t r = 0; r < world; ++r) {
    if (claimed[r] < 0) continue;
    StuckOp stuck;
    stuck.rank = static_cast<int32_t>(r);
    stuck.thread = thread_name_of(r);
    stuck.op = init_record(static_cast<uint32_t>(claimed[r]));
    stuck.waiting_for = missing;
    stuck.never_issued = missing;
    result.stuck.push_back(std::move(stuck));
  }
  result.end = ExecutionEnd::STUCK;
  return end_init(joined, false);
}

// The result of an execution that ended in initialisation.
bool Engine::Impl::end_init(const std::vector<uint32_t>& joined, bool ok) {
  const size_t world = ranks.size();
  result.rank_status.assign(world, RankStatus::NOT_STARTED);
  result.rank_end_ns.assign(world, 0);
  if (options.record_ops) result.ops.assign(world, {});
  for (uint32_t p : joined) {
    const size_t r = static_cast<size_t>(sc.launch.processes[p].rank);
    if (r >= world || result.rank_status[r] == RankStatus::BLOCKED) continue;
    result.rank_status[r] = RankStatus::BLOCKED;
    if (options.record_ops) result.ops[r].push_back(init_record(p));
  }
  for (RankStatus status : result.rank_status) result.events += status == RankStatus::BLOCKED ? 1 : 0;
  stopped = true;
  return ok;
}

}  // namespace lockstep::sim
