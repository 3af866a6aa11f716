#include "record/torch_merge.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "checker/explore.h"
#include "record/record_testing.h"
#include "sim/trace_format.h"

namespace lockstep::record {
namespace {

std::string rank_file(int rank, int world, const std::vector<std::string>& lines, const char* mode = "gloo") {
  std::string text = R"({"lockstep_torch":1,"pid":)" + std::to_string(100 + rank) + R"(,"env_rank":)" + std::to_string(rank) +
                     R"(,"env_world_size":)" + std::to_string(world) + R"(,"mode":")" + mode +
                     R"(","torch":"1.13.0","python":"3.11.2"})" + "\n";
  text += R"({"seq":1,"thread":"MainThread","call":"init_process_group","backend":"nccl","world_size":)" +
          std::to_string(world) + R"(,"rank":)" + std::to_string(rank) + R"(,"source":"t.py:3","function":"main"})" + "\n";
  text += R"({"seq":2,"thread":"MainThread","call":"initialized","world_size":)" + std::to_string(world) + R"(,"rank":)" +
          std::to_string(rank) + "}\n";
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

// A record with sequence number `seq` on MainThread (or `thread`): `rest` are its other keys.
std::string rec(int seq, const std::string& rest, const char* thread = "MainThread") {
  return R"({"seq":)" + std::to_string(seq) + R"(,"thread":")" + thread + R"(",)" + rest + "}";
}

TorchMergeResult merged(const std::vector<std::pair<std::string, std::string>>& files) {
  TorchMergeOptions options;
  options.name = "t";
  return merge_torch_texts(files, options);
}

// The op lines of the written trace (without the header).
std::string ops_of(const TorchMergeResult& result) {
  REQUIRE(result.scenario);
  const std::string trace = sim::write_trace(*result.scenario);
  return trace.substr(trace.find('\n') + 1);
}

// How each process ended, in the order of the summary.
std::vector<std::string> endings_of(const TorchMergeResult& result) {
  std::vector<std::string> endings;
  for (const TorchProcess& p : result.processes) endings.push_back(p.ending);
  return endings;
}

sim::Verdict verdict_of(const TorchMergeResult& result) {
  REQUIRE(result.scenario);
  const sim::LoadResult loaded = sim::load_trace_text(sim::write_trace(*result.scenario), "t.jsonl", {}, sim::LoadLimits{});
  REQUIRE(loaded.ok());
  return checker::check_scenario(*loaded.scenario, checker::CheckOptions{}).verdict;
}

