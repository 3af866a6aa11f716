// Golden tests of the three importers on the samples in tests/import/ (each written from the
// documented formats): the trace written, the import summary, and what `lockstep check` says of
// it. Set LOCKSTEP_UPDATE_GOLDEN=1 to rewrite tests/import/golden/ after a deliberate change.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/cli.h"
#include "import/flight_recorder.h"
#include "import/pipeline_csv.h"
#include "import/recorded.h"
#include "tests/testing.h"

namespace lockstep::import {

namespace {

namespace fs = std::filesystem;

using Run = testing::CliRun;

Run lockstep(const std::vector<std::string>& args) { return testing::run_lockstep(args); }

fs::path temp_dir() {
  const fs::path dir = fs::temp_directory_path() / "lockstep-import-test";
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
  return text;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Imports, checks, and compares trace and texts with tests/import/golden/NAME.{jsonl,txt}.
void golden(const std::string& name, const std::string& format, const std::vector<std::string>& inputs,
            int expected_check_code, const std::vector<std::string>& extra = {}) {
  const fs::path out = temp_dir() / (name + ".jsonl");
  fs::remove(out);
  std::vector<std::string> args{"import", format};
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.insert(args.end(), {"-o", out.string()});
  args.insert(args.end(), extra.begin(), extra.end());
  const Run imported = lockstep(args);
  INFO(imported.err);
  REQUIRE(imported.code == 0);
  const Run checked = lockstep({"check", out.string()});
  CHECK(checked.code == expected_check_code);
  const std::string trace = read_file(out);
  const std::string text = replace_all("$ lockstep import ...\n" + imported.out + "$ lockstep check OUT\n" + checked.out + checked.err,
                                       out.string(), "OUT");
  const fs::path golden_dir = fs::path("tests/import/golden");
  if (std::getenv("LOCKSTEP_UPDATE_GOLDEN") != nullptr) {
    fs::create_directories(golden_dir);
    std::ofstream(golden_dir / (name + ".jsonl"), std::ios::binary) << replace_all(trace, out.string(), "OUT");
    std::ofstream(golden_dir / (name + ".txt"), std::ios::binary) << text;
  }
  CHECK(trace == read_file(golden_dir / (name + ".jsonl")));
  CHECK(text == read_file(golden_dir / (name + ".txt")));
}

// An import that must fail: exit 2, the message, and no output file.
void refused(const std::string& format, const std::vector<std::string>& inputs, const std::string& message) {
  const fs::path out = temp_dir() / "refused.jsonl";
  fs::remove(out);
  std::vector<std::string> args{"import", format};
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.insert(args.end(), {"-o", out.string()});
  const Run run = lockstep(args);
  CHECK(run.code == 2);
  CHECK(run.out.empty());
  INFO(run.err);
  CHECK(run.err.find(message) != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(temp_dir() / "refused.jsonl.lockstep-tmp"));
}

fs::path write_temp(const std::string& name, const std::string& content) {
  const fs::path dir = temp_dir() / "inputs";
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << content;
  return dir / name;
}

}  // namespace

TEST_CASE("flight recorder: rank 2 never joined all_reduce #5 is a hang naming both diverging groups") {
  golden("fr-hang", "flight-recorder", files_in("tests/import/fr-hang"), 1);
}

TEST_CASE("flight recorder: a pickle dump with an all_reduce of another size is a size mismatch") {
  golden("fr-size-mismatch", "flight-recorder", files_in("tests/import/fr-size-mismatch"), 1);
}

TEST_CASE("flight recorder: sends before receives on both ranks are a deadlock with its wait-for cycle") {
  golden("fr-p2p-cycle", "flight-recorder", files_in("tests/import/fr-p2p-cycle"), 1);
}

TEST_CASE("flight recorder: a coalesced send and recv (batch_isend_irecv) is one NCCL group and ok") {
  golden("fr-batched-p2p", "flight-recorder", files_in("tests/import/fr-batched-p2p"), 0);
}

TEST_CASE("flight recorder: an uneven all_to_all whose totals agree is an all_to_all_single and ok") {
  golden("fr-moe-uneven", "flight-recorder", files_in("tests/import/fr-moe-uneven"), 0);
}

TEST_CASE("flight recorder: an uneven all_to_all whose ranks send more than they receive is a mismatch") {
  golden("fr-moe-totals-differ", "flight-recorder", files_in("tests/import/fr-moe-totals-differ"), 1);
}

TEST_CASE("flight recorder: an uneven all_gather (coalesced broadcasts) is ok, with one part sized apart a mismatch") {
  golden("fr-uneven-all-gather", "flight-recorder", files_in("tests/import/fr-uneven-all-gather"), 0);
  golden("fr-uneven-all-gather-stale", "flight-recorder", files_in("tests/import/fr-uneven-all-gather-stale"), 1);
}

TEST_CASE("nccl log: one rank calling AllGather where the others call AllReduce is a mismatch") {
  golden("nccl-mismatch", "nccl-log", {"tests/import/nccl-mismatch/job.txt"}, 1);
}

TEST_CASE("nccl log: Send and Recv between ncclGroupStart and ncclGroupEnd are ok, without the group a deadlock") {
  golden("nccl-group", "nccl-log", files_in("tests/import/nccl-group"), 0);
  golden("nccl-nogroup", "nccl-log", files_in("tests/import/nccl-nogroup"), 1);
}

TEST_CASE("pipeline csv: sends before receives in a schedule with comms deadlock under rendezvous, the reordered one is ok") {
  golden("pipeline-comms-deadlock", "pipeline-csv", {"tests/import/pipeline/comms-deadlock.csv"}, 1);
  golden("pipeline-comms-fixed", "pipeline-csv", {"tests/import/pipeline/comms-fixed.csv"}, 0);
}

TEST_CASE("pipeline csv: compute-only 1F1B is lowered as PyTorch's runtime lowers it and checks ok, with rendezvous or eager sends") {
  golden("pipeline-1f1b", "pipeline-csv", {"tests/import/pipeline/1f1b-compute-only.csv"}, 0);
  golden("pipeline-1f1b-eager", "pipeline-csv", {"tests/import/pipeline/1f1b-compute-only.csv"}, 0,
         {"--eager-limit", "4194304"});
  golden("pipeline-bw-dialect", "pipeline-csv", {"tests/import/pipeline/1f1b-bw-dialect.csv"}, 0);
}

TEST_CASE("pipeline csv: every schedule family as PyTorch writes it, pp 2, 4 and 8, compute only and with comms, checks ok") {
  size_t checked = 0;
  for (const std::string& csv : files_in("tests/import/pipeline/pytorch")) {
    const std::string name = fs::path(csv).filename().string();
    if (!name.ends_with(".csv") || (name.rfind("1f1b-pp", 0) == 0 && name.ends_with("-compute.csv"))) continue;
    const fs::path out = temp_dir() / "family.jsonl";
    const Run imported = lockstep({"import", "pipeline-csv", csv, "-o", out.string(), "--quiet"});
    INFO(csv << "\n" << imported.err);
    REQUIRE(imported.code == 0);
    const Run run = lockstep({"check", out.string(), "--quiet"});
    INFO(run.out << run.err);
    CHECK(run.code == 0);
    CHECK(run.out.find(": ok (no expectation) [1 execution, exhaustive]") != std::string::npos);
    ++checked;
  }
  CHECK(checked == 42);  // 7 families x 3 sizes x 2 forms
}

TEST_CASE("pipeline csv: 2 rows of 200,000 cells import with every handle and tag named once (hashed names)") {
  std::string rows[2];
  for (int mb = 0; mb < 100'000; ++mb) {
    const std::string m = std::to_string(mb);
    rows[0] += (mb ? "," : "") + ("0F" + m) + ",0SEND_F" + m;
    rows[1] += (mb ? "," : "") + ("1RECV_F" + m) + ",1F" + m;
  }
  const fs::path csv = temp_dir() / "wide.csv";
  std::ofstream(csv) << rows[0] << "\n" << rows[1] << "\n";
  const RecordedTrace trace = import_pipeline_csv(csv.string());
  REQUIRE(trace.ranks.size() == 2);
  CHECK(trace.ranks[0].size() >= 200'000);
  // Each name once, and found again by its index: names[0] is "" and never indexed.
  CHECK(trace.name_index.size() == trace.names.size() - 1);
  for (size_t i = 1; i < trace.names.size(); i += 997) CHECK(trace.name_index.at(trace.names[i]) == i);
}

TEST_CASE("pipeline csv: DualPipeV's OVERLAP_F_B cells run their forward and backward in order, each with its comms") {
  golden("pipeline-dualpipev-pp2", "pipeline-csv", {"tests/import/pipeline/pytorch/dualpipev-pp2-comms.csv"}, 0);
}

TEST_CASE("pipeline csv: PyTorch's Schedule1F1B IR that skips the last rank's first microbatch is reported, not refused") {
  golden("pipeline-1f1b-ir", "pipeline-csv", {"tests/import/pipeline/pytorch/1f1b-pp2-compute.csv"}, 1);
}

TEST_CASE("pipeline csv: a dropped RECV_B is a receive that never completes, where the check reports the rank waiting") {
  golden("pipeline-dropped-recv-b", "pipeline-csv", {"tests/import/pipeline/dropped-recv-b.csv"}, 1);
}

TEST_CASE("pipeline csv: --with-dp replicates the pipeline and makes UNSHARD and REDUCE_GRAD data-parallel collectives") {
  golden("pipeline-with-dp", "pipeline-csv", {"tests/import/pipeline/pytorch/gpipe-pp2-comms.csv"}, 0, {"--with-dp", "2"});
}

TEST_CASE("pipeline csv: malformed OVERLAP_F_B cells and options are refused with line and column") {
  refused("pipeline-csv", {write_temp("overlap-kind.csv", "0F0,(0F1;1B0)OVERLAP\r\n1F0,1B0\r\n").string()},
          "overlap-kind.csv:1:5: error: invalid action '(0F1;1B0)OVERLAP': a cell in parentheses is (ACTION;ACTION)OVERLAP_F_B");
  refused("pipeline-csv", {write_temp("overlap-send.csv", "0F0,(0F1; 0SEND_F1)OVERLAP_F_B\n1F0,1B0\n").string()},
          "overlap-send.csv:1:11: error: '0SEND_F1' in '(0F1; 0SEND_F1)OVERLAP_F_B': OVERLAP_F_B runs compute actions (F, I, B, W) only");
  refused("pipeline-csv", {write_temp("overlap-bad.csv", "0F0,(0F1;1Q0)OVERLAP_F_B\n").string()},
          "overlap-bad.csv:1:10: error: invalid action '1Q0'");
  const Run run = lockstep({"import", "pipeline-csv", "tests/import/pipeline/comms-fixed.csv", "-o", (temp_dir() / "x.jsonl").string(),
                            "--with-dp", "0"});
  CHECK(run.code == 2);
  CHECK(run.err == "lockstep: error: --with-dp expects a number of replicas from 1 to 65536, got 0\nrun 'lockstep import --help' for usage\n");
}

TEST_CASE("flight recorder: malformed dumps are refused with the file, the position or record, and no output") {
  const std::string good = read_file("tests/import/fr-hang/nccl_trace_rank_0.json");
  const fs::path truncated = write_temp("trunc_rank_0.json", good.substr(0, good.size() / 2));
  refused("flight-recorder", {truncated.string()}, truncated.string() + ":1:");
  std::string version = good;
  version.replace(version.find("\"2.10\""), 6, "\"3.0\"");
  refused("flight-recorder", {write_temp("ver_rank_0.json", version).string()}, "unknown Flight Recorder version '3.0'");
  std::string op = good;
  op.replace(op.find("nccl:all_gather"), 15, "nccl:all_gathr");
  refused("flight-recorder", {write_temp("op_rank_0.json", op).string()}, "entry 0: unknown op 'all_gathr' in profiling_name 'nccl:all_gathr' (did you mean 'all_gather'?)");
  refused("flight-recorder", {write_temp("dump.json", good).string()}, "cannot tell the rank of this dump");
  refused("flight-recorder", {write_temp("bad_rank_1", std::string("\x80\x02}q\x00(X\x07\x00\x00\x00versionq\x01", 20)).string()},
          "bad pickle: byte 20: the pickle ends before its STOP opcode (truncated?)");
  refused("flight-recorder", {write_temp("evil_rank_1", std::string("\x80\x02" "cos\nsystem\n", 13)).string()},
          "pickle opcode GLOBAL (0x63) is not supported");
  // Rank 0 says pg '1' is [0, 1]; rank 1 says it is [1, 2, 3].
  std::string other = read_file("tests/import/fr-hang/nccl_trace_rank_1.json");
  other.replace(other.find("\"ranks\":\"[0, 1]\""), 16, "\"ranks\":\"[1, 2, 3]\"");
  refused("flight-recorder", {"tests/import/fr-hang/nccl_trace_rank_0.json", write_temp("dis_rank_1.json", other).string()},
          "ranks disagree on process group '1'");
}

TEST_CASE("flight recorder: a dump of a newer 2.x version is read, with a warning naming the fields it does not know") {
  std::vector<std::string> inputs;
  for (const std::string& path : files_in("tests/import/fr-hang")) {
    std::string dump = read_file(path);
    dump.replace(dump.find("\"2.10\""), 6, "\"2.11\"");
    if (inputs.empty()) {
      dump.replace(dump.find("\"state\":"), 8, "\"stream_id\":7,\"state\":");
      dump.insert(1, "\"watchdog\":{\"alive\":true},");
    }
    inputs.push_back(write_temp("new_" + fs::path(path).filename().string(), dump).string());
  }
  const fs::path out = temp_dir() / "newer.jsonl";
  const Run run = lockstep({"import", "flight-recorder", inputs[0], inputs[1], inputs[2], inputs[3], "-o", out.string(), "--quiet"});
  CHECK(run.code == 0);
  CHECK(run.err == inputs[0] + " (and 3 more dumps): warning: Flight Recorder version 2.11 is newer than 2.10, the newest "
                               "this lockstep knows: read as 2.10; fields not understood: entries[].stream_id, watchdog\n");
  CHECK(lockstep({"check", out.string(), "--quiet"}).out.find(": hang") != std::string::npos);
  // A pickle dump of 2.11 whose fields are all known; then one older than the oldest known.
  const std::string pickle = read_file("tests/import/fr-size-mismatch/nccl_trace_rank_0");
  const std::string v24("X\x03\x00\x00\x00" "2.4", 8);
  REQUIRE(pickle.find(v24) != std::string::npos);
  std::string future = pickle;
  future.replace(future.find(v24), v24.size(), std::string("X\x04\x00\x00\x00" "2.11", 9));
  const fs::path one = write_temp("pk_rank_0", future);
  const Run read = lockstep({"import", "flight-recorder", one.string(), "-o", out.string(), "--quiet"});
  CHECK(read.code == 0);
  CHECK(read.err == one.string() + ": warning: Flight Recorder version 2.11 is newer than 2.10, the newest this lockstep "
                                   "knows: read as 2.10; every field in it is one 2.10 has\n");
  std::string past = pickle;
  past.replace(past.find(v24), v24.size(), std::string("X\x03\x00\x00\x00" "2.0", 8));
  refused("flight-recorder", {write_temp("old_rank_0", past).string()},
          "unknown Flight Recorder version '2.0'; versions 2.2 to 2.10 are read, and newer 2.x ones as 2.10");
}

TEST_CASE("flight recorder: groups that share a desc are named by desc and ranks, a desc of one group by the desc alone") {
  const auto dump = [](const std::string& groups, const std::string& pg) {
    return R"({"version":"2.10","pg_config":{"0":{"name":"0","desc":"default_pg","ranks":"[0, 1, 2, 3]"},)" + groups +
           R"(},"pg_status":{},"entries":[{"collective_seq_id":1,"input_dtypes":["Float"],"input_sizes":[[1536]],"is_p2p":false,"output_dtypes":["Float"],"output_sizes":[[1536]],"p2p_seq_id":0,"process_group":[")" +
           pg + R"(","dp"],"profiling_name":"nccl:all_reduce","record_id":0,"state":"completed"}]})";
  };
  const fs::path r0 = write_temp("dp_rank_0.json", dump(R"("1":{"name":"1","desc":"dp","ranks":"[0, 2]"},"3":{"name":"3","desc":"pp","ranks":"[0, 1]"})", "1"));
  const fs::path r1 = write_temp("dp_rank_1.json", dump(R"("2":{"name":"2","desc":"dp","ranks":"[1, 3]"},"3":{"name":"3","desc":"pp","ranks":"[0, 1]"})", "2"));
  const fs::path out = temp_dir() / "dp.jsonl";
  const Run run = lockstep({"import", "flight-recorder", r0.string(), r1.string(), "-o", out.string()});
  INFO(run.out << run.err);
  CHECK(run.code == 0);
  CHECK(run.out.find("process group '1' (dp) ranks [0, 2] is group dp_0to2by2") != std::string::npos);
  CHECK(run.out.find("process group '3' (pp) ranks [0, 1] is group pp\n") != std::string::npos);
  CHECK(run.out.find("process group '2' (dp) ranks [1, 3] is group dp_1to3by2") != std::string::npos);
  // Sizes as check writes them: 1536 floats are 6KiB, not 6.0KiB or 0.0MiB.
  CHECK(run.out.find("all 1 recorded op completed") != std::string::npos);
  const std::string trace = read_file(out);
  CHECK(trace.find(R"({"rank": 0, "op": "allreduce", "group": "dp_0to2by2", "size": 6144, "dtype": "fp32"})") != std::string::npos);
}

