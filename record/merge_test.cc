#include "record/merge.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "checker/explore.h"
#include "record/record_testing.h"
#include "sim/trace_format.h"
#include "tests/testing.h"

namespace lockstep::record {
namespace {

MergeOptions named(const char* name, const char* source = "") {
  MergeOptions options;
  options.name = name;
  options.source = source;
  return options;
}

const char* const HEADER = R"({"lockstep_record":1,"host":"h","pid":10,"env_rank":-1,"nccl_version":22809,"buffer":16})";

std::string raw(int pid, const std::vector<std::string>& lines) {
  std::string text = std::string(HEADER).replace(std::string(HEADER).find("10"), 2, std::to_string(pid)) + "\n";
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

std::string init(int seq, const char* comm, int nranks, int rank, const char* id = "00000000000000aa") {
  return std::string(R"({"seq":)") + std::to_string(seq) + R"(,"tid":1,"call":"ncclCommInitRank","id":")" + id +
         R"(","nranks":)" + std::to_string(nranks) + R"(,"rank":)" + std::to_string(rank) + "}\n" + R"({"seq":)" +
         std::to_string(seq + 1) + R"(,"tid":1,"call":"created","of":)" + std::to_string(seq) +
         R"(,"index":0,"comm":")" + comm + R"(","device":0,"user_rank":)" + std::to_string(rank) + R"(,"nranks":)" +
         std::to_string(nranks) + "}";
}

std::string op(int seq, const char* call, const char* comm, const std::string& extra, int tid = 1) {
  return std::string(R"({"seq":)") + std::to_string(seq) + R"(,"tid":)" + std::to_string(tid) + R"(,"call":")" + call +
         R"(","comm":")" + comm + R"(","count":256,"dtype":7)" + extra + R"(,"stream":"0x0"})";
}

TEST_CASE("record merge: two processes that each send first become a two-rank trace that deadlocks") {
  const MergeResult merged = merge_texts(
      {{"raw/h.11.jsonl", raw(11, {init(1, "0x10", 2, 1), op(3, "ncclSend", "0x10", R"(,"peer":0)"),
                                   op(4, "ncclRecv", "0x10", R"(,"peer":0)"), R"({"seq":5,"tid":1,"call":"exit","dropped":0})"})},
       {"raw/h.12.jsonl", raw(12, {init(1, "0x20", 2, 0), op(3, "ncclSend", "0x20", R"(,"peer":1)"),
                                   op(4, "ncclRecv", "0x20", R"(,"peer":1)")})}},
      named("two", "test"));
  INFO(testing::joined_lines(merged.errors) << testing::joined_lines(merged.warnings));
  REQUIRE(merged.scenario);
  CHECK(merged.warnings.empty());
  CHECK(sim::write_trace(*merged.scenario) ==
        R"({"lockstep_trace": 1, "scenario": "two", "source": "test", "world": 2}
{"rank": 0, "op": "barrier", "tag": "ncclCommInitRank"}
{"rank": 0, "op": "send", "to": 1, "size": 1024, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 0, "op": "recv", "from": 1, "size": 1024, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 1, "op": "barrier", "tag": "ncclCommInitRank"}
{"rank": 1, "op": "send", "to": 0, "size": 1024, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 1, "op": "recv", "from": 0, "size": 1024, "dtype": "fp32", "stream": "cuda:0"}
)");
  // Ranks come from the communicator, not from the file order.
  REQUIRE(merged.processes.size() == 2);
  CHECK(merged.processes[0].ranks == std::vector<int32_t>{1});
  CHECK(merged.processes[0].ending == "exited");
  CHECK(merged.processes[1].ranks == std::vector<int32_t>{0});
  CHECK(merged.processes[1].ending == "no end record (killed, or still running)");
  lockstep::testing::trace_from(sim::write_trace(*merged.scenario), "two.jsonl");
}