TEST_CASE("torch merge: collectives, new_group, async handles and batch_isend_irecv become trace ops with their sources") {
  const std::vector<std::string> calls = {
      rec(3, R"("call":"new_group","group":1,"ranks":[0,1],"source":"t.py:5","function":"main")"),
      rec(4, R"("call":"all_reduce","op":"allreduce","group":1,"size":16,"dtype":"fp32","handle":1,"source":"t.py:6","function":"main")"),
      rec(5, R"("call":"wait","handle":1,"source":"t.py:7")"),
      rec(6, R"("call":"wait","handle":1,"source":"t.py:8")"),
      rec(7, R"("call":"batch_isend_irecv","op":"group","group":0,"ops":[{"op":"send","group":0,"size":8,"dtype":"int64","peer":P},{"op":"recv","group":0,"size":8,"dtype":"int64","peer":P}],"source":"t.py:9","function":"step")"),
      rec(8, R"("call":"broadcast","op":"broadcast","group":0,"size":4,"dtype":"fp32","root":1,"source":"t.py:10","function":"main")"),
      rec(9, R"("call":"exit")"),
  };
  std::vector<std::pair<std::string, std::string>> files;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> lines = calls;
    lines[4].replace(lines[4].find("\"peer\":P"), 8, "\"peer\":" + std::to_string(1 - rank));
    lines[4].replace(lines[4].find("\"peer\":P"), 8, "\"peer\":" + std::to_string(1 - rank));
    files.emplace_back("raw/torch." + std::to_string(100 + rank) + ".jsonl", rank_file(rank, 2, lines));
  }
  const TorchMergeResult result = merged(files);
  INFO(testing::joined_lines(result.errors) << testing::joined_lines(result.warnings));
  CHECK(result.errors.empty());
  CHECK(result.warnings.empty());
  // Both ranks issue the same ops, each with the other as its peer.
  const auto ops_of_rank = [](int rank) {
    const std::string r = std::to_string(rank), peer = std::to_string(1 - rank);
    return "{\"rank\": " + r + ", \"op\": \"new_group\", \"name\": \"group1\", \"ranks\": [0, 1]}\n"
           "{\"rank\": " + r + ", \"op\": \"allreduce\", \"group\": \"group1\", \"size\": 16, \"dtype\": \"fp32\", \"async\": \"all_reduce.1\"}\n"
           "{\"rank\": " + r + ", \"op\": \"wait\", \"handle\": \"all_reduce.1\"}\n"
           "{\"rank\": " + r + ", \"op\": \"group_start\"}\n"
           "{\"rank\": " + r + ", \"op\": \"send\", \"to\": " + peer + ", \"size\": 8, \"dtype\": \"int64\"}\n"
           "{\"rank\": " + r + ", \"op\": \"recv\", \"from\": " + peer + ", \"size\": 8, \"dtype\": \"int64\"}\n"
           "{\"rank\": " + r + ", \"op\": \"group_end\"}\n"
           "{\"rank\": " + r + ", \"op\": \"broadcast\", \"root\": 1, \"size\": 4, \"dtype\": \"fp32\"}\n";
  };
  CHECK(ops_of(result) == ops_of_rank(0) + ops_of_rank(1));
  REQUIRE(result.sources.size() == 16);
  CHECK(result.sources[0].trace_line == 2);
  CHECK(result.sources[0].source == "t.py:5");
  CHECK(result.sources[4].trace_line == 6);  // the send inside the group
  CHECK(result.sources[4].source == "t.py:9");
  CHECK(result.sources[4].function == "step");
  CHECK(result.sources[15].trace_line == 17);
  CHECK(result.sources[15].rank == 1);
  CHECK(result.groups == std::vector<std::string>{"group1 = new_group(ranks=[0, 1]) at t.py:5"});
  CHECK(endings_of(result) == std::vector<std::string>{"exited", "exited"});
  REQUIRE(result.processes.size() == 2);
  CHECK(result.processes[1].rank == 1);
  CHECK(result.processes[1].calls == 7);  // init, new_group, all_reduce, 2 waits, batch, broadcast
  CHECK(result.processes[1].last == "broadcast at t.py:10");
  CHECK(verdict_of(result) == sim::Verdict::OK);
}

TEST_CASE("torch merge: a rank that died of its own exception crashes, one whose peer went away stays in its collective") {
  const TorchMergeResult result = merged({
      {"raw/torch.100.jsonl",
       rank_file(0, 2, {rec(3, R"("call":"all_reduce","op":"allreduce","group":0,"size":4,"dtype":"fp32","source":"t.py:6")"),
                        rec(4, R"("call":"raised","of":3,"type":"RuntimeError","message":"Connection closed by peer","peer_failure":true)"),
                        rec(5, R"("call":"uncaught","type":"RuntimeError","message":"Connection closed by peer","in_call":3,"peer_failure":true,"source":"t.py:6")"),
                        rec(6, R"("call":"exit")")})},
      {"raw/torch.101.jsonl",
       rank_file(1, 2, {rec(3, R"("call":"uncaught","type":"ValueError","message":"bad batch\nsecond line","in_call":0,"peer_failure":false,"source":"t.py:4")"),
                        rec(4, R"("call":"exit")")})},
  });
  INFO(testing::joined_lines(result.errors) << testing::joined_lines(result.warnings));
  CHECK(ops_of(result) == R"({"rank": 0, "op": "allreduce", "size": 4, "dtype": "fp32"}
{"rank": 1, "op": "crash"}
)");
  CHECK(endings_of(result) == std::vector<std::string>{
                                 "raised RuntimeError: Connection closed by peer at t.py:6 (its collective failed because a peer went away)",
                                 "raised ValueError: bad batch ... at t.py:4"});
  CHECK(verdict_of(result) == sim::Verdict::HANG);
}

