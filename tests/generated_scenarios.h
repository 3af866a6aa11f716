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

// Threads whose steps may or may not commute, for the dependence relation (footprints; the
// independence test and the property test): 2-3 ranks, each with two host threads (so thread
// steps are choices), 1-3 ops per thread: collectives on world and on a pair, p2p with named and wildcard receives, choose (some agreed),
// compute on the current stream or a named one, threads with streams of their own or sharing
// main, async ops with `wait`, `sync` on one stream or all, sometimes exit or crash,
// host-blocking `barrier`, comm_concurrency 1, eager p2p, a short watchdog.
// `small`: two ranks and 1-2 ops per thread (spaces plain dfs covers).
inline std::string generate_threaded_scenario(checker::Rng& rng, bool small = false) {
  const int world = small ? 2 : 2 + static_cast<int>(rng.below(2));
  const bool limited = rng.below(3) == 0;
  const bool eager = rng.below(3) == 0;
  std::string text = fmt::format("scenario: threaded\nworld: {}\ngroups: {{g: [0, 1], h: [0, 1]}}\n", world);
  text += fmt::format("semantics: {{comm_concurrency: {}, p2p: {}, eager_limit: 4{}}}\n", limited ? 1 : 0,
                      eager ? "eager" : "rendezvous", rng.below(3) == 0 ? ", timeout: 12us" : "");
  int handles = 0;
  auto op = [&](int rank, int thread) -> std::string {
    const int peer = (rank + 1 + static_cast<int>(rng.below(static_cast<uint64_t>(world - 1)))) % world;
    const char* groups[] = {"g", "h", "world"};
    const std::string group = rank <= 1 ? groups[rng.below(3)] : "world";
    const char* streams[] = {"", ", stream: s1", ", stream: s2"};
    const std::string stream = streams[rng.below(3)];
    switch (rng.below(17)) {
      case 0:
      case 1: return fmt::format("{{allreduce: {{group: {}, size: 4{}}}}}", group, stream);
      case 2: return fmt::format("{{send: {{to: {}, size: 4}}}}", peer);
      case 3: return fmt::format("{{recv: {{from: {}, size: 4}}}}", peer);
      case 4:
      case 5: return rank == 0 ? "{recv: {from: any, size: 4}}" : "{send: {to: 0, size: 4}}";
      case 6:
        return fmt::format("{{choose: {{a: [{{allreduce: {{group: {}, size: 4}}}}], b: [{{compute: 3us}}]}}{}}}", group,
                           rank <= 1 && rng.below(2) ? ", agreed: g" : "");
      case 7: return rng.below(3) == 0 ? (rng.below(2) ? "exit" : "crash") : "{compute: 20us}";
      case 8: return "{sleep: 2us}";
      case 9: {
        // An async op and its wait in the same thread (handle names per thread: a wait never
        // comes before its op).
        const std::string handle = fmt::format("h{}_{}", thread, handles++);
        return fmt::format("{{allgather: {{group: {}, size: 4, async: {}{}}}}}, {{wait: {}}}", group, handle, stream, handle);
      }
      case 10: return fmt::format("{{compute: {{duration: 1us{}}}}}", stream);
      case 11: return "sync";  // host-blocking: the thread waits for other ranks' progress
      case 12: return rng.below(2) ? "{sync: s1}" : "{sync: main}";
      case 13: return "barrier";
      default: return "{compute: 1us}";
    }
  };
  text += "threads:\n";
  const char* names[] = {"main", "bg"};
  for (int thread = 0; thread < 2; ++thread) {
    // A thread with a current stream of its own, or sharing main.
    const bool own = rng.below(2) == 0;
    text += fmt::format("  {}:\n", names[thread]);
    if (own) text += fmt::format("    stream: t{}\n    do:\n", thread);
    const std::string indent = own ? "      " : "    ";
    for (int rank = 0; rank < world; ++rank) {
      text += fmt::format("{}- if: \"rank == {}\"\n{}  then: [", indent, rank, indent);
      const int ops = 1 + static_cast<int>(rng.below(small ? 2 : 3));
      for (int i = 0; i < ops; ++i) text += (i ? ", " : "") + op(rank, thread);
      text += "]\n";
    }
  }
  return text;
}

