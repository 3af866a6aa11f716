#include "record/record_verb.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "checker/explore.h"
#include "checker/report.h"
#include "record/merge.h"
#include "record/record_format.h"
#include "record/torch_merge.h"
#include "record/torch_python.h"
#include "sim/loader.h"
#include "sim/output_file.h"
#include "sim/trace_format.h"

namespace lockstep::record {

namespace {

namespace fs = std::filesystem;

constexpr int EXIT_OK = 0;
constexpr int EXIT_BAD = 2;
constexpr int EXIT_FAILED = 3;
constexpr double KILL_GRACE_S = 10;

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

// One process to start: its command line, the environment it gets, and where its output goes
// (empty: the terminal's).
struct Launch {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string output;
};

struct ProcessOutcome {
  pid_t pid = 0;
  int status = 0;          // waitpid status
  bool stopped = false;    // still running at --timeout: stopped by SIGTERM (SIGKILL later)
};

struct RunOutcome {
  bool started = false;
  bool timed_out = false;
  std::vector<ProcessOutcome> processes;  // one per launch, in order
  std::string error;
  int status() const { return processes.empty() ? 0 : processes.front().status; }
};

// The environment of this process without the variables in `drop` (names), plus `add`.
std::vector<std::string> environment(const std::vector<std::string>& drop, const std::vector<std::string>& add) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(drop.begin(), drop.end(), name) == drop.end()) out.push_back(entry);
  }
  out.insert(out.end(), add.begin(), add.end());
  return out;
}

