#include "sim/utf8.h"

#include <cstdint>
#include <cstring>

namespace lockstep::sim {

namespace {

// The length of the well-formed sequence at text[at] (Unicode 15, table 3-7), 0 if ill-formed.
size_t sequence_at(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(at);
  if (b0 < 0x80) return 1;
  const size_t left = text.size() - at;
  const auto cont = [&](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
    return i < left && byte(at + i) >= lo && byte(at + i) <= hi;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80;
    const uint8_t hi = b0 == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80;
    const uint8_t hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

size_t invalid_utf8_at(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    // ASCII eight bytes at a time: most of a scenario or trace.
    while (at + 8 <= text.size()) {
      uint64_t word = 0;
      std::memcpy(&word, text.data() + at, 8);
      if ((word & 0x8080808080808080ULL) != 0) break;
      at += 8;
    }
    if (at >= text.size()) break;
    const size_t length = sequence_at(text, at);
    if (length == 0) return at;
    at += length;
  }
  return std::string_view::npos;
}

std::string valid_utf8(std::string_view text, std::string_view replacement) {
  size_t bad = invalid_utf8_at(text);
  if (bad == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  while (bad != std::string_view::npos) {
    out.append(text.substr(0, bad));
    out.append(replacement);
    text.remove_prefix(bad + 1);
    bad = invalid_utf8_at(text);
  }
  out.append(text);
  return out;
}

}  // namespace lockstep::sim
