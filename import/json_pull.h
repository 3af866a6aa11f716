// A pull reader of one JSON document held in memory: the caller walks objects and arrays and
// reads or skips each value, so a dump of millions of records is read without building a tree.
// Every error is an ImportError with the line and column of the offending byte.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
  // The hot paths are inline below (a dump is millions of tokens); errors and rare shapes are
  // out of line in json_pull.cc.
  void skip_space() {
    if (pos_ < text_.size() && static_cast<unsigned char>(text_[pos_]) > ' ') return;
    skip_space_slow();
  }
  void skip_space_slow();
  std::string describe(size_t offset) const;
  void expect(char c, const char* what) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) fail_expected(what);
    ++pos_;
  }
  [[noreturn]] void fail_expected(const char* what);
  [[noreturn]] void fail_depth();
  std::string_view read_string_slow(size_t open);
  int64_t read_integer_slow(size_t start);
  void skip_value_slow();
  // The offset of the first '"', '\\' or control character at or after `from` (size: none).
  size_t find_string_special(size_t from) const;

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  uint32_t line_ = 1;       // of pos_ (counted by skip_space)
  size_t line_start_ = 0;   // offset of the line's first byte
  int depth_ = 0;
  bool first_ = true;  // the next member/item is the first of its container
  std::string scratch_;
};

inline size_t JsonPull::find_string_special(size_t from) const {
  const char* p = text_.data();
  const size_t n = text_.size();
  size_t i = from;
#if defined(__SSE2__)
  // Sixteen bytes at a time: '"', '\\', or at most 0x1f (unsigned).
  const __m128i quotes = _mm_set1_epi8('"');
  const __m128i backslashes = _mm_set1_epi8('\\');
  const __m128i controls = _mm_set1_epi8(0x1f);
  while (i + 16 <= n) {
    const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i hits = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(chunk, quotes), _mm_cmpeq_epi8(chunk, backslashes)),
                                      _mm_cmpeq_epi8(_mm_min_epu8(chunk, controls), chunk));
    const auto mask = static_cast<uint32_t>(_mm_movemask_epi8(hits));
    if (mask != 0) return i + static_cast<size_t>(std::countr_zero(mask));
    i += 16;
  }
#endif
  if constexpr (std::endian::native == std::endian::little) {
    // Eight bytes at a time: the lowest flagged byte of each test is exact.
    constexpr uint64_t ONES = 0x0101010101010101ULL;
    constexpr uint64_t HIGHS = 0x8080808080808080ULL;
    while (i + 8 <= n) {
      uint64_t word = 0;
      std::memcpy(&word, p + i, 8);
      const uint64_t quote = word ^ (ONES * '"');
      const uint64_t backslash = word ^ (ONES * '\\');
      const uint64_t mask = ((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash) | ((word - ONES * 0x20) & ~word);
      if ((mask & HIGHS) != 0) return i + static_cast<size_t>(std::countr_zero(mask & HIGHS)) / 8;
      i += 8;
    }
  }
  for (; i < n; ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c == '"' || c == '\\' || c < 0x20) return i;
  }
  return n;
}

inline std::string_view JsonPull::read_string() {
  skip_space();
  if (pos_ < text_.size() && text_[pos_] == '"') {
    const size_t end = find_string_special(pos_ + 1);
    if (end < text_.size() && text_[end] == '"') {
      const std::string_view value = text_.substr(pos_ + 1, end - pos_ - 1);
      pos_ = end + 1;
      first_ = false;
      return value;
    }
  }
  return read_string_slow(pos_);
}

inline bool JsonPull::next_key(std::string_view& key) {
  skip_space();
  if (pos_ < text_.size() && text_[pos_] == '}') {
    ++pos_;
    --depth_;
    first_ = false;
    return false;
  }
  if (!first_) expect(',', "',' or '}'");
  first_ = false;
  skip_space();
  if (pos_ >= text_.size() || text_[pos_] != '"') fail_expected("a key");
  key = read_string();
  expect(':', "':'");
  return true;
}

inline bool JsonPull::next_item() {
  skip_space();
  if (pos_ < text_.size() && text_[pos_] == ']') {
    ++pos_;
    --depth_;
    first_ = false;
    return false;
  }
  if (!first_) expect(',', "',' or ']'");
  first_ = false;
  return true;
}

inline void JsonPull::begin_object() {
  skip_space();
  if (++depth_ > MAX_DEPTH) fail_depth();
  expect('{', "an object");
  first_ = true;
}

inline void JsonPull::begin_array() {
  skip_space();
  if (++depth_ > MAX_DEPTH) fail_depth();
  expect('[', "an array");
  first_ = true;
}

inline int64_t JsonPull::read_integer() {
  skip_space();
  const size_t start = pos_;
  const size_t n = text_.size();
  size_t i = pos_;
  uint64_t value = 0;
  // Up to 18 digits cannot overflow; longer numbers, signs and errors take the slow path.
  while (i < n && i - start < 18 && static_cast<unsigned>(text_[i] - '0') < 10) {
    value = value * 10 + static_cast<uint64_t>(text_[i] - '0');
    ++i;
  }
  if (i == start || i - start == 18 || (i < n && (text_[i] == '.' || text_[i] == 'e' || text_[i] == 'E' ||
                                                   static_cast<unsigned>(text_[i] - '0') < 10))) {
    return read_integer_slow(start);
  }
  pos_ = i;
  first_ = false;
  return static_cast<int64_t>(value);
}

inline void JsonPull::skip_value() {
  skip_space();
  if (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == '"') {
      read_string();
      return;
    }
    if (static_cast<unsigned>(c - '0') < 10) {
      // A number: checked for its shape only.
      size_t i = pos_ + 1;
      while (i < text_.size()) {
        const char d = text_[i];
        if (static_cast<unsigned>(d - '0') < 10 || d == '.' || d == 'e' || d == 'E' || d == '+' || d == '-') {
          ++i;
        } else {
          break;
        }
      }
      pos_ = i;
      first_ = false;
      return;
    }
  }
  skip_value_slow();
}

}  // namespace lockstep::import
