#include "sim/trace_format.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sim/engine.h"
#include "sim/loader.h"
#include "sim/strategy.h"

namespace lockstep::sim {
namespace {

constexpr std::string_view HEADER4 = R"({"lockstep_trace": 1, "scenario": "t", "world": 4})";

LoadResult load(std::string_view text, const LoadLimits& limits = {}) {
  return load_trace_text(text, "t.jsonl", {}, limits);
}

// Every diagnostic's first line ("t.jsonl:2:5: error: ..."), one per line.
std::string messages(const LoadResult& loaded) {
  std::string out;
  for (const Diagnostic& d : loaded.diagnostics) out += format_diagnostic(d, "");
  return out;
}

std::string messages(std::string_view text, const LoadLimits& limits = {}) {
  return messages(load(text, limits));
}

// HEADER4 followed by `ops` (lines separated by '\n').
std::string trace4(std::string_view ops) {
  std::string text(HEADER4);
  text += '\n';
  text += ops;
  text += '\n';
  return text;
}

Scenario loaded(std::string_view text) {
  LoadResult result = load(text);
  INFO(messages(result));
  REQUIRE(result.ok());
  return std::move(*result.scenario);
}

const StmtList& body(const Scenario& s, int32_t rank, size_t thread = 0) {
  return s.program_of(rank).at(thread).body();
}

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
  const LoadResult result = load(
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

struct ErrorCase {
  std::string_view ops;       // lines after HEADER4
  std::string_view expected;  // every diagnostic
};

TEST_CASE("trace: every operation error has its exact message") {
  const std::vector<ErrorCase> cases = {
      {R"({"rank": 0, "op": "allreduse", "size": 1})",
       "t.jsonl:2:19: error: unknown operation 'allreduse' (did you mean 'allreduce'?); valid "
       "operations: all_to_all, allgather, allreduce, barrier, broadcast, compute, crash, exit, "
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
       "t.jsonl:2:48: error: 'compute' takes no argument 'size'; valid arguments: duration_ns\n"},
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
  const LoadResult result = load(trace4(R"({"rank": 0, "op": "allreduce", "size": -1})"));
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
  const LoadResult result = load(text);
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
    const LoadResult result = load(text);
    CHECK(result.ok() == std::none_of(result.diagnostics.begin(), result.diagnostics.end(),
                                      [](const Diagnostic& d) { return d.severity == Severity::ERROR; }));
  }
}

// ---------------------------------------------------------------------------------------------
// The fast path (one-pass scanner for common lines) against the general JSON reader.

void dump_expr(const Expr& e, std::string& out) {
  out += fmt::format(" {}:{}@{}:{}", static_cast<int>(e.op), e.value, e.loc.line, e.loc.col);
}

void dump_body(std::span<const Stmt> body, std::string& out) {
  for (const Stmt& st : body) {
    out += fmt::format("[{} {} {} {}{}{} g{} n{} @{}:{}", static_cast<int>(st.kind), static_cast<int>(st.op),
                       static_cast<int>(st.dtype), st.has_peer, st.peer_any, st.has_root, st.group,
                       st.new_group, st.loc.line, st.loc.col);
    for (const Expr* e : {&st.size, &st.peer, &st.duration, &st.extra().root}) dump_expr(*e, out);
    out += fmt::format(" t'{}' s'{}' h'{}'", st.tag, st.stream, st.handle);
    dump_body(st.body, out);
    out += "]\n";
  }
}

// Everything a load gives: diagnostics, and the scenario's groups and programs.
std::string dump_load(std::string_view text, bool fast, LoadLimits limits = {}) {
  limits.trace_fast_path = fast;
  const LoadResult result = load(text, limits);
  std::string out = messages(result);
  if (!result.ok()) return out;
  const Scenario& s = *result.scenario;
  for (const GroupDef& g : s.groups) out += g.name + " " + format_ranks(g.comms.front()) + "\n";
  for (int32_t rank = 0; rank < s.world; ++rank) {
    out += fmt::format("rank {} program {}\n", rank, s.rank_program[static_cast<size_t>(rank)]);
  }
  for (const RankProgram& program : s.programs) {
    for (const ThreadDef& thread : program) {
      out += fmt::format("thread {} @{}:{}\n", thread.name, thread.loc.line, thread.loc.col);
      dump_body(thread.body(), out);
    }
  }
  return out;
}

// Limits under which every trace that ends in a newline is read on two threads.
LoadLimits split_limits() {
  LoadLimits limits;
  limits.trace_split_bytes = 1;
  return limits;
}

TEST_CASE("trace: the fast path loads every line exactly as the general reader does") {
  constexpr std::string_view header =
      R"({"lockstep_trace": 1, "scenario": "t", "world": 4, "groups": {"dp": [0, 2], "tp": [0, 1]}})";
  const std::vector<std::string> lines = {
      R"({"rank": 0, "op": "allreduce", "size": 1048576})",
      R"({"rank": 2, "op": "allreduce", "group": "dp", "size": 7, "dtype": "fp32", "tag": "g", "stream": "s"})",
      R"({"rank": 1, "thread": "io", "op": "compute", "duration_ns": 20000})",
      R"({"op": "send", "rank": 0, "to": 1, "size": 0, "group": "tp", "async": "h"})",
      R"({"rank": 1, "op": "recv", "from": "any", "size": 3, "group": "tp"})",
      R"({"rank": 3, "op": "recv", "from": 2, "size": 3})",
      R"({"rank": 0, "op": "broadcast", "root": 2, "size": 5, "group": "dp", "dtype": "half"})",
      R"( {	"rank":3 ,"op":"barrier","dtype":"int64"} )",
      R"({"rank": 0, "op": "wait", "handle": "h"})",
      R"({"rank": 2, "op": "sync", "stream": "s"})",
      R"({"rank": 3, "op": "sleep", "duration_ns": 9223372036854775807})",
      R"({"rank": 1, "op": "new_group", "name": "ng", "ranks": [1, 3]})",
      R"({"rank": 3, "op": "new_group", "name": "ng", "ranks": [1, 3]})",
      R"({"rank": 3, "op": "allgather", "group": "ng", "size": 2})",
      R"({"rank": 0, "op": "group_start"})",
      R"({"rank": 0, "op": "reduce", "root": 0, "size": 1, "tag": "x\u00e9"})",
      R"({"rank": 0, "op": "group_end"})",
      R"({"rank": 2, "op": "exit"})",
      R"({"rank": 1, "op": "crash"})",
      R"({"rank": 1, "op": "scatter", "root": 1, "size": 1, "group": "dp"})",
      R"({"rank": 0, "op": "allreduce", "size": 01})",
      R"({"rank": 0, "op": "allreduce", "size": -0})",
      R"({"rank": 0, "op": "all_to_all", "size": 1e3})",
  };
  uint64_t state = 0x2545F4914F6CDD1DULL;  // fixed: the test is deterministic
  const auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::string alphabet = "{}[]\",:\\ -0123456789eE.\t\x01rankopsizetgdu";
  // Each line alone, all of them together, then mutated mixes of them.
  for (const std::string& line : lines) {
    const std::string text = std::string(header) + "\n" + line + "\n";
    INFO(line);
    CHECK(dump_load(text, true) == dump_load(text, false));
  }
  std::string all(header);
  for (const std::string& line : lines) all += "\n" + line;
  CHECK(dump_load(all, true) == dump_load(all, false));
  // A record keeps a value's and a peer's column in 16 bits: past them, the columns stay exact.
  const std::string pad(70000, ' ');
  for (const std::string& line : {R"({"rank": 0, "op": "send", "size": 8,)" + pad + R"("to": 3})",
                                  R"({"rank": 0, "op": "reduce", "root": 1,)" + pad + R"("size": 8})"}) {
    const std::string text = std::string(header) + "\n" + line + "\n";
    CHECK(dump_load(text, true) == dump_load(text, false));
    const LoadResult loaded = load(text);
    REQUIRE(loaded.ok());
    const Stmt& op = loaded.scenario->program_of(0).front().body().front();
    const Expr& far = op.has_peer ? op.peer : op.size;
    CHECK(far.loc.col == line.size() - 1);
  }
  for (int i = 0; i < 1500; ++i) {
    std::string text(header);
    for (int l = 0; l < 6; ++l) {
      std::string line = lines[next() % lines.size()];
      const int edits = static_cast<int>(next() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t at = next() % (line.size() + 1);
        const char c = alphabet[next() % alphabet.size()];
        if (next() % 3 == 0 && at < line.size()) line.erase(at, 1);
        else if (next() % 2 == 0 && at < line.size()) line[at] = c;
        else line.insert(at, 1, c);
      }
      text += "\n" + line;
    }
    INFO(text);
    CHECK(dump_load(text, true) == dump_load(text, false));
    // Ending in a newline, the scanner reads without bounds checks (the newline stops it).
    const std::string general = dump_load(text + "\n", false);
    CHECK(dump_load(text + "\n", true) == general);
    // And its second half is read by a second scanner (trace_split_bytes).
    CHECK(dump_load(text + "\n", true, split_limits()) == general);
  }
}

TEST_CASE("trace: the fast path ends a line where the general reader does") {
  // The fast path finds a line's end itself: every way a line can end (or fail to) gives what
  // the general reader gives, diagnostics and positions included.
  constexpr std::string_view header = R"({"lockstep_trace": 1, "scenario": "t", "world": 2})";
  constexpr std::string_view op = R"({"rank": 1, "op": "compute", "duration_ns": 5})";
  const std::vector<std::string> ends = {"\n", "\r\n", "\r", "", " \r\n", "\t\n", "\r\r\n", "\r \n",
                                         "\r\r", " x\n", "\n\r\n", "\n \n", "\r\n\r\n", "\v\n"};
  for (const std::string& end : ends) {
    for (const std::string& next : {std::string(), std::string(op)}) {
      const std::string text = std::string(header) + "\n" + std::string(op) + end + next;
      INFO(text);
      CHECK(dump_load(text, true) == dump_load(text, false));
    }
  }
}

TEST_CASE("trace: a trace read on two threads loads exactly as in one pass") {
  // The second half's lines are read by a second scanner and taken in order when the first
  // half is done; what each trace below loads as (diagnostics, groups, every statement and
  // position) is that of one pass, whatever the second scanner took.
  constexpr std::string_view header =
      R"({"lockstep_trace": 1, "scenario": "t", "world": 4, "groups": {"dp": [0, 2], "tp": [0, 1]}})";
  const auto op = [](int rank, std::string_view rest) {
    return fmt::format(R"({{"rank": {}, "op": "allreduce", "size": 8{}}})", rank, rest);
  };
  const auto trace = [&](const std::vector<std::string>& lines) {
    std::string text(header);
    for (const std::string& line : lines) text += "\n" + line;
    return text + "\n";
  };
  // What the second thread read: checked on a plain trace that each case below splits.
  const auto part_lines = [](const std::string& text, LoadLimits limits = split_limits()) {
    return load(text, limits).trace_part_lines;
  };
  std::vector<std::string> rank_major;  // each rank's lines together: the part's ranks are new
  std::vector<std::string> interleaved;  // every rank on both sides: the part's records appended
  for (int rank = 0; rank < 4; ++rank) {
    for (int i = 0; i < 10; ++i) rank_major.push_back(op(rank, ""));
  }
  for (int i = 0; i < 10; ++i) {
    for (int rank = 0; rank < 4; ++rank) interleaved.push_back(op(rank, R"(, "group": "world")"));
  }
  const auto with = [](std::vector<std::string> lines, size_t at, std::vector<std::string> more) {
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), more.begin(), more.end());
    return lines;
  };
  const std::vector<std::string> thread_line_at_30 =
      with(rank_major, 30, {R"({"rank": 2, "thread": "io", "op": "compute", "duration_ns": 1})"});
  const std::vector<std::vector<std::string>> cases = {
      rank_major,
      interleaved,
      // Rank 0 opens an NCCL group before the middle and closes it after: the part's lines of
      // rank 0 belong in the group, so this loader reads them itself.
      with(interleaved, 18, {R"({"rank": 0, "op": "group_start"})"}),
      with(with(interleaved, 18, {R"({"rank": 0, "op": "group_start"})"}), 30,
           {R"({"rank": 0, "op": "group_end"})"}),
      // A rank whose first half has only thread "io": its main thread is made at the merge.
      with(rank_major, 0, {R"({"rank": 3, "thread": "io", "op": "compute", "duration_ns": 1})"}),
      // The part stops at a line with a thread, a tag, a group marker, a long line, an error.
      thread_line_at_30,
      with(rank_major, 30, {op(2, R"(, "tag": "t")")}),
      with(rank_major, 30, {R"({"rank": 2, "op": "group_start"})", op(2, ""), R"({"rank": 2, "op": "group_end"})"}),
      with(rank_major, 30, {op(2, ", " + std::string(70000, ' ') + R"("dtype": "fp32")")}),
      with(rank_major, 30, {op(9, ""), op(2, R"(, "size": 3)")}),
      // A group made by new_group before the middle and used after it.
      with(with(rank_major, 2, {R"({"rank": 0, "op": "new_group", "name": "ng", "ranks": [0, 3]})"}), 32,
           {R"({"rank": 3, "op": "new_group", "name": "ng", "ranks": [0, 3]})", op(3, R"(, "group": "ng")"),
            op(0, R"(, "group": "ng")")}),
      // Blank lines and CRLF in the second half; a header group used only there.
      with(rank_major, 30, {"", "  \t", op(2, R"(, "group": "dp")") + "\r", "\r", op(0, R"(, "group": "tp")")}),
      // Errors on both sides.
      with(with(rank_major, 5, {op(1, R"(, "size": -1)")}), 35, {op(2, R"(, "to": 1)")}),
  };
  for (const std::vector<std::string>& lines : cases) {
    const std::string text = trace(lines);
    INFO(text.substr(0, 2000));
    const std::string one_pass = dump_load(text, true, LoadLimits{.trace_split_bytes = 0});
    CHECK(dump_load(text, true, split_limits()) == one_pass);
    CHECK(dump_load(text, false) == one_pass);
  }
  // The second thread did read: of 40 lines of one length, the middle byte is the first of the
  // 21st, and the part starts after it (19 lines); with a thread line as the 31st, the part
  // reads up to it; none of a trace without a newline at its end, or under the threshold.
  const std::string plain = trace(rank_major);
  CHECK(part_lines(plain) == 19);
  CHECK(part_lines(trace(interleaved)) == 19);
  CHECK(part_lines(trace(thread_line_at_30)) == 9);
  CHECK(part_lines(plain.substr(0, plain.size() - 1)) == 0);
  CHECK(part_lines(plain, LoadLimits{}) == 0);
  // A bound met in the second half is reported at its line, as in one pass.
  for (const int64_t max_ops : {1, 25, 39, 40}) {
    const LoadLimits bounded{.max_ops = max_ops};
    LoadLimits split = split_limits();
    split.max_ops = max_ops;
    INFO(max_ops);
    CHECK(dump_load(plain, true, split) == dump_load(plain, true, bounded));
  }
  // The errors' bound stops the first half while the second is read: the part is stopped.
  std::vector<std::string> bad(300, op(7, ""));
  for (int i = 0; i < 3000; ++i) bad.push_back(op(1, ""));
  CHECK(dump_load(trace(bad), true, split_limits()) == dump_load(trace(bad), false));
  // A rank at the limit of threads before the middle, whose main thread comes after it (the
  // op lines take ten lines' bytes more than the threads' lines: the middle is among them).
  std::vector<std::string> threads;
  size_t bytes = 0;
  for (size_t t = 0; t < MAX_TRACE_THREADS_PER_RANK; ++t) {
    threads.push_back(fmt::format(R"({{"rank": 1, "thread": "t{}", "op": "compute", "duration_ns": 1}})", t));
    bytes += threads.back().size() + 1;
  }
  const size_t op_line = op(1, "").size() + 1;
  for (size_t i = 0; i < bytes / op_line + 20; ++i) threads.push_back(op(1, ""));
  const std::string many = trace(threads);
  CHECK(part_lines(many) == 0);
  CHECK(dump_load(many, true, split_limits()) == dump_load(many, true, LoadLimits{.trace_split_bytes = 0}));
}

TEST_CASE("trace: a large trace's threads share one arena of statements, a small one's and a copy's use the heap") {
  // 8 MiB of statements and more take an arena: 50,000 lines of two ranks.
  std::string text = R"({"lockstep_trace": 1, "scenario": "big", "world": 2})" "\n";
  for (int i = 0; i < 50'000; ++i) {
    text += R"({"rank": )" + std::to_string(i % 2) + R"(, "op": "compute", "duration_ns": )" + std::to_string(i) + "}\n";
  }
  const Scenario big = loaded(text);
  const std::shared_ptr<StmtArena> arena = body(big, 0).get_allocator().arena();  // a copy: the allocator is a temporary
  REQUIRE(arena != nullptr);
  CHECK(body(big, 1).get_allocator().arena() == arena);
  CHECK(arena->owns(body(big, 0).data()));
  CHECK(arena->owns(body(big, 1).data()));
  REQUIRE(body(big, 1).size() == 25'000);
  CHECK(body(big, 1).back().duration.value == 49'999);
  CHECK(body(big, 1).back().loc == SourceLoc{50'001, 13});

  const Scenario copy = big;
  CHECK(body(copy, 0).get_allocator().arena() == nullptr);
  CHECK(body(copy, 1).back().duration.value == 49'999);

  const Scenario small = loaded(trace4(R"({"rank": 0, "op": "compute", "duration_ns": 5})"));
  CHECK(body(small, 0).get_allocator().arena() == nullptr);
}

TEST_CASE("trace: a recorded thread's statements are made once on first read, from any thread, and by a copy") {
  // Ops the scanner records flat and ops of the side table (names, an NCCL group, a wait),
  // interleaved on three ranks and two threads.
  std::string text = R"({"lockstep_trace": 1, "scenario": "mixed", "world": 3})" "\n";
  for (int i = 0; i < 300; ++i) {
    const std::string r = std::to_string(i / 6 % 3);
    const std::string size = std::to_string(i * 4);
    switch (i % 6) {
      case 0: text += R"({"rank": )" + r + R"(, "op": "allreduce", "size": )" + size + "}\n"; break;
      case 1: text += R"({"rank": )" + r + R"(, "op": "compute", "duration_ns": )" + size + ", \"thread\": \"io\"}\n"; break;
      case 2: text += R"({"rank": )" + r + R"(, "op": "allgather", "size": )" + size + R"(, "tag": "t", "async": "h"})" "\n"; break;
      case 3: text += R"({"rank": )" + r + R"(, "op": "wait", "handle": "h"})" "\n"; break;
      case 4:
        text += R"({"rank": )" + r + R"(, "op": "group_start"})" "\n";
        text += R"({"rank": )" + r + R"(, "op": "send", "to": )" + std::to_string((i / 6 + 1) % 3) + R"(, "size": 1})" "\n";
        text += R"({"rank": )" + r + R"(, "op": "group_end"})" "\n";
        break;
      default: text += R"({"rank": )" + r + R"(, "op": "broadcast", "root": 0, "size": )" + size + R"(, "dtype": "fp32"})" "\n"; break;
    }
  }
  const Scenario a = loaded(text);
  const Scenario copy = a;  // copies the statements, made from the recorded ops first
  const Scenario b = loaded(text);
  std::vector<std::string> dumps(6);
  std::vector<std::thread> readers;
  for (size_t t = 0; t < dumps.size(); ++t) {
    readers.emplace_back([&b, &dumps, t] {
      for (const RankProgram& program : b.programs) {
        for (const ThreadDef& thread : program) dump_body(thread.body(), dumps[t]);
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  std::string expected;
  for (const RankProgram& program : a.programs) {
    for (const ThreadDef& thread : program) dump_body(thread.body(), expected);
  }
  std::string copied;
  for (const RankProgram& program : copy.programs) {
    for (const ThreadDef& thread : program) dump_body(thread.body(), copied);
  }
  CHECK(expected.size() > 10'000);
  CHECK(copied == expected);
  for (const std::string& dump : dumps) CHECK(dump == expected);
  CHECK(dump_load(text, true) == dump_load(text, false));

  Scenario changed = loaded(text);
  StmtList& ops = changed.programs.at(0).at(0).mutable_body();
  REQUIRE(ops.size() == body(a, 0).size());
  ops.pop_back();
  CHECK(changed.programs.at(0).at(0).body().size() == body(a, 0).size() - 1);
}

// ---------------------------------------------------------------------------------------------
// NCCL groups: group_start / group_end.

constexpr std::string_view HEADER2 = R"({"lockstep_trace": 1, "scenario": "pair", "world": 2})";

// Two ranks that each send to the other, then receive: inside NCCL groups or not.
std::string send_send_pair(bool grouped) {
  std::string text(HEADER2);
  text += '\n';
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank), peer = std::to_string(1 - rank);
    if (grouped) text += R"({"rank": )" + r + R"(, "op": "group_start"})" "\n";
    text += R"({"rank": )" + r + R"(, "op": "send", "to": )" + peer + R"(, "size": 64})" "\n";
    text += R"({"rank": )" + r + R"(, "op": "recv", "from": )" + peer + R"(, "size": 64})" "\n";
    if (grouped) text += R"({"rank": )" + r + R"(, "op": "group_end"})" "\n";
  }
  return text;
}

ExecutionEnd run_once(const Scenario& s) {
  Engine engine(s);
  TimedStrategy timed;
  return engine.run(timed).end;
}

TEST_CASE("trace: group_start and group_end load as the NCCL group of the YAML language") {
  const Scenario s = loaded(send_send_pair(true));
  for (int32_t rank = 0; rank < 2; ++rank) {
    REQUIRE(body(s, rank).size() == 1);
    const Stmt& group = body(s, rank)[0];
    CHECK(group.kind == StmtKind::NCCL_GROUP);
    CHECK(group.loc.line == (rank == 0 ? 2u : 6u));
    CHECK(group.loc.col == 13);
    REQUIRE(group.body.size() == 2);
    CHECK(group.body[0].op == OpKind::SEND);
    CHECK(group.body[1].op == OpKind::RECV);
    CHECK(group.body[1].loc.line == (rank == 0 ? 4u : 8u));
  }
  // The same two ops in a YAML group give the same statements.
  LoadResult yaml = load_scenario_text(
      "scenario: pair\nworld: 2\nprogram:\n  - group:\n"
      "      - send: {to: \"1 - rank\", size: 64}\n"
      "      - recv: {from: \"1 - rank\", size: 64}\n",
      "pair.yaml", {});
  REQUIRE(yaml.ok());
  const Stmt& from_yaml = yaml.scenario->program_of(0).front().body().at(0);
  CHECK(from_yaml.kind == StmtKind::NCCL_GROUP);
  CHECK(from_yaml.body.size() == body(s, 0)[0].body.size());
}

TEST_CASE("trace: a grouped send/send pair completes, the same ungrouped deadlocks") {
  CHECK(run_once(loaded(send_send_pair(true))) == ExecutionEnd::COMPLETED);
  CHECK(run_once(loaded(send_send_pair(false))) == ExecutionEnd::STUCK);
}

TEST_CASE("trace: nested group_start counts once, as in NCCL, and threads keep their own group") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "thread": "side", "op": "compute", "duration_ns": 5})" "\n"
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "allreduce", "size": 8})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "op": "broadcast", "size": 8, "root": 0})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "op": "compute", "duration_ns": 5})" "\n"
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "group_end"})"));
  const StmtList& main = body(s, 0, 0);
  REQUIRE(main.size() == 3);
  CHECK(main[0].kind == StmtKind::NCCL_GROUP);
  REQUIRE(main[0].body.size() == 2);
  CHECK(main[0].body[0].op == OpKind::ALLREDUCE);
  CHECK(main[0].body[1].op == OpKind::BROADCAST);
  CHECK(main[1].op == OpKind::COMPUTE);
  CHECK(main[2].kind == StmtKind::NCCL_GROUP);
  CHECK(main[2].body.empty());
  CHECK(body(s, 0, 1).size() == 1);  // the side thread's compute is outside the group
}

