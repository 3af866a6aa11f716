#include "sim/utf8.h"

#include <doctest/doctest.h>

namespace lockstep::sim {

TEST_CASE("utf8: well-formed text passes, the first ill-formed byte is found by offset") {
  CHECK(invalid_utf8_at("") == std::string_view::npos);
  CHECK(invalid_utf8_at("plain ascii, longer than eight bytes") == std::string_view::npos);
  CHECK(invalid_utf8_at("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == std::string_view::npos);
  CHECK(invalid_utf8_at("abc\xFF") == 3);
  CHECK(invalid_utf8_at("name: x\x80y") == 7);       // a lone continuation byte
  CHECK(invalid_utf8_at("\xC3") == 0);                // cut short
  CHECK(invalid_utf8_at("\xC0\xAF") == 0);            // overlong '/'
  CHECK(invalid_utf8_at("\xE0\x80\xAF") == 0);        // overlong, three bytes
  CHECK(invalid_utf8_at("\xED\xA0\x80") == 0);        // a surrogate (CESU-8)
  CHECK(invalid_utf8_at("\xF4\x90\x80\x80") == 0);    // past U+10FFFF
  CHECK(invalid_utf8_at("0123456789\xF5") == 10);
}

TEST_CASE("utf8: ill-formed bytes are replaced one for one, the rest kept") {
  CHECK(valid_utf8("ok") == "ok");
  CHECK(valid_utf8("a\xFF" "b\xC3") == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  CHECK(valid_utf8("x\xFE\xFFy", "?") == "x??y");
  CHECK(valid_utf8("caf\xC3\xA9", "?") == "caf\xC3\xA9");
}

}  // namespace lockstep::sim
