// The event log's command line: run and replay --sim take --log-level, --log-ranks and --log
// (docs/logging.md), LOCKSTEP_LOG_LEVEL when the option is absent; bad values are usage errors.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/cli.h"
#include "tests/testing.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

testing::CliRun cli(const std::vector<std::string>& args) { return testing::run_lockstep(args); }

const std::string UNEVEN = LOCKSTEP_SOURCE_DIR "/scenarios/corpus/uneven-batches.yaml";

TEST_CASE("log cli: --log-level info on run writes sync points and the stuck ranks to stderr") {
  const testing::CliRun ran = cli({"run", UNEVEN, "--log-level", "info", "--log-ranks", "0,3"});
  CHECK(ran.code == 1);
  CHECK(ran.err.find("rank 0 main: reached allreduce #1 on world") != std::string::npos);
  CHECK(ran.err.find("rank 3 main: finished") != std::string::npos);
  CHECK(ran.err.find("rank 1 ") == std::string::npos);  // filtered out
  // The last line: rank 0 stuck, waiting for rank 3.
  const std::string last = ran.err.substr(ran.err.rfind('\n', ran.err.size() - 2) + 1);
  CHECK(last.find("rank 0 main: stuck in allreduce #3 on world") != std::string::npos);
  CHECK(last.find("waiting for rank 3 (rank 3 never issued it)") != std::string::npos);
  CHECK(ran.out.find("hang:") != std::string::npos);  // the report stays on stdout
}

TEST_CASE("log cli: --log FILE, LOCKSTEP_LOG_LEVEL, and bad values are usage errors") {
  char dir_template[] = "/tmp/lockstep-log-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const fs::path dir(dir_template);
  const std::string path = (dir / "run.log").string();
  const testing::CliRun to_file = cli({"run", UNEVEN, "--log-level=debug", "--log", path});
  CHECK(to_file.err.empty());
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  CHECK(text.str().find("start allreduce #1 on world on stream comm:world") != std::string::npos);

  ::setenv("LOCKSTEP_LOG_LEVEL", "error", 1);
  const testing::CliRun env = cli({"run", UNEVEN});
  CHECK(env.err.find("reached") == std::string::npos);
  CHECK(env.err.find("rank 2 main: stuck in allreduce #3") != std::string::npos);
  ::setenv("LOCKSTEP_LOG_LEVEL", "loud", 1);
  CHECK(cli({"run", UNEVEN}).err.find("LOCKSTEP_LOG_LEVEL expects error, warn, info or debug, got 'loud'") !=
        std::string::npos);
  ::unsetenv("LOCKSTEP_LOG_LEVEL");

  const testing::CliRun bad = cli({"run", UNEVEN, "--log-level", "verbose"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--log-level expects error, warn, info or debug, got 'verbose'") != std::string::npos);
  CHECK(cli({"run", UNEVEN, "--log-ranks", "0,x"}).code == 2);
  CHECK(cli({"check", UNEVEN, "--log-level", "info"}).err.find("unknown option '--log-level' for 'check'") !=
        std::string::npos);
  const testing::CliRun unwritable = cli({"run", UNEVEN, "--log-level", "info", "--log", (dir / "no" / "such.log").string()});
  CHECK(unwritable.code == 2);
  CHECK(unwritable.err.find("cannot write file") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("log cli: replay --sim of a counterexample logs the execution that shows the bug") {
  char dir_template[] = "/tmp/lockstep-log-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const fs::path dir(dir_template);
  REQUIRE(cli({"check", UNEVEN, "--cex-dir", dir.string(), "--quiet"}).code == 1);
  const testing::CliRun replayed = cli({"replay", (dir / "uneven-batches-1.json").string(), "--sim", "--log-level", "error"});
  CHECK(replayed.code == 1);
  CHECK(replayed.out.find("CONFIRMED (sim)") != std::string::npos);
  CHECK(replayed.err.find("rank 0 main: stuck in allreduce #3 on world") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lockstep
