// The trace loader: lines into the model, every error's message, bounds.
#include "sim/trace_format.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/loader.h"
#include "sim/trace_testing.h"

namespace lockstep::sim {
namespace {

using namespace trace_testing;

// ---------------------------------------------------------------------------------------------
// Loading.

TEST_CASE("trace: a header and op lines load into one program per rank, in issue order") {
  const Scenario s = loaded(
      R"({"lockstep_trace": 1, "scenario": "ring", "description": "d", "source": "u", "expect": "deadlock", "world": 3, "groups": {"lo": [1, 0]}})"
      "\n"
      R"({"rank": 1, "op": "allreduce", "group": "lo", "size": 1048576, "dtype": "fp32", "tag": "g0"})"
      "\n"
      R"({"rank": 0, "op": "compute", "duration_ns": 1000})"
      "\n"
      R"({"rank": 0, "op": "allreduce", "group": "lo", "size": 1048576, "dtype": "float32", "tag": "g0"})"
      "\n");
  CHECK(s.name == "ring");
  CHECK(s.description == "d");
  CHECK(s.source_url == "u");
  REQUIRE(s.expect.has_value());
  CHECK(*s.expect == Verdict::DEADLOCK);
  CHECK(s.world == 3);
  REQUIRE(s.groups.size() == 2);
  CHECK(s.groups[0].name == "world");
  CHECK(s.groups[1].name == "lo");
  CHECK(s.groups[1].comms.front() == std::vector<int32_t>{0, 1});
  CHECK(s.slot_names == std::vector<std::string>{"rank", "world"});
  // ranks 0 and 1 have programs (ascending), rank 2 the shared empty one
  REQUIRE(s.programs.size() == 3);
  CHECK(s.rank_program == std::vector<uint32_t>{0, 1, 2});
  CHECK(s.program_of(2).empty());
  REQUIRE(body(s, 0).size() == 2);
  const Stmt& compute = body(s, 0)[0];
  CHECK(compute.op == OpKind::COMPUTE);
  CHECK(compute.duration.is_constant());
  CHECK(compute.duration.value == 1000);
  CHECK(compute.loc == SourceLoc{3, 13});
  CHECK(compute.duration.loc == SourceLoc{3, 45});
  const Stmt& allreduce = body(s, 0)[1];
  CHECK(allreduce.op == OpKind::ALLREDUCE);
  CHECK(allreduce.group == 1);
  CHECK(allreduce.size.value == 1048576);
  CHECK(allreduce.dtype == DType::FP32);
  CHECK(allreduce.tag == "g0");
  CHECK(allreduce.loc == SourceLoc{4, 13});
  CHECK(s.program_of(0).front().name == "main");
  CHECK(s.location(allreduce.loc) == "t.jsonl:4:13");
}

TEST_CASE("trace: every op takes its arguments like the YAML language") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "op": "broadcast", "root": 2, "size": 8, "stream": "s", "async": "h"})"
      "\n"
      R"({"rank": 0, "op": "wait", "handle": "h"})"
      "\n"
      R"({"rank": 0, "op": "send", "to": 1, "size": 16})"
      "\n"
      R"({"rank": 1, "op": "recv", "from": "any", "size": 16})"
      "\n"
      R"({"rank": 1, "op": "recv", "from": 3, "size": 16})"
      "\n"
      R"({"rank": 1, "op": "barrier", "dtype": "fp64"})"
      "\n"
      R"({"rank": 1, "op": "sync", "stream": "s"})"
      "\n"
      R"({"rank": 1, "op": "sync"})"
      "\n"
      R"({"rank": 2, "op": "sleep", "duration_ns": 0})"
      "\n"
      R"({"rank": 2, "op": "exit"})"
      "\n"
      R"({"rank": 3, "op": "crash"})"));
  const Stmt& broadcast = body(s, 0)[0];
  CHECK(broadcast.has_root);
  CHECK(broadcast.extra().root.value == 2);
  CHECK(broadcast.stream == "s");
  CHECK(broadcast.handle == "h");
  CHECK(body(s, 0)[1].op == OpKind::WAIT);
  CHECK(body(s, 0)[1].handle == "h");
  CHECK(body(s, 0)[2].has_peer);
  CHECK(body(s, 0)[2].peer.value == 1);
  CHECK(body(s, 1)[0].peer_any);
  CHECK_FALSE(body(s, 1)[1].peer_any);
  CHECK(body(s, 1)[1].peer.value == 3);
  CHECK(body(s, 1)[2].op == OpKind::BARRIER);
  CHECK(body(s, 1)[2].size.value == 8);  // a barrier's size is one element
  CHECK(body(s, 1)[3].stream == "s");
  CHECK(body(s, 1)[4].stream.empty());
  CHECK(body(s, 2)[1].op == OpKind::EXIT);
  CHECK(body(s, 3)[0].op == OpKind::CRASH);
}

