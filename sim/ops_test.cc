// The op table, and its ops with split sizes (all_to_all_single, allgather_v) from YAML and traces to the
// engine's verdict.
#include "sim/ops.h"

#include <doctest/doctest.h>

#include <string>

#include "checker/explore.h"
#include "sim/loader_testing.h"
#include "sim/trace_format.h"
#include "tests/testing.h"

namespace lockstep::sim {

using loader_testing::problems;
using testing::scenario_from;
using testing::trace_from;

TEST_CASE("op table: every name finds its op, in every vocabulary") {
  for (const OpInfo& op : OPS) {
    if (op.kind == OpKind::INIT) {
      CHECK(find_op_named(op.name) == nullptr);  // no statement of its own
      continue;
    }
    CHECK(find_op_named(op.name) == &op);
    for (std::string_view name : op.torch) {
      if (!name.empty()) CHECK(find_torch_op(name) == &op);
    }
    for (std::string_view name : op.nccl) {
      if (!name.empty()) CHECK(find_nccl_op(name) == &op);
    }
    CHECK((op.required & ~op.fields) == 0);  // required fields are accepted ones
    CHECK((op.agreement != Agreement::NONE) == (op.op_class == OpClass::COLLECTIVE));
  }
  CHECK(find_torch_op("_allgather_base")->kind == OpKind::ALLGATHER);
  CHECK(find_nccl_op("Bcast")->kind == OpKind::BROADCAST);
  CHECK(find_nccl_op("AlltoAll")->kind == OpKind::ALL_TO_ALL);
  CHECK(find_op_named("allreduce ") == nullptr);
  CHECK(find_torch_op("") == nullptr);
}

namespace {

// Four ranks exchanging tokens: rank r sends 1 + (2r + e) % 3 KiB to rank e. `recv` is what
// rank r expects from member e.
std::string moe(const std::string& recv) {
  std::string send_list, recv_list;
  for (int e = 0; e < 4; ++e) {
    send_list += (e > 0 ? ", " : "") + ("\"1KiB * (1 + (2 * rank + " + std::to_string(e) + ") % 3)\"");
    std::string r = recv;
    r.replace(r.find('E'), 1, std::to_string(e));
    recv_list += (e > 0 ? ", " : "") + ("\"" + r + "\"");
  }
  return "scenario: moe\nworld: 4\nprogram:\n  - all_to_all_single: {send_splits: [" + send_list +
         "], recv_splits: [" + recv_list + "]}\n  - allreduce: {size: 1MiB}\n";
}

checker::CheckResult check(const Scenario& scenario) { return checker::check_scenario(scenario, {}); }

}  // namespace

TEST_CASE("all_to_all_single: each pair must agree, and a mismatch names the pair and both sizes") {
  CHECK(check(scenario_from(moe("1KiB * (1 + (2 * E + rank) % 3)"))).verdict == Verdict::OK);

  // Each rank takes its own routing as what it receives.
  const checker::CheckResult bad = check(scenario_from(moe("1KiB * (1 + (2 * rank + E) % 3)")));
  REQUIRE(bad.verdict == Verdict::MISMATCH);
  REQUIRE(bad.bugs.size() == 1);
  const MismatchInfo& m = *bad.bugs[0].mismatch;
  CHECK(m.field == "split sizes");
  CHECK(m.rank_a == 0);
  CHECK(m.rank_b == 1);
  CHECK(m.split_from == 0);
  CHECK(m.split_to == 1);
  CHECK(m.split_sent == 2048);      // 1 + (0 + 1) % 3 = 2 tokens
  CHECK(m.split_expected == 3072);  // rank 1's own routing to 0: 1 + (2 + 0) % 3 = 3
  CHECK(bad.bugs[0].summary.find("rank 0 sends 2KiB to rank 1, which expects 3KiB from it") != std::string::npos);
  REQUIRE(m.op_a.splits.get() != nullptr);
  CHECK(m.op_a.splits.get()->send == std::vector<int64_t>{1024, 2048, 3072, 1024});
}

TEST_CASE("all_to_all_single: a disagreement between two later members is found, whoever issued first") {
  // Only rank 3's part for itself differs: it sends itself 16 bytes and expects 8.
  const char* text = R"Y(scenario: late-pair
world: 4
program:
  - all_to_all_single:
      send_splits: [8, 8, 8, "8 + 8 * (rank == 3)"]
      recv_splits: [8, 8, 8, 8]
)Y";
  const checker::CheckResult r = check(scenario_from(text));
  REQUIRE(r.verdict == Verdict::MISMATCH);
  const MismatchInfo& m = *r.bugs[0].mismatch;
  CHECK(m.field == "split sizes");
  CHECK(m.split_from == 3);
  CHECK(m.split_to == 3);

