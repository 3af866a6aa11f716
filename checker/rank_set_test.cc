#include "checker/rank_set.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

namespace lockstep::checker {

TEST_CASE("rank sets print consecutive ranks as ranges and lone ranks alone") {
  CHECK(format_rank_set({3}) == "3");
  CHECK(format_rank_set({0, 1, 2}) == "0-2");
  CHECK(format_rank_set({5, 0, 1, 2, 2, 7}) == "0-2,5,7");
  CHECK(format_rank_set({0, 1, 5, 6}) == "0,1,5,6");
  CHECK(format_ranks({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
                      28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53,
                      54, 55, 56, 57, 58, 59, 60, 61, 62}) == "ranks 0-62");
  CHECK(format_ranks({4}) == "rank 4");
  CHECK(format_ranks({4, 4}) == "rank 4");
}

TEST_CASE("rank sets name a stride from four ranks on") {
  CHECK(format_rank_set({0, 2, 4, 6}) == "0,2,...,6");
  CHECK(format_rank_set({0, 2, 4}) == "0,2,4");
}

TEST_CASE("rank sets stay short at 16k ranks however scattered") {
  std::vector<int32_t> ranks;
  for (int32_t r = 0; r < 16384; ++r) {
    if ((r * 7919) % 3 != 0 || r % 5 == 0) ranks.push_back(r);
  }
  const std::string text = format_rank_set(ranks);
  CHECK(text.size() < 120);
  CHECK(text.ends_with(fmt::format(",... ({} ranks)", ranks.size())) == true);
}

TEST_CASE("rank sets under a mesh: coordinates, slowest dimension first, * for a whole one") {
  const std::vector<MeshAxis> mesh{{"tp", 8}, {"pp", 4}, {"dp", 128}};
  std::vector<int32_t> last_tp_last_pp;  // tp=7, pp=3, every dp but the last
  for (int32_t dp = 0; dp < 127; ++dp) last_tp_last_pp.push_back(dp * 32 + 3 * 8 + 7);
  CHECK(mesh_coordinates(last_tp_last_pp, mesh) == "dp=0-126, pp=3, tp=7");
  std::vector<int32_t> stage;
  for (int32_t r = 0; r < 4096; ++r) {
    if ((r / 8) % 4 == 1) stage.push_back(r);
  }
  CHECK(mesh_coordinates(stage, mesh) == "dp=*, pp=1, tp=*");
  CHECK(mesh_coordinates({0, 9}, mesh).empty());  // not a box
  CHECK(mesh_coordinates({3}, {}).empty());
}

}  // namespace lockstep::checker
