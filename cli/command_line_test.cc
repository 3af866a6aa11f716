#include "cli/command_line.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing.h"

namespace lockstep::cli {

namespace {

using testing::CliRun;
using testing::run_lockstep;

// The usage error of `verb` ("" for none) as the user sees it.
std::string usage_error(const std::string& verb, const std::string& message) {
  return "lockstep: error: " + message + "\nrun 'lockstep " + (verb.empty() ? "" : verb + " ") + "--help' for usage\n";
}

// Every option each verb's help lists, as it names them.
const std::map<std::string, std::vector<std::string>>& verb_options() {
  static const std::vector<std::string> common = {"-D name=value",   "--seed N",        "--json FILE|-",
                                                  "--quiet",         "--max-world N",   "--max-file-bytes N",
                                                  "--max-nesting N", "--max-ops N",     "--max-repeat N",
                                                  "--max-call-depth N"};
  static const std::vector<std::string> log = {"--log-level L", "--log-ranks R,R,...", "--log FILE"};
  const auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  static const std::map<std::string, std::vector<std::string>> options = {
      {"check", with(common, {"--strategy S", "--max-executions N", "--pct-depth D", "--jobs N", "--time-budget S",
                              "--progress", "--max-bugs N", "--max-memory MIB", "--check-expect", "--cex-dir DIR",
                              "--minimize", "--minimize-budget N", "--junit FILE"})},
      {"run", with(with(common, {"--timeline FILE"}), log)},
      {"validate", common},
      {"replay", with(with(common, {"--sim, --mpi, --nccl", "--timeout S", "--order granted|free"}), log)},
      {"explain", with(common, {"--dot FILE"})},
      {"export", {"-o, --output FILE", "-D name=value"}},
      {"import", {"-o, --output FILE", "--name NAME", "--activation-bytes N", "--with-dp N", "--dp-bytes N",
                  "--eager-limit N", "--quiet"}},
      {"record", {"-o, --output DIR", "--name NAME", "--timeout S", "--lib PATH", "--merge-only", "--quiet", "--torch",
                  "--nproc N", "--fake", "--check"}},
  };
  return options;
}

}  // namespace

TEST_CASE("cli help: VERB --help exits 0 and lists every option of the verb with its description") {
  for (const auto& [verb, options] : verb_options()) {
    INFO(verb);
    const CliRun run = run_lockstep({verb, "--help"});
    CHECK(run.code == 0);
    CHECK(run.err == "");
    CHECK(run.out.rfind("usage:\n  lockstep " + verb + " ", 0) == 0);
    for (const std::string& option : options) {
      INFO(option);
      // The name column, then a description on the same line.
      const size_t at = run.out.find("\n  " + option + " ");
      REQUIRE(at != std::string::npos);
      const std::string line = run.out.substr(at + 1, run.out.find('\n', at + 1) - at - 1);
      CHECK(line.size() > 30);
    }
    CHECK(run.out.find("\n  -h, --help             print this help and exit\n") != std::string::npos);
    CHECK(run_lockstep({verb, "-h"}).out == run.out);
    CHECK(run_lockstep({"help", verb}).out == run.out);
  }
}

TEST_CASE("cli help: --help, -h and help print the verbs and the shared options, exit 0") {
  const CliRun run = run_lockstep({"--help"});
  CHECK(run.code == 0);
  CHECK(run.err == "");
  CHECK(run.out.rfind("usage: lockstep VERB ...\n\n  lockstep check    SCENARIO_OR_DIR... [options]   explore every "
                      "schedule; a verdict per input\n",
                      0) == 0);
  for (const auto& [verb, options] : verb_options()) CHECK(run.out.find("\n  lockstep " + verb + " ") != std::string::npos);
  for (const char* section : {"\ncommon options:\n  -D name=value          override a scenario parameter (repeatable)\n",
                              "\ncheck options:\n  --strategy S ", "\nrun and replay --sim options (docs/logging.md):\n",
                              "\nreplay options:\n", "\n'lockstep VERB --help' lists every option of a verb\n",
                              "\nexit codes: 0 no bug, 1 bug found, 2 bad input or usage, 3 inconclusive\n"}) {
    CHECK(run.out.find(section) != std::string::npos);
  }
  CHECK(run_lockstep({"-h"}).out == run.out);
  CHECK(run_lockstep({"help"}).out == run.out);
  CHECK(run_lockstep({"--version"}).out == "lockstep 0.1.0\n");
}

TEST_CASE("cli errors: unknown options and verbs exit 2 naming the verb, with a suggestion when one is close") {
  const std::string input = "scenarios/corpus/uneven-batches.yaml";
  CHECK(run_lockstep({"check", input, "--wat"}).err == usage_error("check", "unknown option '--wat' for 'check'"));
  CHECK(run_lockstep({"check", input, "--sed", "3"}).err ==
        usage_error("check", "unknown option '--sed' for 'check' (did you mean '--seed'?)"));
  CHECK(run_lockstep({"run", input, "--timelime=t.json"}).err ==
        usage_error("run", "unknown option '--timelime=t.json' for 'run' (did you mean '--timeline'?)"));
  CHECK(run_lockstep({"validate", input, "--strategy", "dfs"}).err ==
        usage_error("validate", "unknown option '--strategy' for 'validate'"));
  // "--" ends the options: what follows is an input even when it starts with '-'.
  CHECK(run_lockstep({"check", input, "--", "-x.yaml"}).err == "-x.yaml: error: cannot read file: No such file or directory\n");
  CHECK(run_lockstep({"import", "nccl-log", "x.log", "-o", "x.jsonl", "--wat"}).err ==
        usage_error("import", "unknown option '--wat' for 'import'"));
  CHECK(run_lockstep({"export", "promela", input, "--wat"}).err == usage_error("export", "unknown option '--wat' for 'export'"));
  CHECK(run_lockstep({"record", "-o", "d", "--wat", "--", "true"}).err ==
        usage_error("record", "unknown option '--wat' for 'record'"));
  const CliRun verb = run_lockstep({"chekc", input});
  CHECK(verb.code == 2);
  CHECK(verb.out == "");
  CHECK(verb.err == usage_error("", "unknown verb 'chekc' (did you mean 'check'?); verbs: check, explain, export, "
                                        "import, record, replay, run, sweep, validate"));
  CHECK(run_lockstep({}).err == usage_error("", "missing verb"));
}

TEST_CASE("cli errors: a missing value, a bad number and a bad word exit 2 with the option named") {
  const std::string input = "scenarios/corpus/uneven-batches.yaml";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"check", input, "--seed"}, usage_error("check", "--seed needs a value")},
      {{"check", input, "-D"}, usage_error("check", "-D needs name=value")},
      {{"export", "promela", input, "-o"}, usage_error("export", "-o needs a value")},
      {{"check", input, "--seed", "x"}, usage_error("check", "--seed expects a non-negative integer, got 'x'")},
      {{"run", input, "--max-ops=-3"}, usage_error("run", "--max-ops expects a non-negative integer, got '-3'")},
      {{"check", input, "-Dbatches"}, usage_error("check", "-D expects name=value, got 'batches'")},
      {{"check", input, "--jobs", "0"}, usage_error("check", "--jobs must be between 1 and 256")},
      {{"check", input, "--time-budget", "soon"},
       usage_error("check", "--time-budget expects a positive number of seconds, got 'soon'")},
      {{"check", input, "--strategy", "dpo"},
       usage_error("check", "unknown strategy 'dpo' (did you mean 'dpor'?); strategies: dfs, dpor, odpor, pct, random")},
      {{"replay", input, "--order", "any"}, usage_error("replay", "--order is granted or free, not 'any'")},
      {{"import", "pipeline-csv", "x.csv", "-o", "x.jsonl", "--dp-bytes", "lots"},
       usage_error("import", "--dp-bytes expects a non-negative integer, got 'lots'")},
      {{"import", "flight-recordr", "x", "-o", "x.jsonl"},
       usage_error("import", "unknown import format 'flight-recordr' (did you mean 'flight-recorder'?); formats: "
                             "flight-recorder, nccl-log, pipeline-csv")},
      {{"record", "-o", "d", "--timeout", "-1", "--", "true"},
       usage_error("record", "--timeout expects a positive number of seconds, got '-1'")},
  };
  for (const auto& [args, message] : cases) {
    INFO(args.back());
    const CliRun run = run_lockstep(args);
    CHECK(run.code == 2);
    CHECK(run.out == "");
    CHECK(run.err == message);
  }
}