TEST_CASE("import summaries write sizes as check does, the largest unit that divides them exactly") {
  CHECK(format_bytes(12) == "12B");
  CHECK(format_bytes(4096) == "4KiB");
  CHECK(format_bytes(1536 * 1024) == "1536KiB");
  CHECK(format_bytes(int64_t{3} << 30) == "3GiB");
  CHECK(format_bytes(32597000) == "32597000B");
  CHECK(format_bytes(0) == "0B");
}

TEST_CASE("nccl log and pipeline csv: malformed lines are refused with line and column, and no output") {
  const fs::path log = write_temp("bad.log",
      "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nranks 1 cudaDev 0 busId 1 commId 0x1 - Init COMPLETE\n"
      "h:1:1 [0] NCCL INFO AllReduse: opCount 0 sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=1] stream 0x2\n");
  refused("nccl-log", {log.string()}, log.string() + ":2:21: error: unknown op 'AllReduse'");
  const fs::path early = write_temp("early.log",
      "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=1] stream 0x2\n"
      "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nranks 1 cudaDev 0 busId 1 commId 0x1 - Init COMPLETE\n");
  refused("nccl-log", {early.string()}, early.string() + ":1:1: error: h:1 [0] uses communicator 0x10 before any 'Init COMPLETE' line of it");
  const fs::path csv = write_temp("bad.csv", "0F0,0SEND_F0\n1RECV_F0,1X0\n");
  refused("pipeline-csv", {csv.string()}, csv.string() + ":2:10: error: invalid action '1X0'");
}

