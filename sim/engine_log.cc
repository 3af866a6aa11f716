// The per-rank event log (EventLog, EngineOptions::log; docs/logging.md) and what the engine
// writes to it.
#include "sim/engine_impl.h"

#include <iterator>

#include <fmt/format.h>

namespace lockstep::sim {

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::ERROR: return "error";
    case LogLevel::WARN: return "warn";
    case LogLevel::INFO: return "info";
    case LogLevel::DEBUG: return "debug";
  }
  return "?";
}

std::optional<LogLevel> parse_log_level(std::string_view name) {
  for (LogLevel level : {LogLevel::ERROR, LogLevel::WARN, LogLevel::INFO, LogLevel::DEBUG}) {
    if (name == log_level_name(level)) return level;
  }
  return std::nullopt;
}

EventLog::EventLog(std::ostream& out, LogLevel level, const std::vector<int32_t>& ranks)
    : out_(out), level_(level), all_(ranks.empty()) {
  for (int32_t r : ranks) {
    if (r < 0) continue;
    if (static_cast<size_t>(r) >= ranks_.size()) ranks_.resize(static_cast<size_t>(r) + 1, false);
    ranks_[static_cast<size_t>(r)] = true;
  }
}

EventLog::~EventLog() { flush(); }

std::string& EventLog::begin_line(int64_t time_ns, int64_t rank, std::string_view thread) {
  fmt::format_to(std::back_inserter(buffer_), "[{:8.3f} ms] rank {} {}: ", static_cast<double>(time_ns) / 1e6, rank, thread);
  return buffer_;
}

void EventLog::end_line() {
  buffer_ += '\n';
  if (buffer_.size() >= (size_t{64} << 10)) flush();
}

void EventLog::flush() {
  if (buffer_.empty()) return;
  out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  out_.flush();
  buffer_.clear();
}

void Engine::Impl::append_ms(std::string& out, int64_t ns) { fmt::format_to(std::back_inserter(out), "{:.3f}ms", static_cast<double>(ns) / 1e6); }

// "allreduce #2 on world", "send to rank 1 #1 on pp", "compute 1.000ms", ...
void Engine::Impl::describe(std::string& out, const Kernel& kernel) const {
  const OpInstance& op = kernel.op;
  const std::string& group = sc.groups[op.group].name;
  auto it = std::back_inserter(out);
  if (is_collective(op.kind)) {
    fmt::format_to(it, "{} #{} on {}", op_kind_name(op.kind), kernel.seq, group);
  } else if (op.kind == OpKind::SEND) {
    fmt::format_to(it, "send to rank {} #{} on {}", op.peer, kernel.seq, group);
  } else if (op.kind == OpKind::RECV) {
    if (op.peer >= 0) fmt::format_to(it, "recv from rank {}", op.peer);
    else if (kernel.match >= 0) fmt::format_to(it, "recv from any (matched rank {})", kernels[static_cast<size_t>(kernel.match)].rank);
    else out += "recv from any";
    if (kernel.seq > 0) fmt::format_to(it, " #{}", kernel.seq);
    fmt::format_to(it, " on {}", group);
  } else if (op.kind == OpKind::NEW_GROUP) {
    fmt::format_to(it, "new_group #{} '{}'", kernel.seq, op.stmt ? sc.groups[op.stmt->new_group].name : std::string());
  } else if (op.kind == OpKind::COMPUTE || op.kind == OpKind::SLEEP) {
    out += op_kind_name(op.kind);
    out += ' ';
    append_ms(out, op.duration_ns);
  } else if (op.kind == OpKind::SYNC) {
    out += "sync";
    if (op.stmt && !op.stmt->stream.empty()) fmt::format_to(it, " {}", op.stmt->stream);
  } else if (op.kind == OpKind::WAIT) {
    fmt::format_to(it, "wait {}", op.stmt ? std::string_view(op.stmt->handle) : std::string_view());
  } else {
    out += op_kind_name(op.kind);
  }
}

std::string_view Engine::Impl::stream_name(const Kernel& kernel) const {
  if (kernel.stream != NO_STREAM) return names[ranks[kernel.rank].streams[kernel.stream].name];
  if (kernel.op.kind == OpKind::COMPUTE) {  // not enqueued yet when issued
    return kernel.op.stmt && !kernel.op.stmt->stream.empty() ? std::string_view(kernel.op.stmt->stream) : "main";
  }
  return {};
}

bool Engine::Impl::is_sync_point(OpKind kind) {
  return is_communication(kind) || kind == OpKind::NEW_GROUP || kind == OpKind::SYNC || kind == OpKind::WAIT;
}

// info: "reached SYNC-POINT (loc)"; debug: every op, "issue OP on STREAM (loc)".
void Engine::Impl::log_issue(uint32_t k) {
  const Kernel& kernel = kernels[k];
  const bool sync_point = is_sync_point(kernel.op.kind);
  EventLog* log = sync_point ? log_info : log_debug;
  if (log == nullptr || !log->wants(kernel.rank)) return;
  std::string& out = log->begin_line(kernel.issue_ns, kernel.rank, thread_names[kernel.thread]);
  out += sync_point ? "reached " : "issue ";
  describe(out, kernel);
  if (log_debug != nullptr) {
    const std::string_view stream = stream_name(kernel);
    if (!stream.empty()) fmt::format_to(std::back_inserter(out), " on stream {}", stream);
  }
  if (kernel.op.stmt) fmt::format_to(std::back_inserter(out), " ({})", sc.location(kernel.op.stmt->loc));
  log->end_line();
}

