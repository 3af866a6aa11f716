// The trace loader's scan: the fast path against the general JSON reader, the second thread,
// the arenas.
#include "sim/trace_format.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sim/loader.h"
#include "sim/trace_testing.h"

namespace lockstep::sim {
namespace {

using namespace trace_testing;

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

}  // namespace
}  // namespace lockstep::sim
