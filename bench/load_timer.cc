// lockstep-load-timer FILE [REPEATS]: loads a scenario (.yaml) or trace (.jsonl) REPEATS times
// (default 5) and prints one line per load: seconds, operations, diagnostics. The loaders are
// timed alone, without the CLI's static checks or process start.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim/loader.h"
#include "sim/trace_format.h"

namespace {

size_t count_ops(const lockstep::sim::Scenario& scenario) {
  size_t ops = 0;
  for (int32_t rank = 0; rank < scenario.world; ++rank) {
    for (const lockstep::sim::ThreadDef& thread : scenario.program_of(rank)) ops += thread.body().size();
  }
  return ops;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [REPEATS]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  lockstep::sim::LoadLimits limits;
  limits.max_file_bytes = 1LL << 30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const lockstep::sim::LoadResult loaded =
        lockstep::sim::is_trace_path(path) ? lockstep::sim::load_trace_file(path, {}, limits)
                                           : lockstep::sim::load_scenario_file(path, {}, limits);
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    const size_t ops = loaded.ok() ? count_ops(*loaded.scenario) : 0;
    std::printf("%.3f s  %zu ops  %zu diagnostics\n", seconds.count(), ops, loaded.diagnostics.size());
    if (!loaded.ok() && i == 0) {
      for (size_t d = 0; d < loaded.diagnostics.size() && d < 5; ++d) {
        std::fputs(lockstep::sim::format_diagnostic(loaded.diagnostics[d], loaded.text).c_str(), stderr);
      }
    }
  }
  return 0;
}
