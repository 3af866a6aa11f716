// What every importer produces: a recorded schedule (groups and, per rank, a flat list of
// operations) kept compact for millions of records, written out in the JSON Lines trace format
// (docs/trace-format.md) through sim::write_trace. Also the importers' shared error type, the
// atomic output file, and the report of where the ranks' schedules part (docs/import.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/diagnostic.h"
#include "sim/scenario.h"

namespace lockstep::import {

// Bad input: the file, a position (text formats) or a record (binary and JSON records), and
// what is wrong. Thrown inside an importer, caught and printed by run_import (exit code 2).
struct ImportError : std::exception {
  ImportError(std::string file_name, sim::SourceLoc at, std::string text)
      : file(std::move(file_name)), loc(at), message(std::move(text)) {}
  const char* what() const noexcept override { return message.c_str(); }

  std::string file;
  sim::SourceLoc loc;    // line 0: no position (the message names the record)
  std::string message;   // lower case, no final period
};

// One operation of one rank.
struct RecordedOp {
  sim::OpKind kind = sim::OpKind::COMPUTE;
  sim::DType dtype = sim::DType::BF16;
  uint32_t group = 0;        // index into RecordedTrace::groups
  int32_t peer = -1;         // send: to, recv: from, broadcast/reduce/gather/scatter: root (global)
  int64_t size = 0;          // bytes (collectives, p2p); nanoseconds for compute and sleep
  uint32_t nccl_group = 0;   // 0: none; consecutive ops of a rank with the same id are one NCCL group
  uint32_t handle = 0;       // index into RecordedTrace::names: `async` of an op, `handle` of a wait
  uint32_t tag = 0;          // index into RecordedTrace::names, 0: none
  uint32_t splits = 0;       // all_to_all_single: 1 + index into RecordedTrace::splits
};

struct RecordedGroup {
  std::string name;            // a trace group name; groups[0] is "world"
  std::vector<int32_t> ranks;  // ascending global ranks
};

struct RecordedTrace {
  std::string scenario;     // the trace's scenario name
  std::string description;
  std::string source;       // provenance: the importer and its inputs
  int32_t world = 0;
  std::vector<RecordedGroup> groups;          // groups[0] = world
  std::vector<std::vector<RecordedOp>> ranks;  // size world: each rank's ops in issue order
  std::vector<std::string> names{""};         // handles and tags; names[0] = "" (none)
  std::vector<std::string> notes;             // summary lines for the user (what was read, dropped)
  struct Splits {
    std::vector<int64_t> send, recv;  // bytes to and from each member of the op's group, in member order
  };
  std::vector<Splits> splits;                 // of the all_to_all_single ops
  sim::Semantics semantics;                   // written to the header where not the default

  // The index of `name` in names, added when new (hashed: a pipeline CSV names every action).
  // Names are added only through it.
  uint32_t intern(std::string_view name);
  uint32_t add_group(std::string name, std::vector<int32_t> ranks);

  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> name_index;  // names[1..]
};

// Writes `trace` to `out` in the canonical trace format (what sim::write_trace writes, rank by
// rank). An NCCL group of more than one op is written as a group_start line, its ops, and a
// group_end line (docs/import.md); a one-op group as the op. Returns "" or why the trace cannot
// be written (a programmer error in an importer).
std::string write_recorded_trace(const RecordedTrace& trace, std::FILE* out);

// The same through sim::write_trace statement by statement (slower; what write_recorded_trace
// must equal byte for byte, and what it falls back to for ops it does not write itself).
std::string write_recorded_trace_reference(const RecordedTrace& trace, std::FILE* out);

// Writes the trace to a temporary file next to `path` and renames it over `path` on success; on
// any failure nothing is left behind. Returns "" or the operating error.
std::string write_trace_file(const RecordedTrace& trace, const std::string& path);

// Where the ranks' schedules part, group by group: for each communicator, the first op (by its
// per-group sequence number) that its members did not all issue alike — a rank that never
// issued it, or a different kind, size or dtype — and, per pair of ranks, sends without their
// receive. One line per diverging group, in group order; empty when every group agrees.
std::vector<std::string> schedule_partings(const RecordedTrace& trace);

// "allreduce 4KiB fp32", "send to 3 1MiB bf16": an op as the summary lines name it.
std::string describe_op(const RecordedTrace& trace, const RecordedOp& op);

// Bytes as `lockstep check` writes them: "4KiB", "1536KiB", "12B" (the largest unit that divides
// the size exactly).
std::string format_bytes(int64_t bytes);

}  // namespace lockstep::import
