#include "sim/queued_work.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/loader_testing.h"
#include "sim/trace_testing.h"
#include "tests/testing.h"

namespace lockstep::sim {
namespace {

using loader_testing::problems;
using loader_testing::with_program;

// The warning for `exit` (or crash) at `at` after `queued` ("allreduce at s.yaml:4:5").
std::string warned(const std::string& at, const std::string& exit, const std::string& queued,
                   bool every_path = true) {
  return at + ": warning: " + exit + (every_path ? " follows" : " may follow") +
         " GPU work the host has not waited for (" + queued +
         "): the rank ends without waiting, and what has not run never runs; add 'sync' before it, or "
         "write '" + exit + ": {queued_work: abort}' if that is meant";
}

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("queued work: exit and crash right after a collective or a kernel are warned of") {
  CHECK(problems(with_program("  - allreduce: {size: 1MiB}\n  - exit\n")) ==
        Lines{warned("5:5", "exit", "allreduce at s.yaml:4:5")});
  CHECK(problems(with_program("  - compute: 2ms\n  - sleep: 1ms\n  - crash\n")) ==
        Lines{warned("6:5", "crash", "compute at s.yaml:4:5")});
  // Every queued op is counted; the latest is named.
  CHECK(problems(with_program("  - compute: 2ms\n  - send: {to: 1, size: 1KiB}\n  - exit\n")) ==
        Lines{warned("6:5", "exit", "send at s.yaml:5:5 and 1 more")});
}

TEST_CASE("queued work: an exit in a choose branch after a collective is warned of") {
  // The branch is the host's decision: it does not wait for the all-reduce.
  CHECK(problems(with_program("  - allreduce: {size: 1MiB}\n  - choose: {stop: [exit], go: []}\n")) ==
        Lines{warned("5:21", "exit", "allreduce at s.yaml:4:5")});
}

TEST_CASE("queued work: an async op, waited for or not, is queued work until the host syncs") {
  CHECK(problems(with_program("  - allreduce: {size: 1MiB, async: h}\n  - wait: h\n  - exit\n")) ==
        Lines{warned("6:5", "exit", "allreduce at s.yaml:4:5")});
  // `wait` makes the current stream wait, not the host: a barrier or `sync` after it does.
  CHECK(problems(with_program("  - allreduce: {size: 1MiB, async: h}\n  - wait: h\n  - barrier\n  - exit\n"))
            .empty());
  CHECK(problems(with_program("  - allreduce: {size: 1MiB, async: h}\n  - wait: h\n  - compute: 1ms\n"
                              "  - sync: main\n  - exit\n"))
            .empty());
  // Without the wait the barrier's stream does not wait for the async op's.
  CHECK(problems(with_program("  - allreduce: {size: 1MiB, async: h, stream: s}\n  - barrier\n  - exit\n"
                              "  - wait: h\n")) == Lines{warned("6:5", "exit", "allreduce at s.yaml:4:5")});
}

TEST_CASE("queued work: sync, sync of the work's stream and barrier wait for it") {
  CHECK(problems(with_program("  - allreduce: {size: 1MiB}\n  - sync\n  - exit\n")).empty());
  CHECK(problems(with_program("  - compute: {duration: 1ms, stream: side}\n  - sync: side\n  - crash\n")).empty());
  CHECK(problems(with_program("  - compute: 1ms\n  - allreduce: {size: 1MiB}\n  - barrier\n  - exit\n")).empty());
  // `sync: main` waits for main's kernels: the all-reduce on comm:world is not one of them...
  CHECK(problems(with_program("  - allreduce: {size: 1MiB}\n  - sync: main\n  - exit\n")) ==
        Lines{warned("6:5", "exit", "allreduce at s.yaml:4:5")});
  // ... until a later kernel on main waits for it.
  CHECK(problems(with_program("  - allreduce: {size: 1MiB}\n  - compute: 1ms\n  - sync: main\n  - exit\n"))
            .empty());
  // A barrier waits for what its stream waits for: not a kernel on another stream.
  CHECK(problems(with_program("  - compute: {duration: 1ms, stream: side}\n  - barrier\n  - exit\n")) ==
        Lines{warned("6:5", "exit", "compute at s.yaml:4:5")});
}

TEST_CASE("queued work: no warning without GPU work before the exit, or when it is meant") {
  CHECK(problems(with_program("  - sleep: 1ms\n  - new_group: {name: g, ranks: [0, 1]}\n  - exit\n"
                              "  - allreduce: {group: g, size: 1KiB}\n"))
            .empty());
  CHECK(problems(with_program("  - if: \"rank == 0\"\n    then: [exit]\n  - allreduce: {size: 1MiB}\n")).empty());
  CHECK(problems(with_program("  - compute: 1ms\n  - crash: {queued_work: abort}\n")).empty());
  CHECK(problems(with_program("  - compute: 1ms\n  - exit: {queued_work: abort}\n")).empty());
}

TEST_CASE("queued work: the value of exit and crash is checked") {
  CHECK(problems(with_program("  - exit: 3\n")) ==
        Lines{"4:11: error: 'exit' takes no value, or {queued_work: abort}"});
  CHECK(problems(with_program("  - crash: {queued_work: finish}\n")) ==
        Lines{"4:26: error: invalid value for 'queued_work'; valid values: abort"});
  CHECK(problems(with_program("  - crash: {queued: abort}\n"))[0].starts_with(
      "4:13: error: unknown key 'queued' in 'crash'"));
}

TEST_CASE("queued work: each thread is read alone") {
  const std::string threads =
      "scenario: t\nworld: 2\nthreads:\n  main: [allreduce: {size: 1MiB}]\n  bg: [sleep: 1ms, exit]\n";
  CHECK(problems(threads).empty());
  const std::string bg_work =
      "scenario: t\nworld: 2\nthreads:\n  main: [sleep: 1ms]\n  bg:\n    stream: b\n    do: [compute: 1ms, exit]\n";
  CHECK(problems(bg_work) == Lines{warned("7:24", "exit", "compute at s.yaml:7:10")});
}

TEST_CASE("queued work: paths through if, repeat and define are joined") {
  // Queued on one branch only: the warning says so.
  CHECK(problems(with_program("  - if: \"rank == 0\"\n    then: [allreduce: {size: 1MiB}]\n  - exit\n")) ==
        Lines{warned("6:5", "exit", "allreduce at s.yaml:5:12, on some paths", false)});
  // The first iteration reaches the crash with nothing queued, the second after the all-reduce.
  CHECK(problems(with_program("  - repeat: 2\n    as: i\n    do:\n      - if: \"i == 1\"\n        then: [crash]\n"
                              "      - allreduce: {size: 1MiB}\n")) ==
        Lines{warned("8:16", "crash", "allreduce at s.yaml:9:9, on some paths", false)});
  // A loop that syncs at the end of each iteration leaves nothing queued.
  CHECK(problems(with_program("  - repeat: 3\n    do: [allreduce: {size: 1MiB}, sync]\n  - exit\n")).empty());
  // A define's exit after its caller's work.
  CHECK(problems("scenario: t\nworld: 2\ndefine:\n  stop: [exit]\nprogram:\n  - compute: 1ms\n  - call: stop\n") ==
        Lines{warned("4:10", "exit", "compute at s.yaml:6:5")});
}

TEST_CASE("queued work: a trace's exit after its rank's op is warned of too") {
  using namespace trace_testing;
  CHECK(messages(trace4(R"({"rank": 0, "op": "allreduce", "size": 1024})"
                        "\n"
                        R"({"rank": 0, "op": "exit"})"
                        "\n"
                        R"({"rank": 1, "op": "sync"})"
                        "\n"
                        R"({"rank": 1, "op": "crash"})")) ==
        warned("t.jsonl:3:13", "exit", "allreduce at t.jsonl:2:13") + "\n");
}

TEST_CASE("queued work: the example of docs/semantics.md warns as shown there") {
  std::ifstream file(std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "docs" / "semantics.md", std::ios::binary);
  REQUIRE(file.good());
  std::ostringstream markdown;
  markdown << file.rdbuf();
  const std::string text = markdown.str();
  const size_t section = text.find("### The host runs ahead");
  REQUIRE(section != std::string::npos);
  const std::vector<testing::FencedBlock> yaml = testing::fenced_blocks(text.substr(section), "yaml");
  const std::vector<testing::FencedBlock> shown = testing::fenced_blocks(text.substr(section), "text");
  REQUIRE(!yaml.empty());
  REQUIRE(!shown.empty());
  const LoadResult result = load_scenario_text(yaml[0].text, "job.yaml", {});
  REQUIRE(result.diagnostics.size() == 1);
  const std::string first = format_diagnostic(result.diagnostics[0], result.text);
  CHECK(first.substr(0, first.find('\n') + 1) == shown[0].text);
}

}  // namespace lockstep::sim