// debug: "start|matched|done OP on STREAM".
void Engine::Impl::log_kernel(uint32_t k, std::string_view what, int64_t at_ns) {
  const Kernel& kernel = kernels[k];
  if (!log_debug->wants(kernel.rank)) return;
  std::string& out = log_debug->begin_line(at_ns, kernel.rank, thread_names[kernel.thread]);
  out += what;
  out += ' ';
  describe(out, kernel);
  const std::string_view stream = stream_name(kernel);
  if (!stream.empty()) fmt::format_to(std::back_inserter(out), " on stream {}", stream);
  log_debug->end_line();
}

// debug: every member of a collective (or new_group) slot has issued it.
void Engine::Impl::log_slot_matched(const CollSlot& slot) {
  int64_t at = 0;
  for (int32_t k : slot.kernels) at = std::max(at, kernels[static_cast<size_t>(k)].issue_ns);
  for (int32_t k : slot.kernels) log_kernel(static_cast<uint32_t>(k), "matched", at);
}

// How the execution ended: one line per rank that did not finish (where it is, whom it waits
// for), or the mismatch, timeout or error.
void Engine::Impl::log_outcome() {
  EventLog& log = *options.log;
  auto ranks_text = [](const std::vector<int32_t>& list) {
    std::string text = list.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < list.size(); ++i) text += (i ? "," : "") + std::to_string(list[i]);
    return text;
  };
  auto describe_record = [&](std::string& out, const OpRecord& rec) {
    if (rec.op.kind == OpKind::INIT) {
      out += "init_process_group on world";
    } else {
      Kernel kernel;
      kernel.op = rec.op;
      kernel.seq = rec.seq;
      describe(out, kernel);
    }
    if (rec.op.stmt) fmt::format_to(std::back_inserter(out), " ({})", sc.location(rec.op.stmt->loc));
  };
  switch (result.end) {
    case ExecutionEnd::STUCK: {
      for (uint32_t r = 0; r < result.rank_status.size(); ++r) {
        const RankStatus status = result.rank_status[r];
        if (!log.wants(r) || status == RankStatus::FINISHED || status == RankStatus::EXITED ||
            status == RankStatus::CRASHED) {
          continue;
        }
        std::string& out = log.begin_line(result.rank_end_ns[r], r, thread_name_of(r));
        if (status == RankStatus::NOT_STARTED) {
          out += "never started: no process joined init_process_group as this rank";
          log.end_line();
          continue;
        }
        bool any = false;
        for (const StuckOp& stuck : result.stuck) {
          if (static_cast<uint32_t>(stuck.rank) != r) continue;
          out += any ? "; and in " : "stuck in ";
          any = true;
          describe_record(out, stuck.op);
          if (!stuck.op.stream.empty()) fmt::format_to(std::back_inserter(out), " on stream {}", stuck.op.stream);
          fmt::format_to(std::back_inserter(out), ", waiting for {}", ranks_text(stuck.waiting_for));
          if (!stuck.never_issued.empty()) {
            fmt::format_to(std::back_inserter(out), " ({} never {})", ranks_text(stuck.never_issued),
                           stuck.op.op.kind == OpKind::INIT ? "joined" : "issued it");
          }
        }
        if (!any) out += "stuck: its host waits for GPU work queued behind a stuck op";
        log.end_line();
      }
      break;
    }
    case ExecutionEnd::MISMATCH: {
      const MismatchInfo& m = *result.mismatch;
      for (int side = 0; side < 2; ++side) {
        const int32_t rank = side == 0 ? m.rank_a : m.rank_b;
        const OpRecord& mine = side == 0 ? m.op_a : m.op_b;
        const int32_t other = side == 0 ? m.rank_b : m.rank_a;
        if (!log.wants(rank)) continue;
        std::string& out = log.begin_line(mine.issue_ns, rank, mine.thread);
        out += "mismatch in ";
        describe_record(out, mine);
        if (m.field == "rank" && m.rank_a == m.rank_b) {
          out += ": another process joined as the same rank";
        } else {
          fmt::format_to(std::back_inserter(out), ": its {} differs from rank {}'s", m.field, other);
        }
        log.end_line();
      }
      break;
    }
    case ExecutionEnd::TIMEOUT:
      for (const StuckOp& late : result.stuck) {
        if (!log.wants(late.rank)) continue;
        std::string& out = log.begin_line(late.op.end_ns, late.rank, late.thread);
        out += "past the watchdog: ";
        describe_record(out, late.op);
        fmt::format_to(std::back_inserter(out), " ran {:.3f}ms", static_cast<double>(late.op.end_ns - late.op.start_ns) / 1e6);
        if (!late.waiting_for.empty()) fmt::format_to(std::back_inserter(out), ", waiting for {}", ranks_text(late.waiting_for));
        log.end_line();
      }
      break;
    case ExecutionEnd::ERROR:
    case ExecutionEnd::LIMIT:
      if (result.error) {
        std::string& out = log.begin_line(0, -1, "engine");
        out += sc.location(result.error->loc);
        out += ": error: ";
        out += result.error->message;
        log.end_line();
      }
      break;
    case ExecutionEnd::COMPLETED:
    case ExecutionEnd::PRUNED:
      break;
  }
  log.flush();
}

}  // namespace lockstep::sim
