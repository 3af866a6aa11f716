// Flight Recorder dumps as import/flight_recorder.cc reads them: the entries of one rank's dump,
// from JSON (walked with the pull reader, no tree of the whole document) or pickle (the
// restricted pickle reader). Internal to import/.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/scenario.h"

namespace lockstep::import::fr {

enum class FrState : uint8_t { SCHEDULED, STARTED, COMPLETED };

// What profiling_name says an entry is.
struct FrOpName {
  sim::OpKind kind = sim::OpKind::ALLREDUCE;
  bool coalesced_end = false;  // "nccl:coalesced": the end of a coalesced group
  int32_t local_self = -1;     // send a->b: a; recv a<-b: a (group-local ranks)
  int32_t local_peer = -1;     // send a->b: b; recv a<-b: b
};

struct FrEntry {
  sim::SourceLoc at;        // JSON: where the entry starts; pickle: none
  size_t index = 0;         // position in the dump's entries
  int64_t record_id = -1;
  uint32_t pg = 0;          // index into FrDump::entry_pgs
  int64_t collective_seq = -1;
  int64_t p2p_seq = -1;
  int8_t is_p2p = -1;       // -1: not in the dump
  FrOpName name;
  int64_t in_bytes = 0, out_bytes = 0;
  std::optional<sim::DType> in_dtype, out_dtype;
  FrState state = FrState::SCHEDULED;
};

struct FrPg {
  std::string name, desc;
  std::vector<int32_t> ranks;  // global ranks in group-rank order
};

struct FrDump {
  std::string path;
  bool json = true;
  int32_t rank = -1;
  std::string version;
  std::vector<FrPg> pg_config;
  std::vector<std::pair<std::string, std::string>> entry_pgs;  // (name, desc) of entries
  std::vector<FrEntry> entries;
  std::set<std::string> unknown_fields;  // keys no known version writes ("entries[].x", "pg_config.*.y", "z")
};

// Every key a dump of versions 2.2 to 2.10 holds, read or skipped on purpose; a newer version's

// One rank's dump, JSON or pickle (told by its first bytes); ImportError when it is neither or
// does not read.
FrDump parse_dump(const std::string& path, std::string_view data);

// "2.10" -> 2, 10; false when it is no version.
bool parse_version(std::string_view text, int& major, int& minor);

}  // namespace lockstep::import::fr
