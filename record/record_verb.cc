#include "record/record_verb.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "record/merge.h"
#include "record/record_format.h"
#include "sim/trace_format.h"

namespace lockstep::record {

namespace {

namespace fs = std::filesystem;

constexpr int EXIT_OK = 0;
constexpr int EXIT_BAD = 2;
constexpr int EXIT_FAILED = 3;
constexpr double KILL_GRACE_S = 10;

struct Usage {
  std::string message;
};

struct RecordOptions {
  std::string dir;
  std::string name;
  std::string lib;
  std::optional<double> timeout_s;
  bool merge_only = false;
  bool quiet = false;
  std::vector<std::string> command;
};

RecordOptions parse(const std::vector<std::string>& args) {
  RecordOptions o;
  size_t i = 0;
  auto value = [&](const std::string& flag) -> std::string {
    if (i + 1 >= args.size()) throw Usage{flag + " needs a value"};
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "-o" || a == "--output") {
      o.dir = value(a);
    } else if (a.rfind("--output=", 0) == 0) {
      o.dir = a.substr(9);
    } else if (a == "--name") {
      o.name = value(a);
    } else if (a == "--lib") {
      o.lib = value(a);
    } else if (a == "--timeout") {
      const std::string text = value(a);
      std::istringstream in(text);
      double s = 0;
      in >> s;
      if (!in || !in.eof() || s <= 0) throw Usage{fmt::format("--timeout expects a positive number of seconds, got '{}'", text)};
      o.timeout_s = s;
    } else if (a == "--merge-only") {
      o.merge_only = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      throw Usage{fmt::format("unknown option '{}' for 'record'", a)};
    } else {
      throw Usage{fmt::format("unexpected '{}': the command to record goes after '--' (lockstep record -o DIR -- CMD ARGS...)", a)};
    }
  }
  if (o.dir.empty()) throw Usage{"record needs -o DIR"};
  if (o.merge_only && !o.command.empty()) throw Usage{"--merge-only takes no command"};
  if (!o.merge_only && o.command.empty()) throw Usage{"record needs a command after '--' (lockstep record -o DIR -- CMD ARGS...)"};
  if (o.merge_only && o.timeout_s) throw Usage{"--timeout needs a command"};
  return o;
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                           std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string name_of(const RecordOptions& o) {
  if (!o.name.empty()) return o.name;
  std::string base = o.command.empty() ? std::string("recorded") : fs::path(o.command.front()).filename().string();
  std::string out;
  for (char c : base) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  return out.empty() ? std::string("recorded") : out;
}

// The recorder library: --lib, $LOCKSTEP_RECORD_LIB, or lib/ beside the binary's bin/.
std::string library_path(const RecordOptions& o) {
  if (!o.lib.empty()) return o.lib;
  if (const char* env = std::getenv("LOCKSTEP_RECORD_LIB"); env != nullptr && *env != 0) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "liblockstep_record.so";
  return (self.parent_path().parent_path() / "lib" / "liblockstep_record.so").string();
}

volatile sig_atomic_t g_forward_signal = 0;
void remember_signal(int sig) { g_forward_signal = sig; }

struct RunOutcome {
  bool started = false;
  int status = 0;       // waitpid status
  bool timed_out = false;
  std::string error;
};

RunOutcome run_command(const RecordOptions& o, const std::string& lib, const std::string& raw_dir) {
  RunOutcome outcome;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("LD_PRELOAD=", 0) == 0 || entry.rfind(std::string(ENV_DIR) + "=", 0) == 0) continue;
    env_strings.push_back(entry);
  }
  const char* preload = std::getenv("LD_PRELOAD");
  env_strings.push_back("LD_PRELOAD=" + lib + (preload != nullptr && *preload != 0 ? std::string(":") + preload : ""));
  env_strings.push_back(std::string(ENV_DIR) + "=" + raw_dir);
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> command = o.command;
  for (std::string& s : command) argv.push_back(s.data());
  argv.push_back(nullptr);

  struct sigaction forward = {}, old_int = {}, old_term = {}, old_hup = {};
  forward.sa_handler = remember_signal;
  sigemptyset(&forward.sa_mask);
  g_forward_signal = 0;
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  ::sigaction(SIGHUP, &forward, &old_hup);

