// 64-bit FNV-1a: the one hash of what lockstep writes out or passes between processes (report
// fingerprints, counterexample file names, NCCL unique ids, replay tags). It is defined byte by
// byte, so its values are the same on every machine and in every version; nothing here needs
// more speed than that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lockstep {

constexpr uint64_t FNV1A_OFFSET = 14695981039346656037ULL;
constexpr uint64_t FNV1A_PRIME = 1099511628211ULL;

// `bytes` bytes at `data` mixed into `hash` (the offset basis: a hash of them alone).
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = FNV1A_OFFSET) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * FNV1A_PRIME;
  return hash;
}

inline uint64_t fnv1a(std::string_view text, uint64_t hash = FNV1A_OFFSET) {
  return fnv1a(text.data(), text.size(), hash);
}

// A 64-bit value mixed into `hash` as its eight bytes, the lowest first.
inline uint64_t fnv1a_u64(uint64_t value, uint64_t hash) {
  for (int i = 0; i < 8; ++i) hash = (hash ^ ((value >> (8 * i)) & 0xff)) * FNV1A_PRIME;
  return hash;
}

}  // namespace lockstep
