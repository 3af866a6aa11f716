// check --mpi with dpor, inside one process: the branches a search gives go as text to a
// checker::BranchHost (as on another rank: its own numbering of footprint objects, its own state
// cache) and their results come back as text, as cli/mpi.cc's ranks exchange them. Shared by the
// property test and explore_test.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "checker/explore.h"

namespace lockstep::testing {

struct RemoteBranchCounts {
  uint64_t explored = 0;  // branches the host explored and answered
  uint64_t lost = 0;      // branches explored, then dropped as from a rank taken as lost
  uint64_t taken = 0;     // branches taken (lose_every counts them)
  uint64_t halted = 0;    // branches halted as the search stopped early
};

// A runner for CheckOptions::run_branches: one host (made with `options`, which must outlive
// the runner) waits for a branch whenever it has none. With `lose_every` > 0, every
// lose_every-th branch it takes (counted in `counts` over every search it runs) is explored,
// then dropped and reported lost (BranchPort::lost), as when the rank that held it dies: the
// branch must be explored again.
inline checker::BranchRunner remote_branches(const sim::Scenario& scenario, const checker::CheckOptions& options,
                                             RemoteBranchCounts& counts, uint64_t lose_every = 0) {
  return [&scenario, &options, &counts, lose_every](const std::function<void()>& root, checker::BranchPort& port) {
    std::optional<checker::BranchHost> host(std::in_place, scenario, options);
    port.set_waiting(1);  // from the search's first execution on
    std::atomic<bool> ended{false};
    std::thread search([&] {
      root();
      ended = true;
    });
    while (!ended) {
      port.set_waiting(1);
      const std::optional<std::pair<uint64_t, std::string>> branch = port.take();
      if (!branch) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        continue;
      }
      port.set_waiting(0);
      // Explored on a thread while this one passes a halt on, as a rank's main thread does.
      std::future<std::string> explored = std::async(std::launch::async, [&] { return host->explore(branch->second); });
      bool halted = false;
      while (explored.wait_for(std::chrono::microseconds(50)) != std::future_status::ready) {
        if (!halted && port.halted()) {
          host->halt();
          halted = true;
          ++counts.halted;
        }
      }
      const std::string result = explored.get();
      if (lose_every > 0 && ++counts.taken % lose_every == 0) {
        port.lost(branch->first);
        ++counts.lost;
        host.emplace(scenario, options);  // another rank: the lost one's state cache died with it
        continue;
      }
      port.answer(branch->first, result);
      ++counts.explored;
    }
    search.join();
    port.set_waiting(0);
  };
}

}  // namespace lockstep::testing
