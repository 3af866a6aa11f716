// Merging what lockstep's Python recorder (record/lockstep_torch.py) wrote for each rank of a
// PyTorch script into one recorded schedule in the lockstep trace format (docs/record.md, "From
// a PyTorch script"):
//
// - a process is the rank init_process_group gave it (else its RANK); the world is the world
//   size it asked for; ranks no process recorded issue nothing;
// - groups: `world`, then one group per new_group (named `groupK` after the K-th new_group call
//   of the ranks, or after its group_desc), each a new_group op on every rank that called it;
// - every collective and p2p call is one op (async_op / isend / irecv: `async`, and `wait` where
//   the handle's wait() was called), batch_isend_irecv and all-to-alls of unequal parts one NCCL
//   group, threads of the script trace threads (MainThread is `main`);
// - a rank that died of an exception of its own ends in `crash`; one whose collective failed
//   because a peer went away (gloo's "Connection closed by peer") stays in that collective, as it
//   would under NCCL; a group used by another thread than the one that made it is a header group
//   (a trace does not say when a thread started), its new_group calls meeting on NAME_made.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "record/merge.h"
#include "sim/scenario.h"

namespace lockstep::record {

// The NCCL merge's options (name, source, the bounds on files and records), and the world.
struct TorchMergeOptions : MergeOptions {
  int32_t max_world = 1 << 20;
};

struct TorchProcess {
  std::string file;
  int64_t pid = 0;
  int32_t rank = -1;     // -1: it never said which rank it is
  uint64_t calls = 0;    // torch.distributed calls recorded
  std::string mode;      // "gloo" or "fake"
  std::string ending;    // "exited", "raised RuntimeError: ... at train.py:9", "no end record (...)"
  std::string last;      // "all_reduce at train.py:42": its last call, where a stopped rank waits
};

// Where the op on one line of the trace came from.
struct TorchSource {
  int32_t trace_line = 0;
  int32_t rank = 0;
  std::string thread;
  std::string call;      // the torch.distributed function
  std::string source;    // file:line of the script
  std::string function;  // the Python function that called it
};

struct TorchMergeResult {
  std::optional<sim::Scenario> scenario;  // set when there are no errors
  std::vector<std::string> errors;        // FILE:LINE: error: TEXT
  std::vector<std::string> warnings;      // FILE[:LINE]: warning: TEXT
  std::vector<TorchProcess> processes;    // in rank order, then the processes without a rank
  std::vector<std::string> groups;        // "group1 = new_group(ranks=[0, 1]) at train.py:20"
  std::vector<TorchSource> sources;       // one per op line of the written trace, in line order
  std::string backend;                    // what init_process_group asked for (the lowest rank's)
  bool fake = false;                      // recorded with --fake
};

// Merges the named texts (file name, content).
TorchMergeResult merge_torch_texts(const std::vector<std::pair<std::string, std::string>>& files,
                                   const TorchMergeOptions& options);

// Reads and merges files (sorted by name first).
TorchMergeResult merge_torch_files(std::vector<std::string> paths, const TorchMergeOptions& options);

}  // namespace lockstep::record