TEST_CASE("cli errors: inputs, and options that need or exclude others, exit 2 with what is missing") {
  const std::string input = "scenarios/corpus/uneven-batches.yaml";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"check"}, usage_error("check", "check needs at least one scenario or folder")},
      {{"run", input, input}, usage_error("run", "run needs exactly one scenario")},
      {{"explain"}, usage_error("explain", "explain needs exactly one counterexample")},
      {{"check", input, "--minimize-budget", "3"}, usage_error("check", "--minimize-budget needs --minimize")},
      {{"export", "promela", input, input, "-o", "x"}, usage_error("export", "one scenario at a time, got '" + input + "' too")},
      {{"import", "pipeline-csv", "a.csv", "b.csv", "-o", "x"}, usage_error("import", "import pipeline-csv takes one CSV file")},
      {{"import", "nccl-log", "a.log"}, usage_error("import", "import needs -o OUT.jsonl")},
      {{"record", "--", "true"}, usage_error("record", "record needs -o DIR")},
      {{"record", "-o", "d", "true"},
       usage_error("record", "unexpected 'true': the command to record goes after '--' (lockstep record -o DIR -- CMD ARGS...)")},
      {{"record", "-o", "d", "--merge-only", "--timeout", "3"}, usage_error("record", "--timeout needs a command")},
      {{"record", "-o", "d", "--nproc", "2", "--", "true"}, usage_error("record", "--nproc needs --torch")},
      {{"record", "-o", "d", "--fake", "--check", "--", "true"}, usage_error("record", "--fake needs --torch")},
      {{"record", "-o", "d", "--torch", "--lib", "x.so", "--nproc", "1", "--", "true"},
       usage_error("record", "--lib is the NCCL recorder's; --torch records through Python")},
  };
  for (const auto& [args, message] : cases) {
    INFO(args.back());
    const CliRun run = run_lockstep(args);
    CHECK(run.code == 2);
    CHECK(run.err == message);
  }
}