TEST_CASE("trace: threads of a rank come in the order of their first line") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "thread": "bg", "op": "compute", "duration_ns": 1})"
      "\n"
      R"({"rank": 0, "op": "compute", "duration_ns": 2})"
      "\n"
      R"({"rank": 0, "thread": "bg", "op": "compute", "duration_ns": 3})"));
  const RankProgram& program = s.program_of(0);
  REQUIRE(program.size() == 2);
  CHECK(program[0].name == "bg");
  CHECK(program[0].body().size() == 2);
  CHECK(program[0].body()[1].duration.value == 3);
  CHECK(program[1].name == "main");
  CHECK(program[1].loc == SourceLoc{3, 13});
}

TEST_CASE("trace: new_group makes a group its ranks use on later lines") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "op": "new_group", "name": "pair", "ranks": [1, 0]})"
      "\n"
      R"({"rank": 1, "op": "new_group", "name": "pair", "ranks": [0, 1]})"
      "\n"
      R"({"rank": 0, "op": "allreduce", "group": "pair", "size": 4})"
      "\n"
      R"({"rank": 1, "op": "allreduce", "group": "pair", "size": 4})"));
  REQUIRE(s.groups.size() == 2);
  CHECK(s.groups[1].from_new_group);
  CHECK(s.groups[1].comms.front() == std::vector<int32_t>{0, 1});
  CHECK(s.groups[1].loc == SourceLoc{2, 40});
  CHECK(body(s, 0)[0].op == OpKind::NEW_GROUP);
  CHECK(body(s, 0)[0].new_group == 1);
  CHECK(body(s, 0)[0].group == 0);
  CHECK(body(s, 1)[1].group == 1);
}

TEST_CASE("trace: a group or handle may come from another thread of the rank, on any line") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "thread": "bg", "op": "allreduce", "group": "g", "size": 4})"
      "\n"
      R"({"rank": 0, "thread": "bg", "op": "wait", "handle": "h"})"
      "\n"
      R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0]})"
      "\n"
      R"({"rank": 0, "op": "allreduce", "size": 4, "async": "h"})"));
  CHECK(body(s, 0)[0].group == 1);
}

TEST_CASE("trace: blank lines, CRLF and spacing are accepted") {
  const Scenario s = loaded(
      "\n  \t\n{\"lockstep_trace\":1,\"scenario\":\"t\",\"world\":2}\r\n\r\n"
      "\t{ \"rank\" : 1 , \"op\" : \"compute\" , \"duration_ns\" : 5 }  \r\n");
  CHECK(body(s, 1).size() == 1);
  CHECK(body(s, 1)[0].loc == SourceLoc{5, 17});
}

TEST_CASE("trace: semantics take the YAML settings with integer units") {
  const Scenario s = loaded(
      R"({"lockstep_trace": 1, "scenario": "t", "world": 1, "semantics": {"p2p": "eager", "eager_limit": 65536, "p2p_comm": "pair", "comm_concurrency": 2, "launch_order_implicit": true, "timeout_ns": 7, "algorithm": "tree", "link": {"latency_ns": 3, "bandwidth_bytes_per_s": 1000}}})");
  CHECK(s.semantics.p2p == P2pMode::EAGER);
  CHECK(s.semantics.eager_limit_bytes == 65536);
  CHECK(s.semantics.p2p_comm == P2pComm::PAIR);
  CHECK(s.semantics.comm_concurrency == 2);
  CHECK(s.semantics.launch_order_implicit);
  CHECK(s.semantics.timeout_ns == 7);
  CHECK(s.semantics.allreduce_algorithm == Algorithm::TREE);
  CHECK(s.link.latency_ns == 3);
  CHECK(s.link.bandwidth_bytes_per_s == 1000.0);
}

