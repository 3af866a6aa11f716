// Merging the recorder's per-process files (record_format.h) into one recorded schedule in the
// lockstep trace format (docs/record.md, "From processes to ranks"):
//
// - a rank is one (process, CUDA device) pair that created a communicator;
// - a communicator is identified across processes by the hash of its ncclUniqueId
//   (ncclCommInitRank, ncclCommInitRankConfig), by the process and call (ncclCommInitAll), or by
//   its parent, the number of earlier splits of that parent and the color (ncclCommSplit; ranks
//   ordered by key, then by rank in the parent, as NCCL does);
// - global ranks are the ranks of the first communicator that holds every rank (in file order,
//   then call order); without one, ranks are ordered by the launcher's rank variable (RANK,
//   OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID), host, pid and device;
// - that communicator is the group `world`; the others are comm1, comm2, ... in order of first
//   use (ranks ascending, calls in order);
// - communicator creation is a barrier on the new communicator (ncclCommSplit: on the parent)
//   tagged with the NCCL function; collectives and p2p keep their communicator, root or peer (as a
//   global rank), size in bytes, dtype and CUDA stream (cuda:N, N in order of first use on the
//   rank); the ops of one ncclGroupStart/End are asynchronous, each on a stream of its own, and
//   the rank waits for all of them at the group's end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/scenario.h"

namespace lockstep::record {

struct MergeOptions {
  std::string name = "recorded";  // the scenario's name
  std::string source;             // provenance (the command line)
  size_t max_files = 65536;
  int64_t max_file_bytes = int64_t{1} << 30;
  uint64_t max_records = uint64_t{1} << 26;  // in all files together
  size_t max_errors = 100;
};

struct ProcessSummary {
  std::string file;
  std::string host;
  int64_t pid = 0;
  int64_t env_rank = -1;
  std::vector<int32_t> ranks;  // global ranks it held
  uint64_t calls = 0;          // NCCL calls recorded
  uint64_t dropped = 0;        // records lost (more than 4096 threads)
  std::string ending;          // "exited", "signal 15", "no end record (killed, or still running)"
};

struct MergeResult {
  std::optional<sim::Scenario> scenario;  // set when there are no errors
  std::vector<std::string> errors;        // FILE:LINE: error: TEXT
  std::vector<std::string> warnings;      // FILE[:LINE]: warning: TEXT
  std::vector<ProcessSummary> processes;  // in file order
  std::string rank_rule;                  // how global ranks were chosen, one sentence
  std::vector<std::string> groups;        // "comm1 = ncclCommSplit of world (color 0): ranks 0,2"
};

// Merges the named texts (file name, content), in the order given.
MergeResult merge_texts(const std::vector<std::pair<std::string, std::string>>& files, const MergeOptions& options);

// Reads and merges files (sorted by name first, so that the result does not depend on the order
// a folder lists them in).
MergeResult merge_files(std::vector<std::string> paths, const MergeOptions& options);

}  // namespace lockstep::record
