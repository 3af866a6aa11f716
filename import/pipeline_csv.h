// `lockstep import pipeline-csv`: a torch.distributed.pipelining schedule CSV (one row per rank,
// one action per cell: 0F0, 1B0, 2SEND_F0, 1RECV_B3, (0F3;3B1)OVERLAP_F_B, ...; compute-only,
// lowered as PyTorch's schedule runtime lowers it, or with comms; the `B` dialect (I, B, W) or
// the older `BW` one (B, BW, W)) into a recorded pipeline in which every send is a rendezvous: it
// completes only when its receive runs (docs/import.md). A compute whose receive was never posted
// waits on a receive that never completes; --with-dp N replicates the pipeline N times and makes
// UNSHARD and REDUCE_GRAD collectives of the data-parallel groups.
#pragma once

#include <cstdint>
#include <string>

#include "import/recorded.h"

namespace lockstep::import {

struct PipelineOptions {
  int64_t activation_bytes = int64_t{1} << 20;  // the size of every send/recv
  int64_t forward_ns = 1'000'000;               // F
  int64_t backward_input_ns = 1'000'000;        // I (old dialect: B)
  int64_t backward_weight_ns = 1'000'000;       // W
  int64_t full_backward_ns = 2'000'000;         // B (old dialect: BW)
  int32_t data_parallel = 0;                    // --with-dp N: replicas of the pipeline (0: none)
  int64_t dp_bytes = int64_t{16} << 20;         // the size of every UNSHARD and REDUCE_GRAD
};

RecordedTrace import_pipeline_csv(const std::string& path, const PipelineOptions& options = {});

}  // namespace lockstep::import
