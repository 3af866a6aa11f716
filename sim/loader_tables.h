// The loader's tables: the statements, the operations and the arguments each takes, and the
// bandwidth units. Private to sim/.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/scenario.h"

namespace lockstep::sim::yaml {

enum class Arg : uint8_t { GROUP, SIZE, DTYPE, ROOT, TAG, TO, FROM, STREAM, ASYNC, DURATION };

struct ArgName {
  std::string_view name;
  Arg arg;
};

inline constexpr std::array<ArgName, 10> ARG_NAMES = {{
    {"group", Arg::GROUP},
    {"size", Arg::SIZE},
    {"dtype", Arg::DTYPE},
    {"root", Arg::ROOT},
    {"tag", Arg::TAG},
    {"to", Arg::TO},
    {"from", Arg::FROM},
    {"stream", Arg::STREAM},
    {"async", Arg::ASYNC},
    {"duration", Arg::DURATION},
}};

std::string_view arg_name(Arg arg);

enum class OpForm : uint8_t {
  ARGS,       // a map of arguments, or the short form `op: GROUP`, or nothing
  DURATION,   // `op: DURATION`
  COMPUTE,    // `op: DURATION` or a map of arguments
  HANDLE,     // `wait: HANDLE`
  SYNC,       // `sync` or `sync: STREAM`
  NEW_GROUP,  // `new_group: {name, ranks}`
  BARE,       // `exit`, `crash`: no value
};

struct OpSpec {
  std::string_view name;
  OpKind kind;
  OpForm form;
  std::vector<Arg> args;  // accepted, in the order they are loaded
  std::vector<Arg> required;
};

const std::vector<OpSpec>& op_specs();

const OpSpec* find_op(std::string_view name);

bool takes_arg(const OpSpec& spec, std::string_view name);

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