TEST_CASE("nccl log: CRLF lines, a last line without newline, inits in another file and re-inits of an address") {
  // Rank 1's log: its init of 0x20 is in the first file, its calls in the second; rank 0 re-inits
  // the address 0x10 as another communicator (commId 0x2 of one rank) before its last call.
  const fs::path first = write_temp("crlf0.log",
      "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nranks 2 cudaDev 0 busId 1 commId 0x1 - Init COMPLETE\r\n"
      "h:2:2 [1] NCCL INFO comm 0x20 rank 1 nranks 2 cudaDev 1 busId 2 commId 0x1 - Init COMPLETE\r\n"
      "h:1:1 [0] NCCL INFO Group of words that is not a group call\r\n"
      "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x2\r\n");
  const fs::path second = write_temp("crlf1.log",
      "h:2:2 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 comm 0x20 [nranks=2] stream 0x2\n"
      "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nranks 1 cudaDev 0 busId 1 commId 0x2 - Init COMPLETE\n"
      "h:1:1 [0] NCCL INFO AllGather: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 datatype 9 op 0 root 0 comm 0x10 [nranks=1] stream 0x2");
  const fs::path out = temp_dir() / "crlf.jsonl";
  const Run run = lockstep({"import", "nccl-log", first.string(), second.string(), "-o", out.string(), "--quiet"});
  INFO(run.err);
  REQUIRE(run.code == 0);
  const std::string trace = read_file(out);
  CHECK(trace.find("\"groups\": {\"comm1\": [0]}") != std::string::npos);
  CHECK(trace.substr(trace.find('\n') + 1) ==
        "{\"rank\": 0, \"op\": \"allreduce\", \"size\": 16, \"dtype\": \"fp32\"}\n"
        "{\"rank\": 0, \"op\": \"allgather\", \"group\": \"comm1\", \"size\": 16}\n"
        "{\"rank\": 1, \"op\": \"allreduce\", \"size\": 16, \"dtype\": \"fp32\"}\n");
  // A bad value keeps its column on a CRLF line.
  const fs::path bad = write_temp("crlf-bad.log",
      "h:1:1 [0] NCCL INFO comm 0x10 rank 0 nranks 1 cudaDev 0 busId 1 commId 0x1 - Init COMPLETE\r\n"
      "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count x4 datatype 7 op 0 root 0 comm 0x10 [nranks=1] stream 0x2\r\n");
  refused("nccl-log", {bad.string()}, bad.string() + ":2:74: error: invalid value 'x4' for 'count'");
}

