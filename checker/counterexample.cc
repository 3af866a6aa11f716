#include "checker/counterexample.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/replay.h"
#include "checker/report.h"
#include "sim/semantics_table.h"

namespace lockstep::checker {


sim::ExecutionResult replay_execution(const sim::Scenario& scenario, const std::vector<sim::Option>& schedule,
                                      sim::EngineOptions options, bool& diverged) {
  options.record_ops = true;
  sim::Engine engine(scenario, options);
  ReplayStrategy replay(schedule);
  sim::ExecutionResult result = engine.run(replay);
  diverged = replay.diverged() || replay.used() != schedule.size();
  return result;
}


namespace {

// Position of op `index` in a rank's records (sorted by index; usually position == index).
std::optional<size_t> position_of(const std::vector<sim::OpRecord>& ops, uint32_t index) {
  if (index < ops.size() && ops[index].index == index) return index;
  auto it = std::lower_bound(ops.begin(), ops.end(), index,
                             [](const sim::OpRecord& rec, uint32_t i) { return rec.index < i; });
  if (it == ops.end() || it->index != index) return std::nullopt;
  return static_cast<size_t>(it - ops.begin());
}

bool is_async_comm(const sim::OpRecord& rec) {
  return (sim::is_collective(rec.op.kind) || sim::is_p2p(rec.op.kind)) && rec.op.stmt && !rec.op.stmt->handle.empty();
}

}  // namespace

std::vector<std::vector<OpId>> matched_sets(const sim::Scenario& scenario, const sim::ExecutionResult& result) {
  // (kind of key, group, communicator or source, destination, seq) -> members.
  using Key = std::tuple<int, uint32_t, int64_t, int64_t, uint32_t>;
  std::map<Key, std::vector<OpId>> sets;
  for (size_t r = 0; r < result.ops.size(); ++r) {
    const int32_t rank = static_cast<int32_t>(r);
    for (const sim::OpRecord& rec : result.ops[r]) {
      if (rec.seq == 0) continue;
      const OpId id{rank, rec.index};
      const uint32_t group = rec.op.group;
      if (rec.op.kind == sim::OpKind::NEW_GROUP) {
        sets[Key{0, 0, 0, 0, rec.seq}].push_back(id);
      } else if (sim::is_collective(rec.op.kind)) {
        const std::vector<int32_t>& comm_of = scenario.groups[group].comm_of_rank;
        const int64_t comm = r < comm_of.size() ? comm_of[r] : -1;
        sets[Key{1, group, comm, 0, rec.seq}].push_back(id);
      } else if (rec.op.kind == sim::OpKind::SEND) {
        sets[Key{2, group, rank, rec.op.peer, rec.seq}].push_back(id);
      } else if (rec.op.kind == sim::OpKind::RECV && rec.matched_peer >= 0) {
        sets[Key{2, group, rec.matched_peer, rank, rec.seq}].push_back(id);
      }
    }
  }
  std::vector<std::vector<OpId>> out;
  for (auto& [key, members] : sets) {
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end());
    out.push_back(std::move(members));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return out;
}

std::vector<OpId> causal_seeds(const Bug& bug, const sim::ExecutionResult& result) {
  std::vector<OpId> seeds;
  std::set<int32_t> stuck_ranks;
  for (const sim::StuckOp& s : bug.stuck) {
    seeds.push_back({s.rank, s.op.index});
    stuck_ranks.insert(s.rank);
  }
  if (bug.mismatch) {
    seeds.push_back({bug.mismatch->rank_a, bug.mismatch->op_a.index});
    seeds.push_back({bug.mismatch->rank_b, bug.mismatch->op_b.index});
  }
  if (bug.kind == sim::Verdict::HANG || bug.kind == sim::Verdict::DEADLOCK) {
    std::set<int32_t> waited;
    for (const sim::StuckOp& s : bug.stuck) waited.insert(s.waiting_for.begin(), s.waiting_for.end());
    for (int32_t w : waited) {
      if (stuck_ranks.count(w) || w < 0 || static_cast<size_t>(w) >= result.ops.size()) continue;
      std::set<std::string> threads;
      const std::vector<sim::OpRecord>& ops = result.ops[static_cast<size_t>(w)];
      for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
        if (threads.insert(it->thread).second) seeds.push_back({w, it->index});
      }
    }
  }
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  return seeds;
}

