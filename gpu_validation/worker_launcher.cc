#include "gpu_validation/worker_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// The children of one launch: reaped as they end.
struct Children {
  std::vector<pid_t> pids;
  std::vector<bool> reaped;
  int first_failure = 0;  // the first non-zero exit code

  bool poll() {  // true when every child was reaped
    bool all = true;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (reaped[i]) continue;
      int status = 0;
      const pid_t got = ::waitpid(pids[i], &status, WNOHANG);
      if (got == pids[i] || (got < 0 && errno == ECHILD)) {
        reaped[i] = true;
        if (got == pids[i] && first_failure == 0) first_failure = exit_code(status);
      } else {
        all = false;
      }
    }
    return all;
  }

  bool wait_all(double seconds) {
    const Clock::time_point start = Clock::now();
    for (;;) {
      if (poll()) return true;
      if (since(start) > seconds) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
};

// Whether `pid` is a process this launch started: in its process group, or a child of one of
// its processes (mpirun's ranks). A frontier's pid from another node is never killed here.
bool ours(int64_t pid, pid_t group, const std::vector<pid_t>& parents) {
  const std::string stat = read_whole("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(stat.substr(close + 1));
  std::string state;
  long ppid = 0, pgrp = 0;
  if (!(in >> state >> ppid >> pgrp)) return false;
  if (group > 0 && pgrp == group) return true;
  for (const pid_t p : parents) {
    if (ppid == p) return true;
  }
  return false;
}

// While a launch runs this process is a child subreaper (PR_SET_CHILD_SUBREAPER): a worker
// whose launcher (mpirun) ends before it is re-parented here instead of to init, which in a
// container may never reap it. Once the launch's group was killed, its processes and the
// workers known by pid that are now children here are reaped, for at most `seconds`.
class Subreaper {
 public:
  Subreaper() {
    int was = 0;
    if (::prctl(PR_GET_CHILD_SUBREAPER, &was) == 0) was_ = was;
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  ~Subreaper() {
    if (was_ == 0) ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  Subreaper(const Subreaper&) = delete;
  Subreaper& operator=(const Subreaper&) = delete;

  static void reap(pid_t group, const std::vector<pid_t>& workers, double seconds) {
    const Clock::time_point start = Clock::now();
    for (bool killed = false;;) {
      bool left = false;
      int status = 0;
      if (group > 0) {
        for (pid_t got = ::waitpid(-group, &status, WNOHANG); got != 0; got = ::waitpid(-group, &status, WNOHANG)) {
          if (got < 0) break;  // ECHILD: none of the group is a child here
        }
        left = ::waitpid(-group, &status, WNOHANG) == 0;
      }
      for (const pid_t pid : workers) {
        const pid_t got = ::waitpid(pid, &status, WNOHANG);
        if (got == 0) left = true;  // a child here (re-parented), still running
      }
      if (!left) return;
      if (since(start) > seconds) {
        if (killed) return;
        for (const pid_t pid : workers) {
          if (::waitpid(pid, &status, WNOHANG) == 0) ::kill(pid, SIGKILL);
        }
        if (group > 0) ::kill(-group, SIGKILL);
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  int was_ = 0;
};

pid_t start_child(const std::vector<std::string>& command, const std::string& log, pid_t group,
                  const std::vector<std::pair<std::string, std::string>>& env, std::string& error) {
  std::vector<std::string> args = command;
  const pid_t pid = ::fork();
  if (pid < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    return pid;
  }
  if (pid == 0) {
    // The child: a process group of the launch's own (nothing reaches the user's terminal
    // group), output to the log, the environment the backend needs.
    ::setpgid(0, group);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    const int null_in = ::open("/dev/null", O_RDONLY);
    if (null_in >= 0) ::dup2(null_in, 0);
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(args.front().c_str(), argv.data());
    std::fprintf(stderr, "exec %s: %s\n", args.front().c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, group == 0 ? pid : group);  // as the child does; whichever runs first
  return pid;
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

std::string worker_path(const std::string& name, const char* env_var) {
  if (const char* env = std::getenv(env_var); env != nullptr && *env != 0) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? name : (self.parent_path() / name).string();
}

std::optional<std::vector<std::string>> user_launcher(int32_t world) {
  const char* text = std::getenv("LOCKSTEP_LAUNCHER");
  if (text == nullptr || *text == 0) return std::nullopt;
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) {
    for (size_t at = w.find("{world}"); at != std::string::npos; at = w.find("{world}")) {
      w.replace(at, 7, std::to_string(world));
    }
    words.push_back(w);
  }
  if (words.empty()) return std::nullopt;
  return words;
}

LaunchResult launch_workers(const LaunchSpec& spec) {
  LaunchResult result;
  result.frontiers.resize(static_cast<size_t>(spec.world));
  const Clock::time_point start = Clock::now();
  const std::string log = spec.dir + "/launch.log";
  if (spec.launcher.command.empty()) {
    result.error = "no launch command";
    return result;
  }

  // Granted order: the grant server listens before any worker starts.
  std::optional<GrantServer> grants;
  if (spec.granted) {
    grants.emplace(spec.step_owner, spec.world);
    std::string why;
    if (!grants->start(spec.dir, why)) {
      result.error = why;
      return result;
    }
  }
  // Waits between looks at the frontiers, serving grants meanwhile.
  auto pause = [&](int ms) {
    if (grants) {
      const Clock::time_point until = Clock::now() + std::chrono::milliseconds(ms);
      for (Clock::time_point now = Clock::now(); now < until; now = Clock::now()) {
        grants->pump(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + 1);
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
  };

  Subreaper subreaper;
  Children children;
  const size_t count = spec.launcher.per_rank ? static_cast<size_t>(spec.world) : 1;
  pid_t group = 0;
  for (size_t r = 0; r < count; ++r) {
    std::vector<std::pair<std::string, std::string>> env = spec.launcher.env;
    if (grants) env.emplace_back(GRANT_TOKEN_VARIABLE, grants->token());  // the workers it starts
    if (spec.launcher.per_rank) {
      env.emplace_back("LOCKSTEP_RANK", std::to_string(r));
      env.emplace_back("LOCKSTEP_WORLD", std::to_string(spec.world));
      env.emplace_back("LOCKSTEP_LOCAL_RANK", std::to_string(r));
      env.emplace_back("LOCKSTEP_LOCAL_SIZE", std::to_string(spec.world));
    }
    const pid_t pid = start_child(spec.launcher.command, log, group, env, result.error);
    if (pid < 0) break;
    if (group == 0) group = pid;
    children.pids.push_back(pid);
    children.reaped.push_back(false);
  }

  if (result.error.empty()) {
    for (;;) {
      read_frontiers(spec, result);
      if (all_reported(result)) break;
      if (children.poll()) {
        read_frontiers(spec, result);
        if (!all_reported(result)) {
          result.launcher_exited = true;
          result.launcher_status = children.first_failure;
        }
        break;
      }
      if (since(start) > spec.wall_s) {
        result.wall_timeout = true;
        break;
      }
      pause(20);
    }
  }
  // Issue reports sent before a frontier was written may still wait in the sockets.
  if (grants) {
    for (int i = 0; i < 5; ++i) grants->pump(2);
  }
  // Every rank finished: let the processes end on their own for a moment. Some did not: ask
  // them to stop (DIR/stop: abort communicators, free memory, exit), then kill what is left.
  bool clean = children.poll();
  if (!clean && all_completed(result)) clean = children.wait_all(5);
  if (!clean && !result.wall_timeout && spec.grace_s > 0) {
    std::ofstream(spec.dir + "/stop") << "stop\n";
    clean = children.wait_all(spec.grace_s);
  }
  result.stopped_cleanly = clean && result.error.empty();
  if (!clean) {
    // The workers we know of by pid (they may live under mpirun in other groups), then the
    // launch's process group, then reap.
    for (const std::optional<Frontier>& f : result.frontiers) {
      if (f && f->pid > 0 && ours(f->pid, group, children.pids)) ::kill(static_cast<pid_t>(f->pid), SIGKILL);
    }
    if (group > 0) ::kill(-group, SIGTERM);
    if (!children.wait_all(3) && group > 0) {
      ::kill(-group, SIGKILL);
      children.wait_all(5);
    }
  }
  if (group > 0) ::kill(-group, SIGKILL);  // anything left in the group
  std::vector<pid_t> workers;
  for (const std::optional<Frontier>& f : result.frontiers) {
    if (f && f->pid > 0) workers.push_back(static_cast<pid_t>(f->pid));
  }
  Subreaper::reap(group, workers, 5);
  if (grants) result.grants = grants->stats();
  const std::string text = read_whole(log);
  result.log_tail = text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  result.seconds = since(start);
  return result;
}

}  // namespace lockstep::gpu
