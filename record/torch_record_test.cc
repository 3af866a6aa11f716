// End to end: `lockstep record --torch` runs real PyTorch scripts (tests/torch/, and the bundled
// record/examples/train.py) on CPU ranks, in both modes, and `--check` gives the verdict each
// script's bug calls for, pointing at the script's line. Needs Debian's python3-torch
// (scripts/setup installs it); every run is bounded by --timeout, and `record` stops and reaps
// the ranks' process group itself.

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string LOCKSTEP = LOCKSTEP_BINARY;
const std::string SOURCE = LOCKSTEP_SOURCE_DIR;
const std::string PYTHON = "/usr/bin/python3";

struct Ran {
  int code = -1;
  std::string output;  // stdout and stderr
};

Ran run(const std::string& command) {
  Ran ran;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) ran.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  ran.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string name = (fs::temp_directory_path() / "lockstep-torch-test-XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

void require_torch() {
  const Ran probe = run(PYTHON + " -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()'");
  INFO("these tests need Debian's python3-torch (with gloo) at " << PYTHON << ": run scripts/setup\n" << probe.output);
  REQUIRE(probe.code == 0);
}

// Records SCRIPT with `nproc` ranks (fake or gloo), checks it, and returns the output.
Ran record_and_check(const TempDir& dir, const std::string& script, int nproc, bool fake, double timeout_s,
                     const std::string& args = "") {
  require_torch();
  const Ran ran = run(LOCKSTEP + " record --torch --check" + (fake ? " --fake" : "") + " -o " + (dir.path / "rec").string() +
                      " --nproc " + std::to_string(nproc) + " --timeout " + std::to_string(timeout_s) + " -- " + PYTHON +
                      " " + SOURCE + "/" + script + (args.empty() ? "" : " " + args));
  INFO(ran.output);
  CHECK(fs::exists(dir.path / "rec" / "trace.jsonl"));
  CHECK(fs::exists(dir.path / "rec" / "sources.txt"));
  return ran;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("record --torch: the bundled example's uneven shards hang in the gradient all-reduce, in both modes") {
  for (const bool fake : {false, true}) {
    TempDir dir;
    const Ran ran = record_and_check(dir, "record/examples/train.py", 4, fake, 60);
    INFO(ran.output);
    CHECK(ran.code == 1);
    CHECK(has(ran.output, ": hang"));
    CHECK(has(ran.output, "ranks 0,1 wait in allreduce #6 on world ("));
    CHECK(has(ran.output, "record/examples/train.py:31); ranks 2,3 never issued it: they finished"));
    // Under gloo the two ranks left over fail when their peers leave: recorded, not a crash of theirs.
    if (!fake) CHECK(has(ran.output, "(its collective failed because a peer went away)"));
    const std::string sources = read_file(dir.path / "rec" / "sources.txt");
    CHECK(has(sources, "/rec/trace.jsonl:7: record/examples/train.py:31: all_reduce in average_gradients() (rank 0, thread main)"));
  }
}

TEST_CASE("record --torch: the bundled example with even shards checks ok") {
  TempDir dir;
  const Ran ran = record_and_check(dir, "record/examples/train.py", 4, true, 60, "--even");
  INFO(ran.output);
  CHECK(ran.code == 0);
  CHECK(has(ran.output, "trace.jsonl: ok"));
  CHECK(has(ran.output, "recorded 4 ranks, 28 torch.distributed calls"));
}

TEST_CASE("record --torch: data parallel with an uneven last shard is a hang at the last gradient all-reduce") {
  for (const bool fake : {false, true}) {
    TempDir dir;
    const Ran ran = record_and_check(dir, "tests/torch/dp_uneven_batches.py", 2, fake, 60);
    INFO(ran.output);
    CHECK(ran.code == 1);
    CHECK(has(ran.output, "rank 0 waits in allreduce #5 on world ("));
    CHECK(has(ran.output, "tests/torch/dp_uneven_batches.py:21); rank 1 never issued it: it finished"));
  }
}

TEST_CASE("record --torch: a metric all-reduced on rank 0 only is a size mismatch with the next gradient all-reduce") {
  for (const bool fake : {false, true}) {
    TempDir dir;
    const Ran ran = record_and_check(dir, "tests/torch/metric_rank0.py", 2, fake, 60);
    INFO(ran.output);
    CHECK(ran.code == 1);
    CHECK(has(ran.output, "operation #2 on world differs in size: rank 0 issued allreduce #2 on world of 4B fp32 ("));
    CHECK(has(ran.output, "tests/torch/metric_rank0.py:10), rank 1 issued allreduce #2 on world of 1KiB fp32 ("));
  }
}

TEST_CASE("record --torch: pipeline stages that both send first deadlock, and gloo's run is stopped at --timeout") {
  for (const bool fake : {false, true}) {
    TempDir dir;
    const Ran ran = record_and_check(dir, "tests/torch/pipeline_send_first.py", 2, fake, 15);
    INFO(ran.output);
    CHECK(ran.code == 1);
    CHECK(has(ran.output, ": deadlock"));
    CHECK(has(ran.output, "rank 0 waits in send to rank 1 #1 on world ("));
    CHECK(has(ran.output, "tests/torch/pipeline_send_first.py:16)"));
    CHECK(has(ran.output, "wait-for cycle: 0 -> 1 -> 0"));
    if (!fake) CHECK(has(ran.output, "rank 1: was stopped after --timeout 15 s; its last call: send at "));
  }
}

TEST_CASE("record --torch: new_group called by its members only leaves them waiting for the rank that never calls it") {
  for (const bool fake : {false, true}) {
    TempDir dir;
    const Ran ran = record_and_check(dir, "tests/torch/new_group_members_only.py", 3, fake, 15);
    INFO(ran.output);
    CHECK(ran.code == 1);
    CHECK(has(ran.output, "ranks 0,1 wait in new_group #1 'group1' of ranks 0,1 ("));
    CHECK(has(ran.output, "tests/torch/new_group_members_only.py:12); rank 2 never issued it: it waits in barrier #1 on world ("));
  }
}

TEST_CASE("record --torch: a correct job using most of torch.distributed checks ok, in both modes") {
  for (const bool fake : {false, true}) {
    TempDir dir;
    const Ran ran = record_and_check(dir, "tests/torch/mixed_correct.py", 2, fake, 60);
    INFO(ran.output);
    CHECK(ran.code == 0);
    CHECK(has(ran.output, "trace.jsonl: ok"));
    const std::string trace = read_file(dir.path / "rec" / "trace.jsonl");
    // batch_isend_irecv is one NCCL group; isend/irecv and async all_reduce carry handles and waits;
    // the uneven all_to_all_single is a group of sends and receives; reduce_scatter is recorded as called.
    CHECK(has(trace, R"({"rank": 1, "op": "group_start"}
{"rank": 1, "op": "send", "to": 0, "size": 32, "dtype": "fp32"}
{"rank": 1, "op": "recv", "from": 0, "size": 32, "dtype": "fp32"}
{"rank": 1, "op": "group_end"})"));
    CHECK(has(trace, R"({"rank": 1, "op": "recv", "from": 0, "size": 32, "dtype": "fp32", "async": "irecv.3"}
{"rank": 1, "op": "wait", "handle": "irecv.3"})"));
    CHECK(has(trace, R"({"rank": 1, "op": "new_group", "name": "group1", "ranks": [0]})"));
    CHECK(has(trace, R"({"rank": 1, "op": "reduce_scatter", "size": 16, "dtype": "fp32"})"));
    CHECK(has(trace, R"({"rank": 1, "op": "group_start"}
{"rank": 1, "op": "send", "to": 0, "size": 4, "dtype": "fp32"}
{"rank": 1, "op": "recv", "from": 0, "size": 8, "dtype": "fp32"}
{"rank": 1, "op": "group_end"})"));
  }
}