  const pid_t pid = ::fork();
  if (pid < 0) {
    outcome.error = fmt::format("cannot start the command: fork: {}", std::strerror(errno));
  } else if (pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::execvpe(argv[0], argv.data(), envp.data());
    const std::string message = fmt::format("lockstep record: cannot run '{}': {}\n", command.front(), std::strerror(errno));
    [[maybe_unused]] const ssize_t written = ::write(2, message.data(), message.size());
    ::_exit(127);
  } else {
    ::setpgid(pid, pid);  // also in the parent: no race with the first signal
    outcome.started = true;
    const auto start = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> terminated;
    for (;;) {
      int status = 0;
      const pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) {
        outcome.status = status;
        break;
      }
      if (done < 0 && errno != EINTR) {
        outcome.error = fmt::format("waitpid: {}", std::strerror(errno));
        break;
      }
      const auto now = std::chrono::steady_clock::now();
      if (g_forward_signal != 0) {
        ::kill(-pid, g_forward_signal);
        g_forward_signal = 0;
      }
      if (!terminated && o.timeout_s && std::chrono::duration<double>(now - start).count() >= *o.timeout_s) {
        outcome.timed_out = true;
        terminated = now;
        ::kill(-pid, SIGTERM);
      }
      if (terminated && std::chrono::duration<double>(now - *terminated).count() >= KILL_GRACE_S) {
        ::kill(-pid, SIGKILL);
        terminated = now + std::chrono::hours(24 * 365);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Processes of the command's group still running after it ended (ranks it forked and left):
    // they hold their recordings until they end; stopped, they flush them.
    if (::kill(-pid, 0) == 0) {
      ::kill(-pid, SIGTERM);
      for (int i = 0; i < 400 && ::kill(-pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (::kill(-pid, 0) == 0) ::kill(-pid, SIGKILL);
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  return outcome;
}

std::string describe_status(const RunOutcome& run, const RecordOptions& o) {
  if (run.timed_out) return fmt::format("was stopped after --timeout {} s", *o.timeout_s);
  if (WIFEXITED(run.status)) return fmt::format("exited with status {}", WEXITSTATUS(run.status));
  if (WIFSIGNALED(run.status)) {
    const char* name = ::strsignal(WTERMSIG(run.status));
    return fmt::format("was killed by signal {} ({})", WTERMSIG(run.status), name != nullptr ? name : "?");
  }
  return "ended";
}

bool write_whole(const std::string& path, const std::string& content, std::ostream& err) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << content;
    file.flush();
    if (!file) {
      err << fmt::format("{}: error: cannot write file: {}\n", path, std::strerror(errno));
      return false;
    }
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    err << fmt::format("{}: error: cannot write file: {}\n", path, ec.message());
    return false;
  }
  return true;
}

std::string ranks_text(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "no rank";
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i > 0 ? "," : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

int run_record(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  RecordOptions o;
  try {
    o = parse(args);
  } catch (const Usage& usage) {
    err << "lockstep: error: " << usage.message << "\n" << "run 'lockstep --help' for usage\n";
    return EXIT_BAD;
  }
  const fs::path dir(o.dir);
  const fs::path raw = dir / "raw";
  std::error_code ec;
  std::optional<RunOutcome> run;
  if (!o.merge_only) {
    fs::create_directories(raw, ec);
    if (ec) {
      err << fmt::format("{}: error: cannot create folder: {}\n", raw.string(), ec.message());
      return EXIT_BAD;
    }
    for (const auto& entry : fs::directory_iterator(raw, ec)) {
      if (entry.path().extension() == ".jsonl") {
        err << fmt::format("{}: error: holds recordings of an earlier run; record into a new folder, or merge them "
                           "with --merge-only\n",
                           raw.string());
        return EXIT_BAD;
      }
    }
    const std::string lib = library_path(o);
    if (::access(lib.c_str(), R_OK) != 0) {
      err << fmt::format("{}: error: the recorder library is missing (build target lockstep_record, or give --lib "
                         "PATH or LOCKSTEP_RECORD_LIB)\n",
                         lib);
      return EXIT_BAD;
    }
    const std::string raw_abs = fs::absolute(raw, ec).lexically_normal().string();
    run = run_command(o, fs::absolute(lib, ec).lexically_normal().string(), raw_abs);
    if (!run->error.empty()) {
      err << "lockstep: error: " << run->error << "\n";
      return EXIT_BAD;
    }
    if (WIFEXITED(run->status) && WEXITSTATUS(run->status) == 127 && !run->timed_out) {
      return EXIT_BAD;  // could not exec: the child said why
    }
  }

  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(raw, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".jsonl") files.push_back(entry.path().string());
  }
  if (ec && o.merge_only) {
    err << fmt::format("{}: error: cannot list folder: {}\n", raw.string(), ec.message());
    return EXIT_BAD;
  }
  MergeOptions merge;
  merge.name = name_of(o);
  if (!o.command.empty()) {
    for (const std::string& word : o.command) merge.source += (merge.source.empty() ? "" : " ") + shell_quote(word);
    merge.source = "lockstep record: " + merge.source;
  }
  const bool failed = run && (run->timed_out || !WIFEXITED(run->status) || WEXITSTATUS(run->status) != 0);
  std::ostream& text = out;
  if (run) text << fmt::format("lockstep record: {} {}\n", shell_quote(o.command.front()), describe_status(*run, o));
  MergeResult merged = merge_files(files, merge);
  for (const std::string& w : merged.warnings) err << w << "\n";
  for (const std::string& e : merged.errors) err << e << "\n";
  if (!merged.scenario) {
    err << fmt::format("lockstep record: no trace written ({} recording{} in {})\n", files.size(),
                       files.size() == 1 ? "" : "s", raw.string());
    return EXIT_BAD;
  }
  const std::string trace_path = (dir / "trace.jsonl").string();
  if (!write_whole(trace_path, sim::write_trace(*merged.scenario), err)) return EXIT_BAD;
  uint64_t calls = 0;
  for (const ProcessSummary& p : merged.processes) calls += p.calls;
  text << fmt::format("recorded {} process{}, {} rank{}, {} NCCL call{} -> {}\n", merged.processes.size(),
                      merged.processes.size() == 1 ? "" : "es", merged.scenario->world,
                      merged.scenario->world == 1 ? "" : "s", calls, calls == 1 ? "" : "s", trace_path);
  if (!o.quiet) {
    for (const ProcessSummary& p : merged.processes) {
      text << fmt::format("  {}: pid {}, {}, {} call{}, {}{}\n", fs::path(p.file).filename().string(), p.pid,
                          ranks_text(p.ranks), p.calls, p.calls == 1 ? "" : "s", p.ending,
                          p.dropped > 0 ? fmt::format(", {} records dropped", p.dropped) : "");
    }
    text << "  " << merged.rank_rule << "\n";
    for (const std::string& g : merged.groups) text << "  " << g << "\n";
    text << fmt::format("next: lockstep check {}\n", trace_path);
  }
  return failed ? EXIT_FAILED : EXIT_OK;
}

}  // namespace lockstep::record
