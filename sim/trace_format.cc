// The JSON Lines trace format: a small JSON reader for one line at a time, the loader that turns
// lines into the Scenario model with every static check of the YAML loader, and the writer.
#include "sim/trace_format.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <system_error>
#include <thread>

#include <sys/mman.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sim/input_file.h"
#include "sim/semantics_table.h"

namespace lockstep::sim {

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers for messages.

// "unknown THING 'name'WHERE (did you mean 'x'?); valid THINGs: a, b, c"
std::string unknown_message(std::string_view thing, std::string_view name, std::string_view where,
                            const std::vector<std::string>& known,
                            const std::vector<std::string>& valid) {
  std::string message = "unknown " + std::string(thing) + " " + quoted(name) + std::string(where);
  message += did_you_mean(name, known);
  return message + "; valid " + std::string(thing) + "s: " + join(sorted(valid));
}

std::string invalid_value_message(std::string_view value, std::string_view key,
                                  const std::vector<std::string>& valid) {
  return "invalid value " + quoted(value) + " for " + quoted(key) + did_you_mean(value, valid) +
         "; valid values: " + join(sorted(valid));
}



// The number of '\n' in `text`, sixteen bytes at a time with SSE2, else eight (std::count on
// chars was a twentieth of loading a large trace: GCC widens every byte to a 64-bit counter).
size_t count_newlines(std::string_view text) {
  constexpr uint64_t ONES = 0x0101010101010101;
  constexpr uint64_t LOW7 = 0x7f7f7f7f7f7f7f7f;
  size_t count = 0;
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i newline = _mm_set1_epi8('\n');
  while (text.size() - i >= 16) {
    // Per byte lane, minus one for each '\n' (a compare gives all ones), for up to 255 blocks,
    // then the lanes summed.
    __m128i lanes = _mm_setzero_si128();
    const size_t blocks = std::min<size_t>((text.size() - i) / 16, 255);
    for (size_t b = 0; b < blocks; ++b, i += 16) {
      const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
      lanes = _mm_sub_epi8(lanes, _mm_cmpeq_epi8(chunk, newline));
    }
    const __m128i sums = _mm_sad_epu8(lanes, _mm_setzero_si128());  // two 64-bit sums
    count += static_cast<size_t>(_mm_cvtsi128_si64(sums)) +
             static_cast<size_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums)));
  }
#endif
  while (text.size() - i >= 8) {
    // Per byte lane, 1 where the byte is '\n'; summed in lanes for up to 255 words at a time.
    uint64_t lanes = 0;
    const size_t words = std::min<size_t>((text.size() - i) / 8, 255);
    for (size_t w = 0; w < words; ++w, i += 8) {
      uint64_t word = 0;
      std::memcpy(&word, text.data() + i, 8);
      const uint64_t x = word ^ (ONES * '\n');                  // '\n' bytes become 0
      const uint64_t nonzero = ((x & LOW7) + LOW7) | x;          // high bit set where x != 0
      lanes += (~nonzero >> 7) & ONES;
    }
    const uint64_t pairs = (lanes & 0x00ff00ff00ff00ff) + ((lanes >> 8) & 0x00ff00ff00ff00ff);
    count += static_cast<size_t>((pairs * 0x0001000100010001) >> 48);
  }
  for (; i < text.size(); ++i) count += text[i] == '\n' ? 1 : 0;
  return count;
}

uint32_t to_u32(size_t value) {
  return value > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(value);
}

// ---------------------------------------------------------------------------------------------
// A JSON reader for one line: objects, arrays, strings, integers, other numbers, literals.

enum class JsonKind : uint8_t { NUL, BOOL, INTEGER, NUMBER, STRING, ARRAY, OBJECT };

struct JsonMember;

struct JsonValue {
  JsonKind kind = JsonKind::NUL;
  bool boolean = false;
  uint32_t col = 0;        // 1-based column of the value's first character
  int64_t integer = 0;     // INTEGER
  std::string_view text;   // STRING: the decoded text; NUMBER: as written
  std::vector<JsonValue> items;     // ARRAY
  std::vector<JsonMember> members;  // OBJECT, in order
};

struct JsonMember {
  std::string_view key;
  uint32_t col = 0;  // of the key's opening quote
  JsonValue value;
};

std::string type_name(const JsonValue& value) {
  switch (value.kind) {
    case JsonKind::NUL: return "null";
    case JsonKind::BOOL: return "a boolean";
    case JsonKind::INTEGER: return "an integer";
    case JsonKind::NUMBER: return "the number " + std::string(value.text);
    case JsonKind::STRING: return "a string";
    case JsonKind::ARRAY: return "an array";
    case JsonKind::OBJECT: return "an object";
  }
  return "?";
}

class JsonLineReader {
 public:
  static constexpr int MAX_DEPTH = 8;

  // Parses `line` as one object into `members`. On failure error_col()/error_message() say why.
  bool read_object(std::string_view line, std::vector<JsonMember>& members) {
    line_ = line;
    pos_ = 0;
    decoded_.clear();
    members.clear();
    skip_space();
    if (!at('{')) return fail(pos_, "expected a json object, got " + describe_here());
    ++pos_;
    if (!parse_members(members, 1)) return false;
    skip_space();
    if (pos_ < line_.size()) return fail(pos_, "unexpected " + describe_here() + " after the object");
    return true;
  }

  uint32_t error_col() const { return error_col_; }
  const std::string& error_message() const { return error_message_; }

 private:
  bool at(char c) const { return pos_ < line_.size() && line_[pos_] == c; }