// Ranks that run one program, for symmetry (check --symmetry): rank 0 a hub, ranks 1..world-1
// workers with one text between them (so symmetric), sometimes made unequal: worker 1 with an
// op of its own, the hub naming one worker, workers that send around a ring (symmetric under
// rotation only, which the classes of swaps must not take for more). 3-5 ranks, one or two
// threads; collectives on world and on the workers' group, p2p with the hub (named and
// wildcard), async ops with `wait`, host-blocking ops, exits, a short watchdog.
inline std::string generate_symmetric_scenario(checker::Rng& rng) {
  const int world = 3 + static_cast<int>(rng.below(3));
  const int threads = 1 + static_cast<int>(rng.below(2));
  const bool eager = rng.below(3) == 0;
  std::string workers;
  for (int r = 1; r < world; ++r) workers += fmt::format("{}{}", r > 1 ? ", " : "", r);
  std::string text = fmt::format("scenario: symmetric\nworld: {}\ngroups: {{w: [{}]}}\n", world, workers);
  text += fmt::format("semantics: {{p2p: {}, eager_limit: 4{}}}\n", eager ? "eager" : "rendezvous",
                      rng.below(4) == 0 ? ", timeout: 12us" : "");
  int handles = 0;
  auto worker_op = [&](int thread) -> std::string {
    switch (rng.below(14)) {
      case 0:
      case 1: return "{allreduce: {size: 4}}";
      case 2:
      case 3: return "{allreduce: {group: w, size: 4}}";
      case 4:
      case 5: return "{send: {to: 0, size: 4}}";
      case 6: return "{recv: {from: 0, size: 4}}";
      case 7: return rng.below(3) == 0 ? "exit" : "{compute: 20us}";
      case 8: {
        const std::string handle = fmt::format("h{}_{}", thread, handles++);
        return fmt::format("{{allgather: {{group: w, size: 4, async: {}}}}}, {{wait: {}}}", handle, handle);
      }
      case 9: return "barrier";
      case 10: return "sync";
      case 11: return rng.below(2) ? "{send: {to: \"rank % (world - 1) + 1\", size: 4}}" : "{sleep: 2us}";
      default: return "{compute: 1us}";
    }
  };
  auto hub_op = [&]() -> std::string {
    switch (rng.below(8)) {
      case 0:
      case 1:
      case 2: return "{recv: {from: any, size: 4}}";
      case 3: return "{allreduce: {size: 4}}";
      case 4: return fmt::format("{{send: {{to: {}, size: 4}}}}", 1 + rng.below(static_cast<uint64_t>(world - 1)));
      case 5: return "{compute: 5us}";
      default: return "{recv: {from: any, size: 4}}";
    }
  };
  text += "threads:\n";
  const char* names[] = {"main", "bg"};
  for (int thread = 0; thread < threads; ++thread) {
    text += fmt::format("  {}:\n", names[thread]);
    std::string hub, worker;
    const int hub_ops = 1 + static_cast<int>(rng.below(3));
    for (int i = 0; i < hub_ops; ++i) hub += (i ? ", " : "") + hub_op();
    const int worker_ops = 1 + static_cast<int>(rng.below(threads == 1 ? 3 : 2));
    for (int i = 0; i < worker_ops; ++i) worker += (i ? ", " : "") + worker_op(thread);
    text += fmt::format("    - if: \"rank == 0\"\n      then: [{}]\n      else: [{}]\n", hub, worker);
    if (rng.below(6) == 0) text += fmt::format("    - if: \"rank == 1\"\n      then: [{}]\n", worker_op(thread));
  }
  return text;
}

}  // namespace lockstep::testing
