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

std::string mesh_coordinates(const std::vector<int32_t>& ranks, const std::vector<MeshAxis>& mesh) {
  if (mesh.empty() || ranks.empty()) return "";
  int64_t world = 1;
  for (const MeshAxis& axis : mesh) world *= axis.size;
  std::vector<int32_t> distinct = ranks;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.front() < 0 || distinct.back() >= world) return "";
  // Per dimension, the coordinates the ranks take; a box has as many ranks as their product.
  std::vector<std::vector<int32_t>> coords(mesh.size());
  for (int32_t rank : distinct) {
    int64_t rest = rank;
    for (size_t d = 0; d < mesh.size(); ++d) {
      coords[d].push_back(static_cast<int32_t>(rest % mesh[d].size));
      rest /= mesh[d].size;
    }
  }
  uint64_t product = 1;
  for (std::vector<int32_t>& c : coords) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    product *= c.size();
  }
  if (product != distinct.size()) return "";
  std::string out;
  for (size_t d = mesh.size(); d-- > 0;) {
    const bool whole = static_cast<int32_t>(coords[d].size()) == mesh[d].size && mesh[d].size > 1;
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", mesh[d].name, whole ? std::string("*") : format_rank_set(coords[d], 4));
  }
  return out;
}

}  // namespace lockstep::checker
