#include "checker/counterexample.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/replay.h"
#include "checker/report.h"

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


std::string counterexample_json(const sim::Scenario& scenario, const Bug& bug, const sim::ExecutionResult& replayed,
                                const std::string& strategy, uint64_t seed) {
  Json out;
  out["lockstep_counterexample"] = 1;
  out["version"] = lockstep_version();
  Json sc;
  sc["name"] = scenario.name;
  sc["path"] = scenario.path;
  Json params = Json::object();
  for (const sim::Param& p : scenario.params) params[p.name] = p.value;
  sc["params"] = std::move(params);
  sc["text"] = scenario.text;
  out["scenario"] = std::move(sc);
  const sim::Semantics& sem = scenario.semantics;
  out["semantics"] = Json{{"p2p", sem.p2p == sim::P2pMode::EAGER ? "eager" : "rendezvous"},
                          {"eager_limit", sem.eager_limit_bytes},
                          {"p2p_comm", sem.p2p_comm == sim::P2pComm::PAIR ? "pair" : "group"},
                          {"comm_concurrency", sem.comm_concurrency},
                          {"launch_order_implicit", sem.launch_order_implicit},
                          {"timeout_ns", sem.timeout_ns},
                          {"algorithm", sem.allreduce_algorithm == sim::Algorithm::TREE ? "tree" : "ring"}};
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
  Json ranks = Json::array();
  for (size_t r = 0; r < replayed.ops.size(); ++r) {
    Json rank;
    rank["rank"] = r;
    rank["status"] = r < replayed.rank_status.size() ? std::string(sim::rank_status_name(replayed.rank_status[r])) : "";
    Json stuck_in = Json::array();
    for (const sim::StuckOp& s : bug.stuck) {
      if (static_cast<size_t>(s.rank) == r) stuck_in.push_back(s.op.index);
    }
    rank["stuck_in"] = std::move(stuck_in);
    Json ops = Json::array();
    for (const sim::OpRecord& rec : replayed.ops[r]) ops.push_back(op_json(scenario, rec, true));
    rank["ops"] = std::move(ops);
    ranks.push_back(std::move(rank));
  }
  out["ranks"] = std::move(ranks);
  return out.dump(2) + "\n";
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
