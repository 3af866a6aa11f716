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
#include <set>
#include <string>
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
  return shell("command -v spin && command -v gcc && command -v timeout").status == 0;
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

fs::path work_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("lockstep-spin-{}-{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("spin differential: every scenario in scenarios/ within the subset gets lockstep's verdict from SPIN") {
  if (!have_tools()) {
    MESSAGE("skipped: spin, gcc or timeout not found (scripts/setup installs spin)");
    return;
  }
  const fs::path dir = work_dir("corpus");
  int compared = 0;
  std::vector<std::string> refused;
  std::vector<std::string> too_big;
  for (const std::string& path : scenario_files()) {
    sim::LoadResult loaded = path.ends_with(".jsonl") ? sim::load_trace_file(path, {}) : sim::load_scenario_file(path, {});
    REQUIRE_MESSAGE(loaded.ok(), path);
    const exporter::PromelaExport exported = exporter::export_promela(*loaded.scenario);
    if (!exported.model) {
      refused.push_back(fs::path(path).stem().string());
      continue;
    }
    // SPIN's state space grows with every interleaving of the ranks' processes: a model of more
    // than twelve runs past the test's budget (bench/spin_bench.sh measures that).
    if (exported.model->processes > 12) {
      too_big.push_back(fs::path(path).stem().string());
      continue;
    }
    const LockstepSide ours = check_with_lockstep(*loaded.scenario);
    if (!ours.comparable) continue;
    const std::string file = fs::path(path).stem().string() + ".pml";
    std::ofstream(dir / file) << exported.model->text;
    std::string log;
    const std::string pan = build_pan(dir, file, exported.model->vector_bytes, log);
    REQUIRE_MESSAGE(!pan.empty(), path << ": the exported model does not build:\n" << log);
    // -A: assertions off (a mismatch drains the model), so an invalid end state is a stuck run;
    // -E: invalid end states off, so an assertion violation is a mismatch.
    const Ran stuck = shell(fmt::format("cd {} && timeout 60 ./pan -A -w22 -m2000000", quoted(dir)));
    const Ran mismatch = shell(fmt::format("cd {} && timeout 60 ./pan -E -w22 -m2000000", quoted(dir)));
    INFO(path);
    REQUIRE_MESSAGE(stuck.output.find("errors:") != std::string::npos, stuck.output);
    REQUIRE_MESSAGE(mismatch.output.find("errors:") != std::string::npos, mismatch.output);
    CHECK_MESSAGE(stuck.output.find("max search depth too small") == std::string::npos, stuck.output);
    Kinds theirs;
    theirs.stuck = stuck.output.find(": invalid end state") != std::string::npos;
    theirs.mismatch = mismatch.output.find(": assertion violated") != std::string::npos;
    if (theirs != ours.kinds) {
      const std::string flags = theirs.stuck != ours.kinds.stuck ? "-A" : "-E";
      FAIL_CHECK(fmt::format("{}: lockstep says {}, SPIN says {}\nlockstep:\n{}SPIN ({}):\n{}", path, describe(ours.kinds),
                             describe(theirs), ours.trace, (dir / file).string(), spin_trail(dir, file, flags)));
    }
    ++compared;
  }
  std::string refused_list;
  for (const std::string& name : refused) refused_list += " " + name;
  std::string big_list;
  for (const std::string& name : too_big) big_list += " " + name;
  MESSAGE("compared ", compared, " scenarios; outside the subset:", refused_list, "; over 12 processes:", big_list);
  CHECK(compared >= 20);  // the corpus holds at least this many within the subset
  fs::remove_all(dir);
}