TEST_CASE("record merge: split ranks follow key then parent rank, groups are named in order of use") {
  // Four processes; split with color rank % 2 and key 3 - rank: the new ranks run backwards.
  std::vector<std::pair<std::string, std::string>> files;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string comm = "0x" + std::to_string(rank + 1) + "0";
    const std::string half = "0x" + std::to_string(rank + 1) + "8";
    files.emplace_back("raw/h." + std::to_string(20 + rank) + ".jsonl",
                       raw(20 + rank, {init(1, comm.c_str(), 4, rank),
                                       R"({"seq":3,"tid":1,"call":"ncclCommSplit","parent":")" + comm +
                                           R"(","color":)" + std::to_string(rank % 2) + R"(,"key":)" +
                                           std::to_string(3 - rank) + "}",
                                       R"({"seq":4,"tid":1,"call":"created","of":3,"index":0,"comm":")" + half +
                                           R"(","device":0,"user_rank":-1,"nranks":-1})",
                                       op(5, "ncclBroadcast", half.c_str(), R"(,"root":0)"),
                                       op(6, "ncclAllGather", half.c_str(), "")}));
  }
  const MergeResult merged = merge_texts(files, named("split"));
  INFO(testing::joined_lines(merged.errors) << testing::joined_lines(merged.warnings));
  REQUIRE(merged.scenario);
  CHECK(merged.groups == std::vector<std::string>{"world = ncclCommInitRank: ranks 0,1,2,3",
                                                  "comm1 = ncclCommSplit of world (color 0): ranks 0,2",
                                                  "comm2 = ncclCommSplit of world (color 1): ranks 1,3"});
  const std::string trace = sim::write_trace(*merged.scenario);
  // Root 0 of {0,2} with keys 3,1 is global rank 2; of {1,3} with keys 2,0 it is 3. The
  // all-gather's size is the gathered buffer: 256 floats from each of 2 ranks.
  CHECK(trace.find(R"({"rank": 0, "op": "broadcast", "group": "comm1", "root": 2, "size": 1024)") != std::string::npos);
  CHECK(trace.find(R"({"rank": 1, "op": "broadcast", "group": "comm2", "root": 3, "size": 1024)") != std::string::npos);
  CHECK(trace.find(R"({"rank": 3, "op": "allgather", "group": "comm2", "size": 2048)") != std::string::npos);
  CHECK(trace.find(R"({"rank": 2, "op": "barrier", "tag": "ncclCommSplit"})") != std::string::npos);
  lockstep::testing::trace_from(trace, "split.jsonl");
}

TEST_CASE("record merge: the ops of an NCCL group are one group between group_start and group_end, nesting counted once") {
  std::vector<std::pair<std::string, std::string>> files;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string comm = rank == 0 ? "0x10" : "0x20";
    const std::string peer = rank == 0 ? R"(,"peer":1)" : R"(,"peer":0)";
    files.emplace_back("raw/h." + std::to_string(30 + rank) + ".jsonl",
                       raw(30 + rank, {init(1, comm.c_str(), 2, rank), R"({"seq":3,"tid":1,"call":"ncclGroupStart"})",
                                       R"({"seq":4,"tid":1,"call":"ncclGroupStart"})",
                                       op(5, "ncclSend", comm.c_str(), peer), op(6, "ncclRecv", comm.c_str(), peer),
                                       R"({"seq":7,"tid":1,"call":"ncclGroupEnd"})",
                                       R"({"seq":8,"tid":1,"call":"ncclGroupEnd"})",
                                       op(9, "ncclAllReduce", comm.c_str(), R"(,"redop":0)")}));
  }
  const MergeResult merged = merge_texts(files, named("grouped"));
  INFO(testing::joined_lines(merged.errors) << testing::joined_lines(merged.warnings));
  REQUIRE(merged.scenario);
  const std::string trace = sim::write_trace(*merged.scenario);
  CHECK(trace.substr(trace.find("\n") + 1, trace.find("{\"rank\": 1") - trace.find("\n") - 1) ==
        R"({"rank": 0, "op": "barrier", "tag": "ncclCommInitRank"}
{"rank": 0, "op": "group_start"}
{"rank": 0, "op": "send", "to": 1, "size": 1024, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 0, "op": "recv", "from": 1, "size": 1024, "dtype": "fp32", "stream": "cuda:0"}
{"rank": 0, "op": "group_end"}
{"rank": 0, "op": "allreduce", "size": 1024, "dtype": "fp32", "stream": "cuda:0"}
)");
  lockstep::testing::trace_from(trace, "grouped.jsonl");
}

