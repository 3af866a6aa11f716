// `lockstep import flight-recorder`: PyTorch Flight Recorder dumps (one per rank, JSON from
// _dump_nccl_trace_json or pickle from the dump on timeout; format versions 2.2 to 2.10, and
// newer 2.x read as 2.10 with a warning naming the fields it does not know) into a recorded
// schedule. docs/import.md describes what is read and how.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "import/recorded.h"

namespace lockstep::import {

// The oldest and newest dump versions known (major 2; minors 2 to 10). A newer minor is read as
// the newest, with a warning.
inline constexpr int FR_MIN_MINOR = 2;
inline constexpr int FR_MAX_MINOR = 10;
// Ranks 0 to FR_MAX_RANKS - 1 are read (the trace loader's bound on the world).
inline constexpr int32_t FR_MAX_RANKS = int32_t{1} << 20;

// The rank a dump belongs to, from the digits at the end of its file name (PyTorch names dumps
// PREFIX<rank>, e.g. nccl_trace_rank_3; an extension such as .json or .pkl is ignored), or -1.
int32_t rank_of_dump_name(const std::string& path);

// Reads every dump and builds the schedule: process groups from pg_config, ops from
// profiling_name, sizes and dtypes, coalesced groups as NCCL groups, and notes on where each
// rank stopped. Throws ImportError on bad input. Warnings ("FILE: warning: TEXT": a version newer
// than the newest known) are appended to `warnings` when given.
RecordedTrace import_flight_recorder(const std::vector<std::string>& paths, std::vector<std::string>* warnings = nullptr);

// The same from in-memory dumps (path i names data i in messages and gives its rank).
RecordedTrace import_flight_recorder_data(const std::vector<std::string>& paths, const std::vector<std::string>& data,
                                          std::vector<std::string>* warnings = nullptr);

}  // namespace lockstep::import
