#include "import/pickle_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

namespace lockstep::import {

const PickleValue* PickleValue::get(std::string_view key) const {
  if (type != Type::DICT) return nullptr;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i]->type == Type::STRING && items[i]->text == key) return items[i + 1].get();
  }
  return nullptr;
}

const char* pickle_type_name(PickleValue::Type type) {
  switch (type) {
    case PickleValue::Type::NONE: return "None";
    case PickleValue::Type::BOOL: return "a boolean";
    case PickleValue::Type::INT: return "an integer";
    case PickleValue::Type::FLOAT: return "a float";
    case PickleValue::Type::STRING: return "a string";
    case PickleValue::Type::LIST: return "a list";
    case PickleValue::Type::TUPLE: return "a tuple";
    case PickleValue::Type::DICT: return "a dict";
  }
  return "?";
}

namespace {

using Value = std::shared_ptr<PickleValue>;

struct Failure {
  std::string message;
};

// Opcodes refused with a name, for a clear message.
const char* refused_name(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: case 0x83: case 0x84: return "EXT";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    default: return nullptr;
  }
}

class Reader {
 public:
  Reader(std::string_view data, uint64_t max_memory_bytes) : data_(data), max_memory_bytes_(max_memory_bytes) {}

  Value run() {
    while (true) {
      const size_t at = pos_;
      const uint8_t op = byte();
      switch (op) {
        case 0x80: {  // PROTO
          const uint8_t version = byte();
          if (version < 2 || version > 5) fail(at, fmt::format("pickle protocol {} is not supported (2 to 5 are)", version));
          break;
        }
        case 0x95: take(8); break;  // FRAME: a length hint only
        case '.': {                 // STOP
          if (stack_.size() != 1 || !marks_.empty()) fail(at, "the pickle ends with a malformed stack");
          return stack_.back();
        }
        case '}': push(make(PickleValue::Type::DICT)); break;
        case ']': push(make(PickleValue::Type::LIST)); break;
        case ')': push(make(PickleValue::Type::TUPLE)); break;
        case '(':
          if (marks_.size() >= MAX_DEPTH) fail(at, "too many nested marks");
          marks_.push_back(stack_.size());
          break;
        case 'd': case 'l': case 't': {  // DICT, LIST, TUPLE from the mark
          const size_t mark = pop_mark(at);
          Value value = make(op == 'd' ? PickleValue::Type::DICT : op == 'l' ? PickleValue::Type::LIST : PickleValue::Type::TUPLE);
          if (op == 'd' && (stack_.size() - mark) % 2 != 0) fail(at, "a dict with an odd number of keys and values");
          value->items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
          spend(at, value->items.size() * sizeof(Value));
          stack_.resize(mark);
          push(value);
          break;
        }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          const size_t n = static_cast<size_t>(op - 0x84);
          if (stack_.size() < n) fail(at, "stack underflow");
          Value value = make(PickleValue::Type::TUPLE);
          value->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          spend(at, n * sizeof(Value));
          stack_.resize(stack_.size() - n);
          push(value);
          break;
        }
        case 's': {  // SETITEM
          if (stack_.size() < 3) fail(at, "stack underflow");
          Value value = pop();
          Value key = pop();
          PickleValue& dict = target(at, PickleValue::Type::DICT);
          dict.items.push_back(std::move(key));
          dict.items.push_back(std::move(value));
          spend(at, 2 * sizeof(Value));
          break;
        }
        case 'u': {  // SETITEMS
          const size_t mark = pop_mark(at);
          if ((stack_.size() - mark) % 2 != 0) fail(at, "SETITEMS with an odd number of keys and values");
          if (mark == 0) fail(at, "stack underflow");
          PickleValue& dict = target_at(at, mark - 1, PickleValue::Type::DICT);
          dict.items.insert(dict.items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
          spend(at, (stack_.size() - mark) * sizeof(Value));
          stack_.resize(mark);
          break;
        }
        case 'a': {  // APPEND
          if (stack_.size() < 2) fail(at, "stack underflow");
          Value value = pop();
          target(at, PickleValue::Type::LIST).items.push_back(std::move(value));
          spend(at, sizeof(Value));
          break;
        }
        case 'e': {  // APPENDS
          const size_t mark = pop_mark(at);
          if (mark == 0) fail(at, "stack underflow");
          PickleValue& list = target_at(at, mark - 1, PickleValue::Type::LIST);
          list.items.insert(list.items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
          spend(at, (stack_.size() - mark) * sizeof(Value));
          stack_.resize(mark);
          break;
        }
        case 'J': push_int(static_cast<int32_t>(uint_le(4))); break;                 // BININT
        case 'K': push(small_int(static_cast<uint8_t>(uint_le(1)))); break;          // BININT1
        case 'M': push_int(static_cast<int64_t>(uint_le(2))); break;                 // BININT2
        case 0x8a: long_n(at, static_cast<size_t>(uint_le(1))); break;               // LONG1
        case 0x8b: {                                                                 // LONG4
          const uint64_t n = uint_le(4);
          if (n > 8) fail(at, "an integer wider than 64 bits");
          long_n(at, static_cast<size_t>(n));
          break;
        }
        case 'G': {  // BINFLOAT, big endian
          const uint64_t bits = uint_be(8);
          double value = 0;
          std::memcpy(&value, &bits, sizeof value);
          Value v = make(PickleValue::Type::FLOAT);
          v->number = value;
          push(v);
          break;
        }
        case 0x88: push(constant(true_, PickleValue::Type::BOOL, true)); break;    // NEWTRUE
        case 0x89: push(constant(false_, PickleValue::Type::BOOL, false)); break;  // NEWFALSE
        case 'N': push(constant(none_, PickleValue::Type::NONE, false)); break;
        case 0x8c: push_string(at, uint_le(1)); break;  // SHORT_BINUNICODE
        case 'X': push_string(at, uint_le(4)); break;   // BINUNICODE
        case 0x8d: push_string(at, uint_le(8)); break;  // BINUNICODE8
        case 'C': push_string(at, uint_le(1)); break;   // SHORT_BINBYTES
        case 'B': push_string(at, uint_le(4)); break;   // BINBYTES
        case 0x8e: push_string(at, uint_le(8)); break;  // BINBYTES8
        case 'q': memo_put(at, uint_le(1)); break;      // BINPUT
        case 'r': memo_put(at, uint_le(4)); break;      // LONG_BINPUT
        case 0x94: memo_put(at, memo_.size()); break;   // MEMOIZE
        case 'h': memo_get(at, uint_le(1)); break;      // BINGET
        case 'j': memo_get(at, uint_le(4)); break;      // LONG_BINGET
        case '0': pop(); break;                          // POP
        case '2': {                                      // DUP
          if (stack_.empty()) fail(at, "stack underflow");
          push(stack_.back());
          break;
        }
        default: {
          const char* name = refused_name(op);
          if (name != nullptr) {
            fail(at, fmt::format("pickle opcode {} (0x{:02x}) is not supported: a Flight Recorder dump holds only "
                                 "dicts, lists, tuples, strings, numbers, booleans and None", name, op));
          }
          fail(at, fmt::format("unknown or unsupported pickle opcode 0x{:02x}", op));
        }
      }
    }
  }

  [[noreturn]] static void fail(size_t at, const std::string& message) {
    throw Failure{fmt::format("byte {}: {}", at, message)};
  }

 private:
  static constexpr size_t MAX_DEPTH = 4096;
  static constexpr size_t MAX_MEMO = size_t{1} << 26;
  // What a value costs beyond its text: the object, its arena slot and the allocator's header.
  static constexpr uint64_t VALUE_BYTES = sizeof(PickleValue) + sizeof(std::unique_ptr<PickleValue>) + 16;

  // Counts memory the values take (an estimate from above: pops give nothing back) against
  // the bound; past it the pickle is refused where it got to.
  void spend(size_t at, uint64_t bytes) {
    used_bytes_ += bytes;
    if (used_bytes_ > max_memory_bytes_) [[unlikely]] {
      fail(at, fmt::format("its values need more than {} MiB of memory, the bound for a pickle of {} bytes (docs/import.md, \"Bounds\")", max_memory_bytes_ >> 20, data_.size()));
    }
  }
  // None, True, False and the integers 0-255 are made once and shared: no value is changed
  // after it is made but dicts and lists, so sharing them is safe, and a pickle of 10^8 None
  // costs a stack slot each.
  Value constant(Value& slot, PickleValue::Type type, bool boolean) {
    if (!slot) {
      slot = make(type);
      slot->boolean = boolean;
    }
    return slot;
  }
  Value small_int(uint8_t value) {
    Value& slot = small_ints_[value];
    if (!slot) {
      slot = make(PickleValue::Type::INT);
      slot->integer = value;
    }
    return slot;
  }

  // Every value lives in the arena until the result goes; the pointers between values (the
  // stack, the memo, items) own nothing, so a memo reference that makes a cycle (a list that
  // holds itself) cannot leak.
  Value make(PickleValue::Type type) {
    spend(pos_, VALUE_BYTES);
    arena_->push_back(std::make_unique<PickleValue>());
    PickleValue* v = arena_->back().get();
    v->type = type;
    return Value(Value(), v);
  }
  void push(Value v) {
    spend(pos_, sizeof(Value));
    stack_.push_back(std::move(v));
  }
  Value pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail(pos_ - 1, "stack underflow");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  size_t pop_mark(size_t at) {
    if (marks_.empty()) fail(at, "no mark on the stack");
    const size_t mark = marks_.back();
    marks_.pop_back();
    return mark;
  }
  PickleValue& target_at(size_t at, size_t index, PickleValue::Type type) {
    PickleValue& v = *stack_[index];
    if (v.type != type) fail(at, fmt::format("expected {} on the stack, found {}", pickle_type_name(type), pickle_type_name(v.type)));
    return v;
  }
  PickleValue& target(size_t at, PickleValue::Type type) {
    if (stack_.empty()) fail(at, "stack underflow");
    return target_at(at, stack_.size() - 1, type);
  }
  uint8_t byte() {
    if (pos_ >= data_.size()) fail(pos_, "the pickle ends before its STOP opcode (truncated?)");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  std::string_view take(uint64_t n) {
    if (n > data_.size() - pos_) fail(pos_, "the pickle ends inside a value (truncated?)");
    const std::string_view out = data_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  uint64_t uint_le(size_t n) {
    const std::string_view bytes = take(n);
    uint64_t value = 0;
    for (size_t i = n; i-- > 0;) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
    return value;
  }
  uint64_t uint_be(size_t n) {
    const std::string_view bytes = take(n);
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
    return value;
  }
  void push_int(int64_t value) {
    Value v = make(PickleValue::Type::INT);
    v->integer = value;
    push(v);
  }
  void long_n(size_t at, size_t n) {
    if (n > 8) fail(at, "an integer wider than 64 bits");
    const std::string_view bytes = take(n);
    uint64_t value = 0;
    for (size_t i = n; i-- > 0;) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80) != 0) value |= ~uint64_t{0} << (8 * n);  // sign
    push_int(static_cast<int64_t>(value));
  }
  void push_string(size_t at, uint64_t n) {
    Value v = make(PickleValue::Type::STRING);
    if (n <= data_.size() - pos_) spend(at, n);
    v->text = std::string(take(n));
    push(v);
  }
  void memo_put(size_t at, uint64_t index) {
    if (stack_.empty()) fail(at, "memo of an empty stack");
    if (index >= MAX_MEMO) fail(at, "memo index out of range");
    // A map: an index is a few bytes of input, a slot per index up to it would not be.
    memo_[index] = stack_.back();
  }
  void memo_get(size_t at, uint64_t index) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) fail(at, fmt::format("memo entry {} was never stored", index));
    push(found->second);
  }

 public:
  // The owner of every value made (read_pickle's result keeps it).
  std::shared_ptr<std::vector<std::unique_ptr<PickleValue>>> arena() const { return arena_; }

 private:

  std::string_view data_;
  size_t pos_ = 0;
  uint64_t max_memory_bytes_;
  uint64_t used_bytes_ = 0;
  Value none_, true_, false_;
  std::array<Value, 256> small_ints_{};
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  std::shared_ptr<std::vector<std::unique_ptr<PickleValue>>> arena_ =
      std::make_shared<std::vector<std::unique_ptr<PickleValue>>>();
};

}  // namespace

uint64_t pickle_memory_bound(uint64_t input_bytes) {
  return std::min(PICKLE_MEMORY_FLOOR_BYTES + PICKLE_MEMORY_PER_BYTE * input_bytes, PICKLE_MEMORY_TOTAL_BYTES);
}

PickleResult read_pickle(std::string_view data, uint64_t max_memory_bytes) {
  PickleResult result;
  try {
    Reader reader(data, max_memory_bytes);
    const Value root = reader.run();
    result.value = std::shared_ptr<PickleValue>(reader.arena(), root.get());  // owns the arena
  } catch (const Failure& failure) {
    result.error = failure.message;
  } catch (const std::bad_alloc&) {
    result.error = "out of memory";
  }
  return result;
}

}  // namespace lockstep::import