TEST_CASE("trace: a group used before its new_group inside an NCCL group is resolved at the end") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "allreduce", "group": "late", "size": 8})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "thread": "t", "op": "new_group", "name": "late", "ranks": [0, 1]})"));
  REQUIRE(body(s, 0).at(0).body.size() == 1);
  CHECK(s.groups[body(s, 0)[0].body[0].group].name == "late");
}

TEST_CASE("trace: NCCL group errors have their exact messages") {
  const std::vector<ErrorCase> cases = {
      {R"({"rank": 0, "op": "group_end"})",
       "t.jsonl:2:19: error: group_end without a group_start on rank 0\n"},
      {R"({"rank": 1, "thread": "io", "op": "group_start"})" "\n"
       R"({"rank": 1, "op": "group_end"})",
       "t.jsonl:2:35: error: group_start on rank 1, thread 'io' has no matching group_end\n"
       "t.jsonl:3:19: error: group_end without a group_start on rank 1\n"},
      {R"({"rank": 2, "op": "group_start"})" "\n"
       R"({"rank": 2, "op": "group_start"})" "\n"
       R"({"rank": 2, "op": "group_end"})",
       "t.jsonl:2:19: error: group_start on rank 2 has no matching group_end\n"},
      {R"({"rank": 0, "op": "group_start"})" "\n"
       R"({"rank": 0, "op": "compute", "duration_ns": 1})" "\n"
       R"({"rank": 0, "op": "wait", "handle": "h"})" "\n"
       R"({"rank": 0, "op": "group_end"})",
       "t.jsonl:3:19: error: only communication operations may appear in an NCCL group "
       "(group_start at line 2), got 'compute'\n"
       "t.jsonl:4:19: error: only communication operations may appear in an NCCL group "
       "(group_start at line 2), got 'wait'\n"},
      {R"({"rank": 0, "op": "group_start"})" "\n"
       R"({"rank": 0, "op": "send", "to": 1, "size": 64, "async": "s"})" "\n"
       R"({"rank": 0, "op": "group_end"})",
       "t.jsonl:3:57: error: 'async' is not allowed in an NCCL group (group_start at line 2): "
       "the main stream waits for the whole group\n"},
      {R"({"rank": 0, "op": "group_start", "size": 4})",
       "t.jsonl:2:34: error: 'group_start' takes no argument 'size'; valid arguments: none\n"},
      {R"({"rank": 0, "op": "group_end", "grup": "x"})",
       "t.jsonl:2:32: error: unknown argument 'grup' for 'group_end' (did you mean 'group'?); "
       "valid arguments: none\n"},
      {R"({"rank": 0, "op": "group_stat"})",
       "t.jsonl:2:19: error: unknown operation 'group_stat' (did you mean 'group_start'?); valid "
       "operations: all_to_all, allgather, allreduce, barrier, broadcast, compute, crash, exit, "
       "gather, group_end, group_start, new_group, recv, reduce, reduce_scatter, scatter, send, "
       "sleep, sync, wait\n"},
  };
  for (const ErrorCase& c : cases) {
    INFO(c.ops);
    CHECK(messages(trace4(c.ops)) == c.expected);
  }
}