TEST_CASE("cli parse: values by space or '=', the last one given wins, -D repeats, everything after '--' is the command") {
  CommandLine line = parse_command_line({"check", "a.yaml", "--seed=3", "--seed", "7", "-Dx=1", "-D", "y=2", "b.yaml",
                                         "--json", "-", "--max-ops", "99"});
  CHECK(line.verb == "check");
  CHECK(line.options.inputs == std::vector<std::string>{"a.yaml", "b.yaml"});
  CHECK(line.options.seed == 7);
  CHECK(line.options.check.seed == 7);
  REQUIRE(line.options.overrides.size() == 2);
  CHECK(line.options.overrides[1].name == "y");
  CHECK(line.options.overrides[1].value == "2");
  CHECK(line.options.json_path == "-");
  CHECK(line.options.check.engine.limits.max_ops == 99);
  CHECK(line.options.load_limits.max_ops == 99);
  CHECK(line.options.check.time_budget_s == 600);
  CHECK(parse_command_line({"run", "a.yaml"}).options.check.time_budget_s == 0);
  CHECK(parse_command_line({"replay", "a.json", "--nccl", "--sim"}).options.backend == "sim");
  CHECK(parse_command_line({"replay", "a.json", "--sim", "--mpi"}).options.backend == "mpi");

  line = parse_command_line({"record", "-o", "out", "--torch", "--nproc", "2", "--", "python3", "t.py", "--help", "--",
                             "-o", "x"});
  CHECK(line.verb == "record");
  CHECK(line.err == "");
  CHECK(line.record_options.dir == "out");
  CHECK(line.record_options.nproc == 2);
  CHECK(line.record_options.command == std::vector<std::string>{"python3", "t.py", "--help", "--", "-o", "x"});
  line = parse_command_line({"import", "pipeline-csv", "x.csv", "-o=x.jsonl", "--with-dp=2"});
  CHECK(line.import_options.output == "x.jsonl");
  CHECK(line.import_options.pipeline.data_parallel == 2);
}

TEST_CASE("export promela: the command writes the model, and refuses bad usage with exit 2") {
  CliRun run = run_lockstep({"export", "promela", "scenarios/corpus/uneven-batches.yaml"});
  CHECK(run.code == 2);
  CHECK(run.err.find("missing -o FILE") != std::string::npos);
  run = run_lockstep({"export", "smv", "scenarios/corpus/uneven-batches.yaml", "-o", "x"});
  CHECK(run.code == 2);
  CHECK(run.err.find("unknown format 'smv'; formats: promela") != std::string::npos);
  const std::string path = (testing::fresh_temp_dir("lockstep-command-line-test", "export") / "model.pml").string();
  run = run_lockstep({"export", "promela", "scenarios/corpus/uneven-batches.yaml", "-o", path, "-D", "batches=2"});
  CHECK(run.code == 0);
  CHECK(testing::file_bytes(path).find("(scenario uneven-batches)") != std::string::npos);
}

}  // namespace lockstep::cli
