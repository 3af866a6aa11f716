// Rank sets as a person reads them: ranges ("0-62,64"), strides ("0,2,...,62") and, past a
// bound, a count, so that a line stays short at any scale.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::checker {

// "0-62,64", "0,1", "0,2,...,62", "3"; at most `max_pieces` ranges or strides, then ",... (N ranks)".
// The ranks need not be sorted nor distinct.
std::string format_rank_set(std::vector<int32_t> ranks, size_t max_pieces = 8);

// "rank 3" or "ranks 0-2,5".
std::string format_ranks(const std::vector<int32_t>& ranks);

// One dimension of a mesh: its name and size; the first dimension varies fastest.
struct MeshAxis {
  std::string name;
  int32_t size = 1;
};

// The ranks as mesh coordinates, slowest dimension first, "*" for a whole dimension:
// "dp=0-255, pp=3, tp=*"; "" when the set is not a box of the mesh (or there is no mesh).
std::string mesh_coordinates(const std::vector<int32_t>& ranks, const std::vector<MeshAxis>& mesh);

}  // namespace lockstep::checker