// Starts every launch in one new process group (the first one's pid), passes SIGINT, SIGTERM
// and SIGHUP on to the group, and waits for all of them; at `timeout_s` the group gets SIGTERM,
// KILL_GRACE_S later SIGKILL. Processes of the group still running when all launches have ended
// (ranks or workers they forked and left) are stopped the same way, so that they flush.
RunOutcome run_processes(const std::vector<Launch>& launches, std::optional<double> timeout_s) {
  RunOutcome outcome;
  struct sigaction forward = {}, old_int = {}, old_term = {}, old_hup = {};
  forward.sa_handler = remember_signal;
  sigemptyset(&forward.sa_mask);
  g_forward_signal = 0;
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  ::sigaction(SIGHUP, &forward, &old_hup);
  pid_t group = 0;
  for (const Launch& launch : launches) {
    std::vector<std::string> env = launch.env, argv_strings = launch.argv;
    std::vector<char*> envp, argv;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    for (std::string& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int output = launch.output.empty() ? -1 : ::open(launch.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!launch.output.empty() && output < 0) {
      outcome.error = fmt::format("{}: cannot create file: {}", launch.output, std::strerror(errno));
      break;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      outcome.error = fmt::format("cannot start the command: fork: {}", std::strerror(errno));
      if (output >= 0) ::close(output);
      break;
    }
    if (pid == 0) {
      ::setpgid(0, group);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGHUP, SIG_DFL);
      if (output >= 0) {
        ::dup2(output, 1);
        ::dup2(output, 2);
      }
      ::execvpe(argv[0], argv.data(), envp.data());
      const std::string message = fmt::format("lockstep record: cannot run '{}': {}\n", argv_strings.front(), std::strerror(errno));
      [[maybe_unused]] const ssize_t written = ::write(2, message.data(), message.size());
      ::_exit(127);
    }
    if (output >= 0) ::close(output);
    ::setpgid(pid, group == 0 ? pid : group);  // also in the parent: no race with the first signal
    if (group == 0) group = pid;
    outcome.processes.push_back({pid, 0, false});
    outcome.started = true;
  }
  if (!outcome.error.empty() && group != 0) ::kill(-group, SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> terminated;
  std::vector<bool> done(outcome.processes.size(), false);
  size_t running = outcome.processes.size();
  while (running > 0) {
    for (size_t i = 0; i < outcome.processes.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      const pid_t ended = ::waitpid(outcome.processes[i].pid, &status, WNOHANG);
      if (ended == outcome.processes[i].pid || (ended < 0 && errno != EINTR)) {
        outcome.processes[i].status = ended < 0 ? 0 : status;
        if (ended < 0 && outcome.error.empty()) outcome.error = fmt::format("waitpid: {}", std::strerror(errno));
        done[i] = true;
        --running;
      }
    }
    if (running == 0) break;
    const auto now = std::chrono::steady_clock::now();
    if (g_forward_signal != 0) {
      ::kill(-group, g_forward_signal);
      g_forward_signal = 0;
    }
    if (!terminated && timeout_s && std::chrono::duration<double>(now - start).count() >= *timeout_s) {
      outcome.timed_out = true;
      terminated = now;
      for (size_t i = 0; i < outcome.processes.size(); ++i) outcome.processes[i].stopped = !done[i];
      ::kill(-group, SIGTERM);
    }
    if (terminated && std::chrono::duration<double>(now - *terminated).count() >= KILL_GRACE_S) {
      ::kill(-group, SIGKILL);
      terminated = now + std::chrono::hours(24 * 365);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (group != 0 && ::kill(-group, 0) == 0) {
    ::kill(-group, SIGTERM);
    for (int i = 0; i < 400 && ::kill(-group, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (::kill(-group, 0) == 0) ::kill(-group, SIGKILL);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  return outcome;
}

RunOutcome run_command(const RecordOptions& o, const std::string& lib, const std::string& raw_dir) {
  const char* preload = std::getenv("LD_PRELOAD");
  Launch launch;
  launch.argv = o.command;
  launch.env = environment({"LD_PRELOAD", ENV_DIR},
                           {"LD_PRELOAD=" + lib + (preload != nullptr && *preload != 0 ? std::string(":") + preload : ""),
                            std::string(ENV_DIR) + "=" + raw_dir});
  return run_processes({launch}, o.timeout_s);
}

std::string describe_status(int status, bool stopped, const RecordOptions& o) {
  if (stopped) return fmt::format("was stopped after --timeout {} s", *o.timeout_s);
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = ::strsignal(WTERMSIG(status));
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), name != nullptr ? name : "?");
  }
  return "ended";
}

bool failed_status(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

bool write_whole(const std::string& path, const std::string& content, std::ostream& err) {
  const std::string problem = sim::write_output_file(path, content);
  if (problem.empty()) return true;
  err << fmt::format("{}: error: cannot write file: {}\n", path, problem);
  return false;
}

std::string ranks_text(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "no rank";
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i > 0 ? "," : "") + std::to_string(ranks[i]);
  return out;
}

// The merge's warnings and errors; false (with a line that says so) when it wrote no trace.
bool report_merge(const std::vector<std::string>& warnings, const std::vector<std::string>& errors, bool merged,
                  size_t files, const fs::path& raw, std::ostream& err) {
  for (const std::string& w : warnings) err << w << "\n";
  for (const std::string& e : errors) err << e << "\n";
  if (!merged) {
    err << fmt::format("lockstep record: no trace written ({} recording{} in {})\n", files, files == 1 ? "" : "s",
                       raw.string());
  }
  return merged;
}

// A TCP port of 127.0.0.1 nothing listens on now (rank 0's store takes it), or 0.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

// The raw folder of a new recording: made, and refused when it holds an earlier run's files.
bool prepare_raw(const fs::path& raw, std::ostream& err) {
  std::error_code ec;
  fs::create_directories(raw, ec);
  if (ec) {
    err << fmt::format("{}: error: cannot create folder: {}\n", raw.string(), ec.message());
    return false;
  }
  for (const auto& entry : fs::directory_iterator(raw, ec)) {
    if (entry.path().extension() == ".jsonl") {
      err << fmt::format("{}: error: holds recordings of an earlier run; record into a new folder, or merge them "
                         "with --merge-only\n",
                         raw.string());
      return false;
    }
  }
  return true;
}

std::vector<std::string> recordings_in(const fs::path& raw) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(raw, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".jsonl") files.push_back(entry.path().string());
  }
  return files;
}

std::string command_line(const std::vector<std::string>& command) {
  std::string out;
  for (const std::string& word : command) out += (out.empty() ? "" : " ") + shell_quote(word);
  return out;
}

// The scenario name of a script: its file name without .py (the first argument ending in .py).
std::string torch_name(const RecordOptions& o) {
  if (!o.name.empty()) return o.name;
  for (const std::string& word : o.command) {
    if (word.size() > 3 && word.ends_with(".py")) {
      const std::string stem = fs::path(word).stem().string();
      std::string out;
      for (char c : stem) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
      if (!out.empty()) return out;
    }
  }
  return name_of(o);
}

// The first line of a rank's output that says why it could not start (exec failed).
std::string first_line_of(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The last line of a rank's output that is not blank (a traceback's exception), at most 300 bytes.
std::string last_line_of(const fs::path& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  if (last.size() > 300) last = last.substr(0, 300) + " ...";
  return last;
}

// Every "TRACE:LINE:COL" in `text` followed by the script's line of that op: "TRACE:LINE:COL,
// train.py:42".
std::string with_sources(const std::string& text, const std::string& trace_path, const std::vector<TorchSource>& sources) {
  std::map<int32_t, const TorchSource*> by_line;
  for (const TorchSource& source : sources) by_line[source.trace_line] = &source;
  std::string out;
  const std::string prefix = trace_path + ":";
  size_t at = 0;
  for (size_t found = text.find(prefix); found != std::string::npos; found = text.find(prefix, at)) {
    size_t end = found + prefix.size();
    int32_t line = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + end, text.data() + text.size(), line);
    end = static_cast<size_t>(ptr - text.data());
    if (ec == std::errc() && end < text.size() && text[end] == ':') {
      size_t col_end = end + 1;
      while (col_end < text.size() && std::isdigit(static_cast<unsigned char>(text[col_end])) != 0) ++col_end;
      auto it = by_line.find(line);
      if (col_end > end + 1 && it != by_line.end()) {
        out += text.substr(at, col_end - at) + ", " + it->second->source;
        at = col_end;
        continue;
      }
    }
    out += text.substr(at, found + prefix.size() - at);
    at = found + prefix.size();
  }
  return out + text.substr(at);
}

