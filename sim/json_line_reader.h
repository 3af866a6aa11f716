// A JSON reader for one line of a trace: objects, arrays, strings, integers, other numbers,
// literals; every value with its column. Private to sim/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "sim/diagnostic.h"

namespace lockstep::sim::trace {

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

std::string type_name(const JsonValue& value);

class JsonLineReader {
 public:
  static constexpr int MAX_DEPTH = 8;

  // Parses `line` as one object into `members`. On failure error_col()/error_message() say why.
  bool read_object(std::string_view line, std::vector<JsonMember>& members);

  uint32_t error_col() const { return error_col_; }
  const std::string& error_message() const { return error_message_; }

 private:
  bool at(char c) const { return pos_ < line_.size() && line_[pos_] == c; }

  void skip_space();

  std::string describe_here() const;

  bool fail(size_t at_pos, std::string message);

  // After '{': members up to and including '}'.
  bool parse_members(std::vector<JsonMember>& members, int depth);

  // After '[': items up to and including ']'.
  bool parse_items(std::vector<JsonValue>& items, int depth);

  bool parse_value(JsonValue& out, int depth);

  bool parse_literal(JsonValue& out);

  bool parse_number(JsonValue& out);

  // The rest of a number with a fraction or an exponent; kept as text.
  bool parse_fraction(JsonValue& out, size_t start);

  // At '"': a string; escapes are decoded into storage that lives until the next line.
  bool parse_string(std::string_view& out);

  bool parse_escaped_string(std::string_view& out, size_t start);

  // At '\\': one escape, appended to `text` (UTF-8).
  bool parse_escape(std::string& text);

  bool hex4(uint32_t& value);

  bool parse_unicode_escape(std::string& text, size_t backslash);

  static void append_utf8(std::string& text, uint32_t code);

  std::string_view line_;
  size_t pos_ = 0;
  std::deque<std::string> decoded_;
  uint32_t error_col_ = 0;
  std::string error_message_;
};

}  // namespace lockstep::sim::trace