TEST_CASE("torch merge: threads are trace threads, and a group another thread uses exists from the start") {
  const TorchMergeResult result = merged({
      {"raw/torch.100.jsonl",
       rank_file(0, 1, {rec(3, R"("call":"new_group","group":1,"ranks":null,"source":"t.py:5")"),
                        rec(4, R"("call":"all_reduce","op":"allreduce","group":1,"size":4,"dtype":"fp32","source":"t.py:9")", "metrics"),
                        rec(5, R"("call":"barrier","op":"barrier","group":0,"size":0,"source":"t.py:6")")})},
  });
  INFO(testing::joined_lines(result.errors) << testing::joined_lines(result.warnings));
  REQUIRE(result.scenario);
  const std::string trace = sim::write_trace(*result.scenario);
  CHECK(trace.find(R"("world": 1, "groups": {"group1": [0]}})") != std::string::npos);
  CHECK(ops_of(result) == R"({"rank": 0, "op": "new_group", "name": "group1_made", "ranks": [0]}
{"rank": 0, "op": "barrier"}
{"rank": 0, "thread": "metrics", "op": "allreduce", "group": "group1", "size": 4, "dtype": "fp32"}
)");
  CHECK(result.groups == std::vector<std::string>{
                             "group1 = new_group(ranks=[0]) at t.py:5 (used by another thread: its new_group calls meet on group1_made)"});
  CHECK(verdict_of(result) == sim::Verdict::OK);
}

TEST_CASE("torch merge: new_group calls that disagree get names of their own, and a rank nobody recorded issues nothing") {
  const TorchMergeResult result = merged({
      {"raw/torch.100.jsonl", rank_file(0, 3, {rec(3, R"("call":"new_group","group":1,"ranks":[0,1],"desc":"dp")")})},
      {"raw/torch.101.jsonl", rank_file(1, 3, {rec(3, R"("call":"new_group","group":1,"ranks":[1,2],"desc":"dp")")})},
  });
  INFO(testing::joined_lines(result.errors) << testing::joined_lines(result.warnings));
  CHECK(ops_of(result) == R"({"rank": 0, "op": "new_group", "name": "dp", "ranks": [0, 1]}
{"rank": 1, "op": "new_group", "name": "dp_2", "ranks": [1, 2]}
)");
  CHECK(result.warnings == std::vector<std::string>{"(recordings): warning: no process recorded rank 2: in the trace as issuing nothing"});
  CHECK(verdict_of(result) == sim::Verdict::MISMATCH);
}

TEST_CASE("torch merge: use_local_synchronization groups meet among their members, unknown groups are named in order") {
  const TorchMergeResult result = merged({
      {"raw/torch.100.jsonl",
       rank_file(0, 2, {rec(3, R"("call":"new_group","group":1,"ranks":[0],"local":true)"),
                        rec(4, R"("call":"all_reduce","op":"allreduce","group":-1,"group_ranks":[0,1],"size":4,"dtype":"fp32")")})},
      {"raw/torch.101.jsonl",
       rank_file(1, 2, {rec(3, R"("call":"new_group","group":1,"ranks":[0],"local":true)"),
                        rec(4, R"("call":"all_reduce","op":"allreduce","group":-1,"group_ranks":[0,1],"size":4,"dtype":"fp32")")})},
  });
  INFO(testing::joined_lines(result.errors) << testing::joined_lines(result.warnings));
  CHECK(ops_of(result) == R"({"rank": 0, "op": "barrier", "group": "group1", "tag": "new_group"}
{"rank": 0, "op": "allreduce", "group": "pg1", "size": 4, "dtype": "fp32"}
{"rank": 1, "op": "allreduce", "group": "pg1", "size": 4, "dtype": "fp32"}
)");
  CHECK(verdict_of(result) == sim::Verdict::OK);
}