TEST_CASE("record merge: one process driving two devices is two ranks, and a second host thread is a thread") {
  const MergeResult merged = merge_texts(
      {{"raw/h.40.jsonl",
        raw(40, {R"({"seq":1,"tid":7,"call":"ncclCommInitAll","ndev":2})",
                 R"({"seq":2,"tid":7,"call":"created","of":1,"index":0,"comm":"0xa0","device":4,"user_rank":0,"nranks":2})",
                 R"({"seq":3,"tid":7,"call":"created","of":1,"index":1,"comm":"0xb0","device":5,"user_rank":1,"nranks":2})",
                 op(4, "ncclAllReduce", "0xa0", R"(,"redop":0)", 7), op(5, "ncclAllReduce", "0xb0", R"(,"redop":0)", 8),
                 op(6, "ncclAllReduce", "0xb0", R"(,"redop":0)", 7)})}},
      named("initall"));
  INFO(testing::joined_lines(merged.errors) << testing::joined_lines(merged.warnings));
  REQUIRE(merged.scenario);
  CHECK(merged.processes[0].ranks == std::vector<int32_t>{0, 1});
  const std::string trace = sim::write_trace(*merged.scenario);
  CHECK(trace.find(R"({"rank": 1, "thread": "thread2", "op": "allreduce")") != std::string::npos);
  CHECK(trace.find(R"({"rank": 1, "op": "barrier", "tag": "ncclCommInitAll"})") != std::string::npos);
  lockstep::testing::trace_from(trace, "initall.jsonl");
}

TEST_CASE("record merge: malformed recordings are errors naming file and line, a cut last line a warning") {
  SUBCASE("unknown version") {
    const MergeResult merged = merge_texts({{"a.jsonl", "{\"lockstep_record\":2}\n"}}, MergeOptions{});
    CHECK_FALSE(merged.scenario);
    CHECK(merged.errors == std::vector<std::string>{"a.jsonl:1: error: unknown recording version 2; this lockstep reads version 1"});
  }
  SUBCASE("not a recording") {
    const MergeResult merged = merge_texts({{"a.jsonl", "{\"lockstep_trace\":1}\n"}}, MergeOptions{});
    CHECK(merged.errors ==
          std::vector<std::string>{"a.jsonl:1: error: not a recording of lockstep's recorder: the first line has no \"lockstep_record\""});
  }
  SUBCASE("bad records") {
    const MergeResult merged = merge_texts(
        {{"a.jsonl", raw(1, {init(1, "0x10", 1, 0), "{\"seq\":3,", R"({"seq":4,"tid":1,"call":"ncclFoo"})",
                             R"({"seq":5,"tid":1,"call":"ncclAllReduce","comm":"0x10","count":1,"dtype":99,"stream":"0x0"})",
                             R"({"seq":6,"tid":1,"call":"ncclSend","comm":"zz","count":1,"dtype":1,"peer":0,"stream":"0x0"})",
                             R"({"seq":1,"tid":1,"call":"ncclGroupStart"})",
                             R"({"seq":8,"tid":1,"call":"ncclCommInitRank","id":"aa","nranks":2,"rank":2})"})}},
        MergeOptions{});
    CHECK_FALSE(merged.scenario);
    CHECK(merged.errors == std::vector<std::string>{
                               "a.jsonl:4: error: not a JSON object",
                               "a.jsonl:5: error: unknown call \"ncclFoo\"",
                               "a.jsonl:6: error: unknown NCCL data type 99",
                               "a.jsonl:7: error: \"comm\" must be a hexadecimal string",
                               "a.jsonl:8: error: sequence number 1 appears twice",
                               "a.jsonl:9: error: rank 2 of 2 ranks",
                           });
  }
  SUBCASE("a record cut short by a kill") {
    std::string text = raw(1, {init(1, "0x10", 1, 0), op(3, "ncclAllReduce", "0x10", "")});
    text += R"({"seq":4,"tid":1,"call":"ncclAllRed)";
    const MergeResult merged = merge_texts({{"a.jsonl", text}}, MergeOptions{});
    REQUIRE(merged.scenario);
    CHECK(merged.warnings ==
          std::vector<std::string>{"a.jsonl:5: warning: the last record is cut short (the process was killed while writing); ignored"});
  }
  SUBCASE("two processes claim one rank") {
    const MergeResult merged =
        merge_texts({{"a.jsonl", raw(1, {init(1, "0x10", 2, 0)})}, {"b.jsonl", raw(2, {init(1, "0x10", 2, 0)})}}, MergeOptions{});
    CHECK(merged.errors == std::vector<std::string>{"b.jsonl:2: error: rank 0 of this communicator was already created by a.jsonl:2"});
  }
  SUBCASE("no recordings") {
    CHECK(merge_texts({}, MergeOptions{}).errors ==
          std::vector<std::string>{"(recordings): error: no recordings: no process called NCCL through the recorder"});
  }
}