// `record --torch --check`: the verdict of the written trace, its explanation pointing at the
// script's lines as well. Returns check's exit code (0 ok, 1 a bug, 3 inconclusive, 2 an error).
int check_recorded(const std::string& trace_path, const std::vector<TorchSource>& sources, std::ostream& out,
                   std::ostream& err) {
  sim::LoadResult loaded = sim::load_trace_file(trace_path, {}, sim::LoadLimits{});
  if (!loaded.ok()) {
    for (const sim::Diagnostic& d : loaded.diagnostics) err << sim::format_diagnostic(d, loaded.text);
    return EXIT_BAD;
  }
  checker::InputReport report;
  report.input = trace_path;
  report.scenario = &*loaded.scenario;
  report.result = checker::check_scenario(*loaded.scenario, checker::CheckOptions{});
  const std::string text = with_sources(checker::report_text(report, false), trace_path, sources);
  if (report.failed_to_load()) {
    err << text;
    return EXIT_BAD;
  }
  out << text;
  const sim::Verdict verdict = report.result->verdict;
  return verdict == sim::Verdict::OK ? EXIT_OK : verdict == sim::Verdict::INCONCLUSIVE ? EXIT_FAILED : 1;
}

int run_torch(const RecordOptions& o, std::ostream& out, std::ostream& err) {
  const fs::path dir(o.dir);
  const fs::path raw = dir / "raw", python = dir / "python", logs = dir / "logs";
  std::error_code ec;
  std::optional<RunOutcome> run;
  if (!o.merge_only) {
    if (!prepare_raw(raw, err)) return EXIT_BAD;
    fs::create_directories(python, ec);
    fs::create_directories(logs, ec);
    if (!write_whole((python / "lockstep_torch.py").string(), std::string(torch_recorder_source()), err) ||
        !write_whole((python / "sitecustomize.py").string(), std::string(torch_sitecustomize_source()), err)) {
      return EXIT_BAD;
    }
    const int port = free_port();
    if (port == 0) {
      err << "lockstep: error: cannot find a free TCP port on 127.0.0.1 for MASTER_PORT\n";
      return EXIT_BAD;
    }
    const char* pythonpath = std::getenv("PYTHONPATH");
    const std::string python_abs = fs::absolute(python, ec).lexically_normal().string();
    const std::string raw_abs = fs::absolute(raw, ec).lexically_normal().string();
    std::vector<Launch> launches;
    for (int32_t rank = 0; rank < o.nproc; ++rank) {
      Launch launch;
      launch.argv = o.command;
      std::vector<std::string> add = {
          fmt::format("RANK={}", rank), fmt::format("LOCAL_RANK={}", rank), fmt::format("WORLD_SIZE={}", o.nproc),
          fmt::format("LOCAL_WORLD_SIZE={}", o.nproc), "GROUP_RANK=0", fmt::format("ROLE_RANK={}", rank),
          "MASTER_ADDR=127.0.0.1", fmt::format("MASTER_PORT={}", port),
          "PYTHONPATH=" + python_abs + (pythonpath != nullptr && *pythonpath != 0 ? std::string(":") + pythonpath : ""),
          "LOCKSTEP_TORCH_DIR=" + raw_abs, std::string("LOCKSTEP_TORCH_MODE=") + (o.fake ? "fake" : "gloo")};
      if (std::getenv("OMP_NUM_THREADS") == nullptr) add.push_back("OMP_NUM_THREADS=1");  // as torchrun does
      launch.env = environment({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                                "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "LOCKSTEP_TORCH_DIR", "LOCKSTEP_TORCH_MODE"},
                               add);
      launch.output = (logs / fmt::format("rank-{}.txt", rank)).string();
      launches.push_back(std::move(launch));
    }
    run = run_processes(launches, o.timeout_s);
    if (!run->error.empty()) {
      err << "lockstep: error: " << run->error << "\n";
      return EXIT_BAD;
    }
    const int status = run->status();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !run->processes.front().stopped) {
      err << first_line_of(logs / "rank-0.txt") << "\n";  // could not exec: the child said why
      return EXIT_BAD;
    }
  }
  TorchMergeOptions merge;
  merge.name = torch_name(o);
  if (!o.command.empty()) merge.source = "lockstep record --torch: " + command_line(o.command);
  const std::vector<std::string> files = recordings_in(raw);
  TorchMergeResult merged = merge_torch_files(files, merge);
  bool failed = false;
  if (run) {
    const std::string mode = o.fake ? "--fake: no communication" : "gloo on CPU";
    out << fmt::format("lockstep record --torch: {} rank{} of {} ({})\n", o.nproc, o.nproc == 1 ? "" : "s",
                       command_line(o.command), mode);
    for (size_t rank = 0; rank < run->processes.size(); ++rank) {
      const ProcessOutcome& p = run->processes[rank];
      failed = failed || p.stopped || failed_status(p.status);
      std::string said;
      for (const TorchProcess& tp : merged.processes) {
        if (tp.rank != static_cast<int32_t>(rank)) continue;
        if (p.stopped || WIFSIGNALED(p.status)) said = "its last call: " + tp.last;
        else if (tp.ending != "exited") said = tp.ending;
      }
      if (said.empty() && !p.stopped && failed_status(p.status)) {
        said = last_line_of(logs / fmt::format("rank-{}.txt", rank));  // it died before recording anything
      }
      out << fmt::format("  rank {}: {}{}\n", rank, describe_status(p.status, p.stopped, o),
                         said.empty() ? "" : "; " + said);
    }
  }
  if (!report_merge(merged.warnings, merged.errors, merged.scenario.has_value(), files.size(), raw, err)) return EXIT_BAD;
  sim::Scenario& scenario = *merged.scenario;
  const std::string asked = merged.backend.empty() ? "" : fmt::format(" (the script asked for backend '{}')", merged.backend);
  scenario.description = merged.fake ? "Recorded by lockstep record --torch --fake: no communication; every rank ran its whole program" + asked + "."
                                     : "Recorded by lockstep record --torch: the ranks ran on CPU with gloo" + asked + ".";
  const std::string trace_path = (dir / "trace.jsonl").string();
  const std::string trace_text = sim::write_trace(scenario);
  const sim::LoadResult reloaded = sim::load_trace_text(trace_text, trace_path, {}, sim::LoadLimits{});
  if (!reloaded.ok()) {
    for (const sim::Diagnostic& d : reloaded.diagnostics) err << sim::format_diagnostic(d, trace_text);
    err << "lockstep record: internal error: the merged trace does not load; nothing written\n";
    return EXIT_BAD;
  }
  std::string sources = "# the torch.distributed call behind each op line of trace.jsonl (lockstep record --torch)\n";
  for (const TorchSource& s : merged.sources) {
    sources += fmt::format("{}:{}: {}: {}{} (rank {}, thread {})\n", trace_path, s.trace_line, s.source, s.call,
                           s.function.empty() ? "" : " in " + s.function + "()", s.rank, s.thread);
  }
  const std::string sources_path = (dir / "sources.txt").string();
  if (!write_whole(trace_path, trace_text, err) || !write_whole(sources_path, sources, err)) return EXIT_BAD;
  uint64_t calls = 0;
  for (const TorchProcess& p : merged.processes) calls += p.calls;
  out << fmt::format("recorded {} rank{}, {} torch.distributed call{} -> {}\n", scenario.world,
                     scenario.world == 1 ? "" : "s", calls, calls == 1 ? "" : "s", trace_path);
  if (!o.quiet) {
    if (!run) {
      for (const TorchProcess& p : merged.processes) {
        out << fmt::format("  {}: pid {}, {}, {} call{}, {}; last: {}\n", fs::path(p.file).filename().string(), p.pid,
                           p.rank >= 0 ? fmt::format("rank {}", p.rank) : "no rank", p.calls, p.calls == 1 ? "" : "s",
                           p.ending, p.last);
      }
    }
    for (const std::string& g : merged.groups) out << "  " << g << "\n";
    out << fmt::format("  the Python line of each op: {} (output of the ranks: {})\n", sources_path, logs.string());
    if (!o.check) out << fmt::format("next: lockstep check {}\n", trace_path);
  }
  if (o.check) {
    // A bug is the answer; else a run that failed or was stopped says the check saw only part of it.
    const int checked = check_recorded(trace_path, merged.sources, out, err);
    if (checked == EXIT_BAD || checked == 1) return checked;
    return failed ? EXIT_FAILED : checked;
  }
  return failed ? EXIT_FAILED : EXIT_OK;
}

}  // namespace