TEST_CASE("trace: strings decode JSON escapes, surrogate pairs included") {
  const Scenario s = loaded(
      R"({"lockstep_trace": 1, "scenario": "a\"b\\c\/d\n\t\u00e9\ud83d\ude00", "world": 1})");
  CHECK(s.name == "a\"b\\c/d\n\t\xc3\xa9\xf0\x9f\x98\x80");
}

TEST_CASE("trace: a header group no op uses is a warning") {
  const LoadResult result = trace_testing::load(
      R"({"lockstep_trace": 1, "scenario": "t", "world": 2, "groups": {"idle": [0]}})");
  CHECK(result.ok());
  CHECK(messages(result) == "t.jsonl:1:63: warning: group 'idle' is never used\n");
}

TEST_CASE("trace: files load through load_trace_file - a missing file is a diagnostic") {
  const LoadResult missing = load_trace_file("/nonexistent/x.jsonl", {});
  CHECK_FALSE(missing.ok());
  CHECK(messages(missing) == "/nonexistent/x.jsonl: error: cannot read file: No such file or directory\n");
  const LoadResult corpus =
      load_trace_file(LOCKSTEP_SOURCE_DIR "/tests/fuzz/corpus/jsonl/every-op.jsonl", {});
  CHECK(corpus.ok());
  CHECK(is_trace_path("a/b.jsonl"));
  CHECK_FALSE(is_trace_path("a/b.yaml"));
  CHECK_FALSE(is_trace_path("jsonl"));
}

TEST_CASE("trace: a file is mapped and loads as its text does, too large and empty files are read as before") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "lockstep-trace-test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, std::string_view text) {
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  };
  // One op per kind of line the fast path takes, one the general reader takes (a wait), and an
  // unused group: a warning, so that the result keeps the text for its diagnostics.
  const std::string text =
      R"({"lockstep_trace": 1, "scenario": "t", "world": 4, "groups": {"pair": [0, 1], "idle": [2, 3]}})"
      "\n"
      R"({"rank": 0, "op": "allreduce", "group": "pair", "size": 64, "dtype": "fp32", "async": "h"})"
      "\n"
      R"({"rank": 0, "op": "wait", "handle": "h"})"
      "\n"
      R"({"rank": 1, "op": "allreduce", "group": "pair", "size": 64, "dtype": "fp32"})"
      "\n"
      R"({"rank": 2, "op": "compute", "duration_ns": 5})";  // no final end of line: the last
                                                           // byte of the file ends the line
  const std::string path = write("mapped.jsonl", text);
  const LoadResult mapped = load_trace_file(path, {});
  const LoadResult from_text = load_trace_text(text, path, {});
  REQUIRE(mapped.ok());
  REQUIRE(from_text.ok());
  CHECK(messages(mapped) == messages(from_text));
  CHECK(messages(mapped) == path + ":1:79: warning: group 'idle' is never used\n");
  CHECK(mapped.text == text);
  CHECK(mapped.scenario->text == text);
  CHECK(write_trace(*mapped.scenario) == write_trace(*from_text.scenario));
  // Copies of the scenario share the text.
  const Scenario copy = *mapped.scenario;
  CHECK(copy.text.view().data() == mapped.scenario->text.view().data());

  LoadLimits small;
  small.max_file_bytes = 10;
  CHECK(messages(load_trace_file(path, {}, small)) ==
        path + ": error: file exceeds the limit of 10 bytes (raise it with --max-file-bytes)\n");
  const std::string empty = write("empty.jsonl", "");
  CHECK(messages(load_trace_file(empty, {})) == empty + ": error: empty trace file\n");
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// Errors: every class, byte for byte.