TEST_CASE("record merge: ops on a communicator whose creation was not seen are left out with a warning") {
  const MergeResult merged =
      merge_texts({{"a.jsonl", raw(1, {init(1, "0x10", 1, 0), op(3, "ncclAllReduce", "0x99", ""),
                                       op(4, "ncclAllReduce", "0x99", ""), op(5, "ncclAllReduce", "0x10", "")})}},
                  MergeOptions{});
  REQUIRE(merged.scenario);
  REQUIRE(merged.warnings.size() == 1);
  CHECK(merged.warnings[0].rfind("a.jsonl:4: warning: ncclAllReduce on communicator 0x99, whose creation was not recorded", 0) == 0);
  CHECK(sim::write_trace(*merged.scenario).find("allreduce") != std::string::npos);
}

TEST_CASE("record merge: a process that never created the world communicator is a rank that issued nothing, and a hang") {
  // Three of four processes recorded ncclCommInitRank; the fourth never called it.
  std::vector<std::pair<std::string, std::string>> files;
  for (int rank : {0, 1, 3}) {
    const std::string comm = "0x" + std::to_string(rank + 1) + "0";
    files.emplace_back("raw/h." + std::to_string(50 + rank) + ".jsonl", raw(50 + rank, {init(1, comm.c_str(), 4, rank)}));
  }
  const MergeResult merged = merge_texts(files, named("missing"));
  INFO(testing::joined_lines(merged.errors) << testing::joined_lines(merged.warnings));
  REQUIRE(merged.scenario);
  CHECK(merged.warnings == std::vector<std::string>{
                               "raw/h.50.jsonl:2: warning: 1 of the 4 ranks of this ncclCommInitRank never recorded it "
                               "(global rank 2): a process that never called it, or whose recording is missing; in the "
                               "trace as a rank that issues nothing"});
  CHECK(merged.scenario->world == 4);
  const sim::Scenario loaded = lockstep::testing::trace_from(sim::write_trace(*merged.scenario), "missing.jsonl");
  const checker::CheckResult checked = checker::check_scenario(loaded, checker::CheckOptions{});
  CHECK(checked.verdict == sim::Verdict::HANG);
}

TEST_CASE("record merge: a communicator some ranks never created is reported") {
  const MergeResult merged = merge_texts(
      {{"a.jsonl", raw(1, {init(1, "0x10", 2, 0), init(3, "0x11", 2, 0, "00000000000000bb")})},
       {"b.jsonl", raw(2, {init(1, "0x20", 2, 1)})}},
      MergeOptions{});
  REQUIRE(merged.scenario);
  CHECK(merged.warnings == std::vector<std::string>{
                               "a.jsonl:4: warning: comm1 was created for 2 ranks; only 1 of them recorded it (ranks 0): a "
                               "process that never called ncclCommInitRank, or whose recording is missing"});
}

}  // namespace
}  // namespace lockstep::record