TEST_CASE("trace: NCCL groups write back as group_start and group_end lines (round trip)") {
  const std::string text =
      R"({"lockstep_trace": 1, "scenario": "g", "world": 2})" "\n"
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "send", "to": 1, "size": 64, "stream": "s"})" "\n"
      R"({"rank": 0, "op": "recv", "from": 1, "size": 64})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "op": "sync", "stream": "s"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_start"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "send", "to": 0, "size": 64})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "recv", "from": 0, "size": 64})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_end"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_start"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_end"})" "\n";
  const Scenario s = loaded(text);
  REQUIRE(trace_write_problem(s).empty());
  CHECK(write_trace(s) == text);
  // A YAML NCCL group writes the same way.
  LoadResult yaml = load_scenario_text(
      "scenario: g\nworld: 2\nprogram:\n  - group:\n"
      "      - send: {to: \"1 - rank\", size: 64}\n"
      "      - recv: {from: \"1 - rank\", size: 64}\n",
      "g.yaml", {});
  REQUIRE(yaml.ok());
  CHECK(trace_write_problem(*yaml.scenario) == "g.yaml:5:9: an expression that is not a constant");
  LoadResult flat = load_scenario_text(
      "scenario: pair\nworld: 2\nranks:\n  0:\n    - group:\n"
      "      - send: {to: 1, size: 64}\n"
      "      - recv: {from: 1, size: 64}\n"
      "  1:\n    - group:\n"
      "      - send: {to: 0, size: 64}\n"
      "      - recv: {from: 0, size: 64}\n",
      "pair.yaml", {});
  REQUIRE(flat.ok());
  REQUIRE(trace_write_problem(*flat.scenario).empty());
  CHECK(write_trace(*flat.scenario) == send_send_pair(true));
}