TEST_CASE("the trace writer writes an NCCL group of several ops between group_start and group_end") {
  RecordedTrace trace;
  trace.scenario = "g";
  trace.world = 2;
  trace.ranks.resize(2);
  trace.add_group("world", {0, 1});
  for (int32_t rank = 0; rank < 2; ++rank) {
    trace.ranks[static_cast<size_t>(rank)] = {
        RecordedOp{sim::OpKind::SEND, sim::DType::BF16, 0, 1 - rank, 16, 7, 0, 0},
        RecordedOp{sim::OpKind::RECV, sim::DType::BF16, 0, 1 - rank, 16, 7, 0, 0},
        RecordedOp{sim::OpKind::ALLREDUCE, sim::DType::FP32, 0, -1, 4, 0, 0, 0}};
  }
  const fs::path out = temp_dir() / "group.jsonl";
  REQUIRE(write_trace_file(trace, out.string()).empty());
  CHECK(read_file(out) ==
        "{\"lockstep_trace\": 1, \"scenario\": \"g\", \"world\": 2}\n"
        "{\"rank\": 0, \"op\": \"group_start\"}\n"
        "{\"rank\": 0, \"op\": \"send\", \"to\": 1, \"size\": 16}\n"
        "{\"rank\": 0, \"op\": \"recv\", \"from\": 1, \"size\": 16}\n"
        "{\"rank\": 0, \"op\": \"group_end\"}\n"
        "{\"rank\": 0, \"op\": \"allreduce\", \"size\": 4, \"dtype\": \"fp32\"}\n"
        "{\"rank\": 1, \"op\": \"group_start\"}\n"
        "{\"rank\": 1, \"op\": \"send\", \"to\": 0, \"size\": 16}\n"
        "{\"rank\": 1, \"op\": \"recv\", \"from\": 0, \"size\": 16}\n"
        "{\"rank\": 1, \"op\": \"group_end\"}\n"
        "{\"rank\": 1, \"op\": \"allreduce\", \"size\": 4, \"dtype\": \"fp32\"}\n");
}

