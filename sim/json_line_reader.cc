// The JSON reader of trace lines.
#include "sim/json_line_reader.h"

#include <array>
#include <cctype>
#include <cstdio>

#include "sim/trace_tables.h"

namespace lockstep::sim::trace {

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

bool JsonLineReader::read_object(std::string_view line, std::vector<JsonMember>& members) {
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

void JsonLineReader::skip_space() {
  while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t')) ++pos_;
}

std::string JsonLineReader::describe_here() const {
  if (pos_ >= line_.size()) return "the end of the line";
  const auto c = static_cast<unsigned char>(line_[pos_]);
  if (c >= 0x20 && c < 0x7f) return quoted(std::string_view(&line_[pos_], 1));
  std::array<char, 16> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "byte 0x%02x", c);
  return buffer.data();
}

bool JsonLineReader::fail(size_t at_pos, std::string message) {
  error_col_ = to_u32(at_pos + 1);
  error_message_ = std::move(message);
  return false;
}

bool JsonLineReader::parse_members(std::vector<JsonMember>& members, int depth) {
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

bool JsonLineReader::parse_items(std::vector<JsonValue>& items, int depth) {
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

bool JsonLineReader::parse_value(JsonValue& out, int depth) {
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

bool JsonLineReader::parse_literal(JsonValue& out) {
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

bool JsonLineReader::parse_number(JsonValue& out) {
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

bool JsonLineReader::parse_fraction(JsonValue& out, size_t start) {
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

bool JsonLineReader::parse_string(std::string_view& out) {
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

bool JsonLineReader::parse_escaped_string(std::string_view& out, size_t start) {
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

bool JsonLineReader::parse_escape(std::string& text) {
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

bool JsonLineReader::hex4(uint32_t& value) {
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

bool JsonLineReader::parse_unicode_escape(std::string& text, size_t backslash) {
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

void JsonLineReader::append_utf8(std::string& text, uint32_t code) {
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

}  // namespace lockstep::sim::trace
