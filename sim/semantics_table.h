// The semantics settings (docs/semantics.md), each once: its key in scenario YAML and in traces,
// what its value is, its bound, and where it goes in Semantics. Both loaders and both writers
// (traces, counterexamples) go through this table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario.h"

namespace lockstep::sim {

enum class SettingKind : uint8_t {
  CHOICE,    // one of `choices`, stored as its index
  BYTES,     // a size: YAML takes units (`64KiB`), traces plain bytes
  COUNT,     // a plain integer
  DURATION,  // YAML takes units (`30s`), traces nanoseconds
  FLAG,      // true or false, stored as 1 or 0
};

struct SemanticsSetting {
  std::string_view yaml_key;
  std::string_view trace_key;  // also the counterexample's
  SettingKind kind;
  std::vector<std::string> choices;  // CHOICE (FLAG: "false", "true")
  int64_t minimum = 0;               // BYTES, COUNT, DURATION
  int64_t (*get)(const Semantics&);
  void (*set)(Semantics&, int64_t);
};

// In the order traces and counterexamples write them.
const std::vector<SemanticsSetting>& semantics_settings();

// The setting a key names (`yaml`: a scenario's key, else a trace's), or null.
const SemanticsSetting* find_setting(std::string_view key, bool yaml);

// Every key of one form, for "valid keys" lists.
std::vector<std::string> setting_keys(bool yaml);

}  // namespace lockstep::sim
