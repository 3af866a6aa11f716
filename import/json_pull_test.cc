// The pull reader's fast paths (strings eight bytes at a time, short integers, skipped numbers)
// against its slow paths: the same values, and errors at the same line and column.
#include <doctest/doctest.h>

#include <string>

#include "import/json_pull.h"

namespace lockstep::import {

namespace {

// The error a document gives when read as {"k": <string>} / skipped, as "line:col: message".
std::string error_of(const std::string& text, bool skip) {
  try {
    JsonPull json(text, "t.json");
    json.begin_object();
    std::string_view key;
    while (json.next_key(key)) {
      if (skip) json.skip_value();
      else json.read_string();
    }
    json.finish();
  } catch (const ImportError& error) {
    return std::to_string(error.loc.line) + ":" + std::to_string(error.loc.col) + ": " + error.message;
  }
  return "";
}

}  // namespace

TEST_CASE("json pull: strings of every length around the eight-byte steps, with and without escapes") {
  for (size_t length = 0; length < 40; ++length) {
    std::string value;
    for (size_t i = 0; i < length; ++i) value += static_cast<char>('a' + i % 26);
    for (const bool escaped : {false, true}) {
      const std::string body = escaped && length > 0 ? value.substr(0, length - 1) + "\\n" : value;
      const std::string text = "{\"key\": \"" + body + "\", \"n\": 12345}";
      JsonPull json(text, "t.json");
      json.begin_object();
      std::string_view key;
      REQUIRE(json.next_key(key));
      CHECK(key == "key");
      const std::string expected = escaped && length > 0 ? value.substr(0, length - 1) + "\n" : value;
      CHECK(std::string(json.read_string()) == expected);
      REQUIRE(json.next_key(key));
      CHECK(key == "n");
      CHECK(json.read_integer() == 12345);
      CHECK_FALSE(json.next_key(key));
      json.finish();
    }
  }
}

TEST_CASE("json pull: integers past the fast path, and malformed values, give the same errors") {
  {
    const std::string text = "[9223372036854775807, -9223372036854775808, 123456789012345678, 0]";
    JsonPull json(text, "t.json");
    json.begin_array();
    REQUIRE(json.next_item());
    CHECK(json.read_integer() == INT64_MAX);
    REQUIRE(json.next_item());
    CHECK(json.read_integer() == INT64_MIN);
    REQUIRE(json.next_item());
    CHECK(json.read_integer() == 123456789012345678);
    REQUIRE(json.next_item());
    CHECK(json.read_integer() == 0);
    CHECK_FALSE(json.next_item());
  }
  const auto integer_error = [](const std::string& text) {
    try {
      JsonPull json(text, "t.json");
      json.read_integer();
    } catch (const ImportError& error) {
      return std::to_string(error.loc.col) + ": " + error.message;
    }
    return std::string();
  };
  CHECK(integer_error("9223372036854775808") == "1: integer out of range");
  CHECK(integer_error("12.5") == "1: expected an integer, got a number with a fraction or exponent");
  CHECK(integer_error("1e3") == "1: expected an integer, got a number with a fraction or exponent");
  CHECK(integer_error("x") == "1: expected an integer, got 'x'");

  CHECK(error_of("{\"k\": \"abc", false) == "1:7: string not closed (truncated?)");
  CHECK(error_of("{\"k\": \"abcdefghijklmnop\tq\"}", false) == "1:24: control character in a string");
  CHECK(error_of("{\"k\": \"ab\\q\"}", false) == "1:11: invalid escape '\\q'");
  CHECK(error_of("{\"k\": \"x\" \"y\": 1}", false) == "1:11: expected ',' or '}', got '\"'");
  CHECK(error_of("{\"k\" 1}", false) == "1:6: expected ':', got '1'");
  CHECK(error_of("{\"k\": 1, 2}", true) == "1:10: expected a key, got '2'");
  CHECK(error_of("{\"a\": [1, 2.5e3, -4, \"s\", true, null, {\"b\": [NaN]}],\n \"c\": -Infinity}", true).empty());
  CHECK(error_of("{\"a\": [1, 2,]}", true) == "1:13: expected a value, got ']'");
  CHECK(error_of("{\"a\": tru}", true) == "1:7: expected true or false, got 't'");
  CHECK(error_of("{\"a\":\n  [1,\n   x]}", true) == "3:4: expected a value, got 'x'");
  CHECK(error_of("{\"a\": 1} 2", true) == "1:10: unexpected '2' after the document");
  std::string deep = "{\"a\": ";
  for (int i = 0; i < 70; ++i) deep += "[";
  CHECK(error_of(deep, true) == "1:70: values nest deeper than 64 levels");
}

}  // namespace lockstep::import
