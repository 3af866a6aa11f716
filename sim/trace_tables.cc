// The trace format's tables: lookups, and the messages' helpers.
#include "sim/trace_tables.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lockstep::sim::trace {

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

const OpSpec* find_op(std::string_view name) {
  for (const OpSpec& spec : OP_SPECS) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::vector<std::string> op_line_names() {
  std::vector<std::string> names;
  for (const OpSpec& spec : OP_SPECS) names.emplace_back(spec.name);
  names.emplace_back(GROUP_START);
  names.emplace_back(GROUP_END);
  return names;
}

std::vector<std::string> arg_names(KeySet keys) {
  std::vector<std::string> names;
  for (size_t i = 0; i < KEY_COUNT; ++i) {
    if ((keys & (KeySet{1} << i)) != 0) names.emplace_back(KEY_NAMES[i]);
  }
  return names;
}

}  // namespace lockstep::sim::trace