  // Ranks 0 and 1 agree with everyone; rank 3 sends rank 2 more than rank 2 expects.
  const char* pair = R"Y(scenario: late-pair
world: 4
program:
  - all_to_all_single:
      send_splits: [8, 8, "8 + 8 * (rank == 3)", 8]
      recv_splits: [8, 8, 8, 8]
)Y";
  const checker::CheckResult p = check(scenario_from(pair));
  REQUIRE(p.verdict == Verdict::MISMATCH);
  CHECK(p.bugs[0].mismatch->rank_a == 2);
  CHECK(p.bugs[0].mismatch->rank_b == 3);
  CHECK(p.bugs[0].mismatch->split_from == 3);
  CHECK(p.bugs[0].mismatch->split_to == 2);
  CHECK(p.bugs[0].mismatch->split_sent == 16);
  CHECK(p.bugs[0].mismatch->split_expected == 8);
}

TEST_CASE("all_to_all_single: its YAML errors") {
  CHECK(problems("scenario: s\nworld: 2\nprogram:\n  - all_to_all_single: {send_splits: [1, 2, 3], recv_splits: [1, 2]}\n") ==
        std::vector<std::string>{"4:38: error: expected 2 sizes, one per member of group 'world', got 3"});
  CHECK(problems("scenario: s\nworld: 2\nprogram:\n  - all_to_all_single: {send_splits: [1, 2]}\n") ==
        std::vector<std::string>{"4:5: error: 'all_to_all_single' requires argument 'recv_splits'"});
  CHECK(problems("scenario: s\nworld: 2\nprogram:\n  - all_to_all_single: {send_splits: 4, recv_splits: [1, -1]}\n") ==
        std::vector<std::string>{"4:38: error: expected a list of sizes, one per member of the group, got a scalar",
                                 "4:58: error: size must not be negative, got -1"});
  CHECK(problems("scenario: s\nworld: 2\nprogram:\n  - all_to_all_single: {size: 4, send_splits: [1, 1], recv_splits: [1, 1]}\n")
            .front()
            .starts_with("4:25: error: 'all_to_all_single' takes no argument 'size'"));
}

