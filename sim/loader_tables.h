// The loader's tables: the statements, the arguments of operations (the op table, sim/ops.h, says
// which each takes), and the bandwidth units. Private to sim/.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/scenario.h"

namespace lockstep::sim::yaml {

// The fields a statement takes in YAML: those of its op (sim/ops.h) where its form is a map of
// arguments, none otherwise (`wait: H`, `sync: S`, `new_group: {...}` are read by their form).
constexpr FieldSet yaml_fields(const OpInfo& op) {
  return op.form == YamlForm::ARGS || op.form == YamlForm::COMPUTE ? op.fields : 0;
}

constexpr std::string_view arg_name(Field field) { return FIELD_NAMES[static_cast<size_t>(field)].yaml; }

// The op a statement names, or null.
inline const OpInfo* find_op(std::string_view name) { return find_op_named(name); }

bool takes_arg(const OpInfo& op, std::string_view name);

// Statements that hold other statements (`group` is an NCCL group).
inline constexpr std::array<std::string_view, 5> BLOCK_STATEMENTS = {"repeat", "if", "choose", "call",
                                                              "group"};

bool is_block_statement(std::string_view name);

bool is_statement_name(std::string_view name);

struct BandwidthUnit {
  std::string_view suffix;
  double bytes_per_s;
};

inline constexpr std::array<BandwidthUnit, 12> BANDWIDTH_UNITS = {{
    {"B/s", 1.0},
    {"KB/s", 1e3},
    {"MB/s", 1e6},
    {"GB/s", 1e9},
    {"TB/s", 1e12},
    {"KiB/s", 1024.0},
    {"MiB/s", 1024.0 * 1024},
    {"GiB/s", 1024.0 * 1024 * 1024},
    {"TiB/s", 1024.0 * 1024 * 1024 * 1024},
    {"Mbps", 1e6 / 8},
    {"Gbps", 1e9 / 8},
    {"Tbps", 1e12 / 8},
}};

}  // namespace lockstep::sim::yaml
