// The trace format's tables: the keys of an operation line, the operations and what they take,
// the header's keys; and the helpers for messages the loader and the writer share. Private to sim/.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/diagnostic.h"
#include "sim/scenario.h"

namespace lockstep::sim::trace {

// "unknown THING 'name'WHERE (did you mean 'x'?); valid THINGs: a, b, c"
std::string unknown_message(std::string_view thing, std::string_view name, std::string_view where,
                            const std::vector<std::string>& known,
                            const std::vector<std::string>& valid);

std::string invalid_value_message(std::string_view value, std::string_view key,
                                  const std::vector<std::string>& valid);

// The number of '\n' in `text`, sixteen bytes at a time with SSE2, else eight (std::count on
// chars was a twentieth of loading a large trace: GCC widens every byte to a 64-bit counter).
size_t count_newlines(std::string_view text);

inline uint32_t to_u32(size_t value) {
  return value > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(value);
}

enum class Key : uint8_t {
  RANK, OP, THREAD,  // every line
  GROUP, SIZE, DTYPE, ROOT, TO, FROM, TAG, STREAM, ASYNC, HANDLE, DURATION, NAME, RANKS,
};
inline constexpr size_t KEY_COUNT = 16;

inline constexpr std::array<std::string_view, KEY_COUNT> KEY_NAMES = {
    "rank", "op",   "thread", "group", "size",   "dtype",       "root", "to",
    "from", "tag",  "stream", "async", "handle", "duration_ns", "name", "ranks",
};

using KeySet = uint32_t;
constexpr KeySet bit(Key key) { return KeySet{1} << static_cast<unsigned>(key); }

inline std::string_view key_name(Key key) { return KEY_NAMES[static_cast<size_t>(key)]; }

// The key of an operation line by name (`found` false for none): by first letter, then a
// compare, as it runs for every key of every line.
inline Key find_key(std::string_view name, bool& found) {
  const auto is = [&](Key key) {
    found = name == KEY_NAMES[static_cast<size_t>(key)];
    return key;
  };
  found = false;
  if (name.empty()) return Key::RANK;
  switch (name[0]) {
    case 'r':
      if (name.size() == 5) return is(Key::RANKS);
      return name.size() > 1 && name[1] == 'o' ? is(Key::ROOT) : is(Key::RANK);
    case 'o': return is(Key::OP);
    case 't': return name.size() == 2 ? is(Key::TO) : name.size() == 3 ? is(Key::TAG) : is(Key::THREAD);
    case 'g': return is(Key::GROUP);
    case 's': return name.size() == 4 ? is(Key::SIZE) : is(Key::STREAM);
    case 'd': return name.size() == 5 ? is(Key::DTYPE) : is(Key::DURATION);
    case 'f': return is(Key::FROM);
    case 'a': return is(Key::ASYNC);
    case 'h': return is(Key::HANDLE);
    case 'n': return is(Key::NAME);
    default: return Key::RANK;
  }
}

struct OpSpec {
  std::string_view name;
  OpKind kind;
  KeySet args;      // arguments accepted besides rank, op and thread
  KeySet required;  // of those, required
};

inline constexpr KeySet COLLECTIVE =
    bit(Key::GROUP) | bit(Key::SIZE) | bit(Key::DTYPE) | bit(Key::TAG) | bit(Key::STREAM) |
    bit(Key::ASYNC);
inline constexpr KeySet ROOTED = COLLECTIVE | bit(Key::ROOT);
inline constexpr KeySet BARRIER_ARGS = COLLECTIVE & ~bit(Key::SIZE);

inline constexpr std::array<OpSpec, 18> OP_SPECS = {{
    {"allreduce", OpKind::ALLREDUCE, COLLECTIVE, bit(Key::SIZE)},
    {"allgather", OpKind::ALLGATHER, COLLECTIVE, bit(Key::SIZE)},
    {"reduce_scatter", OpKind::REDUCE_SCATTER, COLLECTIVE, bit(Key::SIZE)},
    {"broadcast", OpKind::BROADCAST, ROOTED, bit(Key::SIZE) | bit(Key::ROOT)},
    {"reduce", OpKind::REDUCE, ROOTED, bit(Key::SIZE) | bit(Key::ROOT)},
    {"all_to_all", OpKind::ALL_TO_ALL, COLLECTIVE, bit(Key::SIZE)},
    {"gather", OpKind::GATHER, ROOTED, bit(Key::SIZE) | bit(Key::ROOT)},
    {"scatter", OpKind::SCATTER, ROOTED, bit(Key::SIZE) | bit(Key::ROOT)},
    {"barrier", OpKind::BARRIER, BARRIER_ARGS, 0},
    {"send", OpKind::SEND, COLLECTIVE | bit(Key::TO), bit(Key::SIZE) | bit(Key::TO)},
    {"recv", OpKind::RECV, COLLECTIVE | bit(Key::FROM), bit(Key::SIZE) | bit(Key::FROM)},
    {"compute", OpKind::COMPUTE, bit(Key::DURATION), bit(Key::DURATION)},
    {"sleep", OpKind::SLEEP, bit(Key::DURATION), bit(Key::DURATION)},
    {"wait", OpKind::WAIT, bit(Key::HANDLE), bit(Key::HANDLE)},
    {"sync", OpKind::SYNC, bit(Key::STREAM), 0},
    {"new_group", OpKind::NEW_GROUP, bit(Key::NAME) | bit(Key::RANKS),
     bit(Key::NAME) | bit(Key::RANKS)},
    {"exit", OpKind::EXIT, 0, 0},
    {"crash", OpKind::CRASH, 0, 0},
}};

const OpSpec* find_op(std::string_view name);

// The NCCL group markers (ncclGroupStart / ncclGroupEnd): lines that are no operation of their
// own but open and close an NCCL_GROUP statement. They take no arguments.
inline constexpr std::string_view GROUP_START = "group_start";
inline constexpr std::string_view GROUP_END = "group_end";
inline constexpr OpSpec GROUP_START_SPEC = {GROUP_START, OpKind::COMPUTE, 0, 0};
inline constexpr OpSpec GROUP_END_SPEC = {GROUP_END, OpKind::COMPUTE, 0, 0};

// Every name an op line's "op" may have.
std::vector<std::string> op_line_names();

constexpr const OpSpec& spec_of(OpKind kind) {
  for (const OpSpec& spec : OP_SPECS) {
    if (spec.kind == kind) return spec;
  }
  return OP_SPECS.back();
}

// The spec of `KIND`, found at compile time.
template <OpKind KIND>
const OpSpec* spec_for() {
  static constexpr const OpSpec* SPEC = &spec_of(KIND);
  return SPEC;
}

std::vector<std::string> arg_names(KeySet keys);

inline constexpr std::array<std::string_view, 8> HEADER_KEYS = {
    "lockstep_trace", "scenario", "description", "source", "expect", "world", "groups", "semantics",
};

}  // namespace lockstep::sim::trace