// ---------------------------------------------------------------------------------------------
// Writing.

constexpr std::string_view CANONICAL =
    R"({"lockstep_trace": 1, "scenario": "round \"trip\"", "description": "every op\n", "source": "x", "expect": "hang", "world": 4, "groups": {"evens": [0, 2]}, "semantics": {"p2p": "eager", "eager_limit": 4096, "p2p_comm": "pair", "comm_concurrency": 1, "launch_order_implicit": true, "timeout_ns": 99, "algorithm": "tree", "link": {"latency_ns": 7, "bandwidth_bytes_per_s": 1000000}}})"
    "\n"
    R"({"rank": 0, "op": "new_group", "name": "pair", "ranks": [0, 1]})"
    "\n"
    R"({"rank": 0, "op": "allreduce", "group": "evens", "size": 1024, "dtype": "fp32", "tag": "w\u0001", "stream": "s", "async": "h"})"
    "\n"
    R"({"rank": 0, "op": "wait", "handle": "h"})"
    "\n"
    R"({"rank": 0, "op": "broadcast", "root": 1, "size": 8})"
    "\n"
    R"({"rank": 0, "op": "send", "group": "pair", "to": 1, "size": 16})"
    "\n"
    R"({"rank": 0, "op": "barrier", "dtype": "int8"})"
    "\n"
    R"({"rank": 0, "op": "sync", "stream": "s"})"
    "\n"
    R"({"rank": 0, "thread": "bg", "op": "compute", "duration_ns": 1000})"
    "\n"
    R"({"rank": 0, "thread": "bg", "op": "sleep", "duration_ns": 0})"
    "\n"
    R"({"rank": 1, "op": "new_group", "name": "pair", "ranks": [0, 1]})"
    "\n"
    R"({"rank": 1, "op": "recv", "group": "pair", "from": "any", "size": 16})"
    "\n"
    R"({"rank": 1, "op": "recv", "from": 3, "size": 16})"
    "\n"
    R"({"rank": 1, "op": "sync"})"
    "\n"
    R"({"rank": 1, "op": "exit"})"
    "\n"
    R"({"rank": 3, "op": "crash"})"
    "\n";

