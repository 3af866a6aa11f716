#include "gpu_validation/mpi_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace lockstep::gpu {

namespace {

using Clock = std::chrono::steady_clock;

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void read_frontiers(const LaunchSpec& spec, LaunchResult& result) {
  for (int32_t r = 0; r < spec.world; ++r) {
    const std::string text = read_whole(spec.dir + "/frontier." + std::to_string(r));
    if (!text.empty()) result.frontiers[static_cast<size_t>(r)] = parse_frontier(text);
  }
}

bool all_reported(const LaunchResult& result) {
  for (const std::optional<Frontier>& f : result.frontiers) {
    if (!f || f->status == FrontierStatus::RUNNING) return false;
  }
  return true;
}

bool all_completed(const LaunchResult& result) {
  for (const std::optional<Frontier>& f : result.frontiers) {
    if (!f || f->status != FrontierStatus::COMPLETED) return false;
  }
  return true;
}

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Waits for `pid` up to `seconds`; true when it was reaped.
bool reap(pid_t pid, double seconds, int& status) {
  const Clock::time_point start = Clock::now();
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid || (got < 0 && errno == ECHILD)) return true;
    if (since(start) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

std::optional<std::string> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

LaunchResult launch_mpi(const LaunchSpec& spec) {
  LaunchResult result;
  result.frontiers.resize(static_cast<size_t>(spec.world));
  const Clock::time_point start = Clock::now();
  const std::string world = std::to_string(spec.world);
  char stall[32];
  std::snprintf(stall, sizeof stall, "%g", spec.stall_s);
  std::vector<std::string> args = {spec.mpirun, "-n", world, "--oversubscribe", "--bind-to", "none",
                                   spec.worker, spec.plan_path, spec.dir, stall};
  const std::string log = spec.dir + "/mpirun.log";

  const pid_t pid = ::fork();
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    // The child: its own process group (so that nothing reaches the user's terminal group),
    // output to the log, and an environment in which mpirun runs as root and in containers.
    ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    const int null_in = ::open("/dev/null", O_RDONLY);
    if (null_in >= 0) ::dup2(null_in, 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);  // containers forbid CMA
    ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
    ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);  // ranks may outnumber cores
    ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // leaks inside OpenMPI are not ours
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(spec.mpirun.c_str(), argv.data());
    std::fprintf(stderr, "execv %s: %s\n", spec.mpirun.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // as the child does; whichever runs first

  int status = 0;
  bool reaped = false;
  for (;;) {
    read_frontiers(spec, result);
    if (all_reported(result)) break;
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) {
      reaped = true;
      read_frontiers(spec, result);
      if (!all_reported(result)) {
        result.mpirun_exited = true;
        result.mpirun_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      break;
    }
    if (since(start) > spec.wall_s) {
      result.wall_timeout = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!reaped) {
    // Every rank finished: let mpirun end on its own (MPI_Finalize) for a moment.
    if (all_completed(result)) reaped = reap(pid, 5, status);
    if (!reaped) {
      // Kill the workers we know of by pid, then mpirun's process group, then reap mpirun.
      for (const std::optional<Frontier>& f : result.frontiers) {
        if (f && f->pid > 0) ::kill(static_cast<pid_t>(f->pid), SIGKILL);
      }
      ::kill(-pid, SIGTERM);
      if (!reap(pid, 3, status)) {
        ::kill(-pid, SIGKILL);
        reap(pid, 5, status);
      }
      ::kill(-pid, SIGKILL);  // anything left in the group
    }
  }
  const std::string text = read_whole(log);
  result.log_tail = text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  result.seconds = since(start);
  return result;
}

}  // namespace lockstep::gpu
