// Inputs told apart by content, import's output name, and inputs without `expect:`.
#include "cli/cli.h"
#include "tests/testing.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace lockstep::cli {

namespace {

struct Result {
  int code = 0;
  std::string out;
  std::string err;
};

Result call(std::vector<std::string> args) {
  std::ostringstream out, err;
  Result r;
  r.code = run_cli(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace

TEST_CASE("inputs: a trace is a trace whatever its extension, for check, run, validate and replay") {
  const std::filesystem::path dir = testing::fresh_temp_dir("lockstep-input-format-test", "trace-as-yaml");
  const std::filesystem::path renamed = dir / "hang.yaml";
  std::filesystem::copy_file("scenarios/examples/recorded-dp-hang.jsonl", renamed);
  const Result original = call({"check", "scenarios/examples/recorded-dp-hang.jsonl", "--quiet"});
  const Result check = call({"check", renamed.string(), "--quiet"});
  INFO(check.err);
  CHECK(check.code == original.code);
  CHECK(check.out.substr(check.out.find(':')) == original.out.substr(original.out.find(':')));
  CHECK(call({"validate", renamed.string()}).code == EXIT_NO_BUG);
  CHECK(call({"run", renamed.string(), "--quiet"}).code == call({"run", "scenarios/examples/recorded-dp-hang.jsonl", "--quiet"}).code);
  const std::filesystem::path other = dir / "hang.txt";
  std::filesystem::copy_file("scenarios/examples/recorded-dp-hang.jsonl", other);
  CHECK(call({"replay", other.string(), "--sim"}).code == call({"replay", "scenarios/examples/recorded-dp-hang.jsonl", "--sim"}).code);
  // A scenario named .jsonl is still read as YAML.
  const std::filesystem::path yaml = dir / "uneven.jsonl";
  std::filesystem::copy_file("scenarios/corpus/uneven-batches.yaml", yaml);
  CHECK(call({"check", yaml.string(), "--quiet"}).code == EXIT_BUG);
}

TEST_CASE("inputs: a scenario without expect: has no expectation, not a difference") {
  const std::filesystem::path dir = testing::fresh_temp_dir("lockstep-input-format-test", "no-expect");
  std::ofstream(dir / "x.yaml") << "scenario: x\nworld: 2\nprogram:\n  - repeat: \"2 - rank\"\n    do: [{allreduce: {size: 4}}]\n";
  const Result check = call({"check", (dir / "x.yaml").string(), "--quiet"});
  CHECK(check.out == (dir / "x.yaml").string() + ": hang (no expectation) [1 execution, exhaustive]\n");
}

TEST_CASE("import -o X.yaml is refused, naming the .jsonl to use") {
  const std::filesystem::path dir = testing::fresh_temp_dir("lockstep-input-format-test", "import-yaml");
  const std::string out = (dir / "hang.yaml").string();
  const Result import = call({"import", "pipeline-csv", "tests/import/pipeline/1f1b-compute-only.csv", "-o", out});
  CHECK(import.code == EXIT_BAD_INPUT);
  CHECK(import.err == "lockstep: error: -o " + out + ": import writes a JSON Lines trace, not YAML; name it " +
                          (dir / "hang.jsonl").generic_string() + "\n");
  CHECK_FALSE(std::filesystem::exists(out));
}

}  // namespace lockstep::cli