TEST_CASE("torch merge: ops that cannot be in a trace are left out with a warning naming the Python line") {
  const TorchMergeResult result = merged({
      {"raw/torch.100.jsonl",
       rank_file(0, 2, {rec(3, R"("call":"send","op":"send","group":0,"size":4,"dtype":"fp32","peer":5,"source":"t.py:8")"),
                        rec(4, R"("call":"send","op":"send","group":0,"size":4,"dtype":"fp32","peer":0,"source":"t.py:9")"),
                        rec(5, R"("call":"all_reduce","op":"allreduce","group":7,"size":4,"dtype":"fp32","source":"t.py:10")"),
                        rec(6, R"("call":"unrecorded","of":"all_reduce","message":"not a tensor","source":"t.py:11")")})},
  });
  CHECK(result.errors.empty());
  CHECK(result.warnings == std::vector<std::string>{
                               "raw/torch.100.jsonl:4: warning: send at t.py:8: its peer 5 is not a member of world; left out",
                               "raw/torch.100.jsonl:5: warning: send at t.py:9: it sends to or receives from its own rank; left out",
                               "raw/torch.100.jsonl:6: warning: all_reduce on a process group whose creation was not recorded; left out",
                               "raw/torch.100.jsonl:7: warning: all_reduce at t.py:11 could not be read (not a tensor); not in the trace",
                               "(recordings): warning: no process recorded rank 1: in the trace as issuing nothing"});
  CHECK(ops_of(result).empty());
}

TEST_CASE("torch merge: a process that never called init_process_group is a rank only where no other claims it") {
  // mp.spawn under --nproc 1: the launcher has RANK=0 and WORLD_SIZE=1 but never joins; its
  // children join a world of two.
  const std::string launcher = R"({"lockstep_torch":1,"pid":99,"env_rank":0,"env_world_size":1,"mode":"gloo","torch":"1.13.0","python":"3.11.2"})"
                               "\n" + rec(1, R"("call":"exit")") + "\n";
  const TorchMergeResult spawned = merged({{"raw/torch.99.jsonl", launcher},
                                           {"raw/torch.100.jsonl", rank_file(0, 2, {})},
                                           {"raw/torch.101.jsonl", rank_file(1, 2, {})}});
  INFO(testing::joined_lines(spawned.errors) << testing::joined_lines(spawned.warnings));
  REQUIRE(spawned.scenario);
  CHECK(spawned.scenario->world == 2);
  REQUIRE(spawned.processes.size() == 3);
  CHECK(spawned.processes[2].file == "raw/torch.99.jsonl");
  CHECK(spawned.processes[2].rank == -1);
  // A rank that died before init_process_group is still its RANK: it issues nothing.
  const std::string early = R"({"lockstep_torch":1,"pid":101,"env_rank":1,"env_world_size":2,"mode":"gloo","torch":"1.13.0","python":"3.11.2"})"
                            "\n" + rec(1, R"("call":"uncaught","type":"ImportError","message":"no module","source":"t.py:1")") + "\n";
  const TorchMergeResult died = merged({{"raw/torch.100.jsonl", rank_file(0, 2, {})}, {"raw/torch.101.jsonl", early}});
  INFO(testing::joined_lines(died.errors) << testing::joined_lines(died.warnings));
  REQUIRE(died.scenario);
  REQUIRE(died.processes.size() == 2);
  CHECK(died.processes[1].rank == 1);
  CHECK(died.processes[1].ending == "raised ImportError: no module at t.py:1");
  CHECK(ops_of(died) == "{\"rank\": 1, \"op\": \"crash\"}\n");
}

