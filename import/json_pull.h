// A pull reader of one JSON document held in memory: the caller walks objects and arrays and
// reads or skips each value, so a dump of millions of records is read without building a tree.
// Every error is an ImportError with the line and column of the offending byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "import/recorded.h"

namespace lockstep::import {

enum class JsonType : uint8_t { NUL, BOOL, NUMBER, STRING, ARRAY, OBJECT };

class JsonPull {
 public:
  // At most this many nested arrays and objects.
  static constexpr int MAX_DEPTH = 64;

  JsonPull(std::string_view text, std::string file);

  // The type of the next value (after spaces); an error at the end of the text or a bad byte.
  JsonType peek();
  // Object members: call begin_object(), then next_key() until it returns false (at '}').
  void begin_object();
  bool next_key(std::string_view& key);
  // Array items: begin_array(), then next_item() until false (at ']').
  void begin_array();
  bool next_item();

  // The next value as a string (escapes decoded; valid until the next read), an integer
  // (no fraction or exponent), a number, a boolean.
  std::string_view read_string();
  int64_t read_integer();
  double read_number();
  bool read_bool();
  void read_null();
  void skip_value();
  // After the document: only spaces may follow.
  void finish();

  // The position of the next value (1-based), for messages.
  sim::SourceLoc loc();
  const std::string& file() const { return file_; }
  [[noreturn]] void fail_here(const std::string& message);
  [[noreturn]] void fail_at(size_t offset, const std::string& message);

 private:
  void skip_space();
  std::string describe(size_t offset) const;
  void expect(char c, const char* what);

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  uint32_t line_ = 1;       // of pos_ (counted by skip_space)
  size_t line_start_ = 0;   // offset of the line's first byte
  int depth_ = 0;
  bool first_ = true;  // the next member/item is the first of its container
  std::string scratch_;
};

}  // namespace lockstep::import