std::vector<std::vector<bool>> causal_past(const sim::Scenario& scenario, const sim::ExecutionResult& result,
                                           const std::vector<OpId>& seeds) {
  const size_t world = result.ops.size();
  // Direct predecessors on the same rank, by position: the previous op of the thread and of the
  // stream (NONE: none), and what a wait or sync waits for.
  constexpr size_t NONE = SIZE_MAX;
  std::vector<std::vector<std::pair<size_t, size_t>>> previous(world);
  std::vector<std::map<size_t, std::vector<size_t>>> waits(world);
  std::vector<std::vector<int32_t>> set_of(world);
  for (size_t r = 0; r < world; ++r) {
    const std::vector<sim::OpRecord>& ops = result.ops[r];
    previous[r].assign(ops.size(), {NONE, NONE});
    set_of[r].assign(ops.size(), -1);
    std::map<std::string, size_t> last_on_thread, last_on_stream, last_with_handle;
    for (size_t i = 0; i < ops.size(); ++i) {
      const sim::OpRecord& rec = ops[i];
      if (auto it = last_on_thread.find(rec.thread); it != last_on_thread.end()) previous[r][i].first = it->second;
      if (!rec.stream.empty()) {
        if (auto it = last_on_stream.find(rec.stream); it != last_on_stream.end()) previous[r][i].second = it->second;
      }
      if (rec.op.kind == sim::OpKind::WAIT && rec.op.stmt) {
        if (auto it = last_with_handle.find(rec.op.stmt->handle.str()); it != last_with_handle.end()) {
          waits[r][i].push_back(it->second);
        }
      }
      if (rec.op.kind == sim::OpKind::SYNC) {
        const std::string stream = rec.op.stmt ? rec.op.stmt->stream.str() : std::string();
        for (const auto& [name, pos] : last_on_stream) {
          if (stream.empty() || name == stream) waits[r][i].push_back(pos);
        }
      }
      last_on_thread[rec.thread] = i;
      if (!rec.stream.empty()) last_on_stream[rec.stream] = i;
      if (is_async_comm(rec)) last_with_handle[rec.op.stmt->handle.str()] = i;
    }
  }
  const std::vector<std::vector<OpId>> sets = matched_sets(scenario, result);
  for (size_t k = 0; k < sets.size(); ++k) {
    for (const OpId& id : sets[k]) {
      if (std::optional<size_t> pos = position_of(result.ops[static_cast<size_t>(id.rank)], id.index)) {
        set_of[static_cast<size_t>(id.rank)][*pos] = static_cast<int32_t>(k);
      }
    }
  }

  std::vector<std::vector<bool>> past(world);
  for (size_t r = 0; r < world; ++r) past[r].assign(result.ops[r].size(), false);
  std::vector<std::pair<size_t, size_t>> work;
  auto visit = [&](int32_t rank, uint32_t index) {
    if (rank < 0 || static_cast<size_t>(rank) >= world) return;
    const size_t r = static_cast<size_t>(rank);
    std::optional<size_t> pos = position_of(result.ops[r], index);
    if (!pos || past[r][*pos]) return;
    past[r][*pos] = true;
    work.emplace_back(r, *pos);
  };
  for (const OpId& seed : seeds) visit(seed.rank, seed.index);
  while (!work.empty()) {
    const size_t r = work.back().first;  // not a structured binding: clang 14 (the fuzz
    const size_t i = work.back().second;  // targets) cannot capture one in a lambda
    work.pop_back();
    const sim::OpRecord& rec = result.ops[r][i];
    auto visit_local = [&](size_t pred) {
      if (pred != NONE) visit(static_cast<int32_t>(r), result.ops[r][pred].index);
    };
    visit_local(previous[r][i].first);
    visit_local(previous[r][i].second);
    if (auto it = waits[r].find(i); it != waits[r].end()) {
      for (size_t pred : it->second) visit_local(pred);
    }
    visit(rec.start_cause_rank, rec.start_cause_index);
    visit(rec.end_cause_rank, rec.end_cause_index);
    if (set_of[r][i] >= 0) {
      for (const OpId& member : sets[static_cast<size_t>(set_of[r][i])]) visit(member.rank, member.index);
    }
  }
  return past;
}

