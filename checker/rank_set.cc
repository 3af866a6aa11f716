#include "checker/rank_set.h"

#include <algorithm>

#include <fmt/format.h>

namespace lockstep::checker {

std::string format_rank_set(std::vector<int32_t> ranks, size_t max_pieces) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  size_t pieces = 0;
  size_t i = 0;
  while (i < ranks.size()) {
    if (pieces == max_pieces) {
      out += fmt::format(",... ({} ranks)", ranks.size());
      break;
    }
    // The longest run from i with one stride: three consecutive ranks or more are a range; a
    // stride of more than one is worth naming from four ranks on.
    size_t j = i + 1;
    const int64_t stride = j < ranks.size() ? int64_t{ranks[j]} - ranks[i] : 0;
    while (j < ranks.size() && int64_t{ranks[j]} - ranks[j - 1] == stride) ++j;
    std::string piece;
    if (stride == 1 && j - i >= 3) {
      piece = fmt::format("{}-{}", ranks[i], ranks[j - 1]);
    } else if (stride > 1 && j - i >= 4) {
      piece = fmt::format("{},{},...,{}", ranks[i], ranks[i + 1], ranks[j - 1]);
    } else {
      piece = std::to_string(ranks[i]);
      j = i + 1;
    }
    out += (pieces ? "," : "") + piece;
    ++pieces;
    i = j;
  }
  return out;
}

std::string format_ranks(const std::vector<int32_t>& ranks) {
  std::vector<int32_t> distinct = ranks;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const char* noun = distinct.size() == 1 ? "rank " : "ranks ";
  return noun + format_rank_set(std::move(distinct));
}

}  // namespace lockstep::checker
