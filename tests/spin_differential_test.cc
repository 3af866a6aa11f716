// The SPIN oracle (docs/spin.md): for every scenario in scenarios/ within the subset that
// `lockstep export promela` models, and for a few hundred small generated ones, SPIN's verdict
// on the exported model equals lockstep's. A stuck execution (deadlock, hang) is an invalid end
// state (or, batched, the watchdog's assertion), a mismatch an assertion violation. Compared as
// sets of bug kinds over the whole space: each tool explores in its own order, so "the first
// bug" is no common ground. Skips when spin or gcc is absent.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "checker/explore.h"
#include "checker/sampling.h"
#include "export/promela.h"
#include "sim/loader.h"
#include "sim/trace_format.h"
#include "tests/generated_scenarios.h"

namespace lockstep {

namespace {

namespace fs = std::filesystem;

// Runs a shell command; its output (stdout and stderr) and exit status.
struct Ran {
  int status = -1;
  std::string output;
};

Ran shell(const std::string& command) {
  Ran ran;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return ran;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) ran.output.append(buffer, n);
  const int status = ::pclose(pipe);
  ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

bool have_tools() {
  return shell("command -v spin && command -v gcc && command -v timeout && command -v xargs").status == 0;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// What a tool found over the whole space: some execution stuck, some mismatched.
struct Kinds {
  bool stuck = false;
  bool mismatch = false;
  bool operator==(const Kinds&) const = default;
};

std::string describe(const Kinds& kinds) {
  if (!kinds.stuck && !kinds.mismatch) return "ok";
  if (kinds.stuck && kinds.mismatch) return "stuck+mismatch";
  return kinds.stuck ? "stuck (deadlock/hang)" : "mismatch";
}

struct LockstepSide {
  bool comparable = false;  // explored exhaustively, no run-time error, no timeout verdict
  Kinds kinds;
  std::string trace;        // every bug's explanation
};

LockstepSide check_with_lockstep(const sim::Scenario& scenario) {
  checker::CheckOptions options;
  options.strategy = "dpor";
  options.max_executions = 200'000;
  const checker::CheckResult result = checker::check_scenario(scenario, options);
  LockstepSide side;
  if (result.error || !result.exhaustive) return side;
  side.comparable = true;
  for (const checker::Bug& bug : result.bugs) {
    if (bug.kind == sim::Verdict::TIMEOUT) side.comparable = false;
    if (bug.kind == sim::Verdict::DEADLOCK || bug.kind == sim::Verdict::HANG) side.kinds.stuck = true;
    if (bug.kind == sim::Verdict::MISMATCH) side.kinds.mismatch = true;
    side.trace += fmt::format("  {}: {}\n", sim::verdict_name(bug.kind), bug.summary);
    for (const std::string& line : bug.explanation) side.trace += "    " + line + "\n";
    std::string schedule;
    for (uint32_t choice : bug.schedule) schedule += fmt::format("{} ", choice);
    side.trace += fmt::format("    schedule (option indices): {}\n", schedule);
  }
  return side;
}

// spin -a and gcc in `dir`; the pan binary's path, or "" with the failure in `log`.
std::string build_pan(const fs::path& dir, const std::string& model_file, int64_t vector_bytes, std::string& log) {
  const Ran spin = shell(fmt::format("cd {} && spin -a {}", quoted(dir), model_file));
  if (spin.status != 0) {
    log = spin.output;
    return "";
  }
  const Ran gcc = shell(fmt::format("cd {} && gcc -O0 -w -DSAFETY -DNOFAIR -DVECTORSZ={} -o pan pan.c", quoted(dir),
                                    std::max<int64_t>(vector_bytes, 1024)));
  if (gcc.status != 0) {
    log = gcc.output;
    return "";
  }
  return (dir / "pan").string();
}

// SPIN's trail of the first error of a model alone (for a disagreement's report).
std::string spin_trail(const fs::path& dir, const std::string& model_file, const std::string& pan_flags) {
  const Ran pan = shell(fmt::format("cd {} && timeout 20 ./pan {} -w20 -m1000000 | head -5", quoted(dir), pan_flags));
  const Ran trail = shell(fmt::format("cd {} && timeout 20 spin -t -p -g {} | tail -80", quoted(dir), model_file));
  return pan.output + trail.output;
}

std::vector<std::string> scenario_files() {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator("scenarios")) {
    if (entry.is_regular_file() && (entry.path().extension() == ".yaml" || entry.path().extension() == ".jsonl")) {
      files.push_back(entry.path().generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// LOCKSTEP_SPIN_KEEP=1 keeps the models and pan binaries (in the temporary folder) for a look.
void clean(const fs::path& dir) {
  if (std::getenv("LOCKSTEP_SPIN_KEEP") == nullptr) fs::remove_all(dir);
}

fs::path work_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("lockstep-spin-{}-{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A scenario to compare, with its model for a batch.
struct Case {
  std::string name;  // a path, or "generated scenario N"
  sim::Scenario scenario;
  std::string text;  // generated: the YAML
  LockstepSide ours;
  std::string prefix;
  exporter::PromelaModel model;
};

// A model alone, as the user exports it: SPIN's trail of the error lockstep disagrees on.
std::string trail_alone(const fs::path& dir, const Case& c, bool stuck_differs) {
  fs::create_directories(dir);
  const exporter::PromelaExport alone = exporter::export_promela(c.scenario);
  if (!alone.model) return "(not exported alone)";
  std::ofstream(dir / "model.pml") << alone.model->text;
  std::string log;
  if (build_pan(dir, "model.pml", alone.model->vector_bytes, log).empty()) return log;
  return (dir / "model.pml").string() + "\n" + spin_trail(dir, "model.pml", stuck_differs ? "-A" : "-E");
}

// SPIN on the cases, `per_batch` models to a pan binary (compiling pan.c is the fixed cost), the
// batches built and run in parallel (xargs -P, one per core); every disagreement fails with both
// traces. Counts what SPIN found.
void compare_in_batches(const std::vector<Case>& cases, const fs::path& dir, size_t per_batch, int& stuck,
                        int& mismatches) {
  const size_t BATCH = per_batch;
  std::string list;
  std::vector<fs::path> batches;
  for (size_t first = 0; first < cases.size(); first += BATCH) {
    const size_t last = std::min(cases.size(), first + BATCH);
    std::vector<exporter::PromelaModel> models;
    int64_t vector_bytes = 0;
    for (size_t i = first; i < last; ++i) {
      models.push_back(cases[i].model);
      vector_bytes += cases[i].model.vector_bytes;
    }
    const fs::path batch = dir / fmt::format("batch{}", first / BATCH);
    fs::create_directories(batch);
    std::ofstream(batch / "model.pml") << exporter::promela_batch(models);
    std::ofstream(batch / "vectorsz") << std::max<int64_t>(vector_bytes, 1024);
    batches.push_back(batch);
    list += batch.string() + "\n";
  }
  std::ofstream(dir / "batches") << list;
  const unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  // -c0: go on past errors, reporting each; -E: the watchdog reports stuck states instead.
  const Ran ran = shell(fmt::format(
      "xargs -P {} -I@ sh -c 'cd @ && spin -a model.pml > build.log 2>&1 && "
      "gcc -O0 -w -DSAFETY -DNOFAIR -DVECTORSZ=$(cat vectorsz) -o pan pan.c >> build.log 2>&1 && "
      "timeout 300 ./pan -c0 -E -w22 -m2000000 > pan.out 2>&1' < {}",
      jobs, quoted(dir / "batches")));
  INFO(ran.output);
  for (size_t b = 0; b < batches.size(); ++b) {
    std::ifstream in(batches[b] / "pan.out");
    const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ifstream build(batches[b] / "build.log");
    const std::string build_log((std::istreambuf_iterator<char>(build)), std::istreambuf_iterator<char>());
    REQUIRE_MESSAGE(output.find("errors:") != std::string::npos, batches[b].string() << ":\n" << build_log << output);
    CHECK(output.find("max search depth too small") == std::string::npos);
    for (size_t i = b * BATCH; i < std::min(cases.size(), (b + 1) * BATCH); ++i) {
      const Case& c = cases[i];
      Kinds theirs;
      theirs.stuck = output.find(fmt::format("({}fin==", c.prefix)) != std::string::npos;
      theirs.mismatch = output.find(fmt::format("!({}mismatched)", c.prefix)) != std::string::npos;
      stuck += theirs.stuck ? 1 : 0;
      mismatches += theirs.mismatch ? 1 : 0;
      if (theirs == c.ours.kinds) continue;
      FAIL_CHECK(fmt::format("{}: lockstep says {}, SPIN says {}\n{}\nlockstep:\n{}SPIN: {}", c.name, describe(c.ours.kinds),
                             describe(theirs), c.text, c.ours.trace,
                             trail_alone(dir / fmt::format("case{}", i), c, theirs.stuck != c.ours.kinds.stuck)));
    }
  }
}

// The case of a scenario within the subset whose space lockstep covers, or nullopt.
std::optional<Case> make_case(const sim::Scenario& scenario, std::string name, size_t index) {
  exporter::PromelaOptions options;
  options.prefix = fmt::format("m{}_", index);
  options.stuck_as_assertion = true;
  exporter::PromelaExport exported = exporter::export_promela(scenario, options);
  if (!exported.model) return std::nullopt;
  Case c{std::move(name), scenario, "", {}, options.prefix, std::move(*exported.model)};
  return c;
}

}  // namespace

TEST_CASE("spin differential: every scenario in scenarios/ within the subset gets lockstep's verdict from SPIN") {
  if (!have_tools()) {
    MESSAGE("skipped: spin, gcc or timeout not found (scripts/setup installs spin)");
    return;
  }
  const fs::path dir = work_dir("corpus");
  std::vector<Case> cases;
  std::vector<std::string> refused;
  std::vector<std::string> too_big;
  for (const std::string& path : scenario_files()) {
    sim::LoadResult loaded = path.ends_with(".jsonl") ? sim::load_trace_file(path, {}) : sim::load_scenario_file(path, {});
    REQUIRE_MESSAGE(loaded.ok(), path);
    std::optional<Case> c = make_case(*loaded.scenario, path, cases.size());
    if (!c) {
      refused.push_back(fs::path(path).stem().string());
      continue;
    }
    // SPIN's state space grows with every interleaving of the ranks' processes: a model of more
    // than twelve runs past the test's budget (bench/spin_bench.sh measures that).
    if (c->model.processes > 12) {
      too_big.push_back(fs::path(path).stem().string());
      continue;
    }
    c->ours = check_with_lockstep(*loaded.scenario);
    if (c->ours.comparable) cases.push_back(std::move(*c));
  }
  int stuck = 0;
  int mismatches = 0;
  compare_in_batches(cases, dir, 9, stuck, mismatches);  // a few large state spaces: spread them
  std::string refused_list;
  for (const std::string& name : refused) refused_list += " " + name;
  std::string big_list;
  for (const std::string& name : too_big) big_list += " " + name;
  MESSAGE("compared ", cases.size(), " scenarios (SPIN: ", stuck, " stuck, ", mismatches, " mismatched); outside the subset:",
          refused_list, "; too large for the test:", big_list);
  CHECK(cases.size() >= 20);  // the corpus holds at least this many within the subset
  clean(dir);
}

TEST_CASE("spin differential: the model alone reports a stuck run as an invalid end state and a mismatch as an assertion") {
  if (!have_tools()) {
    MESSAGE("skipped: spin, gcc or timeout not found (scripts/setup installs spin)");
    return;
  }
  const fs::path dir = work_dir("alone");
  struct Expected {
    const char* path;
    Kinds kinds;
  };
  for (const Expected& e : {Expected{"scenarios/corpus/head-to-head-sends.yaml", {true, false}},
                            Expected{"scenarios/corpus/allreduce-size-differs.yaml", {false, true}},
                            Expected{"scenarios/corpus/rank-crash.yaml", {true, false}},
                            Expected{"scenarios/examples/wildcard-gather.yaml", {false, false}}}) {
    INFO(e.path);
    sim::LoadResult loaded = sim::load_scenario_file(e.path, {});
    REQUIRE(loaded.ok());
    const exporter::PromelaExport exported = exporter::export_promela(*loaded.scenario);
    REQUIRE(exported.model);
    std::ofstream(dir / "model.pml") << exported.model->text;
    std::string log;
    REQUIRE_MESSAGE(!build_pan(dir, "model.pml", exported.model->vector_bytes, log).empty(), log);
    // -A: assertions off (a mismatch drains the model), so an invalid end state is a stuck run;
    // -E: invalid end states off, so an assertion violation is a mismatch.
    const Ran a = shell(fmt::format("cd {} && timeout 60 ./pan -A -w20 -m1000000", quoted(dir)));
    const Ran e_run = shell(fmt::format("cd {} && timeout 60 ./pan -E -w20 -m1000000", quoted(dir)));
    REQUIRE_MESSAGE(a.output.find("errors:") != std::string::npos, a.output);
    REQUIRE_MESSAGE(e_run.output.find("errors:") != std::string::npos, e_run.output);
    Kinds theirs;
    theirs.stuck = a.output.find(": invalid end state") != std::string::npos;
    theirs.mismatch = e_run.output.find(": assertion violated") != std::string::npos;
    CHECK_MESSAGE(theirs == e.kinds, a.output << e_run.output);
    CHECK(check_with_lockstep(*loaded.scenario).kinds == e.kinds);
  }
  clean(dir);
}

TEST_CASE("spin differential: a few hundred generated scenarios get lockstep's verdict from SPIN") {
  if (!have_tools()) {
    MESSAGE("skipped: spin, gcc or timeout not found (scripts/setup installs spin)");
    return;
  }
  const char* runs_env = std::getenv("LOCKSTEP_SPIN_RUNS");
  const int runs = runs_env ? std::max(1, std::atoi(runs_env)) : 450;
  const fs::path dir = work_dir("generated");
  checker::Rng rng(20260909);
  std::vector<Case> cases;
  int refused = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string text = testing::generate_scenario(rng);
    sim::LoadResult loaded = sim::load_scenario_text(text, "generated.yaml", {});
    REQUIRE_MESSAGE(loaded.ok(), text);
    std::optional<Case> c = make_case(*loaded.scenario, fmt::format("generated scenario {}", i), cases.size());
    if (!c) {
      ++refused;  // comm_concurrency, async or a watchdog: outside the subset
      continue;
    }
    c->text = text;
    c->ours = check_with_lockstep(*loaded.scenario);
    if (c->ours.comparable) cases.push_back(std::move(*c));
  }
  int stuck = 0;
  int mismatches = 0;
  compare_in_batches(cases, dir, 40, stuck, mismatches);
  MESSAGE("compared ", cases.size(), " generated scenarios (", refused, " outside the subset): SPIN found ", stuck,
          " stuck and ", mismatches, " mismatched");
  if (!runs_env) CHECK(cases.size() >= 200);
  clean(dir);
}

}  // namespace lockstep