TEST_CASE("the fast trace writer writes what sim::write_trace writes, for every op kind and field an importer sets") {
  RecordedTrace trace;
  trace.scenario = "all \"kinds\"";
  trace.description = "every kind";
  trace.world = 3;
  trace.ranks.resize(3);
  trace.add_group("world", {0, 1, 2});
  trace.add_group("pair", {0, 1});
  const uint32_t tag = trace.intern("act.s0.mb1");
  const uint32_t handle = trace.intern("h1");
  const sim::OpKind kinds[] = {sim::OpKind::ALLREDUCE, sim::OpKind::ALLGATHER, sim::OpKind::REDUCE_SCATTER,
                               sim::OpKind::BROADCAST, sim::OpKind::REDUCE,    sim::OpKind::ALL_TO_ALL,
                               sim::OpKind::GATHER,    sim::OpKind::SCATTER,   sim::OpKind::BARRIER,
                               sim::OpKind::SEND,      sim::OpKind::RECV,      sim::OpKind::COMPUTE,
                               sim::OpKind::SLEEP,     sim::OpKind::WAIT};
  uint32_t nccl_group = 0;
  for (const sim::OpKind kind : kinds) {
    for (uint32_t group = 0; group < 2; ++group) {
      for (const sim::DType dtype : {sim::DType::BF16, sim::DType::FP8_E5M2, sim::DType::INT8}) {
        for (const uint32_t t : {uint32_t{0}, tag}) {
          for (const uint32_t h : {uint32_t{0}, handle}) {
            RecordedOp op{kind, dtype, group, 1, 4096, 0, h, t};
            if (kind == sim::OpKind::WAIT && h == 0) op.handle = handle;
            trace.ranks[0].push_back(op);
            if (kind == sim::OpKind::COMPUTE || kind == sim::OpKind::SLEEP || kind == sim::OpKind::WAIT) continue;
            // The same op twice in an NCCL group on rank 1 (without async: the trace format has
            // none in a group), and alone in a one-op group on rank 2.
            op.nccl_group = ++nccl_group;
            op.handle = 0;
            trace.ranks[1].push_back(op);
            trace.ranks[1].push_back(op);
            op.nccl_group = ++nccl_group;
            trace.ranks[2].push_back(op);
          }
        }
      }
    }
  }
  const auto written = [&](bool reference) {
    std::FILE* file = std::tmpfile();
    REQUIRE(file != nullptr);
    const std::string problem = reference ? write_recorded_trace_reference(trace, file) : write_recorded_trace(trace, file);
    CHECK(problem.empty());
    std::string text(static_cast<size_t>(std::ftell(file)), '\0');
    std::rewind(file);
    CHECK(std::fread(text.data(), 1, text.size(), file) == text.size());
    std::fclose(file);
    return text;
  };
  const std::string fast = written(false);
  CHECK(fast.size() > 10000);
  CHECK(fast == written(true));
}

TEST_CASE("flight recorder dump names give their rank") {
  CHECK(rank_of_dump_name("/tmp/nccl_trace_rank_12") == 12);
  CHECK(rank_of_dump_name("dumps/nccl_trace_rank_3.json") == 3);
  CHECK(rank_of_dump_name("x/rank7.pkl") == 7);
  CHECK(rank_of_dump_name("dump.json") == -1);
}

}  // namespace lockstep::import
