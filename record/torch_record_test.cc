// End to end: `lockstep record --torch` runs real PyTorch scripts (tests/torch/, and the bundled
// record/examples/train.py) on CPU ranks, in both modes, and `--check` gives the verdict each
// script's bug calls for, pointing at the script's line. Needs Debian's python3-torch
// (scripts/setup installs it); every run is bounded by --timeout, and `record` stops and reaps
// the ranks' process group itself. Under AddressSanitizer the scripts run with --fake only (the
// example in both modes).

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "record/record_testing.h"

namespace {

namespace fs = std::filesystem;

using namespace lockstep::record::testing;

const std::string SOURCE = LOCKSTEP_SOURCE_DIR;
const std::string PYTHON = "/usr/bin/python3";

void require_torch() {
  const Ran probe = run(PYTHON + " -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()'");
  INFO("these tests need Debian's python3-torch (with gloo) at " << PYTHON << ": run scripts/setup\n" << probe.output);
  REQUIRE(probe.code == 0);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The modes a script runs in: both, and under AddressSanitizer (CI runs the suite twice) --fake
// only: the Python side is the same, and the runs gloo needs --timeout for cost 20 s each.
std::vector<bool> fake_modes() {
#if defined(__SANITIZE_ADDRESS__)
  return {true};
#else
  return {false, true};
#endif
}

// One recorded and checked run of a script.
struct Case {
  Case(std::string script_path, int ranks, double timeout, int exit_code, std::vector<std::string> output_holds,
       std::string script_args = "")
      : script(std::move(script_path)), nproc(ranks), timeout_s(timeout), code(exit_code), says(std::move(output_holds)),
        args(std::move(script_args)) {}
  std::string script;
  int nproc;
  double timeout_s;
  int code;                       // record --torch --check's exit code
  std::vector<std::string> says;  // what its output holds (paths of the run's folder left out)
  std::string args;
};

// Records and checks `c` in one mode; returns the output and leaves DIR/rec for more checks.
Ran record_and_check(const TempDir& dir, const Case& c, bool fake) {
  require_torch();
  const Ran ran = run(LOCKSTEP + " record --torch --check" + (fake ? " --fake" : "") + " -o " + (dir.path / "rec").string() +
                      " --nproc " + std::to_string(c.nproc) + " --timeout " + std::to_string(c.timeout_s) + " -- " + PYTHON +
                      " " + SOURCE + "/" + c.script + (c.args.empty() ? "" : " " + c.args));
  INFO(c.script << (fake ? " --fake" : " (gloo)") << "\n" << ran.output);
  CHECK(ran.code == c.code);
  for (const std::string& part : c.says) CHECK(has(ran.output, part));
  CHECK(fs::exists(dir.path / "rec" / "trace.jsonl"));
  CHECK(fs::exists(dir.path / "rec" / "sources.txt"));
  return ran;
}

void check_in_every_mode(const Case& c) {
  for (const bool fake : fake_modes()) {
    TempDir dir;
    record_and_check(dir, c, fake);
  }
}

}  // namespace

TEST_CASE("record --torch: the bundled example's uneven shards hang in the gradient all-reduce, in both modes") {
  const Case example{"record/examples/train.py", 4, 60, 1,
                     {": hang", "ranks 0,1 wait in allreduce #6 on world (",
                      "record/examples/train.py:31); ranks 2,3 never issued it: they finished"}};
  for (const bool fake : {false, true}) {
    TempDir dir;
    const Ran ran = record_and_check(dir, example, fake);
    // Under gloo the two ranks left over fail when their peers leave: recorded, not a crash of theirs.
    if (!fake) CHECK(has(ran.output, "(its collective failed because a peer went away)"));
    CHECK(has(read_file(dir.path / "rec" / "sources.txt"),
              "/rec/trace.jsonl:7: record/examples/train.py:31: all_reduce in average_gradients() (rank 0, thread main)"));
  }
}

TEST_CASE("record --torch: the bundled example with even shards checks ok") {
  TempDir dir;
  record_and_check(dir, {"record/examples/train.py", 4, 60, 0, {"trace.jsonl: ok", "recorded 4 ranks, 28 torch.distributed calls"}, "--even"},
                   true);
}

TEST_CASE("record --torch: data parallel with an uneven last shard is a hang at the last gradient all-reduce") {
  check_in_every_mode({"tests/torch/dp_uneven_batches.py", 2, 60, 1,
                       {"rank 0 waits in allreduce #5 on world (",
                        "tests/torch/dp_uneven_batches.py:21); rank 1 never issued it: it finished"}});
}

TEST_CASE("record --torch: a metric all-reduced on rank 0 only is a size mismatch with the next gradient all-reduce") {
  check_in_every_mode({"tests/torch/metric_rank0.py", 2, 60, 1,
                       {"operation #2 on world differs in size: rank 0 issued allreduce #2 on world of 4B fp32 (",
                        "tests/torch/metric_rank0.py:10), rank 1 issued allreduce #2 on world of 1KiB fp32 ("}});
}

TEST_CASE("record --torch: pipeline stages that both send first deadlock, and gloo's run is stopped at --timeout") {
  const Case pipeline{"tests/torch/pipeline_send_first.py", 2, 15, 1,
                      {": deadlock", "rank 0 waits in send to rank 1 #1 on world (", "tests/torch/pipeline_send_first.py:16)",
                       "wait-for cycle: 0 -> 1 -> 0"}};
  for (const bool fake : fake_modes()) {
    TempDir dir;
    const Ran ran = record_and_check(dir, pipeline, fake);
    if (!fake) CHECK(has(ran.output, "rank 1: was stopped after --timeout 15 s; its last call: send at "));
  }
}

TEST_CASE("record --torch: new_group called by its members only leaves them waiting for the rank that never calls it") {
  check_in_every_mode({"tests/torch/new_group_members_only.py", 3, 15, 1,
                       {"ranks 0,1 wait in new_group #1 'group1' of ranks 0,1 (",
                        "tests/torch/new_group_members_only.py:12); rank 2 never issued it: it waits in barrier #1 on world ("}});
}

TEST_CASE("record --torch: a correct job using most of torch.distributed checks ok, in both modes") {
  for (const bool fake : fake_modes()) {
    TempDir dir;
    record_and_check(dir, {"tests/torch/mixed_correct.py", 2, 60, 0, {"trace.jsonl: ok"}}, fake);
    const std::string trace = read_file(dir.path / "rec" / "trace.jsonl");
    CHECK(has(trace, fake ? "\"description\": \"Recorded by lockstep record --torch --fake: no communication; every rank ran "
                            "its whole program (the script asked for backend 'nccl').\""
                          : "\"description\": \"Recorded by lockstep record --torch: the ranks ran on CPU with gloo (the script "
                            "asked for backend 'nccl').\""));
    // batch_isend_irecv is one NCCL group; isend/irecv and async all_reduce carry handles and waits;
    // the uneven all_to_all_single keeps its split sizes; reduce_scatter is recorded as called.
    CHECK(has(trace, R"({"rank": 1, "op": "group_start"}
{"rank": 1, "op": "send", "to": 0, "size": 32, "dtype": "fp32"}
{"rank": 1, "op": "recv", "from": 0, "size": 32, "dtype": "fp32"}
{"rank": 1, "op": "group_end"})"));
    CHECK(has(trace, R"({"rank": 1, "op": "recv", "from": 0, "size": 32, "dtype": "fp32", "async": "irecv.3"}
{"rank": 1, "op": "wait", "handle": "irecv.3"})"));
    CHECK(has(trace, R"({"rank": 1, "op": "new_group", "name": "group1", "ranks": [0]})"));
    CHECK(has(trace, R"({"rank": 1, "op": "reduce_scatter", "size": 16, "dtype": "fp32"})"));
    CHECK(has(trace, R"({"rank": 1, "op": "all_to_all_single", "dtype": "fp32", "send_splits": [4, 8], "recv_splits": [8, 8]})"));
  }
}

TEST_CASE("record --torch: usage errors and a script that cannot run say why, with exit 2") {
  TempDir dir;
  const std::string out = " -o " + (dir.path / "rec").string();
  const auto refused = [&](const std::string& args, const std::string& message) {
    const Ran ran = run(LOCKSTEP + " record" + args);
    INFO(ran.output);
    CHECK(ran.code == 2);
    CHECK(has(ran.output, "lockstep: error: " + message + "\nrun 'lockstep record --help' for usage\n"));
  };
  refused(" --torch" + out + " -- " + PYTHON + " x.py", "record --torch needs --nproc N (the number of ranks to start)");
  refused(" --torch" + out + " --nproc 0 -- " + PYTHON + " x.py", "--nproc expects a number of ranks from 1 to 1024, got '0'");
  refused(out + " --fake -- " + PYTHON + " x.py", "--fake needs --torch");
  refused(out + " --check -- " + PYTHON + " x.py", "--check needs --torch");
  refused(" --torch --lib x.so" + out + " --nproc 1 -- " + PYTHON + " x.py", "--lib is the NCCL recorder's; --torch records through Python");
  // The ranks start, and fail before they import torch: their last line says why.
  const Ran missing = run(LOCKSTEP + " record --torch --fake" + out + " --nproc 2 -- " + PYTHON + " " + (dir.path / "none.py").string());
  INFO(missing.output);
  CHECK(missing.code == 2);
  CHECK(has(missing.output, "  rank 1: exited with status 2; " + PYTHON + ": can't open file '" + (dir.path / "none.py").string() + "'"));
  CHECK(has(missing.output, "(recordings): error: no recordings: no rank imported torch.distributed with the recorder armed\n"));
  CHECK(has(missing.output, "lockstep record: no trace written (0 recordings in " + (dir.path / "rec" / "raw").string() + ")\n"));
}

TEST_CASE("record --torch --fake: an all_gather of unequal parts is an allgather_v, a stale count a mismatch") {
  // Gloo refuses unequal parts (NCCL gathers them by broadcasts): --fake only.
  TempDir dir;
  record_and_check(dir, {"tests/torch/uneven_all_gather.py", 3, 60, 0, {"trace.jsonl: ok"}}, true);
  CHECK(has(read_file(dir.path / "rec" / "trace.jsonl"),
            R"({"rank": 2, "op": "allgather_v", "dtype": "fp32", "recv_splits": [128, 192, 256]})"));
  TempDir stale;
  record_and_check(stale,
                   {"tests/torch/uneven_all_gather.py", 3, 60, 1,
                    {"trace.jsonl: mismatch", "differs in split sizes", "rank 0 sends 128B to rank 2, which expects 192B from it"},
                    "--stale"},
                   true);
}

TEST_CASE("record --torch --fake: DistributedDataParallel's gradient all-reduces are recorded where backward() runs") {
  TempDir dir;
  record_and_check(dir, {"tests/torch/ddp_uneven_batches.py", 2, 60, 1,
                         {"rank 0 waits in allreduce #", "tests/torch/ddp_uneven_batches.py:19); rank 1 never issued it: it finished"}},
                   true);
  const std::string raw = read_file(dir.path / "rec" / "sources.txt");
  CHECK(has(raw, "tests/torch/ddp_uneven_batches.py:14: ProcessGroup.broadcast in main() (rank 0, thread main)"));
  CHECK(has(raw, "tests/torch/ddp_uneven_batches.py:19: ProcessGroup.allreduce in main() (rank 0, thread main)"));
}