TEST_CASE("trace: every operation error has its exact message") {
  const std::vector<ErrorCase> cases = {
      {R"({"rank": 0, "op": "allreduse", "size": 1})",
       "t.jsonl:2:19: error: unknown operation 'allreduse' (did you mean 'allreduce'?); valid "
       "operations: all_to_all, all_to_all_single, allgather, allgather_v, allreduce, barrier, broadcast, compute, crash, exit, "
       "gather, group_end, group_start, new_group, recv, reduce, reduce_scatter, scatter, send, "
       "sleep, sync, wait\n"},
      {R"({"rank": 0, "size": 1})", "t.jsonl:2:1: error: missing required key 'op'\n"},
      {R"({"op": "exit"})", "t.jsonl:2:1: error: missing required key 'rank'\n"},
      {R"({"rank": 4, "op": "exit"})",
       "t.jsonl:2:10: error: rank 4 is outside the world (ranks 0-3)\n"},
      {R"({"rank": "0", "op": "exit"})", "t.jsonl:2:10: error: expected a rank, got a string\n"},
      {R"({"rank": 0, "op": 5})", "t.jsonl:2:19: error: expected an operation name, got an integer\n"},
      {R"({"rank": 0, "op": "allreduce", "size": -1})",
       "t.jsonl:2:40: error: size must not be negative, got -1\n"},
      {R"({"rank": 0, "op": "allreduce", "size": "1MiB"})",
       "t.jsonl:2:40: error: expected a size in bytes, got a string\n"},
      {R"({"rank": 0, "op": "compute", "duration_ns": 1.5})",
       "t.jsonl:2:45: error: expected a duration in nanoseconds, got the number 1.5\n"},
      {R"({"rank": 0, "op": "sleep", "duration_ns": -2})",
       "t.jsonl:2:43: error: duration must not be negative, got -2\n"},
      {R"({"rank": 0, "op": "allreduce", "size": 1, "dtype": "bf61"})",
       "t.jsonl:2:52: error: invalid value 'bf61' for 'dtype' (did you mean 'bf16'?); valid values: "
       "bf16, bfloat16, double, float, float16, float32, float64, fp16, fp32, fp64, fp8_e4m3, "
       "fp8_e5m2, half, int32, int64, int8, uint32, uint64, uint8\n"},
      {R"({"rank": 0, "op": "allreduce", "sise": 1})",
       "t.jsonl:2:32: error: unknown argument 'sise' for 'allreduce' (did you mean 'size'?); valid "
       "arguments: async, dtype, group, size, stream, tag\n"},
      {R"({"rank": 0, "op": "compute", "duration_ns": 1, "size": 5})",
       "t.jsonl:2:48: error: 'compute' takes no argument 'size'; valid arguments: duration_ns, stream\n"},
      {R"({"rank": 0, "op": "exit", "to": 1})",
       "t.jsonl:2:27: error: 'exit' takes no argument 'to'; valid arguments: none\n"},
      {R"({"rank": 0, "op": "broadcast", "size": 5})",
       "t.jsonl:2:13: error: 'broadcast' requires argument 'root'\n"},
      {R"({"rank": 0, "op": "send", "size": 5})",
       "t.jsonl:2:13: error: 'send' requires argument 'to'\n"},
      {R"({"rank": 0, "op": "new_group", "name": "g"})",
       "t.jsonl:2:13: error: 'new_group' requires argument 'ranks'\n"},
      {R"({"rank": 0, "op": "recv", "from": "anyone", "size": 1})",
       "t.jsonl:2:35: error: expected a rank or \"any\", got the string 'anyone'\n"},
      {R"({"rank": 0, "op": "send", "to": "any", "size": 1})",
       "t.jsonl:2:33: error: expected a rank, got a string\n"},
      {R"({"rank": 0, "op": "send", "to": 9, "size": 1})",
       "t.jsonl:2:33: error: rank 9 is outside the world (ranks 0-3)\n"},
      {R"({"rank": 0, "op": "allreduce", "size": 1, "tag": ""})",
       "t.jsonl:2:50: error: 'tag' is empty\n"},
      {R"({"rank": 0, "thread": 1, "op": "exit"})",
       "t.jsonl:2:23: error: expected a string, got an integer\n"},
      {R"({"rank": 0, "op": "allreduce", "size": 1, "size": 2})",
       "t.jsonl:2:43: error: duplicate key 'size' (first given at column 32)\n"},
      {R"({"rank": 0, "op": "allreduce", "group": "nope", "size": 1})",
       "t.jsonl:2:41: error: unknown group 'nope'; groups: world\n"},
      {R"({"rank": 0, "op": "allreduce", "group": "wrld", "size": 1})",
       "t.jsonl:2:41: error: unknown group 'wrld' (did you mean 'world'?); groups: world\n"},
      {R"({"rank": 0, "op": "wait", "handle": "h"})",
       "t.jsonl:2:37: error: rank 0 waits on handle 'h' that it never issues with async\n"},
      {R"({"rank": 0, "op": "wait", "handle": "h2"})"
       "\n"
       R"({"rank": 0, "op": "allreduce", "size": 1, "async": "h1"})",
       "t.jsonl:2:37: error: rank 0 waits on handle 'h2' that it never issues with async (did you "
       "mean 'h1'?)\n"},
      {R"({"rank": 0, "op": "wait", "handle": "h"})"
       "\n"
       R"({"rank": 0, "op": "allreduce", "size": 1, "async": "h"})",
       "t.jsonl:2:37: error: rank 0 waits on handle 'h' before its thread issues it (async) at a "
       "later line\n"},
  };
  for (const ErrorCase& c : cases) {
    INFO(c.ops);
    CHECK(messages(trace4(c.ops)) == c.expected);
  }
}

