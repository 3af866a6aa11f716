// The generator of small random scenarios shared by the property test (dpor vs dfs) and the SPIN
// differential test (tests/spin_differential_test.cc).
#pragma once

#include <string>

#include <fmt/format.h>

#include "checker/sampling.h"

namespace lockstep::testing {

// A small random scenario: 2-4 ranks, one or two threads (two only with 2 ranks), 1-4
// operations per rank and thread; sometimes comm_concurrency 1, eager p2p, a watchdog short
// enough to fire (so that virtual time decides verdicts: the state cache must keep it), ops of
// different durations and sizes, exits and crashes. `threaded`: 3 ranks with two threads each,
// and host-blocking ops (`sync`, `barrier`) among the others, so that one rank's thread steps
// interleave with other ranks' threads and wildcard matches while its kernels complete (what
// sleep sets must commute with, docs/semantics.md).
inline std::string generate_scenario(checker::Rng& rng, bool threaded = false) {
  const int world = threaded ? 3 : 2 + static_cast<int>(rng.below(3));
  const int threads = threaded ? 2 : world == 2 ? 1 + static_cast<int>(rng.below(2)) : 1;
  const bool limited = threads == 1 && rng.below(3) == 0;
  const bool eager = rng.below(4) == 0;
  const bool short_watchdog = rng.below(3) == 0;
  std::string text = fmt::format("scenario: generated\nworld: {}\ngroups: {{g: [{}]}}\n", world,
                                 world == 2 ? "0, 1" : "0, 1, 2");
  text += fmt::format("semantics: {{comm_concurrency: {}, p2p: {}, eager_limit: 4{}}}\n", limited ? 1 : 0,
                      eager ? "eager" : "rendezvous", short_watchdog ? ", timeout: 12us" : "");
  auto op = [&](int rank, int n) -> std::string {
    const int peer = (rank + 1 + static_cast<int>(rng.below(static_cast<uint64_t>(world - 1)))) % world;
    const bool in_g = rank <= 2 && peer <= 2;
    const std::string group = rng.below(2) || !in_g ? "world" : "g";
    const std::string async = limited && rng.below(2) ? fmt::format(", async: h{}", n) : "";
    const int size = rng.below(4) == 0 ? 8 : 4;
    switch (rng.below(threaded ? 12 : 10)) {
      case 0: return fmt::format("{{allreduce: {{group: {}, size: {}{}}}}}", rank <= 2 ? group : "world", size, async);
      case 1: return fmt::format("{{send: {{to: {}, size: 4{}}}}}", peer, async);
      case 2: return fmt::format("{{recv: {{from: {}, size: 4{}}}}}", peer, async);
      case 3:
      case 4: return rank == 0 ? "{recv: {from: any, size: 4}}" : "{send: {to: 0, size: 4}}";
      case 5: return fmt::format("{{choose: {{a: [{{allreduce: {{group: {}, size: 4}}}}], b: [{{compute: 1us}}]}}}}",
                                 rank <= 2 ? group : "world");
      case 6: return rng.below(4) == 0 ? (rng.below(2) ? "exit" : "crash") : "{compute: 20us}";
      case 10: return "sync";
      case 11: return "barrier";
      default: return "{compute: 1us}";
    }
  };
  auto body = [&](int thread) {
    std::string out;
    int n = 0;
    for (int rank = 0; rank < world; ++rank) {
      out += fmt::format("    - if: \"rank == {}\"\n      then: [", rank);
      const int ops = threaded && thread == 1 ? 1 : 1 + static_cast<int>(rng.below(threads == 1 ? 4 : 2));
      for (int i = 0; i < ops; ++i) out += (i ? ", " : "") + op(rank, thread * 10 + n++);
      out += "]\n";
    }
    return out;
  };
  text += "threads:\n  main:\n" + body(0);
  if (threads == 2) text += "  bg:\n" + body(1);
  return text;
}

}  // namespace lockstep::testing
