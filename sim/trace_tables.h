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
  SEND_SPLITS, RECV_SPLITS,
};
inline constexpr size_t KEY_COUNT = 18;

inline constexpr std::array<std::string_view, KEY_COUNT> KEY_NAMES = {
    "rank", "op",   "thread", "group", "size",   "dtype",       "root", "to",
    "from", "tag",  "stream", "async", "handle", "duration_ns", "name", "ranks",
    "send_splits", "recv_splits",
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
      if (name.size() == 11) return is(Key::RECV_SPLITS);
      return name.size() > 1 && name[1] == 'o' ? is(Key::ROOT) : is(Key::RANK);
    case 'o': return is(Key::OP);
    case 't': return name.size() == 2 ? is(Key::TO) : name.size() == 3 ? is(Key::TAG) : is(Key::THREAD);
    case 'g': return is(Key::GROUP);
    case 's': return name.size() == 4 ? is(Key::SIZE) : name.size() == 6 ? is(Key::STREAM) : is(Key::SEND_SPLITS);
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

// The keys of the op table's fields (sim/ops.h), by their trace names.
constexpr KeySet keys_of(FieldSet fields) {
  KeySet keys = 0;
  for (size_t f = 0; f < FIELD_COUNT; ++f) {
    if ((fields & field_bit(static_cast<Field>(f))) == 0) continue;
    for (size_t k = 0; k < KEY_COUNT; ++k) {
      if (KEY_NAMES[k] == FIELD_NAMES[f].trace) keys |= KeySet{1} << k;
    }
  }
  return keys;
}

// The op lines: every op of the op table but init_process_group, in OpKind order.
inline constexpr size_t OP_SPEC_COUNT = OP_KIND_COUNT - 1;
constexpr std::array<OpSpec, OP_SPEC_COUNT> make_op_specs() {
  std::array<OpSpec, OP_SPEC_COUNT> specs{};
  for (size_t i = 0; i < OP_SPEC_COUNT; ++i) {
    specs[i] = {OPS[i].name, OPS[i].kind, keys_of(OPS[i].fields), keys_of(OPS[i].required)};
  }
  return specs;
}
inline constexpr std::array<OpSpec, OP_SPEC_COUNT> OP_SPECS = make_op_specs();
static_assert(OPS[OP_SPEC_COUNT].kind == OpKind::INIT, "init_process_group is the last op");

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

std::vector<std::string> arg_names(KeySet keys);

inline constexpr std::array<std::string_view, 8> HEADER_KEYS = {
    "lockstep_trace", "scenario", "description", "source", "expect", "world", "groups", "semantics",
};

}  // namespace lockstep::sim::trace
