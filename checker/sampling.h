// Seeded strategies for spaces too big to cover: uniform random choices, and PCT
// (probabilistic concurrency testing: random priorities with d-1 priority change points).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "checker/search.h"
#include "sim/strategy.h"

namespace lockstep::checker {

// The one random number generator of lockstep: splitmix64, a fixed algorithm, seeded explicitly.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0 (rejection sampling: no modulo bias).
  uint64_t below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x = next();
    while (x >= limit) x = next();
    return x % bound;
  }

 private:
  uint64_t state_;
};

// Each execution i draws its choices from Rng(mix(seed, i)).
class RandomStrategy final : public Search {
 public:
  explicit RandomStrategy(uint64_t seed) : seed_(seed), rng_(seed) {}
  void begin(uint64_t execution) override;
  size_t choose(const sim::ChoicePoint& point) override;
  bool next(const sim::ExecutionResult& result) override { return result.choice_points > 0; }
  std::vector<uint32_t> schedule() const override { return {}; }

 private:
  uint64_t seed_;
  Rng rng_;
};

// PCT: every actor (a host thread, a wildcard channel, a kernel waiting for a slot) gets a
// random priority; at each choice point the option of the highest-priority actor wins (a
// thread at a `choose` takes a random branch); at depth-1 random choice points the winner's
// priority drops below all others.
class PctStrategy final : public Search {
 public:
  PctStrategy(uint64_t seed, uint32_t depth) : seed_(seed), depth_(depth), rng_(seed) {}
  void begin(uint64_t execution) override;
  size_t choose(const sim::ChoicePoint& point) override;
  // Remembers the most choice points an execution had: the range of the change points.
  bool next(const sim::ExecutionResult& result) override;
  std::vector<uint32_t> schedule() const override { return {}; }

 private:
  uint64_t priority_of(uint32_t actor);

  uint64_t seed_;
  uint32_t depth_;
  Rng rng_;
  uint64_t longest_ = 0;
  std::map<uint32_t, uint64_t> priority_;  // actor -> priority
  std::vector<uint64_t> change_points_;
  uint64_t point_ = 0;
  uint64_t lowered_ = 0;
};

}  // namespace lockstep::checker