std::string counterexample_json(const sim::Scenario& scenario, const Bug& bug, const sim::ExecutionResult& replayed,
                                const std::string& strategy, uint64_t seed, const MinimizedInfo* minimized) {
  Json out;
  out["lockstep_counterexample"] = 1;
  out["version"] = lockstep_version();
  Json sc;
  sc["name"] = scenario.name;
  sc["path"] = scenario.path;
  Json params = Json::object();
  for (const sim::Param& p : scenario.params) params[p.name] = p.value;
  sc["params"] = std::move(params);
  sc["text"] = std::string(scenario.text);
  out["scenario"] = std::move(sc);
  const sim::Semantics& sem = scenario.semantics;
  Json semantics = Json::object();
  for (const sim::SemanticsSetting& setting : sim::semantics_settings()) {
    const int64_t value = setting.get(sem);
    const std::string key(setting.trace_key);
    switch (setting.kind) {
      case sim::SettingKind::CHOICE: semantics[key] = setting.choices[static_cast<size_t>(value)]; break;
      case sim::SettingKind::FLAG: semantics[key] = value != 0; break;
      case sim::SettingKind::BYTES:
      case sim::SettingKind::COUNT:
      case sim::SettingKind::DURATION: semantics[key] = value; break;
    }
  }
  out["semantics"] = std::move(semantics);
  out["strategy"] = strategy;
  out["seed"] = seed;
  out["schedule"] = schedule_string(bug.choices);
  Json b;
  b["kind"] = std::string(sim::verdict_name(bug.kind));
  b["summary"] = bug.summary;
  b["explanation"] = bug.explanation;
  b["cycle"] = bug.cycle;
  b["signature"] = bug.signature;
  out["bug"] = std::move(b);

  // The op lists: the causal past of the bug only (docs/counterexamples.md).
  const std::vector<std::vector<bool>> past = causal_past(scenario, replayed, causal_seeds(bug, replayed));
  std::set<int32_t> waited;
  for (const sim::StuckOp& s : bug.stuck) waited.insert(s.waiting_for.begin(), s.waiting_for.end());
  Json ranks = Json::array();
  uint64_t listed = 0, left_out = 0, ranks_left_out = 0;
  const size_t world = std::max(replayed.ops.size(), static_cast<size_t>(std::max(scenario.world, 0)));
  // The size bound: past MAX_LISTED_OPS ops in the causal past, only the ranks the bug involves
  // (stuck, or waited for) are listed, each with its last `per_rank` ops of that past.
  std::vector<bool> involved(world, false);
  for (const sim::StuckOp& s : bug.stuck) {
    if (static_cast<size_t>(s.rank) < world) involved[static_cast<size_t>(s.rank)] = true;
  }
  for (int32_t r : waited) {
    if (static_cast<size_t>(r) < world) involved[static_cast<size_t>(r)] = true;
  }
  if (bug.mismatch) {
    for (int32_t r : {bug.mismatch->rank_a, bug.mismatch->rank_b}) {
      if (r >= 0 && static_cast<size_t>(r) < world) involved[static_cast<size_t>(r)] = true;
    }
  }
  uint64_t in_past = 0;
  for (const std::vector<bool>& rank_past : past) in_past += static_cast<uint64_t>(std::count(rank_past.begin(), rank_past.end(), true));
  const bool bounded = in_past > MAX_LISTED_OPS;
  const uint64_t involved_count = std::max<uint64_t>(1, static_cast<uint64_t>(std::count(involved.begin(), involved.end(), true)));
  const uint64_t per_rank = std::max<uint64_t>(2, MAX_LISTED_OPS / involved_count);
  for (size_t r = 0; r < world; ++r) {
    Json stuck_in = Json::array();
    for (const sim::StuckOp& s : bug.stuck) {
      if (static_cast<size_t>(s.rank) == r) stuck_in.push_back(s.op.index);
    }
    Json ops = Json::array();
    uint64_t rank_left_out = 0;
    if (r < replayed.ops.size()) {
      uint64_t keep = UINT64_MAX;  // how many of the rank's causal ops, from its last
      if (bounded) keep = involved[r] ? per_rank : 0;
      uint64_t rank_past = static_cast<uint64_t>(std::count(past[r].begin(), past[r].end(), true));
      const uint64_t skip = rank_past > keep ? rank_past - keep : 0;
      uint64_t seen = 0;
      for (size_t i = 0; i < replayed.ops[r].size(); ++i) {
        if (past[r][i] && seen++ >= skip) ops.push_back(op_json(scenario, replayed.ops[r][i], true));
        else ++rank_left_out;
      }
    }
    listed += ops.size();
    left_out += rank_left_out;
    if (ops.empty() && stuck_in.empty() && (bounded || !waited.count(static_cast<int32_t>(r)))) {
      ++ranks_left_out;
      continue;
    }
    Json rank;
    rank["rank"] = r;
    rank["status"] = r < replayed.rank_status.size() ? std::string(sim::rank_status_name(replayed.rank_status[r])) : "";
    rank["stuck_in"] = std::move(stuck_in);
    rank["left_out"] = rank_left_out;
    rank["ops"] = std::move(ops);
    ranks.push_back(std::move(rank));
  }
  out["listed"] = Json{{"rule", "causal past of the bug"},
                       {"ops", listed},
                       {"ops_left_out", left_out},
                       {"ranks_left_out", ranks_left_out}};
  if (bounded) {
    out["listed"]["bound_hit"] = fmt::format("the causal past has {} ops, over {}: only the ranks the bug involves are "
                                             "listed, each with its last {} ops of it",
                                             in_past, MAX_LISTED_OPS, per_rank);
  }
  out["ranks"] = std::move(ranks);
  if (minimized) {
    Json m;
    if (!minimized->refused.empty()) {
      m["refused"] = minimized->refused;
    } else {
      m["trace"] = minimized->trace;
      m["ranks"] = minimized->ranks;
      m["ops"] = minimized->ops;
      m["of_ranks"] = minimized->of_ranks;
      m["of_ops"] = minimized->of_ops;
      m["rechecks"] = minimized->rechecks;
      m["budget"] = minimized->budget;
      m["budget_hit"] = minimized->budget_hit;
      m["sources"] = minimized->sources;
    }
    out["minimized"] = std::move(m);
  }
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // a path may be any bytes
}

