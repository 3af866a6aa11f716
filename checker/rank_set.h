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

}  // namespace lockstep::checker