TEST_CASE("trace: group membership and new_group errors have their exact messages") {
  constexpr std::string_view header =
      R"({"lockstep_trace": 1, "scenario": "t", "world": 4, "groups": {"dp": [0, 2]}})";
  const std::vector<ErrorCase> cases = {
      {R"({"rank": 1, "op": "allreduce", "group": "dp", "size": 1})",
       "t.jsonl:2:41: error: rank 1 is not a member of group 'dp' (ranks 0, 2)\n"},
      {R"({"rank": 0, "op": "send", "group": "dp", "to": 1, "size": 1})",
       "t.jsonl:2:48: error: rank 1 is not a member of group 'dp' (ranks 0, 2)\n"},
      {R"({"rank": 0, "op": "broadcast", "group": "dp", "root": 3, "size": 1})",
       "t.jsonl:2:55: error: rank 3 is not a member of group 'dp' (ranks 0, 2)\n"},
      {R"({"rank": 0, "op": "new_group", "name": "dp", "ranks": [0]})",
       "t.jsonl:2:32: error: new_group name 'dp' is already a group of the header\n"},
      {R"({"rank": 0, "op": "new_group", "name": "world", "ranks": [0]})",
       "t.jsonl:2:40: error: group 'world' is predefined and may not be redefined\n"},
      {R"({"rank": 0, "op": "new_group", "name": "a-b", "ranks": [0]})",
       "t.jsonl:2:40: error: invalid group name 'a-b'; a name is a letter or '_' followed by "
       "letters, digits or '_'\n"},
      {R"({"rank": 0, "op": "new_group", "name": "g", "ranks": []})",
       "t.jsonl:2:54: error: group 'g' has no ranks\n"},
      {R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0, 0]})",
       "t.jsonl:2:58: error: rank 0 appears twice in group 'g'\n"},
      {R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0, 4]})",
       "t.jsonl:2:58: error: rank 4 is outside the world (ranks 0-3)\n"},
      {R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0, 1]})"
       "\n"
       R"({"rank": 1, "op": "new_group", "name": "g", "ranks": [0, 2]})",
       "t.jsonl:3:54: error: new_group 'g' has ranks 0, 2 here but ranks 0, 1 at line 2\n"},
      {R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0, 1]})"
       "\n"
       R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0, 1]})",
       "t.jsonl:3:40: error: rank 0 makes group 'g' a second time (first at line 2)\n"},
      {R"({"rank": 0, "op": "allreduce", "group": "g", "size": 1})"
       "\n"
       R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0, 1]})",
       "t.jsonl:2:41: error: rank 0 uses group 'g' before its new_group at line 3\n"},
      {R"({"rank": 0, "op": "new_group", "name": "g", "ranks": [0, 1]})"
       "\n"
       R"({"rank": 1, "op": "allreduce", "group": "g", "size": 1})",
       "t.jsonl:3:41: error: rank 1 uses group 'g' but never makes it with new_group\n"},
      {R"({"rank": 1, "op": "allreduce", "group": "g", "size": 1})"
       "\n"
       R"({"rank": 1, "op": "new_group", "name": "g", "ranks": [0, 2]})",
       "t.jsonl:2:41: error: rank 1 uses group 'g' before its new_group at line 3\n"},
  };
  for (const ErrorCase& c : cases) {
    INFO(c.ops);
    std::string text(header);
    text += "\n";
    text += c.ops;
    CHECK(messages(text) == c.expected);
  }
}

