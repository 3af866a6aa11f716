#include "import/json_pull.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace lockstep::import {

JsonPull::JsonPull(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

sim::SourceLoc JsonPull::loc() {
  skip_space();
  return {line_, static_cast<uint32_t>(std::min<size_t>(pos_ - line_start_ + 1, UINT32_MAX))};
}

void JsonPull::fail_at(size_t offset, const std::string& message) {
  offset = std::min(offset, text_.size());
  // Newlines only occur between tokens, where skip_space counts them; recount from the start
  // for a position before the current one (error paths only).
  uint32_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  throw ImportError(file_, {line, static_cast<uint32_t>(std::min<size_t>(offset - line_start + 1, UINT32_MAX))}, message);
}

void JsonPull::fail_here(const std::string& message) {
  skip_space();
  fail_at(pos_, message);
}

std::string JsonPull::describe(size_t offset) const {
  if (offset >= text_.size()) return "the end of the file (truncated?)";
  const auto c = static_cast<unsigned char>(text_[offset]);
  if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", c);
}

void JsonPull::skip_space_slow() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    } else if (c != ' ' && c != '\r' && c != '\t') {
      break;
    }
    ++pos_;
  }
}

void JsonPull::fail_expected(const char* what) {
  skip_space();
  fail_at(pos_, fmt::format("expected {}, got {}", what, describe(pos_)));
}

void JsonPull::fail_depth() { fail_at(pos_, fmt::format("values nest deeper than {} levels", MAX_DEPTH)); }

JsonType JsonPull::peek() {
  skip_space();
  if (pos_ >= text_.size()) fail_at(pos_, "expected a value, got the end of the file (truncated?)");
  switch (text_[pos_]) {
    case '{': return JsonType::OBJECT;
    case '[': return JsonType::ARRAY;
    case '"': return JsonType::STRING;
    case 't': case 'f': return JsonType::BOOL;
    case 'n': return JsonType::NUL;
    default: break;
  }
  const char c = text_[pos_];
  if (c == '-' || (c >= '0' && c <= '9')) return JsonType::NUMBER;
  if (c == 'N' || c == 'I') return JsonType::NUMBER;  // NaN, Infinity (nlohmann writes null; Python may not)
  fail_at(pos_, fmt::format("expected a value, got {}", describe(pos_)));
}

std::string_view JsonPull::read_string_slow(size_t open) {
  pos_ = open;
  if (pos_ >= text_.size() || text_[pos_] != '"') fail_at(pos_, fmt::format("expected a string, got {}", describe(pos_)));
  ++pos_;
  const size_t start = pos_;
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == '\\') break;
    if (c == '"') break;
    if (static_cast<unsigned char>(c) < 0x20) fail_at(pos_, "control character in a string");
    ++pos_;
  }
  scratch_.assign(text_.substr(start, pos_ - start));
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      first_ = false;
      return scratch_;
    }
    if (static_cast<unsigned char>(c) < 0x20) fail_at(pos_, "control character in a string");
    if (c != '\\') {
      scratch_ += c;
      ++pos_;
      continue;
    }
    if (pos_ + 1 >= text_.size()) break;
    const char e = text_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case '"': scratch_ += '"'; break;
      case '\\': scratch_ += '\\'; break;
      case '/': scratch_ += '/'; break;
      case 'b': scratch_ += '\b'; break;
      case 'f': scratch_ += '\f'; break;
      case 'n': scratch_ += '\n'; break;
      case 'r': scratch_ += '\r'; break;
      case 't': scratch_ += '\t'; break;
      case 'u': {
        auto hex4 = [&](size_t at) -> uint32_t {
          if (at + 4 > text_.size()) fail_at(at, "truncated \\u escape");
          uint32_t value = 0;
          for (size_t i = at; i < at + 4; ++i) {
            const char h = text_[i];
            value <<= 4;
            if (h >= '0' && h <= '9') value |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f') value |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') value |= static_cast<uint32_t>(h - 'A' + 10);
            else fail_at(i, "invalid \\u escape");
          }
          return value;
        };
        uint32_t code = hex4(pos_);
        pos_ += 4;
        if (code >= 0xD800 && code < 0xDC00 && pos_ + 6 <= text_.size() && text_[pos_] == '\\' && text_[pos_ + 1] == 'u') {
          const uint32_t low = hex4(pos_ + 2);
          if (low >= 0xDC00 && low < 0xE000) {
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            pos_ += 6;
          }
        }
        if (code < 0x80) {
          scratch_ += static_cast<char>(code);
        } else if (code < 0x800) {
          scratch_ += static_cast<char>(0xC0 | (code >> 6));
          scratch_ += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
          scratch_ += static_cast<char>(0xE0 | (code >> 12));
          scratch_ += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          scratch_ += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          scratch_ += static_cast<char>(0xF0 | (code >> 18));
          scratch_ += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
          scratch_ += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          scratch_ += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default: fail_at(pos_ - 1, fmt::format("invalid escape '\\{}'", e));
    }
  }
  fail_at(open, "string not closed (truncated?)");
}

