// A reader of the subset of Python's pickle format that PyTorch's Flight Recorder dumps use
// (protocols 2 to 5): dicts, lists, tuples, strings, bytes, integers, floats, booleans and None,
// with memo references. Anything else (globals, object construction, persistent ids) is refused:
// a dump never needs it, and this reader never runs code from a file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::import {

struct PickleValue {
  enum class Type : uint8_t { NONE, BOOL, INT, FLOAT, STRING, LIST, TUPLE, DICT };
  Type type = Type::NONE;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;  // STRING (and bytes)
  // LIST, TUPLE; DICT: key, value, key, value... (pointers that own nothing: the result of
  // read_pickle owns every value, so memo references may share values and even make cycles)
  std::vector<std::shared_ptr<PickleValue>> items;

  // DICT: the value of a string key, or null.
  const PickleValue* get(std::string_view key) const;
  bool is_string() const { return type == Type::STRING; }
  bool is_sequence() const { return type == Type::LIST || type == Type::TUPLE; }
};

const char* pickle_type_name(PickleValue::Type type);

struct PickleResult {
  std::shared_ptr<PickleValue> value;  // set on success; keeps every value of the pickle alive
  std::string error;                   // else: why, naming the byte offset
};

// The memory a pickle's values may take: 64 MiB plus 64 bytes per byte of input, and never
// more than PICKLE_MEMORY_TOTAL_BYTES, which is also what all the dumps read at once share
// (import_flight_recorder). A realistic dump takes a few times its size.
inline constexpr uint64_t PICKLE_MEMORY_FLOOR_BYTES = uint64_t{64} << 20;
inline constexpr uint64_t PICKLE_MEMORY_PER_BYTE = 64;
inline constexpr uint64_t PICKLE_MEMORY_TOTAL_BYTES = uint64_t{4} << 30;
uint64_t pickle_memory_bound(uint64_t input_bytes);

// Reads one pickled value from `data`. Never throws; its values take at most `max_memory_bytes`
// (an estimate from above), else the error names the bound.
PickleResult read_pickle(std::string_view data, uint64_t max_memory_bytes = PICKLE_MEMORY_TOTAL_BYTES);

}  // namespace lockstep::import