TEST_CASE("torch merge: malformed recordings are errors naming file and line, a cut last line is a warning") {
  const auto errors_of = [](const std::string& text) {
    return merge_torch_texts({{"r.jsonl", text}}, TorchMergeOptions{}).errors;
  };
  CHECK(errors_of("") == std::vector<std::string>{"r.jsonl: error: empty: no header line"});
  CHECK(errors_of("{\"lockstep_record\":1}\n") ==
        std::vector<std::string>{"r.jsonl:1: error: not a recording of lockstep's torch recorder: the first line has no \"lockstep_torch\""});
  CHECK(errors_of("{\"lockstep_torch\":2}\n") ==
        std::vector<std::string>{"r.jsonl:1: error: unknown recording version 2; this lockstep reads version 1"});
  const std::string header = rank_file(0, 1, {});
  CHECK(errors_of(header + "nope\n") == std::vector<std::string>{"r.jsonl:4: error: not a JSON object"});
  CHECK(errors_of(header + rec(3, R"("call":"all_reduce","op":"allreduce","group":0,"dtype":"fp32")") + "\n") ==
        std::vector<std::string>{"r.jsonl:4: error: missing \"size\""});
  CHECK(errors_of(header + rec(3, R"("call":"all_reduce","op":"allreduse","group":0,"size":1)") + "\n") ==
        std::vector<std::string>{"r.jsonl:4: error: unknown op \"allreduse\""});
  CHECK(errors_of(header + rec(3, R"("call":"all_reduce","op":"allreduce","group":0,"size":1,"dtype":"fp33")") + "\n") ==
        std::vector<std::string>{"r.jsonl:4: error: unknown dtype \"fp33\""});
  CHECK(errors_of(header + rec(3, R"("call":"frobnicate")") + "\n") ==
        std::vector<std::string>{"r.jsonl:4: error: unknown call \"frobnicate\" (a record of an operation has \"op\")"});
  CHECK(errors_of(header + rec(2, R"("call":"exit")") + "\n") == std::vector<std::string>{"r.jsonl:4: error: sequence number 2 appears twice"});
  CHECK(errors_of(header + rec(3, R"("call":"new_group","group":1,"ranks":[0,0])") + "\n") ==
        std::vector<std::string>{"r.jsonl:4: error: \"ranks\" lists a rank twice"});
  CHECK(errors_of(header + rec(3, R"("call":"batch_isend_irecv","op":"group","group":0,"ops":[{"op":"send","group":0,"size":1}])") + "\n") ==
        std::vector<std::string>{"r.jsonl:4: error: in \"ops\": missing \"peer\""});
  CHECK(merge_torch_texts({{"a.jsonl", rank_file(0, 2, {})}, {"b.jsonl", rank_file(0, 2, {})}}, TorchMergeOptions{}).errors ==
        std::vector<std::string>{"b.jsonl: error: rank 0 is also a.jsonl"});
  CHECK(merge_torch_texts({{"a.jsonl", rank_file(0, 2, {})}, {"b.jsonl", rank_file(1, 3, {})}}, TorchMergeOptions{}).errors ==
        std::vector<std::string>{"b.jsonl:3: error: world size 3 here, but a.jsonl says 2"});
  const TorchMergeResult cut = merge_torch_texts({{"r.jsonl", header + "{\"seq\":3,\"thr"}}, TorchMergeOptions{});
  CHECK(cut.errors.empty());
  CHECK(cut.warnings == std::vector<std::string>{
                           "r.jsonl:4: warning: the last record is cut short (the process was killed while writing); ignored"});
  CHECK(cut.scenario);
}

}  // namespace
}  // namespace lockstep::record