TEST_CASE("trace: a canonical trace loads and writes back byte for byte") {
  const Scenario s = loaded(CANONICAL);
  CHECK(trace_write_problem(s).empty());
  CHECK(write_trace(s) == CANONICAL);
}

TEST_CASE("trace: write then load round-trips a trace in any key order and spacing") {
  const std::string text =
      "{\"world\":2,\"scenario\":\"x\",\"lockstep_trace\":1}\n"
      "{\"size\":5,\"op\":\"allreduce\",\"rank\":1,\"dtype\":\"half\"}\n"
      "{\"op\":\"allreduce\",\"rank\":0,\"size\":5,\"dtype\":\"float16\"}\n";
  const std::string written = write_trace(loaded(text));
  CHECK(written ==
        "{\"lockstep_trace\": 1, \"scenario\": \"x\", \"world\": 2}\n"
        "{\"rank\": 0, \"op\": \"allreduce\", \"size\": 5, \"dtype\": \"fp16\"}\n"
        "{\"rank\": 1, \"op\": \"allreduce\", \"size\": 5, \"dtype\": \"fp16\"}\n");
  CHECK(write_trace(loaded(written)) == written);
}

TEST_CASE("trace: a scenario built in memory (as import builds it) round-trips") {
  Scenario s;
  s.name = "imported";
  s.world = 2;
  s.groups.push_back(make_group("world", {}, {0, 1}, 2));
  GroupDef tp = make_group("tp", {}, {0, 1}, 2);
  tp.from_new_group = true;
  s.groups.push_back(tp);
  for (int32_t rank = 0; rank < 2; ++rank) {
    ThreadDef thread{"main", {}, {}};
    Stmt make;
    make.op = OpKind::NEW_GROUP;
    make.new_group = 1;
    thread.mutable_body().push_back(make);
    Stmt op;
    op.op = rank == 0 ? OpKind::SEND : OpKind::RECV;
    op.group = 1;
    op.has_peer = true;
    op.peer = Expr::constant(1 - rank);
    op.size = Expr::constant(64);
    thread.mutable_body().push_back(op);
    s.programs.push_back(RankProgram{thread});
    s.rank_program.push_back(static_cast<uint32_t>(rank));
  }
  REQUIRE(trace_write_problem(s).empty());
  const std::string written = write_trace(s);
  CHECK(written ==
        "{\"lockstep_trace\": 1, \"scenario\": \"imported\", \"world\": 2}\n"
        "{\"rank\": 0, \"op\": \"new_group\", \"name\": \"tp\", \"ranks\": [0, 1]}\n"
        "{\"rank\": 0, \"op\": \"send\", \"group\": \"tp\", \"to\": 1, \"size\": 64}\n"
        "{\"rank\": 1, \"op\": \"new_group\", \"name\": \"tp\", \"ranks\": [0, 1]}\n"
        "{\"rank\": 1, \"op\": \"recv\", \"group\": \"tp\", \"from\": 0, \"size\": 64}\n");
  const Scenario back = loaded(written);
  CHECK(body(back, 1)[1].op == OpKind::RECV);
  CHECK(body(back, 1)[1].peer.value == 0);
  CHECK(write_trace(back) == written);
}