TEST_CASE("allgather_v: every member's part is what each expects from it, its size the gathered whole") {
  // Rank r holds 2 + r % 3 tokens of 1 KiB.
  const auto gather = [](const std::string& part) {
    std::string list;
    for (int e = 0; e < 4; ++e) {
      std::string p = part;
      if (const size_t at = p.find('E'); at != std::string::npos) p.replace(at, 1, std::to_string(e));
      list += (e > 0 ? ", " : "") + ("\"" + p + "\"");
    }
    return "scenario: sp\nworld: 4\nprogram:\n  - allgather_v: {recv_splits: [" + list + "]}\n";
  };
  const checker::CheckResult good = check(scenario_from(gather("1KiB * (2 + E % 3)")));
  CHECK(good.verdict == Verdict::OK);

  // Each rank sizes every part from its own count.
  const checker::CheckResult bad = check(scenario_from(gather("1KiB * (2 + rank % 3)")));
  REQUIRE(bad.verdict == Verdict::MISMATCH);
  const MismatchInfo& m = *bad.bugs[0].mismatch;
  CHECK(m.field == "split sizes");
  CHECK(m.split_from == 0);
  CHECK(m.split_to == 1);
  CHECK(m.split_sent == 2048);      // rank 0's own part: 2 tokens
  CHECK(m.split_expected == 3072);  // rank 1 expects its own count, 3
  REQUIRE(m.op_a.splits.get() != nullptr);
  CHECK(m.op_a.splits.get()->send == std::vector<int64_t>{2048, 2048, 2048, 2048});  // its part to each
  CHECK(m.op_a.op.size_bytes == 4 * 2048);                                          // what it gathers
  CHECK(bad.bugs[0].summary.find("rank 0 sends 2KiB to rank 1, which expects 3KiB from it") != std::string::npos);

  CHECK(problems("scenario: s\nworld: 2\nprogram:\n  - allgather_v: {recv_splits: [1, 2, 3]}\n") ==
        std::vector<std::string>{"4:32: error: expected 2 sizes, one per member of group 'world', got 3"});
  CHECK(problems("scenario: s\nworld: 2\nprogram:\n  - allgather_v: {group: world}\n") ==
        std::vector<std::string>{"4:5: error: 'allgather_v' requires argument 'recv_splits'"});
  CHECK(problems("scenario: s\nworld: 2\nprogram:\n  - allgather_v: {send_splits: [1, 1], recv_splits: [1, 1]}\n")
            .front()
            .starts_with("4:19: error: 'allgather_v' takes no argument 'send_splits'"));
}

namespace {

// A two-rank trace of an op with split sizes that agrees reads, checks ok and writes back as it
// was; with `from` replaced by `to` (the last occurrence) it is a mismatch of those sizes.
void check_split_trace(const std::string& text, const std::string& from, const std::string& to, int64_t sent,
                       int64_t expected) {
  const Scenario ok = trace_from(text);
  CHECK(check(ok).verdict == Verdict::OK);
  CHECK(write_trace(ok) == text);
  std::string bad = text;
  bad.replace(bad.rfind(from), from.size(), to);
  const checker::CheckResult r = check(trace_from(bad));
  REQUIRE(r.verdict == Verdict::MISMATCH);
  CHECK(r.bugs[0].mismatch->split_sent == sent);
  CHECK(r.bugs[0].mismatch->split_expected == expected);
}

}  // namespace

TEST_CASE("split sizes in traces: all_to_all_single's and allgather_v's read, write and mismatch") {
  const std::string header = "{\"lockstep_trace\": 1, \"scenario\": \"t\", \"world\": 2}\n";
  const std::string exchange =
      header + "{\"rank\": 0, \"op\": \"all_to_all_single\", \"send_splits\": [4, 8], \"recv_splits\": [4, 6]}\n"
               "{\"rank\": 1, \"op\": \"all_to_all_single\", \"send_splits\": [6, 2], \"recv_splits\": [8, 2]}\n";
  check_split_trace(exchange, "[8, 2]", "[9, 2]", 8, 9);
  check_split_trace(header + "{\"rank\": 0, \"op\": \"allgather_v\", \"recv_splits\": [4, 8]}\n"
                             "{\"rank\": 1, \"op\": \"allgather_v\", \"recv_splits\": [4, 8]}\n",
                    "[4, 8]", "[6, 8]", 4, 6);

  std::string short_list = exchange;
  short_list.replace(short_list.find("[4, 6]"), 6, "[4]");
  const LoadResult loaded = load_trace_text(short_list, "t.jsonl", {});
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.diagnostics[0].message == "expected 2 sizes in 'recv_splits', one per member of group 'world', got 1");

  const LoadResult sends = load_trace_text(
      header + "{\"rank\": 0, \"op\": \"allgather_v\", \"send_splits\": [4, 4], \"recv_splits\": [4, 4]}\n", "t.jsonl", {});
  REQUIRE_FALSE(sends.ok());
  CHECK(sends.diagnostics[0].message.starts_with("'allgather_v' takes no argument 'send_splits'"));
}

}  // namespace lockstep::sim