int run_record(const RecordOptions& options, std::ostream& out, std::ostream& err) {
  RecordOptions o = options;
  if (o.torch && !o.merge_only && !o.timeout_s) o.timeout_s = TORCH_DEFAULT_TIMEOUT_S;
  if (o.torch) return run_torch(o, out, err);
  const fs::path dir(o.dir);
  const fs::path raw = dir / "raw";
  std::error_code ec;
  std::optional<RunOutcome> run;
  if (!o.merge_only) {
    if (!prepare_raw(raw, err)) return EXIT_BAD;
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
    if (WIFEXITED(run->status()) && WEXITSTATUS(run->status()) == 127 && !run->timed_out) {
      return EXIT_BAD;  // could not exec: the child said why
    }
  }

  const std::vector<std::string> files = recordings_in(raw);
  const fs::directory_iterator listed(raw, ec);
  if (ec && o.merge_only) {
    err << fmt::format("{}: error: cannot list folder: {}\n", raw.string(), ec.message());
    return EXIT_BAD;
  }
  MergeOptions merge;
  merge.name = name_of(o);
  if (!o.command.empty()) merge.source = "lockstep record: " + command_line(o.command);
  const bool failed = run && (run->timed_out || failed_status(run->status()));
  std::ostream& text = out;
  if (run) {
    text << fmt::format("lockstep record: {} {}\n", shell_quote(o.command.front()),
                        describe_status(run->status(), run->timed_out, o));
  }
  MergeResult merged = merge_files(files, merge);
  if (!report_merge(merged.warnings, merged.errors, merged.scenario.has_value(), files.size(), raw, err)) return EXIT_BAD;
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
