#include "sim/timeline.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace lockstep::sim {

namespace {

using Json = nlohmann::ordered_json;

double to_us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string op_name(const Scenario& scenario, const OpRecord& rec) {
  const OpInstance& op = rec.op;
  const std::string_view kind = op_kind_name(op.kind);
  if (is_collective(op.kind)) return fmt::format("{} #{} {}", kind, rec.seq, scenario.groups[op.group].name);
  if (op.kind == OpKind::SEND) return fmt::format("send->{} #{} {}", op.peer, rec.seq, scenario.groups[op.group].name);
  if (op.kind == OpKind::RECV) {
    return op.peer >= 0 ? fmt::format("recv<-{} #{} {}", op.peer, rec.seq, scenario.groups[op.group].name)
                        : fmt::format("recv<-any {}", scenario.groups[op.group].name);
  }
  return std::string(kind);
}

}  // namespace

int64_t timeline_last_event_ns(const ExecutionResult& result) {
  int64_t last = 0;
  for (const std::vector<OpRecord>& ops : result.ops) {
    for (const OpRecord& rec : ops) last = std::max({last, rec.end_ns, rec.start_ns, rec.issue_ns});
  }
  for (int64_t end : result.rank_end_ns) last = std::max(last, end);
  return last;
}

int64_t timeline_horizon_ns(const ExecutionResult& result) {
  int64_t horizon = timeline_last_event_ns(result);
  bool stuck = false;
  for (const std::vector<OpRecord>& ops : result.ops) {
    for (const OpRecord& rec : ops) stuck = stuck || (rec.start_ns >= 0 && rec.end_ns < 0);
  }
  if (stuck) horizon += std::max<int64_t>(horizon / 10, 1'000);
  return horizon;
}

std::optional<TimelineSpan> timeline_span(const Scenario& scenario, const OpRecord& rec, int64_t horizon_ns) {
  if (rec.start_ns < 0) return std::nullopt;
  const bool stuck = rec.end_ns < 0;
  return TimelineSpan{op_name(scenario, rec), rec.start_ns, stuck ? horizon_ns : rec.end_ns, stuck,
                      is_collective(rec.op.kind) || is_p2p(rec.op.kind)};
}

std::string chrome_trace(const Scenario& scenario, const ExecutionResult& result) {
  const int64_t horizon = timeline_horizon_ns(result);

  Json events = Json::array();
  for (size_t r = 0; r < result.ops.size(); ++r) {
    const int pid = static_cast<int>(r);
    events.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                          {"args", {{"name", fmt::format("rank {}", r)}}}});
    events.push_back(Json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                          {"args", {{"sort_index", pid}}}});
    // Tracks: host threads first (tid 1..), then streams (tid 1000..), in order of first use.
    std::map<std::string, int> tids;
    // Host threads and streams may share a name (thread "main", stream "main"): keyed apart.
    auto track = [&](const std::string& name, bool stream) {
      const std::string key = (stream ? "s:" : "t:") + name;
      auto it = tids.find(key);
      if (it != tids.end()) return it->second;
      int count = 0;
      for (const auto& [n, t] : tids) count += (t >= 1000) == stream ? 1 : 0;
      const int tid = (stream ? 1000 : 1) + count;
      tids.emplace(key, tid);
      events.push_back(Json{{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
                            {"args", {{"name", stream ? "stream " + name : "thread " + name}}}});
      return tid;
    };
    for (const ThreadDef& thread : scenario.program_of(pid)) track(thread.name, false);
    for (const OpRecord& rec : result.ops[r]) {
      const bool on_stream = !rec.stream.empty();
      const int tid = track(on_stream ? rec.stream : rec.thread, on_stream);
      const std::optional<TimelineSpan> span = timeline_span(scenario, rec, horizon);
      if (!span) continue;  // never started
      Json args = Json::object();
      if (is_collective(rec.op.kind) || is_p2p(rec.op.kind)) {
        args["group"] = scenario.groups[rec.op.group].name;
        args["seq"] = rec.seq;
        args["size_bytes"] = rec.op.size_bytes;
        args["dtype"] = std::string(dtype_name(rec.op.dtype));
      }
      args["index"] = rec.index;
      args["thread"] = rec.thread;
      if (rec.op.stmt) args["source"] = scenario.location(rec.op.stmt->loc);
      if (span->stuck) args["stuck"] = true;
      Json event{{"name", span->name + (span->stuck ? " (stuck)" : "")},
                 {"cat", span->comm ? "comm" : "compute"},
                 {"ph", "X"}, {"ts", to_us(span->start_ns)}, {"dur", to_us(span->end_ns - span->start_ns)},
                 {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
      if (span->stuck) event["cname"] = "terrible";  // drawn red
      events.push_back(std::move(event));
    }
  }
  Json trace;
  trace["traceEvents"] = std::move(events);
  trace["displayTimeUnit"] = "ns";
  trace["otherData"] = Json{{"scenario", scenario.name}, {"generator", "lockstep"}};
  return trace.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<PathStep> critical_path(const ExecutionResult& result) {
  const OpRecord* last = nullptr;
  int32_t last_rank = -1;
  for (size_t r = 0; r < result.ops.size(); ++r) {
    for (const OpRecord& rec : result.ops[r]) {
      if (rec.end_ns >= 0 && (last == nullptr || rec.end_ns > last->end_ns)) {
        last = &rec;
        last_rank = static_cast<int32_t>(r);
      }
    }
  }
  std::vector<PathStep> path;
  auto find = [&](int32_t rank, uint32_t index) -> const OpRecord* {
    if (rank < 0 || static_cast<size_t>(rank) >= result.ops.size()) return nullptr;
    const std::vector<OpRecord>& ops = result.ops[static_cast<size_t>(rank)];
    return index < ops.size() && ops[index].index == index ? &ops[index] : nullptr;
  };
  size_t bound = 0;
  for (const std::vector<OpRecord>& ops : result.ops) bound += ops.size();
  while (last != nullptr && path.size() <= bound) {
    path.push_back(PathStep{last_rank, last->index});
    // An op that ended when a later participant started: that participant is on the path.
    if (last->end_cause_rank >= 0) {
      const int32_t rank = last->end_cause_rank;
      last = find(rank, last->end_cause_index);
      last_rank = rank;
      if (last != nullptr) path.push_back(PathStep{last_rank, last->index});
      if (last == nullptr) break;
    }
    if (last->start_cause_rank < 0) break;
    const int32_t rank = last->start_cause_rank;
    last = find(rank, last->start_cause_index);
    last_rank = rank;
  }
  std::reverse(path.begin(), path.end());
  // An op reached twice in a row (end cause, then itself) is listed once.
  path.erase(std::unique(path.begin(), path.end(),
                         [](const PathStep& a, const PathStep& b) { return a.rank == b.rank && a.index == b.index; }),
             path.end());
  return path;
}

}  // namespace lockstep::sim