TEST_CASE("trace: every header error has its exact message") {
  const std::vector<ErrorCase> cases = {
      {"", "t.jsonl: error: empty trace file\n"},
      {"\n \n", "t.jsonl: error: empty trace file\n"},
      {R"({"rank": 0, "op": "exit"})",
       "t.jsonl:1:1: error: expected the trace header on the first line, got an operation\n"},
      {R"({"scenario": "t", "world": 1})",
       "t.jsonl:1:1: error: missing required key 'lockstep_trace' in the header (the format "
       "version: 1)\n"},
      {R"({"lockstep_trace": 2, "scenario": "t", "world": 1})",
       "t.jsonl:1:20: error: unsupported trace format version 2; this build reads version 1\n"},
      {R"({"lockstep_trace": "1", "scenario": "t", "world": 1})",
       "t.jsonl:1:20: error: expected an integer (the format version), got a string\n"},
      {R"({"lockstep_trace": 1})",
       "t.jsonl:1:1: error: missing required key 'scenario' in the header\n"
       "t.jsonl:1:1: error: missing required key 'world' in the header\n"},
      {R"({"lockstep_trace": 1, "scenario": "", "world": 0})",
       "t.jsonl:1:35: error: the scenario name is empty\n"
       "t.jsonl:1:48: error: world must be positive, got 0\n"},
      {R"({"lockstep_trace": 1, "scenario": "t", "wrld": 1, "world": 1})",
       "t.jsonl:1:40: error: unknown key 'wrld' in the header (did you mean 'world'?); valid keys: "
       "description, expect, groups, lockstep_trace, scenario, semantics, source, world\n"},
      {R"({"lockstep_trace": 1, "scenario": "t", "world": 1, "world": 2})",
       "t.jsonl:1:52: error: duplicate key 'world' (first given at column 40)\n"},
      {R"({"lockstep_trace": 1, "scenario": "t", "world": 1, "expect": "deadlok"})",
       "t.jsonl:1:62: error: invalid value 'deadlok' for 'expect' (did you mean 'deadlock'?); "
       "valid values: deadlock, hang, inconclusive, mismatch, ok, timeout\n"},
      {R"({"lockstep_trace": 1, "scenario": "t", "world": 2, "groups": {"world": [0], "x y": [0], "g": [0, 0], "h": [], "i": [5], "j": 1}})",
       "t.jsonl:1:63: error: group 'world' is predefined and may not be redefined\n"
       "t.jsonl:1:77: error: invalid group name 'x y'; a name is a letter or '_' followed by "
       "letters, digits or '_'\n"
       "t.jsonl:1:98: error: rank 0 appears twice in group 'g'\n"
       "t.jsonl:1:107: error: group 'h' has no ranks\n"
       "t.jsonl:1:117: error: rank 5 is outside the world (ranks 0, 1)\n"
       "t.jsonl:1:126: error: expected an array of ranks, got an integer\n"},
      {R"({"lockstep_trace": 1, "scenario": "t", "world": 1, "semantics": {"p2p": "eagr", "timeout_ns": 0, "launch_order_implicit": "yes", "colour": 1, "link": {"latency_ns": -1, "bw": 2}}})",
       "t.jsonl:1:73: error: invalid value 'eagr' for 'p2p' (did you mean 'eager'?); valid values: "
       "eager, rendezvous\n"
       "t.jsonl:1:95: error: timeout_ns must be positive, got 0\n"
       "t.jsonl:1:123: error: expected true or false, got a string\n"
       "t.jsonl:1:130: error: unknown key 'colour' in semantics; valid keys: algorithm, "
       "comm_concurrency, eager_limit, launch_order_implicit, link, p2p, p2p_comm, timeout_ns\n"
       "t.jsonl:1:166: error: latency_ns must not be negative, got -1\n"
       "t.jsonl:1:170: error: unknown key 'bw' in link; valid keys: bandwidth_bytes_per_s, "
       "latency_ns\n"},
  };
  for (const ErrorCase& c : cases) {
    INFO(c.ops);
    CHECK(messages(c.ops) == c.expected);
  }
}

