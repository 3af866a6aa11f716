// lockstep sweep: its axes, its points, and a sweep of the interleaved pipeline with failing
// points.
#include "cli/sweep.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/cli.h"
#include "cli/command_line.h"
#include "tests/testing.h"

namespace lockstep::cli {

TEST_CASE("sweep: an axis is a list of values or an integer range") {
  std::string error;
  const std::optional<SweepAxis> list = parse_sweep_axis("pp=2,4,8", 100, error);
  REQUIRE(list);
  CHECK(list->name == "pp");
  CHECK(list->values == std::vector<std::string>{"2", "4", "8"});
  const std::optional<SweepAxis> range = parse_sweep_axis("mb=3..6", 100, error);
  REQUIRE(range);
  CHECK(range->values == std::vector<std::string>{"3", "4", "5", "6"});
  CHECK(parse_sweep_axis("size=1MiB,2MiB", 100, error)->values == std::vector<std::string>{"1MiB", "2MiB"});

  CHECK_FALSE(parse_sweep_axis("pp", 100, error));
  CHECK(error == "-D pp: expected NAME=V1,V2,... or NAME=LO..HI");
  CHECK_FALSE(parse_sweep_axis("pp=4..2", 100, error));
  CHECK(error == "-D pp=4..2: a range is LO..HI with integers LO <= HI");
  CHECK_FALSE(parse_sweep_axis("pp=2,,4", 100, error));
  CHECK(error == "-D pp=2,,4: an empty value");
  CHECK_FALSE(parse_sweep_axis("pp=1..1000000000000", 10'000, error));
  CHECK(error == "-D pp=1..1000000000000: more than 10000 values (raise --max-points)");
}

TEST_CASE("sweep: the points are the cross product that --where keeps, the last axis fastest") {
  SweepOptions sweep;
  std::string error;
  sweep.axes = {*parse_sweep_axis("pp=2,4", 100, error), *parse_sweep_axis("mb=1..4", 100, error)};
  auto points = sweep_points(sweep, error);
  REQUIRE(points);
  REQUIRE(points->size() == 8);
  CHECK((*points)[1][0].value == "2");
  CHECK((*points)[1][1].value == "2");
  sweep.where = "mb % pp == 0";
  points = sweep_points(sweep, error);
  REQUIRE(points);
  REQUIRE(points->size() == 3);  // (2, 2), (2, 4), (4, 4)
  CHECK((*points)[2][0].value == "4");
  CHECK((*points)[2][1].value == "4");

  sweep.where = "mb % tp == 0";
  CHECK_FALSE(sweep_points(sweep, error));
  CHECK(error.find("unknown name 'tp'") != std::string::npos);
  sweep.where = "mb % (pp - 2) == 0";
  CHECK_FALSE(sweep_points(sweep, error));
  CHECK(error.starts_with("in --where: "));
  sweep.where = "";
  sweep.max_points = 5;
  CHECK_FALSE(sweep_points(sweep, error));
  CHECK(error == "the sweep has more than 5 points (raise --max-points)");
}

TEST_CASE("sweep: the interleaved pipeline fails where microbatches is not a multiple of pp") {
  const std::filesystem::path dir = testing::fresh_temp_dir("sweep", "pipeline");
  Options options;
  options.inputs = {"scenarios/examples/pipeline-interleaved-sweep.yaml"};
  options.json_path = (dir / "sweep.json").string();
  options.junit_path = (dir / "sweep.xml").string();
  options.check.jobs = 2;
  SweepOptions sweep;
  std::string error;
  sweep.axes = {*parse_sweep_axis("pp=2..3", 10, error), *parse_sweep_axis("chunks=2", 10, error),
                *parse_sweep_axis("microbatches=3..8", 10, error)};
  sweep.where = "microbatches > pp";
  std::ostringstream out, err;
  CHECK(cmd_sweep(options, sweep, out, err) == EXIT_BUG);
  CHECK(err.str() == "");
  const std::string text = out.str();
  INFO(text);
  // 6 points with pp 2, 5 with pp 3: those where microbatches % pp != 0 deadlock, each stalling
  // at one of three places.
  CHECK(text.starts_with("sweep scenarios/examples/pipeline-interleaved-sweep.yaml: 11 points (--where microbatches > pp)\n"
                         "  pp chunks microbatches  verdict\n"
                         "   2      2            3  deadlock [class 1]\n"
                         "   2      2            4  ok\n"));
  CHECK(text.find("   3      2            6  ok\n") != std::string::npos);
  CHECK(text.find("class 1: 3 points, first pp=2 chunks=2 microbatches=3\n") != std::string::npos);
  CHECK(text.ends_with("11 points: 7 with bugs (3 classes), 0 inconclusive\n"));
  const std::string json = testing::file_bytes(dir / "sweep.json");
  CHECK(json.find("\"verdict\": \"deadlock\"") != std::string::npos);
  CHECK(json.find("\"points\": [\n        0,") != std::string::npos);
  const std::string junit = testing::file_bytes(dir / "sweep.xml");
  CHECK(junit.find("tests=\"11\" failures=\"7\"") != std::string::npos);
  CHECK(junit.find("name=\"pp=2 chunks=2 microbatches=3\">") != std::string::npos);

  // A parameter the scenario does not have is refused before any point runs.
  sweep.axes = {*parse_sweep_axis("tp=1,2", 10, error)};
  sweep.where = "";
  std::ostringstream out2, err2;
  options.json_path.reset();
  options.junit_path.reset();
  CHECK(cmd_sweep(options, sweep, out2, err2) == EXIT_BAD_INPUT);
  CHECK(err2.str() == "lockstep: error: scenarios/examples/pipeline-interleaved-sweep.yaml has no parameter 'tp' to sweep; "
                      "parameters: pp, chunks, microbatches, activation\n");
  CHECK(out2.str() == "");
}

}  // namespace lockstep::cli

namespace lockstep::cli {

TEST_CASE("sweep: the interleaved pipeline over 231 layouts, as docs/sweep.md shows it") {
  const testing::CliRun ran = testing::run_lockstep({"sweep", "scenarios/examples/pipeline-interleaved-sweep.yaml", "-D", "pp=2..8",
                                                     "-D", "chunks=2..4", "-D", "microbatches=1..16", "--where",
                                                     "microbatches > pp", "--jobs", "2"});
  CHECK(ran.code == EXIT_BUG);
  CHECK(ran.out.starts_with("sweep scenarios/examples/pipeline-interleaved-sweep.yaml: 231 points (--where microbatches > pp)\n"));
  CHECK(ran.out.find("class 1: 14 points, first pp=2 chunks=2 microbatches=3\n") != std::string::npos);
  CHECK(ran.out.ends_with("231 points: 174 with bugs (10 classes), 0 inconclusive\n"));
  // Every point where microbatches is a multiple of pp completes, and only those.
  size_t ok = 0;
  for (int pp = 2; pp <= 8; ++pp) {
    for (int mb = pp + 1; mb <= 16; ++mb) ok += mb % pp == 0 ? 3 : 0;
  }
  CHECK(ok == 231 - 174);
}

TEST_CASE("sweep: from the command line, every -D is an axis") {
  const testing::CliRun ran = testing::run_lockstep({"sweep", "scenarios/examples/pipeline-interleaved-sweep.yaml", "-D",
                                                     "pp=2", "-D", "chunks=2,3", "-D", "microbatches=4,5", "--quiet"});
  CHECK(ran.code == EXIT_BUG);
  CHECK(ran.out.starts_with("sweep scenarios/examples/pipeline-interleaved-sweep.yaml: 4 points\n"
                            "  pp chunks microbatches  verdict\n"
                            "   2      2            4  ok\n"
                            "   2      2            5  deadlock [class 1]\n"
                            "   2      3            4  ok\n"
                            "   2      3            5  deadlock [class 1]\n"));
  CHECK(ran.out.ends_with("4 points: 2 with bugs (1 class), 0 inconclusive\n"));
  const testing::CliRun ok = testing::run_lockstep({"sweep", "scenarios/examples/pipeline-interleaved-sweep.yaml", "-D",
                                                    "pp=2,4", "--where", "pp != 4"});
  CHECK(ok.code == EXIT_NO_BUG);
  CHECK(ok.out.ends_with("1 point: 0 with bugs (0 classes), 0 inconclusive\n"));

  const auto refused = [](const std::vector<std::string>& args, const std::string& message) {
    const testing::CliRun r = testing::run_lockstep(args);
    CHECK(r.code == EXIT_BAD_INPUT);
    CHECK(r.err.starts_with("lockstep: error: " + message + "\n"));
  };
  const std::string scenario = "scenarios/examples/pipeline-interleaved-sweep.yaml";
  refused({"sweep", scenario}, "sweep needs at least one -D name=v1,v2,... or -D name=lo..hi");
  refused({"sweep", scenario, scenario, "-D", "pp=2"}, "sweep needs exactly one scenario");
  refused({"sweep", scenario, "-D", "pp=2", "--cex-dir", "x"}, "sweep writes no counterexamples: check a failing point with its -D values");
  refused({"sweep", scenario, "-D", "pp=2", "-D", "pp=3"}, "-D pp is given twice");
  refused({"sweep", scenario, "-D", "pp=3..2"}, "-D pp=3..2: a range is LO..HI with integers LO <= HI");
  refused({"sweep", scenario, "-D", "pp=2,3", "--where", "pp +"}, "in --where: expected an expression, got end of expression");
}

}  // namespace lockstep::cli

namespace lockstep::cli {

TEST_CASE("sweep: a point that does not load names its error in the matrix and its values on stderr") {
  const std::filesystem::path dir = testing::fresh_temp_dir("lockstep-sweep-test", "errors");
  const std::string scenario = (dir / "ckpt.yaml").string();
  std::ofstream(scenario) << "scenario: ckpt\n"
                             "world: dp\n"
                             "params: {dp: 4}\n"
                             "groups: {ckpt: [0, 1, 2, 3]}\n"
                             "program:\n"
                             "  - allgather: {group: ckpt, size: 8MiB}\n";
  const testing::CliRun ran = testing::run_lockstep({"sweep", scenario, "-D", "dp=2,3,4,5"});
  CHECK(ran.code == EXIT_BAD_INPUT);
  INFO(ran.out << ran.err);
  CHECK(ran.out.find("   2  error  " + scenario + ":4:23: rank 2 is outside the world (ranks 0, 1)\n") != std::string::npos);
  CHECK(ran.out.find("   3  error  " + scenario + ":4:26: rank 3 is outside the world (ranks 0-2)\n") != std::string::npos);
  CHECK(ran.out.find("   4  ok\n") != std::string::npos);
  CHECK(ran.out.find("   5  error  " + scenario + ":6:5: rank 4 issues allgather on group 'ckpt' but is not a member of it\n") !=
        std::string::npos);
  // Each error in full once, under the first point that had it.
  CHECK(ran.err.starts_with("lockstep: at dp=2:\n" + scenario + ":4:23: error: rank 2 is outside the world (ranks 0, 1)\n"));
  CHECK(ran.err.find("lockstep: at dp=3:\n" + scenario + ":4:26: error: rank 3 is outside the world (ranks 0-2)\n") != std::string::npos);
  CHECK(ran.err.find("lockstep: at dp=5:\n") != std::string::npos);
}

TEST_CASE("sweep --html: one page, the points of each class under its explanation, replaced like check's") {
  const std::filesystem::path dir = testing::fresh_temp_dir("sweep", "html");
  const std::string page = (dir / "sweep.html").string();
  const std::vector<std::string> args = {"sweep", "scenarios/examples/pipeline-interleaved-sweep.yaml", "-D", "pp=2",
                                         "-D", "chunks=2,3", "-D", "microbatches=4,5", "--quiet", "--html", page};
  CHECK(testing::run_lockstep(args).code == EXIT_BUG);
  const std::string html = testing::file_bytes(page);
  CHECK(html.starts_with("<!DOCTYPE html>\n"));
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<h1>lockstep sweep scenarios/examples/pipeline-interleaved-sweep.yaml: 4 points, 2 with bugs (1 class)</h1>")
        != std::string::npos);
  CHECK(html.find("<div class=\"bug-class\" data-kind=\"deadlock\" data-points=\"2\">\n<h3>class 1 of 1: deadlock, 2 points</h3>\n"
                  "<pre class=\"explanation\">scenarios/examples/pipeline-interleaved-sweep.yaml: deadlock") != std::string::npos);
  CHECK(html.find("<tr><th>pp</th><th>chunks</th><th>microbatches</th><th>verdict</th><th></th></tr>") != std::string::npos);
  CHECK(html.find("<tr class=\"point\" data-verdict=\"deadlock\"><td>2</td><td>2</td><td>5</td><td class=\"verdict\">deadlock</td>")
        != std::string::npos);
  CHECK(html.find("<h3>no bug found: 2 points</h3>") != std::string::npos);
  CHECK(html.find("<tr class=\"point\" data-verdict=\"ok\"><td>2</td><td>3</td><td>4</td><td class=\"verdict\">ok</td>")
        != std::string::npos);
  // An existing file is replaced, as check --html replaces it; the same sweep writes the same bytes.
  CHECK(testing::run_lockstep(args).code == EXIT_BUG);
  CHECK(testing::file_bytes(page) == html);
  const std::string check_page = (dir / "check.html").string();
  std::filesystem::copy_file(page, check_page);
  CHECK(testing::run_lockstep({"check", "scenarios/corpus/uneven-batches.yaml", "--quiet", "--html", check_page}).code == EXIT_BUG);
  CHECK(testing::file_bytes(check_page).starts_with("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>lockstep check</title>"));
  // Neither writes into a folder.
  const testing::CliRun into_folder = testing::run_lockstep({"sweep", "scenarios/examples/pipeline-interleaved-sweep.yaml", "-D",
                                                             "pp=2", "--quiet", "--html", dir.string()});
  CHECK(into_folder.code == EXIT_BAD_INPUT);
  CHECK(into_folder.err.starts_with(dir.string() + ": error: cannot write file: "));
}

}  // namespace lockstep::cli
