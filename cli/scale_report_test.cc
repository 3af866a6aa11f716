// Reports at scale: a 64-rank hang on a mesh reads as ranges and coordinates, `run` prints a
// bounded summary, the counterexample keeps a bounded op list, and the DOT graph and the HTML
// timeline fold ranks in identical states.
#include "cli/cli.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/testing.h"

namespace lockstep::cli {

namespace {

std::filesystem::path scale_dir() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "lockstep-scale-test";
  std::filesystem::create_directories(dir);
  return dir;
}

// 64 ranks (tp 4, pp 2, dp 8); rank 63 skips its last dp all-reduce.
constexpr const char* MESH_HANG = R"(scenario: mesh-skip
expect: hang
mesh: {tp: 4, pp: 2, dp: 8}
program:
  - repeat: 60
    do:
      - allreduce: {group: tp, size: 1MiB}
  - if: "rank != 63"
    then:
      - allreduce: {group: dp, size: 4KiB}
)";

std::string write(const std::string& name, const std::string& text) {
  const std::string path = (scale_dir() / name).string();
  std::ofstream(path) << text;
  return path;
}

size_t longest_line(const std::string& text) {
  std::istringstream in(text);
  size_t longest = 0;
  for (std::string line; std::getline(in, line);) longest = std::max(longest, line.size());
  return longest;
}

}  // namespace

TEST_CASE("scale: a 64-rank mesh hang names ranges, coordinates and the group instance") {
  const std::string input = write("mesh-skip.yaml", MESH_HANG);
  const std::filesystem::path cex_dir = scale_dir() / "cex";
  std::filesystem::remove_all(cex_dir);
  const testing::CliRun check = testing::run_lockstep({"check", input, "--cex-dir", cex_dir.string()});
  CHECK(check.code == EXIT_BUG);
  CHECK(check.out.find("  ranks 7,15,...,55 (dp=0-6, pp=1, tp=3) wait in allreduce #1 on dp[pp=1,tp=3] (") != std::string::npos);
  CHECK(check.out.find("rank 63 (dp=7, pp=1, tp=3) never issued it: it finished") != std::string::npos);
  CHECK(longest_line(check.out) < 200 + input.size());
  // --html: the folded graph, three nodes, drawn in the page.
  const std::string html = (scale_dir() / "report.html").string();
  CHECK(testing::run_lockstep({"check", input, "--html", html, "--quiet"}).code == EXIT_BUG);
  std::ifstream page(html);
  const std::string page_text((std::istreambuf_iterator<char>(page)), {});
  size_t nodes = 0;
  for (size_t at = page_text.find("<g class=\"node"); at != std::string::npos; at = page_text.find("<g class=\"node", at + 1)) ++nodes;
  CHECK(nodes == 3);
  // Its timeline folds the same way: the bystanders, the waiting ranks, the rank they wait for.
  size_t rows = 0;
  for (size_t at = page_text.find("<g class=\"timeline-row\""); at != std::string::npos;
       at = page_text.find("<g class=\"timeline-row\"", at + 1)) {
    ++rows;
  }
  CHECK(rows == 3);
  CHECK(page_text.find("class=\"head\">ranks 7,15,...,55 (7 ranks): waits in allreduce #1 on dp</text>") != std::string::npos);
  CHECK(page_text.find("class=\"head\">rank 63: finished at ") != std::string::npos);
  CHECK(page_text.size() < 20'000);

  // The counterexample lists the ranks the bug involves, each with its last ops, and says so.
  std::filesystem::path cex;
  for (const auto& entry : std::filesystem::directory_iterator(cex_dir)) cex = entry.path();
  REQUIRE(!cex.empty());
  std::ifstream in(cex);
  const nlohmann::json json = nlohmann::json::parse(in);
  CHECK(json["listed"].contains("bound_hit"));
  CHECK(json["listed"]["ops"].get<uint64_t>() <= 1500);
  CHECK(json["ranks"].size() == 8);
  CHECK(std::filesystem::file_size(cex) < 1'000'000);

  // The DOT graph: the waiting ranks, the rank they wait for, the bystanders.
  const std::string dot = (scale_dir() / "mesh.dot").string();
  const testing::CliRun explain = testing::run_lockstep({"explain", cex.string(), "--dot", dot});
  CHECK(explain.code == EXIT_BUG);
  CHECK(explain.out.find("  ranks 7,15,...,55 -> rank 63: allreduce #1 on dp (") != std::string::npos);
  std::ifstream graph(dot);
  const std::string text((std::istreambuf_iterator<char>(graph)), {});
  CHECK(text.find("1[label=\"ranks 7,15,...,55 (7 ranks)\\nwaits in allreduce #1 on dp\\n") != std::string::npos);
  CHECK(text.find("1->2 [label=\"allreduce #1 on dp (x7)\"];") != std::string::npos);
  CHECK(text.find("3[") == std::string::npos);  // three nodes
}

TEST_CASE("scale: run prints a bounded summary past 16 ranks, a line per rank up to it") {
  const std::string input = write("mesh-skip-run.yaml", MESH_HANG);
  const testing::CliRun run = testing::run_lockstep({"run", input});
  CHECK(run.code == EXIT_BUG);
  CHECK(run.out.find("  ranks: 57 finished, 7 stuck\n") != std::string::npos);
  CHECK(run.out.find("  stuck: ranks 7,15,...,55 since ") != std::string::npos);
  CHECK(run.out.find("  fastest: ") != std::string::npos);
  CHECK(run.out.find("  rank 10:") == std::string::npos);
  const testing::CliRun small = testing::run_lockstep({"run", "scenarios/corpus/uneven-batches.yaml"});
  CHECK(small.out.find("  rank 3: finished at ") != std::string::npos);
}

}  // namespace lockstep::cli