TEST_CASE("trace: JSON syntax errors point at the offending character") {
  const std::vector<ErrorCase> cases = {
      {R"([1, 2])", "t.jsonl:2:1: error: expected a json object, got '['\n"},
      {R"({"rank": 0, "op": "exit"} x)", "t.jsonl:2:27: error: unexpected 'x' after the object\n"},
      {R"({"rank": 0, "op": "exit",})",
       "t.jsonl:2:26: error: expected a key in double quotes, got '}'\n"},
      {R"({"rank": 0 "op": "exit"})",
       "t.jsonl:2:12: error: expected ',' or '}' after a value, got '\"'\n"},
      {R"({"rank" 0})", "t.jsonl:2:9: error: expected ':' after the key, got '0'\n"},
      {R"({"rank": 0, "op": "exit)", "t.jsonl:2:19: error: unterminated string\n"},
      {R"({"rank": 0, "op": "ex\qit"})", "t.jsonl:2:22: error: invalid escape '\\q'\n"},
      {R"({"rank": 0, "op": "\u12"})",
       "t.jsonl:2:20: error: invalid escape: \\u needs four hex digits\n"},
      {R"({"rank": 0, "op": "\ud800x"})",
       "t.jsonl:2:20: error: high surrogate in \\u escape without its low half\n"},
      {R"({"rank": 0, "op": "\udc00"})",
       "t.jsonl:2:20: error: lone low surrogate in \\u escape\n"},
      {"{\"rank\": 0, \"op\": \"a\x01\"}",
       "t.jsonl:2:21: error: control character in a string; write it as an escape\n"},
      {R"({"rank": 01, "op": "exit"})",
       "t.jsonl:2:10: error: numbers may not have leading zeros\n"},
      {R"({"rank": -, "op": "exit"})", "t.jsonl:2:11: error: expected a digit after '-', got ','\n"},
      {R"({"rank": 1., "op": "exit"})", "t.jsonl:2:12: error: expected a digit after '.', got ','\n"},
      {R"({"rank": 1e, "op": "exit"})",
       "t.jsonl:2:12: error: expected a digit in the exponent, got ','\n"},
      {R"({"rank": 99999999999999999999, "op": "exit"})",
       "t.jsonl:2:10: error: integer 99999999999999999999 is out of range\n"},
      {R"({"rank": tru, "op": "exit"})",
       "t.jsonl:2:10: error: invalid literal 'tru'; strings go in double quotes\n"},
      {R"({"rank": })", "t.jsonl:2:10: error: expected a value, got '}'\n"},
      {R"({"rank": 0, "op": "exit", "x": [[[[[[[[1]]]]]]]]})",
       "t.jsonl:2:39: error: values nest deeper than the limit of 8 levels\n"},
      {"{\"rank\": 0, \"op\": \"exit\", \x01}",
       "t.jsonl:2:27: error: expected a key in double quotes, got byte 0x01\n"},
      {"{\"rank\": 0, \"op\": \"exit\", \xff}",
       "t.jsonl:2:27: error: invalid UTF-8 byte 0xFF: a scenario or trace is UTF-8 text\n"},
  };
  for (const ErrorCase& c : cases) {
    INFO(c.ops);
    CHECK(messages(trace4(c.ops)) == c.expected);
  }
}

TEST_CASE("trace: integers at the edges of int64 are read exactly") {
  const Scenario s =
      loaded(trace4(R"({"rank": 0, "op": "allreduce", "size": 9223372036854775807})"));
  CHECK(body(s, 0)[0].size.value == INT64_MAX);
  CHECK(messages(trace4(R"({"rank": 0, "op": "allreduce", "size": -9223372036854775808})")) ==
        "t.jsonl:2:40: error: size must not be negative, got -9223372036854775808\n");
}

TEST_CASE("trace: every error of the file is reported, each line on its own") {
  const std::string text = trace4(
      R"({"rank": 0, "op": "compute"})"
      "\n"
      "not json\n"
      R"({"rank": 0, "op": "compute", "duration_ns": 5})"
      "\n"
      R"({"rank": 7, "op": "exit"})");
  CHECK(messages(text) ==
        "t.jsonl:2:13: error: 'compute' requires argument 'duration_ns'\n"
        "t.jsonl:3:1: error: expected a json object, got 'n'\n"
        "t.jsonl:5:10: error: rank 7 is outside the world (ranks 0-3)\n");
}