  void skip_space() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t')) ++pos_;
  }

  std::string describe_here() const {
    if (pos_ >= line_.size()) return "the end of the line";
    const auto c = static_cast<unsigned char>(line_[pos_]);
    if (c >= 0x20 && c < 0x7f) return quoted(std::string_view(&line_[pos_], 1));
    std::array<char, 16> buffer{};
    std::snprintf(buffer.data(), buffer.size(), "byte 0x%02x", c);
    return buffer.data();
  }

  bool fail(size_t at_pos, std::string message) {
    error_col_ = to_u32(at_pos + 1);
    error_message_ = std::move(message);
    return false;
  }

  // After '{': members up to and including '}'.
  bool parse_members(std::vector<JsonMember>& members, int depth) {
    skip_space();
    if (at('}')) {
      ++pos_;
      return true;
    }
    while (true) {
      skip_space();
      if (!at('"')) return fail(pos_, "expected a key in double quotes, got " + describe_here());
      JsonMember& member = members.emplace_back();
      member.col = to_u32(pos_ + 1);
      if (!parse_string(member.key)) return false;
      skip_space();
      if (!at(':')) return fail(pos_, "expected ':' after the key, got " + describe_here());
      ++pos_;
      if (!parse_value(member.value, depth)) return false;
      skip_space();
      if (at(',')) {
        ++pos_;
        continue;
      }
      if (at('}')) {
        ++pos_;
        return true;
      }
      return fail(pos_, "expected ',' or '}' after a value, got " + describe_here());
    }
  }

  // After '[': items up to and including ']'.
  bool parse_items(std::vector<JsonValue>& items, int depth) {
    skip_space();
    if (at(']')) {
      ++pos_;
      return true;
    }
    while (true) {
      if (!parse_value(items.emplace_back(), depth)) return false;
      skip_space();
      if (at(',')) {
        ++pos_;
        continue;
      }
      if (at(']')) {
        ++pos_;
        return true;
      }
      return fail(pos_, "expected ',' or ']' after a value, got " + describe_here());
    }
  }

  bool parse_value(JsonValue& out, int depth) {
    skip_space();
    out.col = to_u32(pos_ + 1);
    if (pos_ >= line_.size()) return fail(pos_, "expected a value, got the end of the line");
    const char c = line_[pos_];
    if (c == '"') {
      out.kind = JsonKind::STRING;
      return parse_string(out.text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(out);
    if (c == '{' || c == '[') {
      if (depth >= MAX_DEPTH) {
        return fail(pos_, "values nest deeper than the limit of " + std::to_string(MAX_DEPTH) +
                              " levels");
      }
      ++pos_;
      out.kind = c == '{' ? JsonKind::OBJECT : JsonKind::ARRAY;
      return c == '{' ? parse_members(out.members, depth + 1) : parse_items(out.items, depth + 1);
    }
    return parse_literal(out);
  }

  bool parse_literal(JsonValue& out) {
    size_t end = pos_;
    while (end < line_.size() && std::isalnum(static_cast<unsigned char>(line_[end])) != 0) ++end;
    const std::string_view word = line_.substr(pos_, end - pos_);
    if (word == "true" || word == "false") {
      out.kind = JsonKind::BOOL;
      out.boolean = word == "true";
    } else if (word == "null") {
      out.kind = JsonKind::NUL;
    } else if (word.empty()) {
      return fail(pos_, "expected a value, got " + describe_here());
    } else {
      return fail(pos_, "invalid literal " + quoted(word) + "; strings go in double quotes");
    }
    pos_ = end;
    return true;
  }

  bool parse_number(JsonValue& out) {
    const size_t start = pos_;
    const bool negative = at('-');
    if (negative) ++pos_;
    const size_t digits = pos_;
    uint64_t magnitude = 0;
    bool overflow = false;
    while (pos_ < line_.size() && line_[pos_] >= '0' && line_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(line_[pos_] - '0');
      if (magnitude > (UINT64_MAX - digit) / 10) overflow = true;
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ == digits) return fail(pos_, "expected a digit after '-', got " + describe_here());
    if (line_[digits] == '0' && pos_ - digits > 1) {
      return fail(digits, "numbers may not have leading zeros");
    }
    if (at('.') || at('e') || at('E')) return parse_fraction(out, start);
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    if (overflow || magnitude > limit) {
      return fail(start, "integer " + std::string(line_.substr(start, pos_ - start)) +
                             " is out of range");
    }
    out.kind = JsonKind::INTEGER;
    out.integer = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return true;
  }

  // The rest of a number with a fraction or an exponent; kept as text.
  bool parse_fraction(JsonValue& out, size_t start) {
    const auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < line_.size() && line_[pos_] >= '0' && line_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (at('.')) {
      ++pos_;
      if (!digits()) return fail(pos_, "expected a digit after '.', got " + describe_here());
    }
    if (at('e') || at('E')) {
      ++pos_;
      if (at('+') || at('-')) ++pos_;
      if (!digits()) return fail(pos_, "expected a digit in the exponent, got " + describe_here());
    }
    out.kind = JsonKind::NUMBER;
    out.text = line_.substr(start, pos_ - start);
    return true;
  }

  // At '"': a string; escapes are decoded into storage that lives until the next line.
  bool parse_string(std::string_view& out) {
    const size_t open = pos_++;
    const size_t start = pos_;
    while (pos_ < line_.size()) {
      const char c = line_[pos_];
      if (c == '"') {
        out = line_.substr(start, pos_ - start);
        ++pos_;
        return true;
      }
      if (c == '\\') return parse_escaped_string(out, start);
      if (static_cast<unsigned char>(c) < 0x20) {
        return fail(pos_, "control character in a string; write it as an escape");
      }
      ++pos_;
    }
    return fail(open, "unterminated string");
  }

  bool parse_escaped_string(std::string_view& out, size_t start) {
    std::string& text = decoded_.emplace_back(line_.substr(start, pos_ - start));
    while (pos_ < line_.size()) {
      const char c = line_[pos_];
      if (c == '"') {
        ++pos_;
        out = text;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return fail(pos_, "control character in a string; write it as an escape");
      }
      if (c != '\\') {
        text += c;
        ++pos_;
        continue;
      }
      if (!parse_escape(text)) return false;
    }
    return fail(start - 1, "unterminated string");
  }

  // At '\\': one escape, appended to `text` (UTF-8).
  bool parse_escape(std::string& text) {
    const size_t backslash = pos_++;
    if (pos_ >= line_.size()) return fail(backslash, "unterminated string");
    const char c = line_[pos_++];
    switch (c) {
      case '"': text += '"'; return true;
      case '\\': text += '\\'; return true;
      case '/': text += '/'; return true;
      case 'b': text += '\b'; return true;
      case 'f': text += '\f'; return true;
      case 'n': text += '\n'; return true;
      case 'r': text += '\r'; return true;
      case 't': text += '\t'; return true;
      case 'u': return parse_unicode_escape(text, backslash);
      default: break;
    }
    pos_ = backslash + 1;
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      return fail(backslash, "invalid escape " + quoted(std::string{'\\', c}));
    }
    return fail(backslash, "invalid escape: '\\' followed by " + describe_here());
  }

  bool hex4(uint32_t& value) {
    if (line_.size() - pos_ < 4) return false;
    value = 0;
    for (size_t i = 0; i < 4; ++i) {
      const char c = line_[pos_ + i];
      uint32_t digit = 0;
      if (c >= '0' && c <= '9') digit = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<uint32_t>(c - 'A' + 10);
      else return false;
      value = value * 16 + digit;
    }
    pos_ += 4;
    return true;
  }

  bool parse_unicode_escape(std::string& text, size_t backslash) {
    uint32_t code = 0;
    if (!hex4(code)) return fail(backslash, "invalid escape: \\u needs four hex digits");
    if (code >= 0xDC00 && code <= 0xDFFF) return fail(backslash, "lone low surrogate in \\u escape");
    if (code >= 0xD800 && code <= 0xDBFF) {
      uint32_t low = 0;
      if (line_.substr(pos_, 2) != "\\u") {
        return fail(backslash, "high surrogate in \\u escape without its low half");
      }
      pos_ += 2;
      if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) {
        return fail(backslash, "high surrogate in \\u escape without its low half");
      }
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(text, code);
    return true;
  }

  static void append_utf8(std::string& text, uint32_t code) {
    const auto byte = [&](uint32_t b) { text += static_cast<char>(static_cast<unsigned char>(b)); };
    if (code < 0x80) {
      byte(code);
    } else if (code < 0x800) {
      byte(0xC0 | (code >> 6));
      byte(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      byte(0xE0 | (code >> 12));
      byte(0x80 | ((code >> 6) & 0x3F));
      byte(0x80 | (code & 0x3F));
    } else {
      byte(0xF0 | (code >> 18));
      byte(0x80 | ((code >> 12) & 0x3F));
      byte(0x80 | ((code >> 6) & 0x3F));
      byte(0x80 | (code & 0x3F));
    }
  }

  std::string_view line_;
  size_t pos_ = 0;
  std::deque<std::string> decoded_;
  uint32_t error_col_ = 0;
  std::string error_message_;
};

// ---------------------------------------------------------------------------------------------
// Tables: the keys of an operation line, operations and what they take.

enum class Key : uint8_t {
  RANK, OP, THREAD,  // every line
  GROUP, SIZE, DTYPE, ROOT, TO, FROM, TAG, STREAM, ASYNC, HANDLE, DURATION, NAME, RANKS,
};
constexpr size_t KEY_COUNT = 16;

constexpr std::array<std::string_view, KEY_COUNT> KEY_NAMES = {
    "rank", "op",   "thread", "group", "size",   "dtype",       "root", "to",
    "from", "tag",  "stream", "async", "handle", "duration_ns", "name", "ranks",
};

using KeySet = uint32_t;
constexpr KeySet bit(Key key) { return KeySet{1} << static_cast<unsigned>(key); }

std::string_view key_name(Key key) { return KEY_NAMES[static_cast<size_t>(key)]; }

// The key of an operation line by name (`found` false for none): by first letter, then a
// compare, as it runs for every key of every line.
Key find_key(std::string_view name, bool& found) {
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

constexpr KeySet COLLECTIVE =
    bit(Key::GROUP) | bit(Key::SIZE) | bit(Key::DTYPE) | bit(Key::TAG) | bit(Key::STREAM) |
    bit(Key::ASYNC);
constexpr KeySet ROOTED = COLLECTIVE | bit(Key::ROOT);
constexpr KeySet BARRIER_ARGS = COLLECTIVE & ~bit(Key::SIZE);

constexpr std::array<OpSpec, 18> OP_SPECS = {{
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

const OpSpec* find_op(std::string_view name) {
  for (const OpSpec& spec : OP_SPECS) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// The NCCL group markers (ncclGroupStart / ncclGroupEnd): lines that are no operation of their
// own but open and close an NCCL_GROUP statement. They take no arguments.
constexpr std::string_view GROUP_START = "group_start";
constexpr std::string_view GROUP_END = "group_end";
constexpr OpSpec GROUP_START_SPEC = {GROUP_START, OpKind::COMPUTE, 0, 0};
constexpr OpSpec GROUP_END_SPEC = {GROUP_END, OpKind::COMPUTE, 0, 0};

// Every name an op line's "op" may have.
std::vector<std::string> op_line_names() {
  std::vector<std::string> names;
  for (const OpSpec& spec : OP_SPECS) names.emplace_back(spec.name);
  names.emplace_back(GROUP_START);
  names.emplace_back(GROUP_END);
  return names;
}

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

std::vector<std::string> arg_names(KeySet keys) {
  std::vector<std::string> names;
  for (size_t i = 0; i < KEY_COUNT; ++i) {
    if ((keys & (KeySet{1} << i)) != 0) names.emplace_back(KEY_NAMES[i]);
  }
  return names;
}


constexpr std::array<std::string_view, 8> HEADER_KEYS = {
    "lockstep_trace", "scenario", "description", "source", "expect", "world", "groups", "semantics",
};

// ---------------------------------------------------------------------------------------------
// The loader.

class TooManyErrors {};


// A group a rank made with new_group.
struct CreatedGroup {
  uint32_t group = 0;
  uint32_t thread = 0;
  uint32_t line = 0;
};

// An NCCL group a thread has open: group_start lines minus group_end lines (nesting counts
// once, as in NCCL), the NCCL_GROUP statement the ops go into, and where it was opened.
struct OpenGroup {
  uint32_t depth = 0;
  uint32_t stmt = 0;  // index into the thread's ops (one in the side table)
  SourceLoc loc;      // the outermost group_start's operation name
};

// What the loader keeps per rank that has lines.
struct RankState {
  int32_t rank = 0;
  RankProgram program;  // the threads' names and positions; their ops are in `recorded`
  std::vector<std::shared_ptr<RecordedBody>> recorded;  // per thread of `program`
  std::vector<OpenGroup> open;  // per thread of `program`
  uint32_t last_thread = 0;
  bool last_is_main = false;  // program[last_thread] is "main"
  std::vector<CreatedGroup> created;  // sorted by group
  std::map<std::string, std::vector<uint32_t>, std::less<>> handles;  // threads issuing each
};

// A wait whose handle its thread has not issued before: checked at the end of the file.
struct PendingWait {
  uint32_t state = 0;
  uint32_t thread = 0;
  std::string handle;
  SourceLoc loc;
};

// A group name used before any line created it, or a new_group group used before this rank's
// new_group line: checked when the whole file is read.
struct PendingUse {
  uint32_t state = 0;   // index into ranks_
  uint32_t thread = 0;
  size_t stmt = 0;      // index into the thread's ops (one in the side table)
  size_t inner = SIZE_MAX;  // index into that statement's body when the op is in an NCCL group
  std::string name;     // the group's name
  SourceLoc loc;        // of the group's name
  bool unknown = false; // the name was unknown on its line: members are checked at the end
};

class TraceLoader {
 public:
  TraceLoader(SourceText text, const std::string& path,
              std::span<const ParamOverride> overrides, const LoadLimits& limits)
      : source_(std::move(text)), text_(source_.view()), path_(path), overrides_(overrides),
        limits_(limits), fast_path_(limits.trace_fast_path) {}

  LoadResult run() {
    try {
      load();
    } catch (const TooManyErrors&) {
      diagnostics_.push_back({path_, {}, Severity::ERROR,
                              "too many errors; stopped after " +
                                  std::to_string(MAX_TRACE_ERRORS)});
    }
    part_.reset();  // a load that stopped early leaves the second part's thread to stop
    std::stable_sort(diagnostics_.begin(), diagnostics_.end(),
                     [](const Diagnostic& a, const Diagnostic& b) {
                       return std::pair(a.loc.line, a.loc.col) < std::pair(b.loc.line, b.loc.col);
                     });
    LoadResult result;
    result.diagnostics = std::move(diagnostics_);
    result.trace_part_lines = part_lines_;
    if (errors_ == 0) {
      scenario_.path = path_;
      // The text lives in the scenario; the result keeps a copy only for its diagnostics.
      if (!result.diagnostics.empty()) result.text = std::string(text_);
      scenario_.text = std::move(source_);
      result.scenario = std::move(scenario_);
    } else {
      result.text = std::string(text_);
    }
    return result;
  }

 private:
  // ----- diagnostics

  void error(SourceLoc at, std::string message) {
    assert(!in_part_);  // a part takes only lines without diagnostics
    if (errors_ >= MAX_TRACE_ERRORS) throw TooManyErrors{};
    ++errors_;
    diagnostics_.push_back({path_, at, Severity::ERROR, std::move(message)});
  }

  void warning(SourceLoc at, std::string message) {
    diagnostics_.push_back({path_, at, Severity::WARNING, std::move(message)});
  }

  SourceLoc at(const JsonValue& value) const { return {line_, value.col}; }
  SourceLoc at(const JsonMember& member) const { return {line_, member.col}; }

  bool expect_kind(const JsonValue& value, JsonKind kind, std::string_view what) {
    if (value.kind == kind) return true;
    error(at(value), "expected " + std::string(what) + ", got " + type_name(value));
    return false;
  }

  // A non-empty string, or nullopt (reported).
  std::optional<std::string_view> name_of(const JsonValue& value, std::string_view key) {
    if (!expect_kind(value, JsonKind::STRING, "a string")) return std::nullopt;
    if (value.text.empty()) {
      error(at(value), quoted(key) + " is empty");
      return std::nullopt;
    }
    return value.text;
  }

  // An integer of at least `min`, or nullopt (reported).
  std::optional<int64_t> integer_of(const JsonValue& value, std::string_view what,
                                    std::string_view name, int64_t min) {
    if (!expect_kind(value, JsonKind::INTEGER, what)) return std::nullopt;
    if (value.integer >= min) return value.integer;
    const std::string bound = min == 0 ? " must not be negative" : " must be positive";
    error(at(value), std::string(name) + bound + ", got " + std::to_string(value.integer));
    return std::nullopt;
  }

  // Reports a rank outside [0, world).
  bool check_in_world(int64_t rank, SourceLoc loc) {
    if (rank >= 0 && rank < scenario_.world) return true;
    const int32_t world = scenario_.world;
    const std::string ranks = world == 1   ? "0"
                              : world == 2 ? "0, 1"
                                           : "0-" + std::to_string(world - 1);
    error(loc, "rank " + std::to_string(rank) + " is outside the world (ranks " + ranks + ")");
    return false;
  }

  std::optional<int32_t> rank_of(const JsonValue& value) {
    if (!expect_kind(value, JsonKind::INTEGER, "a rank")) return std::nullopt;
    if (!check_in_world(value.integer, at(value))) return std::nullopt;
    return static_cast<int32_t>(value.integer);
  }

  // ----- the file

  void load() {
    for (const ParamOverride& override_ : overrides_) {
      error({}, "unknown parameter " + quoted(override_.name) + " in -D " + override_.name + "=" +
                    override_.value + "; a trace has no parameters");
    }
    if (text_.size() > static_cast<uint64_t>(limits_.max_file_bytes)) {
      error({}, "file exceeds the limit of " + std::to_string(limits_.max_file_bytes) +
                    " bytes (raise it with --max-file-bytes)");
      return;
    }
    size_t pos = 0;
    bool header_seen = false;
    bool ops_ok = false;
    uint32_t line = 0;
    std::string_view text;
    const bool ends_in_newline = !text_.empty() && text_.back() == '\n';
    stop_ = text_.size();
    while (true) {
      // An operation line the fast path takes is read from the text directly.
      if (ops_ok && fast_path_ && line < UINT32_MAX && pos < stop_) {
        line_ = line + 1;
        size_t length = 0;
        const std::string_view rest(text_.data() + pos, text_.size() - pos);
        const bool taken = ends_in_newline ? fast_op_line<false>(rest, length) : fast_op_line<true>(rest, length);
        if (taken) {
          ++line;
          pos += length;
          continue;
        }
      }
      if (!next_line(pos, text)) {
        if (part_ == nullptr) break;
        take_part(pos, line);  // at the second part's start: its lines, then the rest
        continue;
      }
      if (line == UINT32_MAX) {
        error({}, "the trace has more than " + std::to_string(UINT32_MAX) + " lines");
        return;
      }
      line_ = ++line;
      if (is_blank(text)) continue;
      if (!header_seen) {
        header_seen = true;
        ops_ok = load_header(text);
        if (ops_ok && ends_in_newline) start_part(pos);
      } else if (ops_ok && !load_op_line(text)) {
        return;
      }
    }
    if (!header_seen) {
      error({}, "empty trace file");
      return;
    }
    if (ops_ok) finish();
  }

  // Whether a line (without its end of line) has nothing but spaces and tabs: skipped.
  static bool is_blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

  // The line at `pos` (without its end of line); advances `pos`. False at the end of the text
  // (or, while a second part is read beside this loader, at that part's start).
  bool next_line(size_t& pos, std::string_view& line) const {
    if (pos >= stop_) return false;
    size_t end = text_.find('\n', pos);
    if (end == std::string_view::npos) end = text_.size();
    line = text_.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return true;
  }

  // ----- header

  // Loads the header; false when operations cannot be checked (no valid world).
  bool load_header(std::string_view text) {
    if (!reader_.read_object(text, members_)) {
      error({line_, reader_.error_col()}, reader_.error_message());
      return false;
    }
    const auto has = [&](std::string_view key) {
      return std::any_of(members_.begin(), members_.end(),
                         [&](const JsonMember& m) { return m.key == key; });
    };
    if (!has("lockstep_trace") && has("op")) {
      error({line_, 1}, "expected the trace header on the first line, got an operation");
      return false;
    }
    const std::map<std::string_view, const JsonMember*> keys = header_keys(members_);
    if (!load_version(keys)) return false;
    const auto find = [&](std::string_view key) {
      const auto found = keys.find(key);
      return found == keys.end() ? nullptr : found->second;
    };
    const SourceLoc header_loc{line_, 1};
    for (std::string_view required : {"scenario", "world"}) {
      if (find(required) == nullptr) {
        error(header_loc, "missing required key " + quoted(required) + " in the header");
      }
    }
    if (const JsonMember* m = find("scenario")) load_name(m->value);
    if (const JsonMember* m = find("description")) load_text(m->value, scenario_.description);
    if (const JsonMember* m = find("source")) load_text(m->value, scenario_.source_url);
    if (const JsonMember* m = find("expect")) load_expect(m->value);
    const bool world_ok = find("world") != nullptr && load_world(*find("world"));
    if (world_ok) define_world_group(find("world")->col);
    if (const JsonMember* m = find("groups"); m != nullptr && world_ok) load_groups(m->value);
    if (const JsonMember* m = find("semantics")) load_semantics(m->value);
    return world_ok;
  }

  // The header's keys by name; unknown and duplicate keys are reported and left out.
  std::map<std::string_view, const JsonMember*> header_keys(const std::vector<JsonMember>& header) {
    std::map<std::string_view, const JsonMember*> keys;
    std::vector<std::string> valid(HEADER_KEYS.begin(), HEADER_KEYS.end());
    for (const JsonMember& member : header) {
      if (std::find(HEADER_KEYS.begin(), HEADER_KEYS.end(), member.key) == HEADER_KEYS.end()) {
        error(at(member), unknown_message("key", member.key, " in the header", valid, valid));
        continue;
      }
      const auto [it, inserted] = keys.emplace(member.key, &member);
      if (!inserted) report_duplicate(member, it->second->col);
    }
    return keys;
  }

  void report_duplicate(const JsonMember& member, uint32_t first_col) {
    error(at(member), "duplicate key " + quoted(member.key) + " (first given at column " +
                          std::to_string(first_col) + ")");
  }

  bool load_version(const std::map<std::string_view, const JsonMember*>& keys) {
    const auto found = keys.find("lockstep_trace");
    if (found == keys.end()) {
      error({line_, 1}, "missing required key 'lockstep_trace' in the header (the format "
                        "version: " + std::to_string(TRACE_FORMAT_VERSION) + ")");
      return false;
    }
    const JsonValue& value = found->second->value;
    if (!expect_kind(value, JsonKind::INTEGER, "an integer (the format version)")) return false;
    if (value.integer == TRACE_FORMAT_VERSION) return true;
    error(at(value), "unsupported trace format version " + std::to_string(value.integer) +
                         "; this build reads version " + std::to_string(TRACE_FORMAT_VERSION));
    return false;
  }

  void load_name(const JsonValue& value) {
    if (!expect_kind(value, JsonKind::STRING, "a string")) return;
    if (value.text.empty()) error(at(value), "the scenario name is empty");
    scenario_.name = std::string(value.text);
  }

  void load_text(const JsonValue& value, std::string& out) {
    if (expect_kind(value, JsonKind::STRING, "a string")) out = std::string(value.text);
  }

  void load_expect(const JsonValue& value) {
    if (!expect_kind(value, JsonKind::STRING, "a string")) return;
    scenario_.expect_loc = at(value);
    scenario_.expect = parse_verdict(value.text);
    if (scenario_.expect) return;
    std::vector<std::string> verdicts;
    for (int v = 0; v <= static_cast<int>(Verdict::INCONCLUSIVE); ++v) {
      verdicts.emplace_back(verdict_name(static_cast<Verdict>(v)));
    }
    error(at(value), invalid_value_message(value.text, "expect", verdicts));
  }

  bool load_world(const JsonMember& member) {
    const std::optional<int64_t> world = integer_of(member.value, "an integer", "world", 1);
    if (!world) return false;
    if (*world > limits_.max_world) {
      error(at(member.value), "world " + std::to_string(*world) + " exceeds the limit of " +
                                  std::to_string(limits_.max_world) +
                                  " ranks (raise it with --max-world)");
      return false;
    }
    scenario_.world = static_cast<int32_t>(*world);
    state_of_rank_.assign(static_cast<size_t>(scenario_.world), -1);
    return true;
  }

  void define_world_group(uint32_t col) {
    std::vector<int32_t> ranks(static_cast<size_t>(scenario_.world));
    for (int32_t rank = 0; rank < scenario_.world; ++rank) ranks[static_cast<size_t>(rank)] = rank;
    add_group(make_group("world", {line_, col}, std::move(ranks), scenario_.world));
  }

  // Each group costs a slot per rank of the world (GroupDef::comm_of_rank): their number is
  // bounded so that groups times world stays under MAX_TRACE_GROUP_SLOTS.
  bool check_group_bound(SourceLoc loc) {
    const auto slots = static_cast<uint64_t>(scenario_.groups.size() + 1) *
                       static_cast<uint64_t>(scenario_.world);
    if (slots <= MAX_TRACE_GROUP_SLOTS) return true;
    error(loc, "more groups than the limit of " +
                   std::to_string(MAX_TRACE_GROUP_SLOTS / static_cast<uint64_t>(scenario_.world)) +
                   " for a world of " + std::to_string(scenario_.world) + " ranks");
    return false;
  }

  uint32_t add_group(GroupDef group) {
    const auto index = static_cast<uint32_t>(scenario_.groups.size());
    group_index_.emplace(group.name, index);
    scenario_.groups.push_back(std::move(group));
    group_used_.push_back(index == 0);
    return index;
  }

  void load_groups(const JsonValue& value) {
    if (!expect_kind(value, JsonKind::OBJECT, "an object of groups")) return;
    std::map<std::string_view, uint32_t> seen;
    for (const JsonMember& member : value.members) {
      if (const auto [it, inserted] = seen.emplace(member.key, member.col); !inserted) {
        report_duplicate(member, it->second);
        continue;
      }
      if (!check_group_name(member.key, at(member)) || !check_group_bound(at(member))) continue;
      if (std::optional<std::vector<int32_t>> ranks = ranks_of(member.value, member.key)) {
        add_group(make_group(std::string(member.key), at(member), std::move(*ranks),
                             scenario_.world));
      }
    }
  }

  bool check_group_name(std::string_view name, SourceLoc loc) {
    if (name == "world") {
      error(loc, "group 'world' is predefined and may not be redefined");
      return false;
    }
    if (is_identifier(name)) return true;
    error(loc, "invalid group name " + quoted(name) +
                   "; a name is a letter or '_' followed by letters, digits or '_'");
    return false;
  }

  // A list of distinct ranks in the world, sorted; nullopt when any is wrong (reported).
  std::optional<std::vector<int32_t>> ranks_of(const JsonValue& value, std::string_view group) {
    if (!expect_kind(value, JsonKind::ARRAY, "an array of ranks")) return std::nullopt;
    if (value.items.empty()) {
      error(at(value), "group " + quoted(group) + " has no ranks");
      return std::nullopt;
    }
    std::vector<int32_t> ranks;
    std::vector<bool> seen(static_cast<size_t>(scenario_.world), false);
    bool ok = true;
    for (const JsonValue& item : value.items) {
      const std::optional<int32_t> rank = rank_of(item);
      if (rank && seen[static_cast<size_t>(*rank)]) {
        error(at(item), "rank " + std::to_string(*rank) + " appears twice in group " +
                            quoted(group));
        ok = false;
      } else if (rank) {
        seen[static_cast<size_t>(*rank)] = true;
        ranks.push_back(*rank);
      } else {
        ok = false;
      }
    }
    if (!ok) return std::nullopt;
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }

  // ----- semantics

  void load_semantics(const JsonValue& value) {
    if (!expect_kind(value, JsonKind::OBJECT, "an object of semantics settings")) return;
    std::vector<std::string> keys = setting_keys(false);
    keys.emplace_back("link");
    std::map<std::string_view, uint32_t> seen;
    for (const JsonMember& member : value.members) {
      if (const auto [it, inserted] = seen.emplace(member.key, member.col); !inserted) {
        report_duplicate(member, it->second);
      } else if (member.key == "link") {
        load_link(member.value);
      } else if (const SemanticsSetting* setting = find_setting(member.key, false)) {
        load_setting(*setting, member.value);
      } else {
        error(at(member), unknown_message("key", member.key, " in semantics", keys, keys));
      }
    }
  }

  void load_setting(const SemanticsSetting& setting, const JsonValue& value) {
    const std::string_view key = setting.trace_key;
    std::optional<int64_t> got;
    switch (setting.kind) {
      case SettingKind::CHOICE:
        if (auto index = choice_of(value, key, setting.choices)) got = static_cast<int64_t>(*index);
        break;
      case SettingKind::FLAG:
        if (expect_kind(value, JsonKind::BOOL, "true or false")) got = value.boolean ? 1 : 0;
        break;
      case SettingKind::BYTES: got = integer_of(value, "a size in bytes", key, setting.minimum); break;
      case SettingKind::COUNT: got = integer_of(value, "an integer", key, setting.minimum); break;
      case SettingKind::DURATION: got = integer_of(value, "a duration in nanoseconds", key, setting.minimum); break;
    }
    if (got) setting.set(scenario_.semantics, *got);
  }

  void load_link(const JsonValue& value) {
    if (!expect_kind(value, JsonKind::OBJECT, "an object")) return;
    static const std::vector<std::string> keys = {"latency_ns", "bandwidth_bytes_per_s"};
    std::map<std::string_view, uint32_t> seen;
    for (const JsonMember& member : value.members) {
      if (const auto [it, inserted] = seen.emplace(member.key, member.col); !inserted) {
        report_duplicate(member, it->second);
      } else if (member.key == "latency_ns") {
        if (auto ns = integer_of(member.value, "a duration in nanoseconds", member.key, 0)) {
          scenario_.link.latency_ns = *ns;
        }
      } else if (member.key == "bandwidth_bytes_per_s") {
        if (auto rate = integer_of(member.value, "an integer", member.key, 1)) {
          scenario_.link.bandwidth_bytes_per_s = static_cast<double>(*rate);
        }
      } else {
        error(at(member), unknown_message("key", member.key, " in link", keys, keys));
      }
    }
  }

  std::optional<size_t> choice_of(const JsonValue& value, std::string_view key,
                                  const std::vector<std::string>& choices) {
    if (!expect_kind(value, JsonKind::STRING, "a string")) return std::nullopt;
    const auto found = std::find(choices.begin(), choices.end(), value.text);
    if (found != choices.end()) return static_cast<size_t>(found - choices.begin());
    error(at(value), invalid_value_message(value.text, key, choices));
    return std::nullopt;
  }

  // ----- operation lines

  struct LineKeys {
    std::array<const JsonMember*, KEY_COUNT> member{};
    std::vector<const JsonMember*> unknown;
    const JsonMember* get(Key key) const { return member[static_cast<size_t>(key)]; }
  };

  // ----- the fast path

  // One value of a line read by the fast path: a string without escapes, or an integer.
  // No initialisers: a line fills only the values of its keys (the `seen` bits), and
  // zeroing all sixteen per line cost more than reading them.
  struct FastValue {
    int64_t integer;
    const char* text;
    uint32_t size;      // of text
    uint32_t col;       // of the value's first character
    uint32_t key_col;   // of the key's opening quote
    bool is_string;
    std::string_view str() const { return {text, size}; }
  };

  // The common operation line, read in one pass without building JSON values: keys without
  // escapes, each once; values that are strings without escapes or integers; every check
  // passing. `rest` is the text from the line's start to the end of the file: the scan finds
  // the line's end itself (no search for the newline first) and sets `length` to the bytes
  // the line takes with its end of line. A line that is anything else (or would give any
  // diagnostic) is left untouched (false) and read again by the general path, which reports
  // exactly what is wrong with it.
  template <bool BOUNDED>
  bool fast_op_line(std::string_view rest, size_t& length) {
    if (ops_ >= limits_.max_ops) return false;
    const char* const begin = rest.data();
    const char* const end = begin + rest.size();
    const char* p = begin;
    const auto col = [begin](const char* at_char) { return static_cast<uint32_t>(at_char - begin + 1); };
    // Whether `at` is inside the text. Without BOUNDED the text ends in a newline, which ends
    // every loop below: a scan never passes it, so it needs no bound.
    const auto more = [end](const char* at) { return !BOUNDED || at < end; };
    // A string's contents after its opening quote, up to (and past) its closing quote.
    const auto plain_string = [&](std::string_view& out) __attribute__((always_inline)) {
      const char* const from = p;
      // Eight bytes at a time while eight are left (SWAR): the first quote, backslash or
      // control character found by masks; the bytes before it belong to the string.
      while (end - p >= 8) {
        uint64_t word = 0;
        std::memcpy(&word, p, 8);
        const uint64_t stops = byte_is(word, '"') | byte_is(word, '\\') | byte_below_space(word);
        if (stops == 0) {
          p += 8;
          continue;
        }
        p += __builtin_ctzll(stops) / 8;
        break;
      }
      while (more(p) && *p != '"') {
        if (*p == '\\' || static_cast<unsigned char>(*p) < 0x20) return false;
        ++p;
      }
      if (!more(p)) return false;
      out = std::string_view(from, static_cast<size_t>(p - from));
      ++p;
      return true;
    };
    // An integer at `p` into `value`; advances `p` past it.
    const auto integer = [&](FastValue& value) __attribute__((always_inline)) {
      const bool negative = *p == '-';
      if (negative) ++p;
      const char* const digits = p;
      uint64_t magnitude = 0;
      if (end - p >= 8) {
        // Up to eight digits at once (SWAR): the digits' bytes as values 0-9, the leading
        // ones found by a mask, then combined in three multiplications.
        uint64_t chunk = 0;
        std::memcpy(&chunk, p, 8);
        const uint64_t x = chunk ^ 0x3030303030303030ULL;
        const uint64_t not_digit =
            (((x & 0x7f7f7f7f7f7f7f7fULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
        const int count = not_digit == 0 ? 8 : __builtin_ctzll(not_digit) / 8;
        if (count > 0) {
          uint64_t v = x << (64 - 8 * count);  // little endian: the first digit lowest
          v = (v * 2561) >> 8 & 0x00ff00ff00ff00ffULL;
          v = (v * 6553601) >> 16 & 0x0000ffff0000ffffULL;
          magnitude = (v * 42949672960001ULL) >> 32;
          p += count;
        }
      }
      while (more(p) && *p >= '0' && *p <= '9' && p - digits < 18) {
        magnitude = magnitude * 10 + static_cast<uint64_t>(*p - '0');
        ++p;
      }
      // 18 digits at most (no overflow), no leading zero, no fraction or exponent.
      if (p == digits || (more(p) && (*p >= '0' && *p <= '9'))) return false;
      if (*digits == '0' && p - digits > 1) return false;
      if (more(p) && (*p == '.' || *p == 'e' || *p == 'E')) return false;
      value.is_string = false;
      value.integer = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
      return true;
    };
    // After a value: past the comma and the blanks before the next key (0), past the closing
    // brace (1), or neither (-1).
    const auto after_value = [&]() __attribute__((always_inline)) {
      if (pair_at<BOUNDED>(p, end, ',', ' ')) {
        p += 2;  // the common `, `
        p = skip_blanks<BOUNDED>(p, end);
        return 0;
      }
      p = skip_blanks<BOUNDED>(p, end);
      if (more(p) && *p == ',') {
        ++p;
        p = skip_blanks<BOUNDED>(p, end);
        return 0;
      }
      if (more(p) && *p == '}') {
        ++p;
        return 1;
      }
      return -1;
    };
    std::array<FastValue, KEY_COUNT> values;  // NOLINT(cppcoreguidelines-pro-type-member-init)
    KeySet seen = 0;
    p = skip_blanks<BOUNDED>(p, end);
    if (!more(p) || *p != '{') return false;
    ++p;
    // The start that writers give every line, `{"rank": R, "op": "NAME"`, by two compares of
    // known length; on anything else the line is read key by key from its brace.
    const char* const after_brace = p;
    if (end - p >= 8 && std::memcmp(p, "\"rank\": ", 8) == 0) {
      FastValue& rank = values[static_cast<size_t>(Key::RANK)];
      rank.key_col = col(p);
      p += 8;
      rank.col = col(p);
      if (more(p) && *p >= '0' && *p <= '9' && integer(rank) && end - p >= 9 && std::memcmp(p, ", \"op\": \"", 9) == 0) {
        FastValue& op = values[static_cast<size_t>(Key::OP)];
        op.key_col = col(p + 2);
        op.col = col(p + 8);
        p += 9;
        op.is_string = true;
        std::string_view text;
        if (plain_string(text)) {
          op.text = text.data();
          op.size = static_cast<uint32_t>(text.size());
          seen = bit(Key::RANK) | bit(Key::OP);
        }
      }
    }
    bool ended = false;
    if (seen != 0) {
      const int next = after_value();
      if (next < 0) return false;
      ended = next > 0;
    } else {
      p = skip_blanks<BOUNDED>(after_brace, end);
    }
    while (!ended) {
      if (!more(p) || *p != '"') return false;
      const uint32_t key_col = col(p);
      ++p;
      Key id = Key::RANK;
      if (!fast_key(p, end, id) || (seen & bit(id)) != 0) return false;
      seen |= bit(id);
      FastValue& value = values[static_cast<size_t>(id)];
      value.key_col = key_col;
      if (pair_at<BOUNDED>(p, end, ':', ' ')) {
        p += 2;  // the common `": "`
      } else {
        p = skip_blanks<BOUNDED>(p, end);
        if (!more(p) || *p != ':') return false;
        ++p;
      }
      p = skip_blanks<BOUNDED>(p, end);
      if (!more(p)) return false;
      value.col = col(p);
      if (*p == '"') {
        ++p;
        value.is_string = true;
        std::string_view text;
        if (!plain_string(text)) return false;
        value.text = text.data();
        value.size = static_cast<uint32_t>(text.size());
      } else if (!integer(value)) {
        return false;
      }
      const int next = after_value();
      if (next < 0) return false;
      if (next > 0) break;
    }
    // The end of the line: what next_line takes as one (a newline, a carriage return before
    // it or before the end of the file, or the end of the file).
    p = skip_blanks<BOUNDED>(p, end);
    if (more(p) && *p == '\r') ++p;
    if (more(p) && *p != '\n') return false;
    length = static_cast<size_t>(p - begin) + (more(p) ? 1 : 0);

    // The checks of the general path; any that fails sends the line there.
    const auto has = [&](Key key) { return (seen & bit(key)) != 0; };
    const auto get = [&](Key key) -> const FastValue& { return values[static_cast<size_t>(key)]; };
    const auto in_world = [&](const FastValue& v) {
      return !v.is_string && v.integer >= 0 && v.integer < scenario_.world;
    };
    const auto name = [&](const FastValue& v) { return v.is_string && v.size != 0; };
    const auto count = [&](const FastValue& v) { return !v.is_string && v.integer >= 0; };
    if (!has(Key::RANK) || !has(Key::OP) || !in_world(get(Key::RANK)) || !get(Key::OP).is_string) {
      return false;
    }
    const OpSpec* spec = fast_op(get(Key::OP).str());
    if (spec == nullptr || spec->kind == OpKind::WAIT || spec->kind == OpKind::NEW_GROUP) return false;
    const KeySet args = seen & ~(bit(Key::RANK) | bit(Key::OP) | bit(Key::THREAD));
    if ((args & ~spec->args) != 0 || (spec->required & ~args) != 0) return false;
    if (has(Key::THREAD) && !name(get(Key::THREAD))) return false;
    if (has(Key::SIZE) && !count(get(Key::SIZE))) return false;
    if (has(Key::DURATION) && !count(get(Key::DURATION))) return false;
    if (has(Key::ROOT) && !in_world(get(Key::ROOT))) return false;
    if (has(Key::TO) && !in_world(get(Key::TO))) return false;
    const bool from_any = has(Key::FROM) && get(Key::FROM).is_string;
    if (has(Key::FROM) && (from_any ? get(Key::FROM).str() != "any" : !in_world(get(Key::FROM)))) {
      return false;
    }
    if ((seen & (bit(Key::TAG) | bit(Key::STREAM) | bit(Key::ASYNC))) != 0) {
      for (Key key : {Key::TAG, Key::STREAM, Key::ASYNC}) {
        if (has(key) && !name(get(key))) return false;
      }
    }
    DType dtype = DType::BF16;
    if (has(Key::DTYPE)) {
      if (!get(Key::DTYPE).is_string) return false;
      const std::string_view text = get(Key::DTYPE).str();
      if (text.empty() || text != last_dtype_name_) {
        const std::optional<DType> parsed = parse_dtype(text);
        if (!parsed) return false;
        last_dtype_name_ = text;
        last_dtype_ = *parsed;
      }
      dtype = last_dtype_;
    }
    const auto rank = static_cast<int32_t>(get(Key::RANK).integer);
    uint32_t group = 0;
    if (has(Key::GROUP)) {
      if (!name(get(Key::GROUP))) return false;
      const std::string_view group_name = get(Key::GROUP).str();
      if (group_name != last_group_name_) {
        const auto found = group_index_.find(group_name);
        if (found == group_index_.end()) return false;
        last_group_name_ = group_name;
        last_group_ = found->second;
      }
      group = last_group_;
      const GroupDef& def = scenario_.groups[group];
      if (def.from_new_group) return false;
      if (group != 0 && def.single()) {
        const auto member = [&](int64_t r) { return def.comm_for(static_cast<int32_t>(r)) != nullptr; };
        if (!member(rank)) return false;
        if (has(Key::TO) && !member(get(Key::TO).integer)) return false;
        if (has(Key::FROM) && !from_any && !member(get(Key::FROM).integer)) return false;
        if (has(Key::ROOT) && !member(get(Key::ROOT).integer)) return false;
      }
    }

    const bool names = (seen & (bit(Key::TAG) | bit(Key::STREAM) | bit(Key::ASYNC))) != 0;
    // A record keeps the columns of a value and a peer in 16 bits (a longer line: a statement).
    const bool short_line = length <= RecordedOp::MAX_VALUE_COL;
    // A part takes only lines that become records of a thread "main" (merge_part).
    if (in_part_ && (names || !short_line || has(Key::THREAD))) return false;

    // The line is good: place it as the general path would.
    ++ops_;
    const SourceLoc op_loc{line_, get(Key::OP).key_col};
    const auto loc = [&](Key key) { return SourceLoc{line_, get(key).col}; };
    enter_rank(rank);
    const std::string_view thread = has(Key::THREAD) ? get(Key::THREAD).str() : "main";
    if (!has(Key::THREAD) && ranks_[current_state_].last_is_main) {
      current_thread_ = ranks_[current_state_].last_thread;  // the common line: no thread named
    } else if (!place_thread(rank, thread, has(Key::THREAD) ? loc(Key::THREAD) : op_loc, op_loc)) {
      return true;
    }
    placed_ = true;
    const bool uses_group = has(Key::GROUP) || is_collective(spec->kind) || is_p2p(spec->kind);
    if (!names && short_line && open_group().depth == 0) {
      // The common op: a flat record (RecordedOp), made into a statement when first read.
      RecordedOp& op = recorded().ops.emplace_back();
      op.line = line_;
      op.col = op_loc.col;
      op.op = spec->kind;
      op.dtype = dtype;
      op.group = group;
      uint8_t flags = 0;
      // No operation takes both a size and a duration, or a root and a peer.
      if (has(Key::SIZE)) {
        op.value = get(Key::SIZE).integer;
        op.value_col = static_cast<uint16_t>(get(Key::SIZE).col);
        flags |= RecordedOp::SIZE;
      } else if (has(Key::DURATION)) {
        op.value = get(Key::DURATION).integer;
        op.value_col = static_cast<uint16_t>(get(Key::DURATION).col);
        flags |= RecordedOp::DURATION;
      }
      if (has(Key::ROOT)) {
        op.peer = static_cast<int32_t>(get(Key::ROOT).integer);
        op.peer_col = static_cast<uint16_t>(get(Key::ROOT).col);
        flags |= RecordedOp::ROOT;
      } else if (has(Key::TO)) {
        op.peer = static_cast<int32_t>(get(Key::TO).integer);
        op.peer_col = static_cast<uint16_t>(get(Key::TO).col);
        flags |= RecordedOp::PEER;
      } else if (has(Key::FROM)) {
        op.peer = from_any ? 0 : static_cast<int32_t>(get(Key::FROM).integer);
        op.peer_col = static_cast<uint16_t>(get(Key::FROM).col);
        flags |= from_any ? RecordedOp::PEER | RecordedOp::PEER_ANY : RecordedOp::PEER;
      }
      op.flags = flags;
      if (uses_group) group_used_[group] = true;
      return true;
    }
    // An op with names, or in an NCCL group: a statement in the side table.
    if (open_group().depth > 0) {
      const SourceLoc async_loc = has(Key::ASYNC) ? loc(Key::ASYNC) : SourceLoc{};
      if (!check_in_nccl_group(*spec, loc(Key::OP), has(Key::ASYNC) ? &async_loc : nullptr)) return true;
    }
    Stmt& stmt = new_op();
    stmt.kind = StmtKind::OP;
    stmt.op = spec->kind;
    stmt.loc = op_loc;
    stmt.dtype = dtype;
    stmt.group = group;
    if (uses_group) group_used_[group] = true;
    // The statement is new: its expressions are constants already (of value 0), set in place.
    const auto constant = [&](Expr& expr, int64_t value, Key key) {
      expr.value = value;
      expr.loc = loc(key);
    };
    if (has(Key::SIZE)) constant(stmt.size, get(Key::SIZE).integer, Key::SIZE);
    if (has(Key::DURATION)) constant(stmt.duration, get(Key::DURATION).integer, Key::DURATION);
    if (has(Key::ROOT)) {
      constant(stmt.set_extra().root, get(Key::ROOT).integer, Key::ROOT);
      stmt.has_root = true;
    }
    if (has(Key::TO)) {
      constant(stmt.peer, get(Key::TO).integer, Key::TO);
      stmt.has_peer = true;
    }
    if (has(Key::FROM)) {
      constant(stmt.peer, from_any ? 0 : get(Key::FROM).integer, Key::FROM);
      stmt.has_peer = true;
      stmt.peer_any = from_any;
    }
    if (has(Key::TAG)) stmt.tag = scenario_.names->intern(get(Key::TAG).str());
    if (has(Key::STREAM)) stmt.stream = scenario_.names->intern(get(Key::STREAM).str());
    if (has(Key::ASYNC)) {
      stmt.handle = scenario_.names->intern(get(Key::ASYNC).str());
      std::vector<uint32_t>& threads = ranks_[current_state_].handles[stmt.handle.str()];
      if (std::find(threads.begin(), threads.end(), current_thread_) == threads.end()) {
        threads.push_back(current_thread_);
      }
    }
    if (stmt.op == OpKind::BARRIER) {
      stmt.size.value = dtype_bytes(stmt.dtype);
      stmt.size.loc = stmt.loc;
    }
    return true;
  }

  // Whether the text at `p` starts with `name` (the closing quote included): a compare of known
  // length, which the compiler turns into one or two integer compares instead of a call.
  template <size_t N>
  static bool starts(const char* p, const char* end, const char (&name)[N]) {
    return static_cast<size_t>(end - p) >= N - 1 && std::memcmp(p, name, N - 1) == 0;
  }

  // The key of an operation line whose name starts at `p` (after its opening quote): the name
  // and its closing quote are compared in place, without finding the quote first (no key
  // holds a quote, a backslash or a control character, so a key that is anything else fails
  // every compare). Advances `p` past the closing quote.
  [[gnu::always_inline]] static bool fast_key(const char*& p, const char* end, Key& id) {
    const auto is = [&](bool match, Key found, size_t length) {
      id = found;
      p += match ? length + 1 : 0;
      return match;
    };
    if (p == end) return false;
    switch (*p) {
      case 'r':
        if (starts(p, end, "rank\"")) return is(true, Key::RANK, 4);
        if (starts(p, end, "root\"")) return is(true, Key::ROOT, 4);
        return is(starts(p, end, "ranks\""), Key::RANKS, 5);
      case 'o': return is(starts(p, end, "op\""), Key::OP, 2);
      case 's':
        if (starts(p, end, "size\"")) return is(true, Key::SIZE, 4);
        return is(starts(p, end, "stream\""), Key::STREAM, 6);
      case 'd':
        if (starts(p, end, "duration_ns\"")) return is(true, Key::DURATION, 11);
        return is(starts(p, end, "dtype\""), Key::DTYPE, 5);
      case 't':
        if (starts(p, end, "to\"")) return is(true, Key::TO, 2);
        if (starts(p, end, "tag\"")) return is(true, Key::TAG, 3);
        return is(starts(p, end, "thread\""), Key::THREAD, 6);
      case 'f': return is(starts(p, end, "from\""), Key::FROM, 4);
      case 'g': return is(starts(p, end, "group\""), Key::GROUP, 5);
      case 'a': return is(starts(p, end, "async\""), Key::ASYNC, 5);
      case 'h': return is(starts(p, end, "handle\""), Key::HANDLE, 6);
      case 'n': return is(starts(p, end, "name\""), Key::NAME, 4);
      default: return false;
    }
  }

  // Whether the text at `p` starts with the two bytes `a`, `b` (one 16-bit compare).
  template <bool BOUNDED>
  [[gnu::always_inline]] static bool pair_at(const char* p, const char* end, char a, char b) {
    if (BOUNDED && end - p < 2) return false;
    if (!BOUNDED && *p != a) return false;  // the newline that ends the text stops here
    uint16_t pair = 0;
    std::memcpy(&pair, p, 2);
    return pair == static_cast<uint16_t>(static_cast<unsigned char>(a) | static_cast<unsigned char>(b) << 8);
  }

  // Per byte of `word`, the high bit set where the byte is `c` (exact: no carries between bytes).
  static uint64_t byte_is(uint64_t word, char c) {
    constexpr uint64_t ONES = 0x0101010101010101ULL;
    constexpr uint64_t LOW7 = 0x7f7f7f7f7f7f7f7fULL;
    const uint64_t x = word ^ (ONES * static_cast<unsigned char>(c));
    return ~(((x & LOW7) + LOW7) | x) & ~LOW7;
  }
  // Per byte of `word`, the high bit set where the byte is below ' ' (a control character).
  static uint64_t byte_below_space(uint64_t word) {
    constexpr uint64_t LOW7 = 0x7f7f7f7f7f7f7f7fULL;
    return ~(((word & LOW7) + 0x6060606060606060ULL) | word) & ~LOW7;
  }

  // Past the blanks (spaces and tabs) at `p`.
  template <bool BOUNDED>
  [[gnu::always_inline]] static const char* skip_blanks(const char* p, const char* end) {
    // A byte above ' ' ends the blanks at once: the common case is one compare.
    while ((!BOUNDED || p < end) && static_cast<unsigned char>(*p) <= ' ' && (*p == ' ' || *p == '\t')) ++p;
    return p;
  }

  // Whether `text` (of the length of `name`) is `name`: a compare of known length, which the
  // compiler turns into one or two integer compares instead of a call.
  template <size_t N>
  static bool same(const char* text, const char (&name)[N]) {
    return std::memcmp(text, name, N - 1) == 0;
  }

  // The operation named `name` (not a group marker): by length, then compares of known length.
  static const OpSpec* fast_op(std::string_view name) {
    const char* const n = name.data();
    switch (name.size()) {
      case 4:
        if (same(n, "send")) return spec_for<OpKind::SEND>();
        if (same(n, "recv")) return spec_for<OpKind::RECV>();
        if (same(n, "sync")) return spec_for<OpKind::SYNC>();
        if (same(n, "wait")) return spec_for<OpKind::WAIT>();
        if (same(n, "exit")) return spec_for<OpKind::EXIT>();
        return nullptr;
      case 5:
        if (same(n, "sleep")) return spec_for<OpKind::SLEEP>();
        if (same(n, "crash")) return spec_for<OpKind::CRASH>();
        return nullptr;
      case 6:
        if (same(n, "reduce")) return spec_for<OpKind::REDUCE>();
        if (same(n, "gather")) return spec_for<OpKind::GATHER>();
        return nullptr;
      case 7:
        if (same(n, "compute")) return spec_for<OpKind::COMPUTE>();
        if (same(n, "scatter")) return spec_for<OpKind::SCATTER>();
        if (same(n, "barrier")) return spec_for<OpKind::BARRIER>();
        return nullptr;
      case 9:
        if (same(n, "allreduce")) return spec_for<OpKind::ALLREDUCE>();
        if (same(n, "allgather")) return spec_for<OpKind::ALLGATHER>();
        if (same(n, "broadcast")) return spec_for<OpKind::BROADCAST>();
        if (same(n, "new_group")) return spec_for<OpKind::NEW_GROUP>();
        return nullptr;
      case 10: return same(n, "all_to_all") ? spec_for<OpKind::ALL_TO_ALL>() : nullptr;
      case 14: return same(n, "reduce_scatter") ? spec_for<OpKind::REDUCE_SCATTER>() : nullptr;
      default: return nullptr;
    }
  }

  // One operation line; false when loading must stop (a bound was hit).
  bool load_op_line(std::string_view text) {
    // (load tried fast_op_line on this line already.)
    if (!reader_.read_object(text, members_)) {
      error({line_, reader_.error_col()}, reader_.error_message());
      return true;
    }
    if (++ops_ > limits_.max_ops) {
      error({line_, 1}, "trace exceeds the limit of " + std::to_string(limits_.max_ops) +
                            " operations (raise it with --max-ops)");
      return false;
    }
    LineKeys keys;
    if (!sort_keys(keys)) return true;
    const OpSpec* spec = op_of(keys);
    const std::optional<int32_t> rank = line_rank(keys);
    if (spec == nullptr) return true;
    if (!check_args(*spec, keys)) return true;
    if (spec == &GROUP_START_SPEC || spec == &GROUP_END_SPEC) {
      if (rank.has_value() && place(*rank, keys)) load_group_mark(*spec, keys);
      return true;
    }
    const bool placed = rank.has_value() && place(*rank, keys);
    placed_ = placed;
    if (placed && !check_in_nccl_group(*spec, keys)) return true;
    Stmt& stmt = placed ? new_op() : (scratch_ = Stmt{});
    stmt.kind = StmtKind::OP;
    stmt.op = spec->kind;
    stmt.loc = at(*keys.member[static_cast<size_t>(Key::OP)]);
    pending_name_.clear();
    const bool ok = load_args(keys, stmt, rank.value_or(-1)) && placed;
    if (!ok) {
      if (placed) drop_op();
      return true;
    }
    if (!pending_name_.empty()) commit_pending();
    return true;
  }

  // ----- NCCL groups

  OpenGroup& open_group() { return ranks_[current_state_].open[current_thread_]; }

  // The current thread's ops.
  RecordedBody& recorded() { return *ranks_[current_state_].recorded[current_thread_]; }
  // Op `index` of a thread, one of its side table.
  static Stmt& side_stmt(RecordedBody& body, size_t index) { return body.stmts[body.ops[index].side_index()]; }
  // A new op of the current thread, as a statement in its side table.
  static Stmt& new_side_stmt(RecordedBody& body) {
    RecordedOp& op = body.ops.emplace_back();
    op.flags = RecordedOp::SIDE;
    op.value = static_cast<int64_t>(body.stmts.size());
    return body.stmts.emplace_back();
  }

  // A new statement for the current line's op: in the thread's ops (its side table), or its
  // open NCCL group's.
  Stmt& new_op() {
    RecordedBody& body = recorded();
    const OpenGroup& group = open_group();
    return group.depth > 0 ? side_stmt(body, group.stmt).body.emplace_back() : new_side_stmt(body);
  }
  // Takes back the statement new_op gave.
  void drop_op() {
    RecordedBody& body = recorded();
    const OpenGroup& group = open_group();
    if (group.depth > 0) {
      side_stmt(body, group.stmt).body.pop_back();
    } else {
      body.stmts.pop_back();
      body.ops.pop_back();
    }
  }

  // Only communication goes into an NCCL group (as in the YAML `group:`).
  bool check_in_nccl_group(const OpSpec& spec, const LineKeys& keys) {
    const JsonMember* async = keys.get(Key::ASYNC);
    const SourceLoc async_loc = async != nullptr ? at(async->value) : SourceLoc{};
    return check_in_nccl_group(spec, at(keys.get(Key::OP)->value), async != nullptr ? &async_loc : nullptr);
  }

  // `op_loc`: the operation's name; `async_loc`: the async value, null without one.
  bool check_in_nccl_group(const OpSpec& spec, SourceLoc op_loc, const SourceLoc* async_loc) {
    const OpenGroup& group = open_group();
    if (group.depth == 0) return true;
    const std::string where = " (group_start at line " + std::to_string(group.loc.line) + ")";
    if (!is_collective(spec.kind) && !is_p2p(spec.kind)) {
      error(op_loc, "only communication operations may appear in an NCCL group" + where +
                        ", got " + quoted(spec.name));
      return false;
    }
    // The engine issues a group as one unit that the main stream waits for: it has no handles.
    if (async_loc != nullptr) {
      error(*async_loc, "'async' is not allowed in an NCCL group" + where +
                            ": the main stream waits for the whole group");
      return false;
    }
    return true;
  }

  // group_start opens the thread's NCCL group (a nested one only counts), group_end closes it.
  void load_group_mark(const OpSpec& spec, const LineKeys& keys) {
    OpenGroup& group = open_group();
    if (&spec == &GROUP_START_SPEC) {
      if (group.depth++ > 0) return;
      RecordedBody& body = recorded();
      group.stmt = static_cast<uint32_t>(body.ops.size());
      group.loc = at(keys.get(Key::OP)->value);
      Stmt& stmt = new_side_stmt(body);
      stmt.kind = StmtKind::NCCL_GROUP;
      stmt.loc = at(*keys.get(Key::OP));
      return;
    }
    if (group.depth == 0) {
      error(at(keys.get(Key::OP)->value), "group_end without a group_start on rank " +
                                             std::to_string(ranks_[current_state_].rank) +
                                             thread_words(current_thread_));
      return;
    }
    --group.depth;
  }

  // ", thread 'NAME'" for a thread other than main, else "".
  std::string thread_words(uint32_t thread) const {
    const std::string& name = ranks_[current_state_].program[thread].name;
    return name == "main" ? std::string() : ", thread " + quoted(name);
  }

  // Every group still open at the end of the file is an error at its group_start.
  void check_groups_closed() {
    for (uint32_t s = 0; s < ranks_.size(); ++s) {
      current_state_ = s;
      const RankState& rs = ranks_[s];
      for (uint32_t t = 0; t < rs.open.size(); ++t) {
        if (rs.open[t].depth == 0) continue;
        error(rs.open[t].loc, "group_start on rank " + std::to_string(rs.rank) + thread_words(t) +
                                  " has no matching group_end");
      }
    }
  }

  // Sorts the line's members by key; reports duplicates. False when there was one.
  bool sort_keys(LineKeys& keys) {
    bool ok = true;
    for (const JsonMember& member : members_) {
      bool known = false;
      const Key key = find_key(member.key, known);
      if (!known) {
        keys.unknown.push_back(&member);
        continue;
      }
      const JsonMember*& slot = keys.member[static_cast<size_t>(key)];
      if (slot != nullptr) {
        report_duplicate(member, slot->col);
        ok = false;
        continue;
      }
      slot = &member;
    }
    return ok;
  }

  const OpSpec* op_of(const LineKeys& keys) {
    const JsonMember* op = keys.get(Key::OP);
    if (op == nullptr) {
      error({line_, 1}, "missing required key 'op'");
      return nullptr;
    }
    if (!expect_kind(op->value, JsonKind::STRING, "an operation name")) return nullptr;
    if (const OpSpec* spec = find_op(op->value.text)) return spec;
    if (op->value.text == GROUP_START) return &GROUP_START_SPEC;
    if (op->value.text == GROUP_END) return &GROUP_END_SPEC;
    const std::vector<std::string> names = op_line_names();
    error(at(op->value), unknown_message("operation", op->value.text, "", names, names));
    return nullptr;
  }

  std::optional<int32_t> line_rank(const LineKeys& keys) {
    const JsonMember* rank = keys.get(Key::RANK);
    if (rank == nullptr) {
      error({line_, 1}, "missing required key 'rank'");
      return std::nullopt;
    }
    return rank_of(rank->value);
  }

  // Reports arguments the op does not take, unknown keys and missing required arguments.
  bool check_args(const OpSpec& spec, const LineKeys& keys) {
    bool ok = true;
    const auto valid = [&] {
      const std::vector<std::string> names = arg_names(spec.args);
      return names.empty() ? std::string("none") : join(sorted(names));
    };
    for (size_t i = static_cast<size_t>(Key::GROUP); i < KEY_COUNT; ++i) {
      const JsonMember* member = keys.member[i];
      if (member == nullptr || (spec.args & (KeySet{1} << i)) != 0) continue;
      error(at(*member), quoted(spec.name) + " takes no argument " + quoted(member->key) +
                             "; valid arguments: " + valid());
      ok = false;
    }
    if (!keys.unknown.empty()) {
      const std::vector<std::string> known(KEY_NAMES.begin(), KEY_NAMES.end());
      for (const JsonMember* member : keys.unknown) {
        error(at(*member), "unknown argument " + quoted(member->key) + " for " +
                               quoted(spec.name) + did_you_mean(member->key, known) +
                               "; valid arguments: " + valid());
      }
      return false;  // a misspelt argument: missing ones go unreported
    }
    for (size_t i = static_cast<size_t>(Key::GROUP); i < KEY_COUNT; ++i) {
      if ((spec.required & (KeySet{1} << i)) == 0 || keys.member[i] != nullptr) continue;
      error(at(*keys.get(Key::OP)), quoted(spec.name) + " requires argument " +
                                        quoted(KEY_NAMES[i]));
      ok = false;
    }
    return ok;
  }

  // Finds (or makes) the rank's state and the thread of the line; false when the thread is bad.
  bool place(int32_t rank, const LineKeys& keys) {
    enter_rank(rank);
    std::string_view name = "main";
    const JsonMember* thread = keys.get(Key::THREAD);
    if (thread != nullptr) {
      const std::optional<std::string_view> given = name_of(thread->value, "thread");
      if (!given) return false;
      name = *given;
    }
    const SourceLoc op_loc = at(*keys.get(Key::OP));
    return place_thread(rank, name, thread != nullptr ? at(thread->value) : op_loc, op_loc);
  }

  // Makes the rank's state the current one (made on its first line).
  [[gnu::always_inline]] void enter_rank(int32_t rank) {
    int32_t& state = state_of_rank_[static_cast<size_t>(rank)];
    if (state < 0) {
      state = static_cast<int32_t>(ranks_.size());
      ranks_.emplace_back().rank = rank;
    }
    current_state_ = static_cast<uint32_t>(state);
  }

  // The thread `name` of the current rank state (made on its first line); false when the rank
  // has too many threads (reported at `name_loc`).
  [[gnu::always_inline]] bool place_thread(int32_t rank, std::string_view name, SourceLoc name_loc, SourceLoc op_loc) {
    const RankState& rs = ranks_[current_state_];
    if (rs.last_thread < rs.program.size()) {
      // Compared in line: a thread name is short, and a call to memcmp cost more than this.
      const std::string& last = rs.program[rs.last_thread].name;
      bool same_name = last.size() == name.size();
      for (size_t i = 0; same_name && i < name.size(); ++i) same_name = last[i] == name[i];
      if (same_name) {
        current_thread_ = rs.last_thread;
        return true;
      }
    }
    return place_other_thread(rank, name, name_loc, op_loc);
  }

  // place_thread when the thread is not the rank's last one.
  [[gnu::noinline]] bool place_other_thread(int32_t rank, std::string_view name, SourceLoc name_loc,
                                            SourceLoc op_loc) {
    RankState& rs = ranks_[current_state_];
    const size_t found = thread_index(rs, name);
    if (found == SIZE_MAX && rs.program.size() >= MAX_TRACE_THREADS_PER_RANK) {
      error(name_loc, "rank " + std::to_string(rank) + " has more than the limit of " +
                          std::to_string(MAX_TRACE_THREADS_PER_RANK) + " threads");
      return false;
    }
    current_thread_ = found == SIZE_MAX ? add_thread(rs, name, op_loc) : static_cast<uint32_t>(found);
    rs.last_thread = current_thread_;
    rs.last_is_main = rs.program[current_thread_].name == "main";
    return true;
  }

  // The index of `rs`'s thread `name`, or SIZE_MAX when it has none.
  static size_t thread_index(const RankState& rs, std::string_view name) {
    const auto found = std::find_if(rs.program.begin(), rs.program.end(),
                                    [&](const ThreadDef& t) { return t.name == name; });
    return found == rs.program.end() ? SIZE_MAX : static_cast<size_t>(found - rs.program.begin());
  }

  // A new thread `name` of `rs`, first named by the operation at `op_loc`; its index.
  uint32_t add_thread(RankState& rs, std::string_view name, SourceLoc op_loc) {
    rs.program.push_back(ThreadDef{std::string(name), op_loc});
    rs.open.emplace_back();
    auto& recorded = *rs.recorded.emplace_back(std::make_shared<RecordedBody>());
    recorded.ops = std::vector<RecordedOp, StmtAllocator<RecordedOp>>(StmtAllocator<RecordedOp>(ops_arena()));
    recorded.arena = stmt_arena();
    // A rank's first thread gets the average share of the file's lines up front: growing
    // a million statements by doubling cost a tenth of the load (copies and page faults).
    // Its pages are backed at once: a page fault per 4 KiB of statements was a sixth.
    // On a large trace, the statements of every rank come from one arena in huge pages
    // (StmtArena): backing and freeing them by 4 KiB pages was most of the load.
    if (rs.program.size() == 1) {
      recorded.ops.reserve(expected_ops_per_rank());
      // In the arena a thread of its own backs the pages (make_arenas); on the heap, here.
      if (ops_arena_ == nullptr || !ops_arena_->owns(recorded.ops.data())) {
        populate_pages(recorded.ops.data(), recorded.ops.capacity() * sizeof(RecordedOp));
      }
    }
    return static_cast<uint32_t>(rs.program.size() - 1);
  }

  // Loads the arguments into `stmt` (the group first: peers and roots are checked against it).
  bool load_args(const LineKeys& keys, Stmt& stmt, int32_t rank) {
    bool ok = true;
    bool group_known = true;
    if (const JsonMember* group = keys.get(Key::GROUP)) {
      ok = load_group(group->value, stmt, rank, group_known);
    } else if (is_collective(stmt.op) || is_p2p(stmt.op)) {
      group_used_[0] = true;
    }
    for (size_t i = static_cast<size_t>(Key::SIZE); i < KEY_COUNT; ++i) {
      if (keys.member[i] == nullptr) continue;
      ok = load_arg(static_cast<Key>(i), keys.member[i]->value, stmt) && ok;
    }
    if (stmt.op == OpKind::NEW_GROUP) ok = load_new_group(keys, stmt, rank) && ok;
    if (stmt.op == OpKind::BARRIER) stmt.size = Expr::constant(dtype_bytes(stmt.dtype), stmt.loc);
    if (ok && group_known && rank >= 0 && (is_collective(stmt.op) || is_p2p(stmt.op))) {
      ok = check_members(stmt, rank, keys.get(Key::GROUP));
    }
    return ok;
  }

  bool load_arg(Key key, const JsonValue& value, Stmt& stmt) {
    switch (key) {
      case Key::SIZE: return load_expr(value, "a size in bytes", "size", stmt.size);
      case Key::DURATION: return load_expr(value, "a duration in nanoseconds", "duration", stmt.duration);
      case Key::DTYPE: return load_dtype(value, stmt);
      case Key::ROOT: return load_rank_expr(value, stmt.set_extra().root, stmt.has_root);
      case Key::TO: return load_rank_expr(value, stmt.peer, stmt.has_peer);
      case Key::FROM: return load_from(value, stmt);
      case Key::TAG: return load_string(value, "tag", stmt.tag);
      case Key::STREAM: return load_string(value, "stream", stmt.stream);
      case Key::ASYNC: return load_async(value, stmt);
      case Key::HANDLE: return load_wait(value, stmt);
      case Key::RANK: case Key::OP: case Key::THREAD: case Key::GROUP:
      case Key::NAME: case Key::RANKS: return true;  // see load_args
    }
    return true;
  }

  bool load_expr(const JsonValue& value, std::string_view what, std::string_view name, Expr& out) {
    const std::optional<int64_t> number = integer_of(value, what, name, 0);
    if (number) out = Expr::constant(*number, at(value));
    return number.has_value();
  }

  bool load_rank_expr(const JsonValue& value, Expr& out, bool& has) {
    const std::optional<int32_t> rank = rank_of(value);
    if (rank) {
      out = Expr::constant(*rank, at(value));
      has = true;
    }
    return rank.has_value();
  }

  bool load_from(const JsonValue& value, Stmt& stmt) {
    if (value.kind != JsonKind::STRING) return load_rank_expr(value, stmt.peer, stmt.has_peer);
    if (value.text == "any") {
      stmt.has_peer = true;
      stmt.peer_any = true;
      stmt.peer = Expr::constant(0, at(value));
      return true;
    }
    error(at(value), "expected a rank or \"any\", got the string " + quoted(value.text));
    return false;
  }

  bool load_string(const JsonValue& value, std::string_view key, Name& out) {
    const std::optional<std::string_view> text = name_of(value, key);
    if (text) out = scenario_.names->intern(*text);
    return text.has_value();
  }

  bool load_dtype(const JsonValue& value, Stmt& stmt) {
    if (!expect_kind(value, JsonKind::STRING, "a string")) return false;
    if (const std::optional<DType> dtype = parse_dtype(value.text)) {
      stmt.dtype = *dtype;
      return true;
    }
    error(at(value), invalid_value_message(value.text, "dtype", dtype_spellings()));
    return false;
  }

  // Handles are per rank: a wait needs an `async` with its handle earlier in its own thread, or
  // anywhere in another thread of the rank (checked at the end).
  bool load_async(const JsonValue& value, Stmt& stmt) {
    if (!load_string(value, "async", stmt.handle)) return false;
    if (placed_) {
      std::vector<uint32_t>& threads = ranks_[current_state_].handles[stmt.handle.str()];
      if (std::find(threads.begin(), threads.end(), current_thread_) == threads.end()) {
        threads.push_back(current_thread_);
      }
    }
    return true;
  }

  bool load_wait(const JsonValue& value, Stmt& stmt) {
    if (!load_string(value, "handle", stmt.handle)) return false;
    if (!placed_) return true;
    const RankState& rs = ranks_[current_state_];
    const auto found = rs.handles.find(stmt.handle.str());
    if (found == rs.handles.end() ||
        std::find(found->second.begin(), found->second.end(), current_thread_) ==
            found->second.end()) {
      pending_waits_.push_back({current_state_, current_thread_, stmt.handle.str(), at(value)});
    }
    return true;
  }

  void check_wait(const PendingWait& wait) {
    const RankState& rs = ranks_[wait.state];
    const auto found = rs.handles.find(wait.handle);
    const std::string who =
        "rank " + std::to_string(rs.rank) + " waits on handle " + quoted(wait.handle);
    if (found == rs.handles.end()) {
      std::vector<std::string> issued;
      for (const auto& [handle, threads] : rs.handles) issued.push_back(handle);
      error(wait.loc, who + " that it never issues with async" + did_you_mean(wait.handle, issued));
    } else if (found->second.size() == 1 && found->second.front() == wait.thread) {
      error(wait.loc, who + " before its thread issues it (async) at a later line");
    }
  }

  // ----- groups

  // The group of an op. An unknown name may still be made by a later new_group line (of
  // another thread): it is checked at the end (`known` false).
  bool load_group(const JsonValue& value, Stmt& stmt, int32_t rank, bool& known) {
    const std::optional<std::string_view> name = name_of(value, "group");
    if (!name) return false;
    const auto found = group_index_.find(*name);
    if (found == group_index_.end()) {
      known = false;
      pending_unknown_ = true;
      pending_name_ = std::string(*name);
      pending_loc_ = at(value);
      return true;
    }
    stmt.group = found->second;
    group_used_[stmt.group] = true;
    const GroupDef& group = scenario_.groups[stmt.group];
    if (!group.from_new_group || rank < 0 || created_here(rank, stmt.group)) return true;
    pending_unknown_ = false;
    pending_name_ = group.name;  // this rank makes it later, or in another thread
    pending_loc_ = at(value);
    return true;
  }

  // Whether `rank` made `group` with new_group on an earlier line of the current thread, or on
  // any line of another thread so far.
  bool created_here(int32_t rank, uint32_t group) const {
    const int32_t state = state_of_rank_[static_cast<size_t>(rank)];
    if (state < 0) return false;
    return find_created(ranks_[static_cast<size_t>(state)], group) != nullptr;
  }

  // The rank's new_group of `group`, or null (RankState::created is sorted by group).
  static const CreatedGroup* find_created(const RankState& rs, uint32_t group) {
    const auto found = std::lower_bound(
        rs.created.begin(), rs.created.end(), group,
        [](const CreatedGroup& c, uint32_t g) { return c.group < g; });
    return found != rs.created.end() && found->group == group ? &*found : nullptr;
  }

  void commit_pending() {
    RecordedBody& body = recorded();
    const OpenGroup& group = open_group();
    const size_t stmt = group.depth > 0 ? group.stmt : body.ops.size() - 1;
    const size_t inner = group.depth > 0 ? side_stmt(body, group.stmt).body.size() - 1 : SIZE_MAX;
    pending_.push_back({current_state_, current_thread_, stmt, inner, std::move(pending_name_),
                        pending_loc_, pending_unknown_});
    pending_name_.clear();
  }

  // The issuing rank, the peer and the root must be members of the op's group.
  bool check_members(const Stmt& stmt, int32_t rank, const JsonMember* group_member) {
    const GroupDef& group = scenario_.groups[stmt.group];
    if (stmt.group == 0 || !group.single()) return true;
    const auto not_member = [&](int64_t r) {
      return group.comm_for(static_cast<int32_t>(r)) == nullptr;
    };
    const auto report = [&](int64_t r, SourceLoc loc) {
      error(loc, "rank " + std::to_string(r) + " is not a member of group " + quoted(group.name) +
                     " (ranks " + format_ranks(group.comms.front()) + ")");
    };
    bool ok = true;
    if (not_member(rank)) {
      report(rank, group_member != nullptr ? at(group_member->value) : stmt.loc);
      ok = false;
    }
    if (stmt.has_peer && !stmt.peer_any && not_member(stmt.peer.value)) {
      report(stmt.peer.value, stmt.peer.loc);
      ok = false;
    }
    if (stmt.has_root && not_member(stmt.extra().root.value)) {
      report(stmt.extra().root.value, stmt.extra().root.loc);
      ok = false;
    }
    return ok;
  }

  // A new_group line: the group is made by its first line; later lines (of other ranks) must
  // give the same ranks, and no rank may make a name twice.
  bool load_new_group(const LineKeys& keys, Stmt& stmt, int32_t rank) {
    const JsonMember* name_member = keys.get(Key::NAME);
    const JsonMember* ranks_member = keys.get(Key::RANKS);
    if (name_member == nullptr || ranks_member == nullptr) return false;
    const std::optional<std::string_view> name = name_of(name_member->value, "name");
    if (!name || !check_group_name(*name, at(name_member->value))) return false;
    std::optional<std::vector<int32_t>> ranks = ranks_of(ranks_member->value, *name);
    if (!ranks) return false;
    const auto found = group_index_.find(*name);
    uint32_t index = 0;
    if (found == group_index_.end()) {
      if (!check_group_bound(at(name_member->value))) return false;
      GroupDef group = make_group(std::string(*name), at(name_member->value), std::move(*ranks),
                                  scenario_.world);
      group.from_new_group = true;
      index = add_group(std::move(group));
      group_used_[index] = true;
    } else {
      index = found->second;
      if (!same_new_group(index, *ranks, at(*name_member), at(ranks_member->value))) return false;
    }
    stmt.new_group = index;
    stmt.group = 0;
    return rank < 0 || record_creation(rank, index, at(name_member->value));
  }

  bool same_new_group(uint32_t index, const std::vector<int32_t>& ranks, SourceLoc name_loc,
                      SourceLoc ranks_loc) {
    const GroupDef& group = scenario_.groups[index];
    if (!group.from_new_group) {
      error(name_loc, "new_group name " + quoted(group.name) + " is already a group of the header");
      return false;
    }
    if (group.comms.front() == ranks) return true;
    error(ranks_loc, "new_group " + quoted(group.name) + " has ranks " + format_ranks(ranks) +
                         " here but ranks " + format_ranks(group.comms.front()) + " at line " +
                         std::to_string(group.loc.line));
    return false;
  }

  bool record_creation(int32_t rank, uint32_t group, SourceLoc loc) {
    const int32_t state = state_of_rank_[static_cast<size_t>(rank)];
    if (state < 0) return true;  // the line's thread was bad: reported already
    RankState& rs = ranks_[static_cast<size_t>(state)];
    if (const CreatedGroup* first = find_created(rs, group)) {
      error(loc, "rank " + std::to_string(rank) + " makes group " +
                     quoted(scenario_.groups[group].name) + " a second time (first at line " +
                     std::to_string(first->line) + ")");
      return false;
    }
    const auto at_group = std::lower_bound(
        rs.created.begin(), rs.created.end(), group,
        [](const CreatedGroup& c, uint32_t g) { return c.group < g; });
    rs.created.insert(at_group, {group, current_thread_, line_});
    return true;
  }

  // ----- the end of the file

  void finish() {
    check_groups_closed();
    for (PendingUse& use : pending_) resolve(use);
    for (const PendingWait& wait : pending_waits_) check_wait(wait);
    RankProgram empty;
    std::sort(ranks_.begin(), ranks_.end(),
              [](const RankState& a, const RankState& b) { return a.rank < b.rank; });
    scenario_.rank_program.assign(static_cast<size_t>(scenario_.world), 0);
    for (RankState& rs : ranks_) {
      scenario_.rank_program[static_cast<size_t>(rs.rank)] =
          static_cast<uint32_t>(scenario_.programs.size());
      for (size_t t = 0; t < rs.program.size(); ++t) rs.program[t].set_recorded(std::move(rs.recorded[t]));
      scenario_.programs.push_back(std::move(rs.program));
    }
    if (ranks_.size() < static_cast<size_t>(scenario_.world)) {
      const auto index = static_cast<uint32_t>(scenario_.programs.size());
      scenario_.programs.emplace_back();
      for (size_t r = 0; r < state_of_rank_.size(); ++r) {
        if (state_of_rank_[r] < 0) scenario_.rank_program[r] = index;
      }
    }
    scenario_.slot_names = {"rank", "world"};
    scenario_.group_link.assign(scenario_.groups.size(), std::nullopt);
    if (errors_ == 0) warn_unused();
  }

  void resolve(PendingUse& use) {
    RankState& rs = ranks_[use.state];
    Stmt& outer = side_stmt(*rs.recorded[use.thread], use.stmt);
    Stmt& stmt = use.inner == SIZE_MAX ? outer : outer.body[use.inner];
    line_ = stmt.loc.line;
    const auto found = group_index_.find(use.name);
    if (found == group_index_.end()) {
      std::vector<std::string> names;
      for (const GroupDef& group : scenario_.groups) names.push_back(group.name);
      error(use.loc, "unknown group " + quoted(use.name) + did_you_mean(use.name, names) +
                         "; groups: " + join(names));
      return;
    }
    stmt.group = found->second;
    group_used_[stmt.group] = true;
    const GroupDef& group = scenario_.groups[stmt.group];
    if (group.from_new_group && !check_created(rs, use, stmt)) return;
    if (use.unknown) check_members(stmt, rs.rank, nullptr);
  }

  bool check_created(const RankState& rs, const PendingUse& use, const Stmt& stmt) {
    const CreatedGroup* created = find_created(rs, stmt.group);
    const std::string who = "rank " + std::to_string(rs.rank) + " uses group " + quoted(use.name);
    if (created == nullptr) {
      error(use.loc, who + " but never makes it with new_group");
      return false;
    }
    if (created->thread == use.thread && created->line > use.loc.line) {
      error(use.loc, who + " before its new_group at line " + std::to_string(created->line));
      return false;
    }
    return true;
  }

  // ----- the second part: a large trace's lines on two threads

  // A large trace is read by two loaders at once: this one from the first operation line to the
  // middle of the file, and a part loader (a TraceLoader of its own, on a thread of its own)
  // from there to the end, by the fast path only, up to the first line it does not take. When
  // this one reaches the middle, it takes the part's ranks, threads and records as if it had
  // read those lines itself (take_part), then reads on from where the part stopped; or, when
  // its own lines would have the part's read otherwise, reads them itself. The part takes only
  // lines whose meaning depends on nothing before them but the header and what take_part
  // checks: operations of a group of the header, without a thread (so of thread "main"), tag,
  // stream or handle, on lines shorter than 65,536 bytes, and blank lines.
  struct Part {
    std::unique_ptr<TraceLoader> loader;
    std::atomic<bool> cancel = false;  // set when this loader stops before the part's start
    bool failed = false;               // the part threw (out of memory): its lines are read here
    std::thread thread;
    Part() = default;
    Part(const Part&) = delete;
    Part& operator=(const Part&) = delete;
    ~Part() {
      cancel = true;
      if (thread.joinable()) thread.join();
    }
  };
  struct PartOf {};

  // A part loader of `main` (after its header), whose operations may number `max_ops`.
  TraceLoader(const TraceLoader& main, PartOf /*tag*/, int64_t max_ops)
      : source_(main.source_), text_(main.text_), path_(main.path_), limits_(main.limits_) {
    limits_.max_ops = max_ops;
    scenario_.world = main.scenario_.world;
    scenario_.groups = main.scenario_.groups;  // copies: `main` adds groups as it reads on
    group_index_ = main.group_index_;
    group_used_.assign(main.group_used_.size(), false);
    state_of_rank_.assign(main.state_of_rank_.size(), -1);
    expected_ops_per_rank_ = main.expected_ops_per_rank_;
    line_count_ = main.line_count_;
    ops_arena_ = main.ops_arena_;
    stmt_arena_ = main.stmt_arena_;
    arenas_made_ = true;
    stop_ = text_.size();
    in_part_ = true;
  }

  // After the header (whose line ends before `pos`, in a text that ends in a newline): starts a
  // part loader on the second half of the lines when the trace is large enough.
  void start_part(size_t pos) {
    if (!fast_path_ || limits_.trace_split_bytes <= 0 || std::thread::hardware_concurrency() == 1 ||
        text_.size() - pos < static_cast<uint64_t>(limits_.trace_split_bytes)) {
      return;
    }
    const size_t newline = text_.find('\n', pos + (text_.size() - pos) / 2);
    if (newline == std::string_view::npos || newline + 1 >= text_.size()) return;
    const size_t split = newline + 1;
    const size_t before = count_newlines(text_.substr(0, split));  // the lines before the part
    if (line_count_ == SIZE_MAX) line_count_ = before + count_newlines(text_.substr(split));
    // This loader takes at most one operation per line before the part.
    const int64_t part_ops = limits_.max_ops - static_cast<int64_t>(before);
    if (line_count_ >= UINT32_MAX || part_ops <= 0) return;
    expected_ops_per_rank();
    ops_arena();  // made before the part takes from it
    auto part = std::make_unique<Part>();
    part->loader.reset(new TraceLoader(*this, PartOf{}, part_ops));
    Part* const p = part.get();
    try {
      p->thread = std::thread([p, split, before] {
        try {
          p->loader->read_part(split, static_cast<uint32_t>(before), p->cancel);
        } catch (...) {
          p->failed = true;
        }
      });
    } catch (const std::system_error&) {
      return;  // no thread: this loader reads every line
    }
    part_ = std::move(part);
    stop_ = split;
  }

  // The part loader's work: the lines from `pos` (whose first has number `line` + 1) by the
  // fast path, and blank lines, up to the first line it does not take or the end.
  void read_part(size_t pos, uint32_t line, const std::atomic<bool>& cancel) {
    while (pos < text_.size()) {
      if (line % 4096 == 0 && cancel.load(std::memory_order_relaxed)) break;
      line_ = line + 1;
      size_t length = 0;
      if (!fast_op_line<false>(std::string_view(text_.data() + pos, text_.size() - pos), length)) {
        size_t next = pos;
        std::string_view text;
        next_line(next, text);
        if (!is_blank(text)) break;
        length = next - pos;
      }
      ++line;
      pos += length;
    }
    part_pos_ = pos;
    part_line_ = line;
  }

  // At the part's start (`pos`, after `line` lines): waits for the part, takes its lines when
  // this loader's state lets it, and moves `pos` and `line` past them.
  void take_part(size_t& pos, uint32_t& line) {
    const std::unique_ptr<Part> part = std::move(part_);
    stop_ = text_.size();
    part->thread.join();
    if (part->failed || !merge_part(*part->loader)) return;
    pos = part->loader->part_pos_;
    part_lines_ = part->loader->part_line_ - line;
    line = part->loader->part_line_;
  }

  // Takes the ranks, threads and records of `part` as reading its lines here would have made
  // them; false (and nothing changed) when those lines would be read otherwise here: into an
  // NCCL group left open, or making a thread past a rank's limit.
  bool merge_part(TraceLoader& part) {
    for (const RankState& from : part.ranks_) {
      const int32_t state = state_of_rank_[static_cast<size_t>(from.rank)];
      if (state < 0) continue;
      const RankState& into = ranks_[static_cast<size_t>(state)];
      const size_t main = thread_index(into, "main");
      if (main == SIZE_MAX ? into.program.size() >= MAX_TRACE_THREADS_PER_RANK : into.open[main].depth != 0) {
        return false;
      }
    }
    // (The current rank, thread and `placed_` are the line's: the next line sets them.)
    for (RankState& from : part.ranks_) {
      int32_t& state = state_of_rank_[static_cast<size_t>(from.rank)];
      if (state < 0) {
        state = static_cast<int32_t>(ranks_.size());
        ranks_.push_back(std::move(from));
        continue;
      }
      RankState& into = ranks_[static_cast<size_t>(state)];
      size_t main = thread_index(into, "main");
      if (main == SIZE_MAX) main = add_thread(into, "main", from.program[0].loc);
      auto& ops = into.recorded[main]->ops;
      const auto& more = from.recorded[0]->ops;
      ops.reserve(ops.size() + more.size());
      ops.insert(ops.end(), more.begin(), more.end());
      into.last_thread = static_cast<uint32_t>(main);
      into.last_is_main = true;
    }
    ops_ += part.ops_;
    for (size_t i = 0; i < part.group_used_.size(); ++i) {
      if (part.group_used_[i]) group_used_[i] = true;
    }
    return true;
  }

  void warn_unused() {
    for (size_t i = 1; i < scenario_.groups.size(); ++i) {
      if (group_used_[i]) continue;
      warning(scenario_.groups[i].loc,
              "group " + quoted(scenario_.groups[i].name) + " is never used");
    }
  }

  SourceText source_;
  std::string_view text_;  // source_
  std::string path_;
  std::span<const ParamOverride> overrides_;
  LoadLimits limits_;
  std::vector<Diagnostic> diagnostics_;
  size_t errors_ = 0;
  Scenario scenario_;

  JsonLineReader reader_;
  std::vector<JsonMember> members_;  // of the current line
  uint32_t line_ = 0;                // the current line
  int64_t ops_ = 0;

  std::map<std::string, uint32_t, std::less<>> group_index_;
  std::vector<bool> group_used_;
  std::vector<int32_t> state_of_rank_;  // size world: index into ranks_, -1 without lines
  size_t expected_ops_per_rank_ = SIZE_MAX;  // lines / world, counted on first use

  size_t expected_ops_per_rank() {
    if (expected_ops_per_rank_ == SIZE_MAX) {
      expected_ops_per_rank_ = count_lines() / static_cast<size_t>(std::max(scenario_.world, 1)) + 1;
    }
    return expected_ops_per_rank_;
  }
  size_t line_count_ = SIZE_MAX;  // newlines in the text, counted on first use
  size_t count_lines() {
    if (line_count_ == SIZE_MAX) line_count_ = count_newlines(text_);
    return line_count_;
  }
  // The arenas of the threads' ops and of their statements when made: room for one of each
  // per line and one per rank (what the first threads reserve, and more), made on first use;
  // none for a small trace, where a 2 MiB page would cost more than it saves. The statements'
  // is only address space until the statements are made.
  static constexpr size_t MIN_ARENA_BYTES = size_t{8} << 20;
  std::shared_ptr<StmtArena> make_arena(size_t bytes_per_line) {
    const size_t bytes = (count_lines() + static_cast<size_t>(std::max(scenario_.world, 1))) * bytes_per_line;
    return bytes >= MIN_ARENA_BYTES ? std::make_shared<StmtArena>(bytes) : nullptr;
  }
  std::shared_ptr<StmtArena> ops_arena() {
    if (!arenas_made_) make_arenas();
    return ops_arena_;
  }
  std::shared_ptr<StmtArena> stmt_arena() {
    if (!arenas_made_) make_arenas();
    return stmt_arena_;
  }
  void make_arenas() {
    arenas_made_ = true;
    ops_arena_ = make_arena(sizeof(RecordedOp));
    // The ops are written front to back (a rank's first line reserves its share next), and
    // all of the arena is used: its pages are backed ahead of the writes, beside them.
    if (ops_arena_ != nullptr) ops_arena_->populate_in_background();
    stmt_arena_ = make_arena(sizeof(Stmt));
  }
  std::shared_ptr<StmtArena> ops_arena_;
  std::shared_ptr<StmtArena> stmt_arena_;
  bool arenas_made_ = false;
  std::vector<RankState> ranks_;        // in order of first line
  uint32_t current_state_ = 0;
  uint32_t current_thread_ = 0;
  Stmt scratch_;                        // an op of a line that has errors
  std::string pending_name_;            // the current line's group, to check at the end
  SourceLoc pending_loc_;
  bool pending_unknown_ = false;
  std::vector<PendingUse> pending_;
  std::vector<PendingWait> pending_waits_;
  bool placed_ = false;                 // the current line's op goes into ranks_[current_state_]
  bool fast_path_ = true;               // try fast_op_line first (LoadLimits::trace_fast_path)
  size_t stop_ = 0;                     // where this loader's lines end for now (next_line)
  std::unique_ptr<Part> part_;          // the second part while it is read (start_part)
  bool in_part_ = false;                // this is a part loader
  size_t part_pos_ = 0;                 // a part loader's end: the first line it did not take
  uint32_t part_line_ = 0;              // and the lines before it
  uint64_t part_lines_ = 0;             // the lines a part read, taken (LoadResult::trace_part_lines)
  std::string_view last_dtype_name_;    // the fast path's last dtype (a view into the text)
  DType last_dtype_ = DType::BF16;
  std::string last_group_name_;         // the fast path's last group name and its index
  uint32_t last_group_ = 0;
};


// ---------------------------------------------------------------------------------------------
// The writer.

void write_integer(int64_t value, std::string& out) {
  std::array<char, 24> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  out.append(buffer.data(), result.ptr);
}

// Appends `, "key": ` (or `{"key": ` for the first key of an object).
void write_key(std::string_view key, bool& first, std::string& out) {
  out += first ? "{\"" : ", \"";
  first = false;
  out += key;
  out += "\": ";
}

void write_ranks(const std::vector<int32_t>& ranks, std::string& out) {
  out += '[';
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    write_integer(ranks[i], out);
  }
  out += ']';
}

void write_semantics(const Scenario& s, std::string& out) {
  const Semantics defaults;
  const Semantics& sem = s.semantics;
  const Link default_link;
  std::string body;
  bool first = true;
  for (const SemanticsSetting& setting : semantics_settings()) {
    const int64_t value = setting.get(sem);
    if (value == setting.get(defaults)) continue;
    write_key(setting.trace_key, first, body);
    switch (setting.kind) {
      case SettingKind::CHOICE: append_json_string(setting.choices[static_cast<size_t>(value)], body); break;
      case SettingKind::FLAG: body += value != 0 ? "true" : "false"; break;
      case SettingKind::BYTES:
      case SettingKind::COUNT:
      case SettingKind::DURATION: write_integer(value, body); break;
    }
  }
  if (s.link.latency_ns != default_link.latency_ns ||
      s.link.bandwidth_bytes_per_s != default_link.bandwidth_bytes_per_s) {
    write_key("link", first, body);
    body += "{\"latency_ns\": ";
    write_integer(s.link.latency_ns, body);
    body += ", \"bandwidth_bytes_per_s\": ";
    write_integer(std::llround(s.link.bandwidth_bytes_per_s), body);
    body += '}';
  }
  if (first) return;
  out += ", \"semantics\": ";
  out += body;
  out += '}';
}

void write_header(const Scenario& s, std::string& out) {
  bool first = true;
  write_key("lockstep_trace", first, out);
  write_integer(TRACE_FORMAT_VERSION, out);
  write_key("scenario", first, out);
  append_json_string(s.name, out);
  if (!s.description.empty()) {
    write_key("description", first, out);
    append_json_string(s.description, out);
  }
  if (!s.source_url.empty()) {
    write_key("source", first, out);
    append_json_string(s.source_url, out);
  }
  if (s.expect) {
    write_key("expect", first, out);
    append_json_string(verdict_name(*s.expect), out);
  }
  write_key("world", first, out);
  write_integer(s.world, out);
  bool first_group = true;
  for (size_t g = 1; g < s.groups.size(); ++g) {
    if (s.groups[g].from_new_group) continue;
    out += first_group ? ", \"groups\": {" : ", ";
    first_group = false;
    append_json_string(s.groups[g].name, out);
    out += ": ";
    write_ranks(s.groups[g].comms.front(), out);
  }
  if (!first_group) out += '}';
  write_semantics(s, out);
  out += "}\n";
}

// `{"rank": R, "thread": T, "op": ` (the thread left out when it is main).
void write_line_start(int32_t rank, const ThreadDef& thread, bool& first, std::string& out) {
  write_key("rank", first, out);
  write_integer(rank, out);
  if (thread.name != "main") {
    write_key("thread", first, out);
    append_json_string(thread.name, out);
  }
  write_key("op", first, out);
}

void write_op(const Scenario& s, int32_t rank, const ThreadDef& thread, const Stmt& stmt,
              std::string& out) {
  bool first = true;
  write_line_start(rank, thread, first, out);
  if (stmt.kind == StmtKind::NCCL_GROUP) {
    append_json_string(GROUP_START, out);
    out += "}\n";
    for (const Stmt& op : stmt.body) write_op(s, rank, thread, op, out);
    first = true;
    write_line_start(rank, thread, first, out);
    append_json_string(GROUP_END, out);
    out += "}\n";
    return;
  }
  const KeySet args = spec_of(stmt.op).args;
  const auto takes = [&](Key key) { return (args & bit(key)) != 0; };
  append_json_string(op_kind_name(stmt.op), out);
  if (takes(Key::GROUP) && stmt.group != 0) {
    write_key("group", first, out);
    append_json_string(s.groups[stmt.group].name, out);
  }
  if (takes(Key::ROOT) && stmt.has_root) {
    write_key("root", first, out);
    write_integer(stmt.extra().root.value, out);
  }
  if ((takes(Key::TO) || takes(Key::FROM)) && stmt.has_peer) {
    write_key(takes(Key::TO) ? "to" : "from", first, out);
    if (stmt.peer_any) append_json_string("any", out);
    else write_integer(stmt.peer.value, out);
  }
  if (takes(Key::SIZE)) {
    write_key("size", first, out);
    write_integer(stmt.size.value, out);
  }
  if (takes(Key::DTYPE) && stmt.dtype != DType::BF16) {
    write_key("dtype", first, out);
    append_json_string(dtype_name(stmt.dtype), out);
  }
  for (const auto& [key, text] : {std::pair{Key::TAG, &stmt.tag}, std::pair{Key::STREAM, &stmt.stream},
                                  std::pair{Key::ASYNC, &stmt.handle}, std::pair{Key::HANDLE, &stmt.handle}}) {
    if (!takes(key) || text->empty()) continue;
    write_key(key_name(key), first, out);
    append_json_string(text->str(), out);
  }
  if (takes(Key::DURATION)) {
    write_key("duration_ns", first, out);
    write_integer(stmt.duration.value, out);
  }
  if (stmt.op == OpKind::NEW_GROUP) {
    const GroupDef& group = s.groups[stmt.new_group];
    write_key("name", first, out);
    append_json_string(group.name, out);
    write_key("ranks", first, out);
    write_ranks(group.comms.front(), out);
  }
  out += "}\n";
}

std::string body_problem(const Scenario& s, std::span<const Stmt> body, bool in_group = false) {
  for (const Stmt& stmt : body) {
    const std::string where = s.location(stmt.loc) + ": ";
    if (stmt.kind == StmtKind::NCCL_GROUP && !in_group) {
      std::string problem = body_problem(s, stmt.body, true);
      if (!problem.empty()) return problem;
      continue;
    }
    if (stmt.kind != StmtKind::OP) return where + "a statement other than an operation";
    if (in_group && !is_collective(stmt.op) && !is_p2p(stmt.op)) {
      return where + "an operation other than communication in an NCCL group";
    }
    if (in_group && !stmt.handle.empty()) return where + "an async operation in an NCCL group";
    for (const Expr* expr : {&stmt.size, &stmt.peer, &stmt.extra().root, &stmt.duration}) {
      if (!expr->is_constant()) return where + "an expression that is not a constant";
    }
    if (stmt.group >= s.groups.size()) return where + "an undefined group";
    if (stmt.op == OpKind::NEW_GROUP &&
        (stmt.new_group >= s.groups.size() || !s.groups[stmt.new_group].from_new_group)) {
      return where + "a new_group without its group";
    }
  }
  return "";
}

}  // namespace

bool is_trace_path(std::string_view path) {
  return path.size() >= 6 && path.substr(path.size() - 6) == ".jsonl";
}

LoadResult load_trace_file(const std::string& path, std::span<const ParamOverride> overrides,
                           const LoadLimits& limits) {
  return load_file_with(path, limits.max_file_bytes, [&](SourceText&& text) {
    return TraceLoader(std::move(text), path, overrides, limits).run();
  });
}

LoadResult load_trace_text(std::string_view text, const std::string& path,
                           std::span<const ParamOverride> overrides, const LoadLimits& limits) {
  return load_text_with(SourceText(std::string(text)), path, [&](SourceText&& owned) {
    return TraceLoader(std::move(owned), path, overrides, limits).run();
  });
}

std::string trace_write_problem(const Scenario& recorded) {
  if (recorded.world < 1) return "the scenario has no ranks";
  if (recorded.name.empty()) return "the scenario has no name";
  if (recorded.rank_program.size() != static_cast<size_t>(recorded.world)) {
    return "the scenario does not say which program each rank runs";
  }
  for (size_t g = 0; g < recorded.groups.size(); ++g) {
    const GroupDef& group = recorded.groups[g];
    if (!group.single() || group.mesh_dim >= 0) {
      return "group " + quoted(group.name) + " is not one communicator";
    }
    if (g < recorded.group_link.size() && recorded.group_link[g]) {
      return "group " + quoted(group.name) + " has its own link";
    }
  }
  for (const RankProgram& program : recorded.programs) {
    for (const ThreadDef& thread : program) {
      if (thread.name.empty()) return "a thread has no name";
      std::string problem = body_problem(recorded, thread.body());
      if (!problem.empty()) return problem;
    }
  }
  return "";
}

std::string write_trace(const Scenario& recorded) {
  assert(trace_write_problem(recorded).empty());
  std::string out;
  write_header(recorded, out);
  for (int32_t rank = 0; rank < recorded.world; ++rank) {
    for (const ThreadDef& thread : recorded.program_of(rank)) {
      for (const Stmt& stmt : thread.body()) write_op(recorded, rank, thread, stmt, out);
    }
  }
  return out;
}

void append_json_string(std::string_view text, std::string& out) {
  static constexpr std::string_view HEX = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20) {
      out += "\\u00";
      out += HEX[byte >> 4];
      out += HEX[byte & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace lockstep::sim
