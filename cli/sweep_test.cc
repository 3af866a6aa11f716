// lockstep sweep: its axes, its points, and a sweep of the interleaved pipeline with failing
// points.
#include "cli/sweep.h"

#include <doctest/doctest.h>

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