TEST_CASE("trace: a YAML scenario of constant ops writes as a trace with the same ops") {
  LoadResult yaml = load_scenario_text(
      "scenario: flat\n"
      "world: 2\n"
      "groups: {both: [0, 1]}\n"
      "program:\n"
      "  - compute: 20us\n"
      "  - allreduce: {group: both, size: 1MiB, dtype: fp16, tag: b0}\n"
      "  - broadcast: {size: 4KiB, root: 1}\n",
      "flat.yaml", {});
  INFO(messages(yaml));
  REQUIRE(yaml.ok());
  REQUIRE(trace_write_problem(*yaml.scenario).empty());
  const std::string written = write_trace(*yaml.scenario);
  const Scenario trace = loaded(written);
  for (int32_t rank = 0; rank < 2; ++rank) {
    const StmtList& from_yaml = yaml.scenario->program_of(rank).front().body();
    const StmtList& from_trace = body(trace, rank);
    REQUIRE(from_yaml.size() == from_trace.size());
    for (size_t i = 0; i < from_yaml.size(); ++i) {
      CHECK(from_yaml[i].op == from_trace[i].op);
      CHECK(from_yaml[i].size.value == from_trace[i].size.value);
      CHECK(from_yaml[i].duration.value == from_trace[i].duration.value);
      CHECK(from_yaml[i].dtype == from_trace[i].dtype);
      CHECK(from_yaml[i].tag == from_trace[i].tag);
      CHECK(from_yaml[i].extra().root.value == from_trace[i].extra().root.value);
      CHECK(trace.groups[from_trace[i].group].name ==
            yaml.scenario->groups[from_yaml[i].group].name);
    }
  }
}

TEST_CASE("trace: scenarios with control flow or expressions cannot be written") {
  LoadResult yaml = load_scenario_text(
      "scenario: loop\nworld: 2\nprogram:\n  - repeat: 2\n    do:\n      - compute: 1ms\n",
      "loop.yaml", {});
  REQUIRE(yaml.ok());
  CHECK(trace_write_problem(*yaml.scenario) ==
        "loop.yaml:4:5: a statement other than an operation");
  LoadResult ranked = load_scenario_text(
      "scenario: r\nworld: 2\nprogram:\n  - allreduce: {size: \"rank * 4\"}\n", "r.yaml", {});
  REQUIRE(ranked.ok());
  CHECK(trace_write_problem(*ranked.scenario) ==
        "r.yaml:4:5: an expression that is not a constant");
  Scenario empty;
  CHECK(trace_write_problem(empty) == "the scenario has no ranks");
}

}  // namespace
}  // namespace lockstep::sim
