// End to end: `lockstep record` around lockstep_record_demo (linked against the fake libnccl),
// then `lockstep check` and `lockstep replay --sim` on what it wrote. Runs the built binaries.

#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "record/record_testing.h"

namespace {

namespace fs = std::filesystem;

using namespace lockstep::record::testing;

const std::string DEMO = (fs::path(LOCKSTEP_BINARY).parent_path() / "lockstep_record_demo").string();

TEST_CASE("record round trip: head-to-head sends are recorded, checked as a deadlock, confirmed by replay --sim") {
  TempDir dir;
  const fs::path out = dir.path / "h2h";
  const Ran recorded = run(LOCKSTEP + " record -o " + out.string() + " --name head-to-head -- " + DEMO + " head-to-head");
  INFO(recorded.output);
  REQUIRE(recorded.code == 0);
  CHECK(recorded.output.find("recorded 3 processes, 2 ranks, 8 NCCL calls -> " + (out / "trace.jsonl").string()) !=
        std::string::npos);
  const std::string trace = read_file(out / "trace.jsonl");
  CHECK(trace.substr(trace.find('\n') + 1) == R"({"rank": 0, "op": "barrier", "tag": "ncclCommInitRank"}
{"rank": 0, "op": "send", "to": 1, "size": 4096, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 0, "op": "recv", "from": 1, "size": 4096, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 1, "op": "barrier", "tag": "ncclCommInitRank"}
{"rank": 1, "op": "send", "to": 0, "size": 4096, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 1, "op": "recv", "from": 0, "size": 4096, "dtype": "fp32", "stream": "cuda:0"}
)");
  const Ran checked = run(LOCKSTEP + " check " + (out / "trace.jsonl").string() + " --cex-dir " + (dir.path / "cex").string());
  INFO(checked.output);
  CHECK(checked.code == 1);
  CHECK(checked.output.find(": deadlock") != std::string::npos);
  CHECK(checked.output.find("wait-for cycle: 0 -> 1 -> 0") != std::string::npos);
  const Ran replayed = run(LOCKSTEP + " replay " + (dir.path / "cex" / "trace-1.json").string() + " --sim");
  INFO(replayed.output);
  CHECK(replayed.code == 1);
  CHECK(replayed.output.rfind("CONFIRMED (sim): deadlock", 0) == 0);
}

TEST_CASE("record round trip: the grouped send and recv are recorded as one NCCL group and check ok") {
  TempDir dir;
  const Ran recorded = run(LOCKSTEP + " record -o " + dir.path.string() + " -- " + DEMO + " grouped");
  INFO(recorded.output);
  REQUIRE(recorded.code == 0);
  const Ran checked = run(LOCKSTEP + " check " + (dir.path / "trace.jsonl").string());
  INFO(checked.output);
  CHECK(checked.code == 0);
  CHECK(checked.output.find(": ok") != std::string::npos);
}

TEST_CASE("record: an NCCL loaded RTLD_LOCAL by a plugin, as Python loads PyTorch, is still found and recorded") {
  TempDir dir;
  const std::string loader = (fs::path(LOCKSTEP_BINARY).parent_path() / "lockstep_record_dlopen").string();
  const std::string plugin = (fs::path(LOCKSTEP_BINARY).parent_path().parent_path() / "lib" / "record_demo_plugin.so").string();
  const Ran recorded = run(LOCKSTEP + " record -o " + dir.path.string() + " -- " + loader + " " + plugin + " grouped");
  INFO(recorded.output);
  REQUIRE(recorded.code == 0);
  CHECK(recorded.output.find("recorded 3 processes, 2 ranks, 14 NCCL calls") != std::string::npos);
  CHECK(run(LOCKSTEP + " check " + (dir.path / "trace.jsonl").string()).code == 0);
}

TEST_CASE("record: split communicators and one process with two devices map to global ranks") {
  TempDir dir;
  const Ran split = run(LOCKSTEP + " record -o " + (dir.path / "split").string() + " -- " + DEMO + " split");
  INFO(split.output);
  REQUIRE(split.code == 0);
  CHECK(split.output.find("comm1 = ncclCommSplit of world (color 0): ranks 0,2") != std::string::npos);
  CHECK(split.output.find("comm2 = ncclCommSplit of world (color 1): ranks 1,3") != std::string::npos);
  const std::string trace = read_file(dir.path / "split" / "trace.jsonl");
  // ncclBcast (which the fake forwards to ncclBroadcast, as NCCL does) is recorded once.
  CHECK(trace.find(R"({"rank": 3, "op": "broadcast", "group": "comm2", "root": 3, "size": 16, "dtype": "uint8", "stream": "cuda:0"})") !=
        std::string::npos);
  CHECK(run(LOCKSTEP + " check " + (dir.path / "split" / "trace.jsonl").string()).code == 0);

  const Ran all = run(LOCKSTEP + " record -o " + (dir.path / "all").string() + " -- " + DEMO + " init-all");
  INFO(all.output);
  REQUIRE(all.code == 0);
  CHECK(all.output.find("recorded 1 process, 2 ranks, 7 NCCL calls") != std::string::npos);
  CHECK(run(LOCKSTEP + " check " + (dir.path / "all" / "trace.jsonl").string()).code == 0);
}

TEST_CASE("record --timeout stops a hung job, its ranks flush on SIGTERM, and check finds the hang") {
  TempDir dir;
  // No periodic flush: what reaches the files is what the signal handler wrote.
  const Ran recorded =
      run("LOCKSTEP_RECORD_FLUSH_MS=0 " + LOCKSTEP + " record -o " + dir.path.string() + " --timeout 0.5 -- " + DEMO + " hang");
  INFO(recorded.output);
  CHECK(recorded.code == 3);
  CHECK(recorded.output.find("was stopped after --timeout 0.5 s") != std::string::npos);
  CHECK(recorded.output.find("rank 1, 2 calls, signal 15") != std::string::npos);
  const Ran checked = run(LOCKSTEP + " check " + (dir.path / "trace.jsonl").string());
  INFO(checked.output);
  CHECK(checked.code == 1);
  CHECK(checked.output.find("hang") != std::string::npos);
  CHECK(checked.output.find("rank 0 waits in allreduce #3 on world") != std::string::npos);
}

TEST_CASE("record: a failing command is reported, its trace still merged, exit code 3") {
  TempDir dir;
  const Ran recorded = run(LOCKSTEP + " record -o " + dir.path.string() + " -- sh -c '" + DEMO + " grouped; exit 5'");
  INFO(recorded.output);
  CHECK(recorded.code == 3);
  CHECK(recorded.output.find("lockstep record: sh exited with status 5") != std::string::npos);
  CHECK(fs::exists(dir.path / "trace.jsonl"));
}

TEST_CASE("record: usage errors, a missing command and earlier recordings exit 2") {
  TempDir dir;
  CHECK(run(LOCKSTEP + " record -- true").output.find("lockstep: error: record needs -o DIR") != std::string::npos);
  CHECK(run(LOCKSTEP + " record -o " + dir.path.string()).code == 2);
  CHECK(run(LOCKSTEP + " record -o " + dir.path.string() + " --timeout -1 -- true").code == 2);
  const Ran missing = run(LOCKSTEP + " record -o " + (dir.path / "m").string() + " -- /nonexistent/program");
  CHECK(missing.code == 2);
  CHECK(missing.output.find("cannot run '/nonexistent/program'") != std::string::npos);
  const Ran nothing = run(LOCKSTEP + " record -o " + (dir.path / "n").string() + " -- true");
  CHECK(nothing.code == 2);
  CHECK(nothing.output.find("no recordings: no process called NCCL through the recorder") != std::string::npos);
  REQUIRE(run(LOCKSTEP + " record -o " + (dir.path / "g").string() + " -- " + DEMO + " grouped").code == 0);
  const Ran again = run(LOCKSTEP + " record -o " + (dir.path / "g").string() + " -- " + DEMO + " grouped");
  CHECK(again.code == 2);
  CHECK(again.output.find("holds recordings of an earlier run") != std::string::npos);
  const Ran merged = run(LOCKSTEP + " record -o " + (dir.path / "g").string() + " --merge-only");
  INFO(merged.output);
  CHECK(merged.code == 0);
}

}  // namespace
