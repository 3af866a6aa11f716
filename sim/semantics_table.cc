#include "sim/semantics_table.h"

namespace lockstep::sim {

const std::vector<SemanticsSetting>& semantics_settings() {
  static const std::vector<SemanticsSetting> settings = {
      {"p2p", "p2p", SettingKind::CHOICE, {"rendezvous", "eager"}, 0,
       [](const Semantics& s) { return static_cast<int64_t>(s.p2p); },
       [](Semantics& s, int64_t v) { s.p2p = static_cast<P2pMode>(v); }},
      {"eager_limit", "eager_limit", SettingKind::BYTES, {}, 0,
       [](const Semantics& s) { return s.eager_limit_bytes; }, [](Semantics& s, int64_t v) { s.eager_limit_bytes = v; }},
      {"p2p_comm", "p2p_comm", SettingKind::CHOICE, {"group", "pair"}, 0,
       [](const Semantics& s) { return static_cast<int64_t>(s.p2p_comm); },
       [](Semantics& s, int64_t v) { s.p2p_comm = static_cast<P2pComm>(v); }},
      {"comm_concurrency", "comm_concurrency", SettingKind::COUNT, {}, 0,
       [](const Semantics& s) { return s.comm_concurrency; }, [](Semantics& s, int64_t v) { s.comm_concurrency = v; }},
      {"launch_order_implicit", "launch_order_implicit", SettingKind::FLAG, {"false", "true"}, 0,
       [](const Semantics& s) { return static_cast<int64_t>(s.launch_order_implicit); },
       [](Semantics& s, int64_t v) { s.launch_order_implicit = v != 0; }},
      {"timeout", "timeout_ns", SettingKind::DURATION, {}, 1, [](const Semantics& s) { return s.timeout_ns; },
       [](Semantics& s, int64_t v) { s.timeout_ns = v; }},
      {"algorithm", "algorithm", SettingKind::CHOICE, {"ring", "tree"}, 0,
       [](const Semantics& s) { return static_cast<int64_t>(s.allreduce_algorithm); },
       [](Semantics& s, int64_t v) { s.allreduce_algorithm = static_cast<Algorithm>(v); }},
  };
  return settings;
}

const SemanticsSetting* find_setting(std::string_view key, bool yaml) {
  for (const SemanticsSetting& setting : semantics_settings()) {
    if ((yaml ? setting.yaml_key : setting.trace_key) == key) return &setting;
  }
  return nullptr;
}

std::vector<std::string> setting_keys(bool yaml) {
  std::vector<std::string> keys;
  for (const SemanticsSetting& setting : semantics_settings()) keys.emplace_back(yaml ? setting.yaml_key : setting.trace_key);
  return keys;
}

}  // namespace lockstep::sim
