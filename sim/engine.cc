// The engine's public entry points (Engine, resident_bytes, the names of statuses) and one
// execution's main loop: running what needs no choice, collecting the options of a choice
// point, asking the strategy and applying its pick. The rest of Engine::Impl is in the
// sim/engine_*.cc files that sim/engine_impl.h lists.
#include "sim/engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <tuple>
#include <utility>

#include "sim/engine_impl.h"

namespace lockstep::sim {

std::string_view rank_status_name(RankStatus status) {
  switch (status) {
    case RankStatus::RUNNING: return "running";
    case RankStatus::BLOCKED: return "blocked";
    case RankStatus::FINISHED: return "finished";
    case RankStatus::EXITED: return "exited";
    case RankStatus::CRASHED: return "crashed";
    case RankStatus::NOT_STARTED: return "not started";
  }
  return "?";
}

uint64_t resident_bytes() {
  // statm: "total resident shared ..." in pages.
  char text[128];
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return 0;
  text[got] = '\0';
  unsigned long long total = 0, resident = 0;
  if (std::sscanf(text, "%llu %llu", &total, &resident) != 2) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string_view kernel_state_name(KernelState state) {
  switch (state) {
    case KernelState::QUEUED: return "queued";
    case KernelState::RUNNING: return "running";
    case KernelState::DONE: return "done";
    case KernelState::ABORTED: return "aborted";
  }
  return "?";
}

Engine::Engine(const Scenario& scenario, EngineOptions options)
    : impl_(std::make_unique<Impl>(scenario, options)) {}

Engine::~Engine() = default;

ExecutionResult Engine::run(Strategy& strategy) { return impl_->run(strategy); }

}  // namespace lockstep::sim
