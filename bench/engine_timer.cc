// lockstep_engine_timer FILE MODE [--deadline-s S] [--max-memory-mib M] [-D name=value ...]:
// loads a scenario once and runs one
// execution of the engine alone, as `lockstep run` (MODE run: TimedStrategy, every op recorded)
// or `lockstep check` (MODE check: ops not recorded) does, without the CLI's report, analysis
// or timeline. Prints one line: events, engine wall seconds, engine CPU seconds (this thread's,
// to the microsecond: on a shared machine wall time counts other processes too), events per CPU
// second, peak RSS in MiB (getrusage, the whole process: scenario and engine), and the engine's
// CPU seconds split into user and system (the system part is mostly first touches of the memory
// the kernels take, which a virtual machine makes slow and variable). bench/engine_bench.sh
// runs it. With --deadline-s or --max-memory-mib the engine's bounds inside an execution
// (EngineOptions::deadline, max_resident_bytes) are set; an execution they end prints
// "LIMIT wall_s cpu_s peak_mib: message" instead (bench/hardening_bench.sh).
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "sim/engine.h"
#include "sim/loader.h"
#include "sim/strategy.h"

namespace {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double seconds_of(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

// This thread's user and system CPU seconds.
std::pair<double, double> thread_user_sys_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return {seconds_of(usage.ru_utime), seconds_of(usage.ru_stime)};
}

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::strcmp(argv[2], "run") != 0 && std::strcmp(argv[2], "check") != 0)) {
    std::fprintf(stderr, "usage: %s FILE run|check [-D name=value ...]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const bool run = std::strcmp(argv[2], "run") == 0;
  std::vector<lockstep::sim::ParamOverride> overrides;
  double deadline_s = 0;
  unsigned long long max_memory_mib = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--deadline-s") == 0) {
      deadline_s = std::strtod(argv[i + 1], nullptr);
      continue;
    }
    if (std::strcmp(argv[i], "--max-memory-mib") == 0) {
      max_memory_mib = std::strtoull(argv[i + 1], nullptr, 10);
      continue;
    }
    const std::string assignment = argv[i + 1];
    const size_t eq = assignment.find('=');
    if (std::strcmp(argv[i], "-D") != 0 || eq == std::string::npos) {
      std::fprintf(stderr, "expected -D name=value, got %s %s\n", argv[i], argv[i + 1]);
      return 2;
    }
    overrides.push_back({assignment.substr(0, eq), assignment.substr(eq + 1)});
  }
  const lockstep::sim::LoadResult loaded = lockstep::sim::load_scenario_file(path, overrides);
  if (!loaded.ok()) {
    for (const lockstep::sim::Diagnostic& d : loaded.diagnostics) {
      std::fputs(lockstep::sim::format_diagnostic(d, loaded.text).c_str(), stderr);
    }
    return 2;
  }
  lockstep::sim::EngineOptions options;
  options.record_ops = run;
  options.max_resident_bytes = max_memory_mib << 20;
  if (max_memory_mib > 0 || deadline_s > 0) options.limits.max_ops = UINT64_MAX;  // the bounds measured end it
  const auto start = std::chrono::steady_clock::now();
  if (deadline_s > 0) {
    options.deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(deadline_s));
  }
  lockstep::sim::Engine engine(*loaded.scenario, options);
  lockstep::sim::TimedStrategy timed;
  const double cpu_start = thread_cpu_seconds();
  const auto [user_start, sys_start] = thread_user_sys_seconds();
  const lockstep::sim::ExecutionResult result = engine.run(timed);
  const double cpu = thread_cpu_seconds() - cpu_start;
  const auto [user_end, sys_end] = thread_user_sys_seconds();
  const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  if (result.end == lockstep::sim::ExecutionEnd::LIMIT && (deadline_s > 0 || max_memory_mib > 0)) {
    std::printf("LIMIT %.3f %.6f %.0f: %s\n", seconds.count(), cpu, peak_rss_mib(), result.error->message.c_str());
    return 0;
  }
  if (result.end != lockstep::sim::ExecutionEnd::COMPLETED) {
    std::fprintf(stderr, "%s: the execution did not complete (end %d)\n", path.c_str(), static_cast<int>(result.end));
    return 1;
  }
  std::printf("%llu %.3f %.6f %.0f %.0f %.3f %.3f\n", static_cast<unsigned long long>(result.events), seconds.count(), cpu,
              static_cast<double>(result.events) / cpu, peak_rss_mib(), user_end - user_start, sys_end - sys_start);
  return 0;
}