TEST_CASE("spin differential: a few hundred generated scenarios get lockstep's verdict from SPIN") {
  if (!have_tools()) {
    MESSAGE("skipped: spin, gcc or timeout not found (scripts/setup installs spin)");
    return;
  }
  const char* runs_env = std::getenv("LOCKSTEP_SPIN_RUNS");
  const int runs = runs_env ? std::max(1, std::atoi(runs_env)) : 450;
  constexpr size_t BATCH = 40;  // models per pan binary: compiling pan.c is the fixed cost
  const fs::path dir = work_dir("generated");
  checker::Rng rng(20260909);
  struct Case {
    std::string text;
    LockstepSide ours;
    std::string prefix;
    exporter::PromelaModel model;
  };
  std::vector<Case> cases;
  int refused = 0;
  for (int i = 0; i < runs; ++i) {
    Case c;
    c.text = testing::generate_scenario(rng);
    sim::LoadResult loaded = sim::load_scenario_text(c.text, "generated.yaml", {});
    REQUIRE_MESSAGE(loaded.ok(), c.text);
    exporter::PromelaOptions options;
    c.prefix = fmt::format("m{}_", i);
    options.prefix = c.prefix;
    options.stuck_as_assertion = true;
    exporter::PromelaExport exported = exporter::export_promela(*loaded.scenario, options);
    if (!exported.model) {
      ++refused;  // comm_concurrency, async or a watchdog: outside the subset
      continue;
    }
    c.ours = check_with_lockstep(*loaded.scenario);
    if (!c.ours.comparable) continue;
    c.model = std::move(*exported.model);
    cases.push_back(std::move(c));
  }
  int compared = 0;
  int stuck = 0;
  int mismatches = 0;
  for (size_t first = 0; first < cases.size(); first += BATCH) {
    const size_t last = std::min(cases.size(), first + BATCH);
    std::vector<exporter::PromelaModel> models;
    int64_t vector_bytes = 0;
    for (size_t i = first; i < last; ++i) {
      models.push_back(cases[i].model);
      vector_bytes += cases[i].model.vector_bytes;
    }
    const std::string file = fmt::format("batch{}.pml", first / BATCH);
    std::ofstream(dir / file) << exporter::promela_batch(models);
    std::string log;
    const std::string pan = build_pan(dir, file, vector_bytes, log);
    REQUIRE_MESSAGE(!pan.empty(), "a batch does not build:\n" << log);
    // -c0: go on past errors, reporting each; -E: the watchdog reports stuck states instead.
    const Ran ran = shell(fmt::format("cd {} && timeout 120 ./pan -c0 -E -w22 -m200000", quoted(dir)));
    REQUIRE_MESSAGE(ran.output.find("errors:") != std::string::npos, ran.output);
    CHECK(ran.output.find("max search depth too small") == std::string::npos);
    for (size_t i = first; i < last; ++i) {
      const Case& c = cases[i];
      Kinds theirs;
      theirs.stuck = ran.output.find(fmt::format("({}fin==", c.prefix)) != std::string::npos;
      theirs.mismatch = ran.output.find(fmt::format("!({}mismatched)", c.prefix)) != std::string::npos;
      stuck += theirs.stuck ? 1 : 0;
      mismatches += theirs.mismatch ? 1 : 0;
      ++compared;
      if (theirs == c.ours.kinds) continue;
      // The disagreement alone, as the user would export it, with SPIN's trail.
      const fs::path one = dir / fmt::format("case{}", i);
      fs::create_directories(one);
      std::ofstream(one / "generated.yaml") << c.text;
      const exporter::PromelaExport alone =
          exporter::export_promela(*sim::load_scenario_text(c.text, "generated.yaml", {}).scenario);
      std::string trail;
      if (alone.model) {
        std::ofstream(one / "model.pml") << alone.model->text;
        std::string build_log;
        if (!build_pan(one, "model.pml", alone.model->vector_bytes, build_log).empty()) {
          trail = spin_trail(one, "model.pml", theirs.stuck != c.ours.kinds.stuck ? "-A" : "-E");
        }
      }
      FAIL_CHECK(fmt::format("generated scenario {}: lockstep says {}, SPIN says {}\n{}\nlockstep:\n{}SPIN ({}):\n{}", i,
                             describe(c.ours.kinds), describe(theirs), c.text, c.ours.trace,
                             (one / "model.pml").string(), trail));
    }
  }
  MESSAGE("compared ", compared, " generated scenarios (", refused, " outside the subset): SPIN found ", stuck,
          " stuck and ", mismatches, " mismatched");
  if (!runs_env) CHECK(compared >= 200);
  fs::remove_all(dir);
}

}  // namespace lockstep