int64_t JsonPull::read_integer_slow(size_t start) {
  pos_ = start;
  const bool negative = pos_ < text_.size() && text_[pos_] == '-';
  if (negative) ++pos_;
  uint64_t magnitude = 0;
  const size_t digits = pos_;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
    if (magnitude > (UINT64_MAX - digit) / 10) fail_at(start, "integer out of range");
    magnitude = magnitude * 10 + digit;
    ++pos_;
  }
  if (pos_ == digits) fail_at(start, fmt::format("expected an integer, got {}", describe(start)));
  if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
    fail_at(start, "expected an integer, got a number with a fraction or exponent");
  }
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (magnitude > limit) fail_at(start, "integer out of range");
  first_ = false;
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

double JsonPull::read_number() {
  skip_space();
  const size_t start = pos_;
  for (const char* word : {"NaN", "Infinity", "-Infinity"}) {
    const size_t n = std::strlen(word);
    if (text_.substr(pos_, n) == word) {
      pos_ += n;
      first_ = false;
      return word[0] == 'N' ? NAN : (word[0] == '-' ? -INFINITY : INFINITY);
    }
  }
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  const size_t digits = pos_;
  while (pos_ < text_.size() && std::strchr("0123456789.eE+-", text_[pos_]) != nullptr && text_[pos_] != '\0') ++pos_;
  if (pos_ == digits) fail_at(start, fmt::format("expected a number, got {}", describe(start)));
  const std::string number(text_.substr(start, pos_ - start));
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) fail_at(start, fmt::format("invalid number '{}'", number));
  first_ = false;
  return value;
}

bool JsonPull::read_bool() {
  skip_space();
  if (text_.substr(pos_, 4) == "true") {
    pos_ += 4;
    first_ = false;
    return true;
  }
  if (text_.substr(pos_, 5) == "false") {
    pos_ += 5;
    first_ = false;
    return false;
  }
  fail_at(pos_, fmt::format("expected true or false, got {}", describe(pos_)));
}

void JsonPull::read_null() {
  skip_space();
  if (text_.substr(pos_, 4) != "null") fail_at(pos_, fmt::format("expected null, got {}", describe(pos_)));
  pos_ += 4;
  first_ = false;
}

void JsonPull::skip_value_slow() {
  switch (peek()) {
    case JsonType::NUL: read_null(); return;
    case JsonType::BOOL: read_bool(); return;
    case JsonType::NUMBER: {
      // Skipped numbers are checked for their shape only.
      skip_space();
      const size_t start = pos_;
      if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
      const size_t digits = pos_;
      while (pos_ < text_.size()) {
        const char c = text_[pos_];
        if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
          ++pos_;
        } else {
          break;
        }
      }
      if (pos_ == digits) {
        pos_ = start;
        read_number();  // NaN, Infinity, or the error
      }
      first_ = false;
      return;
    }
    case JsonType::STRING: read_string(); return;
    case JsonType::ARRAY:
      begin_array();
      while (next_item()) skip_value();
      return;
    case JsonType::OBJECT: {
      begin_object();
      std::string_view key;
      while (next_key(key)) skip_value();
      return;
    }
  }
}

void JsonPull::finish() {
  skip_space();
  if (pos_ < text_.size()) fail_at(pos_, fmt::format("unexpected {} after the document", describe(pos_)));
}

}  // namespace lockstep::import