TEST_CASE("trace: diagnostics show the line and a caret under the column") {
  const LoadResult result = trace_testing::load(trace4(R"({"rank": 0, "op": "allreduce", "size": -1})"));
  REQUIRE(result.diagnostics.size() == 1);
  CHECK(format_diagnostic(result.diagnostics[0], result.text) ==
        "t.jsonl:2:40: error: size must not be negative, got -1\n"
        "  {\"rank\": 0, \"op\": \"allreduce\", \"size\": -1}\n"
        "                                         ^\n");
}

TEST_CASE("trace: -D overrides are errors, a trace has no parameters") {
  const std::vector<ParamOverride> overrides = {{"batches", "3"}};
  const LoadResult result = load_trace_text(trace4(""), "t.jsonl", overrides);
  CHECK_FALSE(result.ok());
  CHECK(messages(result) ==
        "t.jsonl: error: unknown parameter 'batches' in -D batches=3; a trace has no parameters\n");
}

// ---------------------------------------------------------------------------------------------
// Bounds.

TEST_CASE("trace: the file size, world, operation and thread bounds are errors naming them") {
  LoadLimits limits;
  limits.max_file_bytes = 10;
  CHECK(messages(trace4(""), limits) ==
        "t.jsonl: error: file exceeds the limit of 10 bytes (raise it with --max-file-bytes)\n");

  limits = {};
  limits.max_world = 3;
  CHECK(messages(trace4(""), limits) ==
        "t.jsonl:1:49: error: world 4 exceeds the limit of 3 ranks (raise it with --max-world)\n");

  limits = {};
  limits.max_ops = 2;
  const std::string three = trace4(
      R"({"rank": 0, "op": "exit"})"
      "\n"
      R"({"rank": 1, "op": "exit"})"
      "\n"
      R"({"rank": 2, "op": "exit"})"
      "\n"
      R"({"rank": 3, "op": "bad"})");
  CHECK(messages(three, limits) ==
        "t.jsonl:4:1: error: trace exceeds the limit of 2 operations (raise it with --max-ops)\n");

  std::string threads(HEADER4);
  threads += '\n';
  for (size_t t = 0; t <= MAX_TRACE_THREADS_PER_RANK; ++t) {
    threads += R"({"rank": 0, "thread": "t)" + std::to_string(t) + R"(", "op": "exit"})" + "\n";
  }
  CHECK(messages(threads) == "t.jsonl:1026:23: error: rank 0 has more than the limit of 1024 threads\n");
}

TEST_CASE("trace: loading stops after the error bound") {
  std::string text = trace4("");
  for (size_t i = 0; i < MAX_TRACE_ERRORS + 10; ++i) text += "x\n";
  const LoadResult result = trace_testing::load(text);
  CHECK_FALSE(result.ok());
  // What is reported is bounded again (MAX_DIAGNOSTICS_SHOWN errors, then a count).
  REQUIRE(result.diagnostics.size() == MAX_DIAGNOSTICS_SHOWN + 1);
  CHECK(format_diagnostic(result.diagnostics.front(), "") ==
        "t.jsonl: error: too many errors; stopped after 1000\n");
  CHECK(format_diagnostic(result.diagnostics.back(), "") == "t.jsonl: error: 951 more errors not shown (1001 in all)\n");
}

TEST_CASE("trace: arbitrary bytes never crash or throw the loader") {
  uint64_t state = 0x9E3779B97F4A7C15ULL;  // a fixed xorshift stream: the test is deterministic
  const auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::string alphabet = "{}[]\",:\\ -0123456789eE.truefalsn\n\tu\x01\xff";
  const std::string seed = trace4(R"({"rank": 0, "op": "allreduce", "size": 1, "async": "h"})");
  for (int i = 0; i < 2000; ++i) {
    std::string text = seed;
    const int edits = 1 + static_cast<int>(next() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t at = next() % (text.size() + 1);
      const char c = alphabet[next() % alphabet.size()];
      if (next() % 2 == 0 && at < text.size()) text[at] = c;
      else text.insert(at, 1, c);
    }
    const LoadResult result = trace_testing::load(text);
    CHECK(result.ok() == std::none_of(result.diagnostics.begin(), result.diagnostics.end(),
                                      [](const Diagnostic& d) { return d.severity == Severity::ERROR; }));
  }
}

}  // namespace
}  // namespace lockstep::sim