std::optional<Counterexample> read_counterexample(const std::string& path, std::string& error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    error = fmt::format("{}: error: cannot read file: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  std::stringstream buffer;
  buffer << file.rdbuf();
  const Json json = Json::parse(buffer.str(), nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    error = fmt::format("{}: error: not a JSON object", path);
    return std::nullopt;
  }
  if (!json.contains("lockstep_counterexample") || json["lockstep_counterexample"] != 1) {
    error = fmt::format("{}: error: not a lockstep counterexample (version 1)", path);
    return std::nullopt;
  }
  try {
    Counterexample cex;
    const Json& sc = json.at("scenario");
    cex.input = sc.at("path").get<std::string>();
    cex.text = sc.at("text").get<std::string>();
    for (const auto& [name, value] : sc.at("params").items()) {
      cex.params.push_back({name, std::to_string(value.get<int64_t>())});
    }
    std::string schedule_error;
    std::optional<std::vector<sim::Option>> schedule = parse_schedule(json.at("schedule").get<std::string>(), schedule_error);
    if (!schedule) {
      error = fmt::format("{}: error: bad schedule: {}", path, schedule_error);
      return std::nullopt;
    }
    cex.schedule = std::move(*schedule);
    const Json& bug = json.at("bug");
    cex.strategy = json.at("strategy").get<std::string>();
    cex.kind = bug.at("kind").get<std::string>();
    cex.signature = bug.at("signature").get<std::string>();
    for (const Json& line : bug.at("explanation")) cex.explanation.push_back(line.get<std::string>());
    return cex;
  } catch (const Json::exception& e) {
    error = fmt::format("{}: error: malformed counterexample: {}", path, e.what());
    return std::nullopt;
  }
}

}  // namespace lockstep::checker
