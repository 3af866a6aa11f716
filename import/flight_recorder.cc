// Flight Recorder dumps -> a recorded schedule. A JSON dump is walked with the pull reader (no
// tree of the whole document); a pickle dump is read with the restricted pickle reader. Both
// become the same compact entries, which are then checked and turned into ops.
#include "import/flight_recorder.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "import/json_pull.h"
#include "import/pickle_reader.h"
#include "sim/input_file.h"
#include "sim/loader.h"

namespace lockstep::import {

namespace {

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
// other keys are named in its warning.
bool known_top_key(std::string_view key) {
  static constexpr std::string_view KNOWN[] = {"version", "pg_config", "pg_status", "entries", "nccl_comm_state",
                                               "comm_lib_version", "nccl_version"};
  return std::find(std::begin(KNOWN), std::end(KNOWN), key) != std::end(KNOWN);
}

bool known_entry_key(std::string_view key) {
  static constexpr std::string_view KNOWN[] = {
      "record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
      "time_created_ns", "duration_ms", "timeout_ms", "frames", "state", "retired", "time_discovered_started_ns",
      "time_discovered_completed_ns", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "is_p2p",
      "thread_id", "thread_name"};
  return std::find(std::begin(KNOWN), std::end(KNOWN), key) != std::end(KNOWN);
}

bool known_pg_key(std::string_view key) { return key == "name" || key == "desc" || key == "ranks"; }

void note_unknown(FrDump& dump, std::string_view prefix, std::string_view key, bool known) {
  if (!known && dump.unknown_fields.size() < 64) dump.unknown_fields.insert(std::string(prefix) + std::string(key));
}

// ---------------------------------------------------------------------------------------------
// Shared parsing helpers.

std::optional<sim::DType> dtype_of_c10(std::string_view name, int64_t& bytes_per_element) {
  struct Known {
    std::string_view name;
    sim::DType dtype;
    int64_t bytes;
  };
  static constexpr Known KNOWN[] = {
      {"Float", sim::DType::FP32, 4},         {"Double", sim::DType::FP64, 8},
      {"Half", sim::DType::FP16, 2},          {"BFloat16", sim::DType::BF16, 2},
      {"Byte", sim::DType::UINT8, 1},         {"Char", sim::DType::INT8, 1},
      {"Int", sim::DType::INT32, 4},          {"Long", sim::DType::INT64, 8},
      {"Bool", sim::DType::UINT8, 1},         {"UInt32", sim::DType::UINT32, 4},
      {"UInt64", sim::DType::UINT64, 8},      {"Float8_e4m3fn", sim::DType::FP8_E4M3, 1},
      {"Float8_e4m3fnuz", sim::DType::FP8_E4M3, 1}, {"Float8_e5m2", sim::DType::FP8_E5M2, 1},
      {"Float8_e5m2fnuz", sim::DType::FP8_E5M2, 1},
      // Approximations by element size (docs/import.md): no such trace dtype.
      {"Short", sim::DType::FP16, 2},         {"UInt16", sim::DType::FP16, 2},
      {"ComplexHalf", sim::DType::FP32, 4},   {"ComplexFloat", sim::DType::FP64, 8},
  };
  for (const Known& known : KNOWN) {
    if (name == known.name) {
      bytes_per_element = known.bytes;
      return known.dtype;
    }
  }
  return std::nullopt;
}

// profiling_name -> op; "" or the reason it is not understood.
std::string parse_profiling_name(std::string_view text, FrOpName& out) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return fmt::format("profiling_name '{}' is not 'BACKEND:OP'", text);
  std::string_view rest = text.substr(colon + 1);
  std::string_view meta;
  const size_t space = rest.find(' ');
  if (space != std::string_view::npos) {
    meta = rest.substr(space + 1);
    rest = rest.substr(0, space);
  }
  struct Known {
    const char* name;
    sim::OpKind kind;
  };
  static constexpr Known KNOWN[] = {
      {"all_reduce", sim::OpKind::ALLREDUCE},
      {"allreduce", sim::OpKind::ALLREDUCE},
      {"all_reduce_coalesced", sim::OpKind::ALLREDUCE},
      {"allreduce_coalesced", sim::OpKind::ALLREDUCE},
      {"all_reduce_barrier", sim::OpKind::BARRIER},
      {"barrier", sim::OpKind::BARRIER},
      {"broadcast", sim::OpKind::BROADCAST},
      {"_broadcast_oop", sim::OpKind::BROADCAST},
      {"reduce", sim::OpKind::REDUCE},
      {"_reduce_oop", sim::OpKind::REDUCE},
      {"all_gather", sim::OpKind::ALLGATHER},
      {"allgather", sim::OpKind::ALLGATHER},
      {"_all_gather_base", sim::OpKind::ALLGATHER},
      {"_allgather_base", sim::OpKind::ALLGATHER},
      {"all_gather_into_tensor_coalesced", sim::OpKind::ALLGATHER},
      {"allgather_into_tensor_coalesced", sim::OpKind::ALLGATHER},
      {"reduce_scatter", sim::OpKind::REDUCE_SCATTER},
      {"_reduce_scatter_base", sim::OpKind::REDUCE_SCATTER},
      {"reduce_scatter_tensor_coalesced", sim::OpKind::REDUCE_SCATTER},
      {"all_to_all", sim::OpKind::ALL_TO_ALL},
      {"all_to_all_base", sim::OpKind::ALL_TO_ALL},
      {"alltoall", sim::OpKind::ALL_TO_ALL},
      {"alltoall_base", sim::OpKind::ALL_TO_ALL},
      {"gather", sim::OpKind::GATHER},
      {"scatter", sim::OpKind::SCATTER},
      {"send", sim::OpKind::SEND},
      {"recv", sim::OpKind::RECV},
  };
  if (rest == "coalesced") {
    out.coalesced_end = true;
    return "";
  }
  for (const Known& known : KNOWN) {
    if (rest != known.name) continue;
    out.kind = known.kind;
    if (known.kind == sim::OpKind::SEND || known.kind == sim::OpKind::RECV) {
      const std::string_view arrow = known.kind == sim::OpKind::SEND ? "->" : "<-";
      const size_t at = meta.find(arrow);
      auto number = [](std::string_view digits, int32_t& value) {
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        return ec == std::errc() && ptr == digits.data() + digits.size() && value >= 0;
      };
      if (at == std::string_view::npos || !number(meta.substr(0, at), out.local_self) ||
          !number(meta.substr(at + 2), out.local_peer)) {
        return fmt::format("profiling_name '{}': expected '{} A{}B' with group ranks A and B", text, known.name, arrow);
      }
    }
    return "";
  }
  std::vector<std::string> names;
  for (const Known& known : KNOWN) names.emplace_back(known.name);
  names.emplace_back("coalesced");
  const std::string hint = sim::closest_name(rest, names);
  return fmt::format("unknown op '{}' in profiling_name '{}'{}", rest, text,
                     hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint));
}

std::optional<FrState> state_of(std::string_view text) {
  if (text == "completed") return FrState::COMPLETED;
  if (text == "started") return FrState::STARTED;
  if (text == "scheduled") return FrState::SCHEDULED;
  return std::nullopt;
}

// "[0, 1, 2]" (PyTorch's ranks_str) -> ranks.
bool parse_rank_list(std::string_view text, std::vector<int32_t>& ranks) {
  ranks.clear();
  size_t i = 0;
  auto space = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  };
  space();
  if (i >= text.size() || text[i] != '[') return false;
  ++i;
  space();
  if (i < text.size() && text[i] == ']') return true;
  while (i < text.size()) {
    space();
    int32_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + text.size(), value);
    if (ec != std::errc() || value < 0) return false;
    ranks.push_back(value);
    i = static_cast<size_t>(ptr - text.data());
    space();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == ']') {
      ++i;
      space();
      return i == text.size();
    }
    return false;
  }
  return false;
}

// "2.10" -> (2, 10).
bool parse_version(std::string_view text, int& major, int& minor) {
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos) return false;
  auto number = [](std::string_view digits, int& value) {
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return ec == std::errc() && ptr == digits.data() + digits.size();
  };
  return number(text.substr(0, dot), major) && number(text.substr(dot + 1), minor);
}

// Per-tensor sizes and dtypes -> bytes, once both lists are read.
int64_t bytes_of(const std::vector<int64_t>& numels, const std::vector<int64_t>& element_bytes) {
  int64_t total = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t per = i < element_bytes.size() ? element_bytes[i] : (element_bytes.empty() ? 2 : element_bytes.back());
    // Saturating: a dump may claim any shape.
    const int64_t bytes = numels[i] > INT64_MAX / per ? INT64_MAX : numels[i] * per;
    total = bytes > INT64_MAX - total ? INT64_MAX : total + bytes;
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// JSON dumps.

// `field == name` with the length known at compile time (the compare is inlined).
template <size_t N>
bool is_key(std::string_view field, const char (&name)[N]) {
  return field.size() == N - 1 && std::memcmp(field.data(), name, N - 1) == 0;
}

void read_sizes_json(JsonPull& json, std::vector<int64_t>& numels) {
  numels.clear();
  json.begin_array();
  while (json.next_item()) {
    int64_t numel = 1;
    json.begin_array();
    while (json.next_item()) {
      const int64_t dim = json.read_integer();
      if (dim < 0) json.fail_here("a negative tensor dimension");
      numel = dim != 0 && numel > INT64_MAX / dim ? INT64_MAX : numel * dim;
    }
    numels.push_back(numel);
  }
}

void read_dtypes_json(JsonPull& json, std::vector<int64_t>& element_bytes, std::optional<sim::DType>& first) {
  element_bytes.clear();
  first.reset();
  json.begin_array();
  while (json.next_item()) {
    const sim::SourceLoc at = json.loc();
    const std::string_view name = json.read_string();
    int64_t bytes = 0;
    const std::optional<sim::DType> dtype = dtype_of_c10(name, bytes);
    if (!dtype) throw ImportError(json.file(), at, fmt::format("unknown dtype '{}'", name));
    if (!first) first = dtype;
    element_bytes.push_back(bytes);
  }
}

FrDump parse_json_dump(std::string path, std::string_view text) {
  FrDump dump;
  dump.path = std::move(path);
  JsonPull json(text, dump.path);
  std::map<std::pair<std::string, std::string>, uint32_t> pg_index;
  std::vector<int64_t> in_numels, out_numels, in_bytes, out_bytes;
  std::map<std::string, FrOpName, std::less<>> names;  // profiling names seen, parsed
  std::string_view last_name;                          // a key of names: the last one looked up
  FrOpName last_parsed;
  std::string pg_name, pg_desc;
  // The index of (name, desc) in dump.entry_pgs: a dump has a few process groups, so a linear
  // look-up; the map once there are many.
  const auto pg_index_of = [&](const std::string& name, const std::string& desc) -> uint32_t {
    if (dump.entry_pgs.size() <= 16) {
      for (size_t i = 0; i < dump.entry_pgs.size(); ++i) {
        if (dump.entry_pgs[i].first == name && dump.entry_pgs[i].second == desc) return static_cast<uint32_t>(i);
      }
      if (dump.entry_pgs.size() < 16) {
        dump.entry_pgs.emplace_back(name, desc);
        return static_cast<uint32_t>(dump.entry_pgs.size() - 1);
      }
      if (pg_index.empty()) {
        for (size_t i = 0; i < dump.entry_pgs.size(); ++i) pg_index.emplace(dump.entry_pgs[i], static_cast<uint32_t>(i));
      }
    }
    auto [it, added] = pg_index.emplace(std::pair{name, desc}, static_cast<uint32_t>(dump.entry_pgs.size()));
    if (added) dump.entry_pgs.emplace_back(name, desc);
    return it->second;
  };
  bool has_version = false, has_pg_config = false;
  json.begin_object();
  std::string_view key;
  while (json.next_key(key)) {
    if (key == "version") {
      if (json.peek() == JsonType::NUMBER) dump.version = fmt::format("{}", json.read_number());
      else dump.version = std::string(json.read_string());
      has_version = true;
    } else if (key == "pg_config") {
      has_pg_config = true;
      json.begin_object();
      std::string_view pg_key;
      while (json.next_key(pg_key)) {
        FrPg pg;
        pg.name = std::string(pg_key);
        const sim::SourceLoc at = json.loc();
        json.begin_object();
        std::string_view field;
        bool has_ranks = false;
        while (json.next_key(field)) {
          if (field == "name") {
            pg.name = std::string(json.read_string());
          } else if (field == "desc") {
            pg.desc = std::string(json.read_string());
          } else if (field == "ranks") {
            has_ranks = true;
            const sim::SourceLoc ranks_at = json.loc();
            if (json.peek() == JsonType::ARRAY) {
              json.begin_array();
              while (json.next_item()) {
                const int64_t r = json.read_integer();
                if (r < 0 || r > INT32_MAX) throw ImportError(dump.path, ranks_at, "a rank out of range in pg_config");
                pg.ranks.push_back(static_cast<int32_t>(r));
              }
            } else if (!parse_rank_list(json.read_string(), pg.ranks)) {
              throw ImportError(dump.path, ranks_at, "pg_config ranks are not a list of ranks like \"[0, 1, 2]\"");
            }
          } else {
            note_unknown(dump, "pg_config.*.", field, known_pg_key(field));
            json.skip_value();
          }
        }
        if (!has_ranks) throw ImportError(dump.path, at, fmt::format("pg_config entry '{}' has no 'ranks'", pg.name));
        dump.pg_config.push_back(std::move(pg));
      }
    } else if (key == "entries") {
      // Room for the entries up front (an entry is a few hundred bytes of JSON; room never used
      // costs no memory), so the vector does not grow by copying.
      dump.entries.reserve(dump.entries.size() + text.size() / 256);
      json.begin_array();
      while (json.next_item()) {
        FrEntry entry;
        entry.index = dump.entries.size();
        entry.at = json.loc();
        bool has_name = false, has_pg = false, has_state = false, has_seq = false;
        bool has_in_sizes = false, has_out_sizes = false;
        std::optional<sim::DType> in_dtype, out_dtype;
        in_bytes.clear();
        out_bytes.clear();
        json.begin_object();
        std::string_view field;
        while (json.next_key(field)) {
          switch (field.empty() ? '\0' : field[0]) {
            case 'p':
              if (is_key(field, "profiling_name")) {
                const sim::SourceLoc at = json.loc();
                const std::string_view name_text = json.read_string();
                if (!last_name.empty() && name_text == last_name) {
                  entry.name = last_parsed;
                } else {
                  auto it = names.find(name_text);
                  if (it == names.end()) {
                    FrOpName parsed;
                    const std::string problem = parse_profiling_name(name_text, parsed);
                    if (!problem.empty()) throw ImportError(dump.path, at, fmt::format("entry {}: {}", entry.index, problem));
                    it = names.emplace(std::string(name_text), parsed).first;
                  }
                  entry.name = it->second;
                  last_name = it->first;
                  last_parsed = it->second;
                }
                has_name = true;
                continue;
              }
              if (is_key(field, "process_group")) {
                json.begin_array();
                pg_name.clear();
                pg_desc.clear();
                if (json.next_item()) pg_name = json.read_string();
                if (json.next_item()) pg_desc = json.read_string();
                while (json.next_item()) json.skip_value();
                entry.pg = pg_index_of(pg_name, pg_desc);
                has_pg = true;
                continue;
              }
              if (is_key(field, "p2p_seq_id")) {
                entry.p2p_seq = json.read_integer();
                continue;
              }
              break;
            case 'c':
              if (is_key(field, "collective_seq_id")) {
                entry.collective_seq = json.read_integer();
                has_seq = true;
                continue;
              }
              break;
            case 'r':
              if (is_key(field, "record_id")) {
                entry.record_id = json.read_integer();
                continue;
              }
              break;
            case 'i':
              if (is_key(field, "input_sizes")) {
                read_sizes_json(json, in_numels);
                has_in_sizes = true;
                continue;
              }
              if (is_key(field, "input_dtypes")) {
                read_dtypes_json(json, in_bytes, in_dtype);
                continue;
              }
              if (is_key(field, "is_p2p")) {
                entry.is_p2p = json.read_bool() ? 1 : 0;
                continue;
              }
              break;
            case 'o':
              if (is_key(field, "output_sizes")) {
                read_sizes_json(json, out_numels);
                has_out_sizes = true;
                continue;
              }
              if (is_key(field, "output_dtypes")) {
                read_dtypes_json(json, out_bytes, out_dtype);
                continue;
              }
              break;
            case 's':
              if (is_key(field, "state")) {
                const sim::SourceLoc at = json.loc();
                const std::string_view state = json.read_string();
                const std::optional<FrState> parsed = state_of(state);
                if (!parsed) {
                  throw ImportError(dump.path, at, fmt::format("entry {}: unknown state '{}'; valid states: completed, scheduled, started", entry.index, state));
                }
                entry.state = *parsed;
                has_state = true;
                continue;
              }
              break;
            default: break;
          }
          if (dump.unknown_fields.size() < 64 && !known_entry_key(field)) note_unknown(dump, "entries[].", field, false);
          json.skip_value();
        }
        const auto missing = [&](const char* what) {
          json.fail_here(fmt::format("entry {} ends without '{}'", entry.index, what));
        };
        if (!has_name) missing("profiling_name");
        if (!has_pg) missing("process_group");
        if (!has_state) missing("state");
        if (!has_seq && !entry.name.coalesced_end) missing("collective_seq_id");
        if (!entry.name.coalesced_end && (!has_in_sizes || !has_out_sizes)) missing(has_in_sizes ? "output_sizes" : "input_sizes");
        entry.in_bytes = bytes_of(in_numels, in_bytes);
        entry.out_bytes = bytes_of(out_numels, out_bytes);
        entry.in_dtype = in_dtype;
        entry.out_dtype = out_dtype;
        dump.entries.push_back(std::move(entry));
      }
    } else {
      note_unknown(dump, "", key, known_top_key(key));
      json.skip_value();
    }
  }
  json.finish();
  if (!has_version) throw ImportError(dump.path, {}, "no 'version' key: not a Flight Recorder dump");
  if (!has_pg_config) throw ImportError(dump.path, {}, "no 'pg_config' key: not a Flight Recorder dump");
  return dump;
}

// ---------------------------------------------------------------------------------------------
// Pickle dumps.

[[noreturn]] void fail_record(const std::string& path, std::string message) {
  throw ImportError(path, {}, std::move(message));
}

int64_t int_of(const std::string& path, const PickleValue* value, const std::string& what) {
  if (value == nullptr || value->type != PickleValue::Type::INT) {
    fail_record(path, fmt::format("{}: expected an integer, got {}", what, value ? pickle_type_name(value->type) : "nothing"));
  }
  return value->integer;
}

const std::string& string_of(const std::string& path, const PickleValue* value, const std::string& what) {
  if (value == nullptr || value->type != PickleValue::Type::STRING) {
    fail_record(path, fmt::format("{}: expected a string, got {}", what, value ? pickle_type_name(value->type) : "nothing"));
  }
  return value->text;
}

void sizes_of_pickle(const std::string& path, const PickleValue* value, const std::string& what, std::vector<int64_t>& numels) {
  numels.clear();
  if (value == nullptr || !value->is_sequence()) fail_record(path, fmt::format("{}: expected a list of shapes", what));
  for (const auto& shape : value->items) {
    if (!shape->is_sequence()) fail_record(path, fmt::format("{}: expected a list of shapes", what));
    int64_t numel = 1;
    for (const auto& dim : shape->items) {
      if (dim->type != PickleValue::Type::INT || dim->integer < 0) fail_record(path, fmt::format("{}: a dimension is not a non-negative integer", what));
      numel = dim->integer != 0 && numel > INT64_MAX / dim->integer ? INT64_MAX : numel * dim->integer;
    }
    numels.push_back(numel);
  }
}

void dtypes_of_pickle(const std::string& path, const PickleValue* value, const std::string& what,
                      std::vector<int64_t>& element_bytes, std::optional<sim::DType>& first) {
  element_bytes.clear();
  first.reset();
  if (value == nullptr) return;
  if (!value->is_sequence()) fail_record(path, fmt::format("{}: expected a list of dtype names", what));
  for (const auto& item : value->items) {
    const std::string& name = string_of(path, item.get(), what);
    int64_t bytes = 0;
    const std::optional<sim::DType> dtype = dtype_of_c10(name, bytes);
    if (!dtype) fail_record(path, fmt::format("{}: unknown dtype '{}'", what, name));
    if (!first) first = dtype;
    element_bytes.push_back(bytes);
  }
}

FrDump parse_pickle_dump(std::string path, std::string_view data) {
  FrDump dump;
  dump.path = std::move(path);
  dump.json = false;
  PickleResult pickle = read_pickle(data, pickle_memory_bound(data.size()));
  if (!pickle.value) fail_record(dump.path, "bad pickle: " + pickle.error);
  const PickleValue& root = *pickle.value;
  if (root.type != PickleValue::Type::DICT) fail_record(dump.path, fmt::format("the pickle holds {}, not a dict: not a Flight Recorder dump", pickle_type_name(root.type)));
  const PickleValue* version = root.get("version");
  if (version == nullptr) fail_record(dump.path, "no 'version' key: not a Flight Recorder dump");
  const auto note_keys = [&](const PickleValue& dict, std::string_view prefix, bool (*known)(std::string_view)) {
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      if (dict.items[i]->type == PickleValue::Type::STRING) note_unknown(dump, prefix, dict.items[i]->text, known(dict.items[i]->text));
    }
  };
  note_keys(root, "", known_top_key);
  dump.version = string_of(dump.path, version, "version");
  const PickleValue* pg_config = root.get("pg_config");
  if (pg_config == nullptr || pg_config->type != PickleValue::Type::DICT) fail_record(dump.path, "no 'pg_config' dict: not a Flight Recorder dump");
  for (size_t i = 0; i + 1 < pg_config->items.size(); i += 2) {
    FrPg pg;
    pg.name = string_of(dump.path, pg_config->items[i].get(), "pg_config key");
    const PickleValue& info = *pg_config->items[i + 1];
    const std::string what = fmt::format("pg_config '{}'", pg.name);
    if (info.type != PickleValue::Type::DICT) fail_record(dump.path, what + ": expected a dict");
    note_keys(info, "pg_config.*.", known_pg_key);
    if (const PickleValue* name = info.get("name")) pg.name = string_of(dump.path, name, what + " name");
    if (const PickleValue* desc = info.get("desc")) pg.desc = string_of(dump.path, desc, what + " desc");
    const PickleValue* ranks = info.get("ranks");
    if (ranks == nullptr) fail_record(dump.path, what + " has no 'ranks'");
    if (ranks->is_sequence()) {
      for (const auto& r : ranks->items) {
        if (r->type != PickleValue::Type::INT || r->integer < 0 || r->integer > INT32_MAX) fail_record(dump.path, what + ": a rank out of range");
        pg.ranks.push_back(static_cast<int32_t>(r->integer));
      }
    } else if (!parse_rank_list(string_of(dump.path, ranks, what + " ranks"), pg.ranks)) {
      fail_record(dump.path, what + ": ranks are not a list of ranks like \"[0, 1, 2]\"");
    }
    dump.pg_config.push_back(std::move(pg));
  }
  const PickleValue* entries = root.get("entries");
  if (entries == nullptr) return dump;
  if (entries->type != PickleValue::Type::LIST) fail_record(dump.path, "'entries' is not a list");
  std::map<std::pair<std::string, std::string>, uint32_t> pg_index;
  std::vector<int64_t> in_numels, out_numels, in_bytes, out_bytes;
  for (const auto& item : entries->items) {
    FrEntry entry;
    entry.index = dump.entries.size();
    const std::string what = fmt::format("entry {}", entry.index);
    if (item->type != PickleValue::Type::DICT) fail_record(dump.path, what + ": expected a dict");
    const PickleValue& e = *item;
    note_keys(e, "entries[].", known_entry_key);
    if (const PickleValue* id = e.get("record_id")) entry.record_id = int_of(dump.path, id, what + " record_id");
    const PickleValue* name = e.get("profiling_name");
    if (name == nullptr) fail_record(dump.path, what + " has no 'profiling_name'");
    const std::string problem = parse_profiling_name(string_of(dump.path, name, what + " profiling_name"), entry.name);
    if (!problem.empty()) fail_record(dump.path, what + ": " + problem);
    const PickleValue* pg = e.get("process_group");
    if (pg == nullptr || !pg->is_sequence() || pg->items.empty()) fail_record(dump.path, what + " has no 'process_group' (name, desc)");
    std::string pg_name = string_of(dump.path, pg->items[0].get(), what + " process_group");
    std::string pg_desc = pg->items.size() > 1 ? string_of(dump.path, pg->items[1].get(), what + " process_group") : "";
    auto [it, added] = pg_index.emplace(std::pair{pg_name, pg_desc}, static_cast<uint32_t>(dump.entry_pgs.size()));
    if (added) dump.entry_pgs.emplace_back(pg_name, pg_desc);
    entry.pg = it->second;
    const PickleValue* seq = e.get("collective_seq_id");
    if (seq == nullptr && !entry.name.coalesced_end) fail_record(dump.path, what + " has no 'collective_seq_id'");
    if (seq != nullptr) entry.collective_seq = int_of(dump.path, seq, what + " collective_seq_id");
    if (const PickleValue* p2p = e.get("p2p_seq_id")) entry.p2p_seq = int_of(dump.path, p2p, what + " p2p_seq_id");
    if (const PickleValue* is_p2p = e.get("is_p2p")) {
      if (is_p2p->type != PickleValue::Type::BOOL) fail_record(dump.path, what + " is_p2p: expected a boolean");
      entry.is_p2p = is_p2p->boolean ? 1 : 0;
    }
    const PickleValue* state = e.get("state");
    if (state == nullptr) fail_record(dump.path, what + " has no 'state'");
    const std::optional<FrState> parsed = state_of(string_of(dump.path, state, what + " state"));
    if (!parsed) fail_record(dump.path, fmt::format("{}: unknown state '{}'; valid states: completed, scheduled, started", what, state->text));
    entry.state = *parsed;
    if (!entry.name.coalesced_end) {
      sizes_of_pickle(dump.path, e.get("input_sizes"), what + " input_sizes", in_numels);
      sizes_of_pickle(dump.path, e.get("output_sizes"), what + " output_sizes", out_numels);
      dtypes_of_pickle(dump.path, e.get("input_dtypes"), what + " input_dtypes", in_bytes, entry.in_dtype);
      dtypes_of_pickle(dump.path, e.get("output_dtypes"), what + " output_dtypes", out_bytes, entry.out_dtype);
      entry.in_bytes = bytes_of(in_numels, in_bytes);
      entry.out_bytes = bytes_of(out_numels, out_bytes);
    }
    dump.entries.push_back(std::move(entry));
  }
  return dump;
}

// ---------------------------------------------------------------------------------------------
// Dumps -> schedule.

std::string sanitize(std::string_view text) {
  std::string out;
  for (const char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) != 0) out = "pg_" + out;
  return out;
}

// The name a process group gets from its desc (`dp`, `tp`), or from its pg name without one.
std::string base_of(const FrPg& pg) {
  return pg.desc.empty() || pg.desc == "undefined" ? sanitize(pg.name) : sanitize(pg.desc);
}

// Ascending ranks as a part of a group name: "3", "0to3", "0to6by2", "0_1_5", else
// "0to9_12ranks".
std::string ranks_suffix(const std::vector<int32_t>& ranks) {
  if (ranks.size() == 1) return std::to_string(ranks.front());
  const int32_t step = ranks[1] - ranks[0];
  bool arithmetic = step > 0;
  for (size_t i = 2; i < ranks.size() && arithmetic; ++i) arithmetic = ranks[i] - ranks[i - 1] == step;
  if (arithmetic) return fmt::format("{}to{}{}", ranks.front(), ranks.back(), step == 1 ? "" : fmt::format("by{}", step));
  if (ranks.size() <= 6) {
    std::string out;
    for (int32_t r : ranks) out += (out.empty() ? "" : "_") + std::to_string(r);
    return out;
  }
  return fmt::format("{}to{}_{}ranks", ranks.front(), ranks.back(), ranks.size());
}

struct GroupKey {
  std::string name;
  std::vector<int32_t> ranks;  // sorted
  auto operator<=>(const GroupKey&) const = default;
};

class Builder {
 public:
  Builder(std::vector<FrDump> dumps, std::vector<std::string>* warnings) : dumps_(std::move(dumps)), warnings_(warnings) {}

  RecordedTrace run() {
    std::sort(dumps_.begin(), dumps_.end(), [](const FrDump& a, const FrDump& b) { return a.rank < b.rank; });
    for (size_t i = 1; i < dumps_.size(); ++i) {
      if (dumps_[i].rank == dumps_[i - 1].rank) {
        throw ImportError(dumps_[i].path, {}, fmt::format("a second dump of rank {} (the first is {})", dumps_[i].rank, dumps_[i - 1].path));
      }
    }
    check_versions();
    collect_groups();
    build_ops();
    return std::move(trace_);
  }

 private:
  [[noreturn]] void fail_entry(const FrDump& dump, const FrEntry& entry, const std::string& message) {
    throw ImportError(dump.path, entry.at, fmt::format("entry {}{}: {}", entry.index,
                                                 entry.record_id >= 0 ? fmt::format(" (record_id {})", entry.record_id) : "",
                                                 message));
  }

  void check_versions() {
    std::set<std::string> versions;
    std::map<std::string, std::vector<const FrDump*>> newer;  // version -> its dumps
    for (const FrDump& dump : dumps_) {
      int major = 0, minor = 0;
      if (!parse_version(dump.version, major, minor) || major != 2 || minor < FR_MIN_MINOR) {
        throw ImportError(dump.path, {}, fmt::format("unknown Flight Recorder version '{}'; versions 2.{} to 2.{} are read, "
                                                     "and newer 2.x ones as 2.{}",
                                                     dump.version, FR_MIN_MINOR, FR_MAX_MINOR, FR_MAX_MINOR));
      }
      if (minor > FR_MAX_MINOR) newer[dump.version].push_back(&dump);
      versions.insert(dump.version);
    }
    std::string list;
    for (const std::string& v : versions) list += (list.empty() ? "" : ", ") + v;
    trace_.notes.push_back(fmt::format("read {} Flight Recorder dump{} (version {})", dumps_.size(), dumps_.size() == 1 ? "" : "s", list));
    if (warnings_ == nullptr) return;
    for (const auto& [version, dumps] : newer) {
      std::set<std::string> unknown;
      for (const FrDump* dump : dumps) unknown.insert(dump->unknown_fields.begin(), dump->unknown_fields.end());
      std::string fields;
      for (const std::string& field : unknown) fields += (fields.empty() ? "" : ", ") + field;
      warnings_->push_back(fmt::format(
          "{}{}: warning: Flight Recorder version {} is newer than 2.{}, the newest this lockstep knows: read as 2.{}; {}",
          dumps.front()->path, dumps.size() == 1 ? "" : fmt::format(" (and {} more dump{})", dumps.size() - 1, dumps.size() == 2 ? "" : "s"),
          version, FR_MAX_MINOR, FR_MAX_MINOR,
          fields.empty() ? fmt::format("every field in it is one 2.{} has", FR_MAX_MINOR) : "fields not understood: " + fields));
    }
  }

  // Groups: (pg name, ranks) of every dump's pg_config. Two ranks that both belong to what the
  // other calls pg X, with different members, disagree.
  void collect_groups() {
    int32_t world = 0;
    for (const FrDump& dump : dumps_) {
      world = std::max(world, dump.rank + 1);
      for (const FrPg& pg : dump.pg_config) {
        for (int32_t r : pg.ranks) {
          if (r >= FR_MAX_RANKS) {
            throw ImportError(dump.path, {}, fmt::format("pg_config '{}' names rank {}: at most {} ranks are read", pg.name, r, FR_MAX_RANKS));
          }
        }
        // The first rank listed twice, in list order.
        std::vector<int32_t> sorted = pg.ranks;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
          std::set<int32_t> seen;
          for (int32_t r : pg.ranks) {
            if (!seen.insert(r).second) throw ImportError(dump.path, {}, fmt::format("pg_config '{}' lists rank {} twice", pg.name, r));
          }
        }
        if (!sorted.empty()) world = std::max(world, sorted.back() + 1);
        if (pg.ranks.empty()) throw ImportError(dump.path, {}, fmt::format("pg_config '{}' has no ranks", pg.name));
      }
    }
    trace_.world = world;
    trace_.ranks.assign(static_cast<size_t>(world), {});
    std::vector<int32_t> all(static_cast<size_t>(world));
    for (int32_t r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
    trace_.add_group("world", all);

    // The groups each name base stands for (the group of all ranks named default_pg or 0 is world).
    std::map<std::string, std::set<GroupKey>> sharing;
    for (const FrDump& dump : dumps_) {
      for (const FrPg& pg : dump.pg_config) {
        std::vector<int32_t> sorted = pg.ranks;
        std::sort(sorted.begin(), sorted.end());
        if (sorted == all && (pg.desc == "default_pg" || pg.name == "0")) continue;
        sharing[base_of(pg)].insert(GroupKey{pg.name, sorted});
      }
    }

    // Who says what about each pg name (members only).
    std::map<std::string, std::pair<std::vector<int32_t>, const FrDump*>> claims;  // name -> first member claim
    std::set<std::string> used_names{"world"};
    for (const FrDump& dump : dumps_) {
      for (const FrPg& pg : dump.pg_config) {
        std::vector<int32_t> sorted = pg.ranks;
        std::sort(sorted.begin(), sorted.end());
        const bool member = std::binary_search(sorted.begin(), sorted.end(), dump.rank);
        for (const auto& [other_name, claim] : claims) {
          if (other_name != pg.name || claim.first == sorted) continue;
          const auto& [other_ranks, other_dump] = claim;
          const bool overlap = std::binary_search(other_ranks.begin(), other_ranks.end(), dump.rank) ||
                               std::binary_search(sorted.begin(), sorted.end(), other_dump->rank);
          if (member && overlap) {
            throw ImportError(dump.path, {}, fmt::format(
                "ranks disagree on process group '{}': rank {} ({}) says its ranks are [{}], rank {} ({}) says [{}]",
                pg.name, other_dump->rank, other_dump->path, sim::format_ranks(other_ranks), dump.rank, dump.path,
                sim::format_ranks(sorted)));
          }
        }
        if (member && !claims.contains(pg.name)) claims[pg.name] = {sorted, &dump};
        GroupKey key{pg.name, sorted};
        if (group_of_.contains(key)) continue;
        uint32_t index = 0;
        if (sorted != all || (pg.desc != "default_pg" && pg.name != "0") || default_taken_) {
          // A desc (`dp`) that names one group is its name; one that several groups share names
          // each of them with its ranks too (`dp_0to3`, `dp_4to7`).
          const std::string base = base_of(pg);
          std::string name = sharing[base].size() > 1 ? base + "_" + ranks_suffix(sorted) : base;
          const std::string unique = name;
          for (int n = 2; used_names.contains(name); ++n) name = fmt::format("{}_{}", unique, n);
          used_names.insert(name);
          index = trace_.add_group(name, sorted);
          group_note(pg, name);
        } else {
          default_taken_ = true;
          group_note(pg, "world");
        }
        group_of_[key] = index;
      }
    }
  }

  void group_note(const FrPg& pg, const std::string& name) {
    trace_.notes.push_back(fmt::format("process group '{}'{} ranks [{}] is group {}", pg.name,
                                       pg.desc.empty() ? "" : fmt::format(" ({})", pg.desc),
                                       sim::format_ranks([&] {
                                         std::vector<int32_t> r = pg.ranks;
                                         std::sort(r.begin(), r.end());
                                         return r;
                                       }()),
                                       name));
  }

  // The group and pg_config entry an entry of `dump` belongs to (cached per dump and pg).
  std::pair<uint32_t, const FrPg*> group_of(const FrDump& dump, const FrEntry& entry) {
    if (cache_dump_ != &dump) {
      cache_dump_ = &dump;
      cache_.assign(dump.entry_pgs.size(), {UINT32_MAX, nullptr});
    }
    auto& cached = cache_[entry.pg];
    if (cached.second == nullptr) cached = resolve_group(dump, entry);
    return cached;
  }

  std::pair<uint32_t, const FrPg*> resolve_group(const FrDump& dump, const FrEntry& entry) {
    const std::string& name = dump.entry_pgs[entry.pg].first;
    for (const FrPg& pg : dump.pg_config) {
      if (pg.name != name) continue;
      std::vector<int32_t> sorted = pg.ranks;
      std::sort(sorted.begin(), sorted.end());
      if (!std::binary_search(sorted.begin(), sorted.end(), dump.rank)) continue;
      return {group_of_.at(GroupKey{pg.name, sorted}), &pg};
    }
    fail_entry(dump, entry, fmt::format("process group '{}' is not in this dump's pg_config with rank {} as a member", name, dump.rank));
  }

  bool is_p2p(const FrEntry& e) const {
    if (e.is_p2p >= 0) return e.is_p2p == 1;
    return e.name.kind == sim::OpKind::SEND || e.name.kind == sim::OpKind::RECV;
  }

  void build_ops() {
    uint32_t next_nccl_group = 1;
    // A ring buffer that wrapped lost its oldest entries: align each group to the first
    // collective every member that wrapped still has.
    std::map<uint32_t, int64_t> first_seq;  // group -> sequence number to start from
    std::vector<int32_t> wrapped;
    for (const FrDump& dump : dumps_) {
      if (dump.entries.empty() || dump.entries.front().record_id <= 0) continue;
      wrapped.push_back(dump.rank);
      std::map<uint32_t, int64_t> seen;
      for (const FrEntry& e : dump.entries) {
        if (e.name.coalesced_end || is_p2p(e)) continue;
        seen.emplace(group_of(dump, e).first, e.collective_seq);
      }
      for (const auto& [g, seq] : seen) first_seq[g] = std::max(first_seq[g], seq);
    }
    size_t dropped = 0;
    std::map<std::string, std::vector<int32_t>> stops;  // where each rank stopped -> ranks
    std::vector<std::string> stop_order;                 // in order of their first rank
    for (const FrDump& dump : dumps_) {
      std::vector<RecordedOp>& ops = trace_.ranks[static_cast<size_t>(dump.rank)];
      std::vector<const FrEntry*> kept;  // parallel to ops
      ops.reserve(dump.entries.size());
      kept.reserve(dump.entries.size());
      bool started = first_seq.empty();
      for (size_t i = 0; i < dump.entries.size(); ++i) {
        const FrEntry& e = dump.entries[i];
        if (e.name.coalesced_end) {
          // The ops of this rank just before, on the same group with the same sequence number.
          const uint32_t g = group_of(dump, e).first;
          const bool p2p_group = e.is_p2p == 1 || (e.is_p2p < 0 && !kept.empty() && is_p2p(*kept.back()));
          const int64_t seq = p2p_group ? e.p2p_seq : e.collective_seq;
          size_t k = ops.size();
          while (k > 0 && ops[k - 1].nccl_group == 0 && ops[k - 1].group == g &&
                 (is_p2p(*kept[k - 1]) ? kept[k - 1]->p2p_seq : kept[k - 1]->collective_seq) == seq) {
            --k;
          }
          if (ops.size() - k > 1) {
            for (size_t j = k; j < ops.size(); ++j) ops[j].nccl_group = next_nccl_group;
            ++next_nccl_group;
          }
          continue;
        }
        const auto [g, pg] = group_of(dump, e);
        if (!started) {
          const auto it = first_seq.find(g);
          if (!is_p2p(e) && (it == first_seq.end() || e.collective_seq >= it->second)) started = true;
        }
        if (!is_p2p(e)) {
          const auto it = first_seq.find(g);
          if (it != first_seq.end() && e.collective_seq < it->second) {
            ++dropped;
            continue;
          }
        } else if (!started) {
          ++dropped;
          continue;
        }
        ops.push_back(op_of(dump, e, g, *pg));
        kept.push_back(&e);
      }
      std::string stop = stop_of(dump, ops, kept);
      if (!stops.contains(stop)) stop_order.push_back(stop);
      stops[stop].push_back(dump.rank);
    }
    if (!wrapped.empty()) {
      trace_.notes.push_back(fmt::format("the ring buffer wrapped on rank{} {}: each group starts at the first collective "
                                         "all of them recorded ({} older entr{} left out)",
                                         wrapped.size() == 1 ? "" : "s", sim::format_ranks(wrapped), dropped,
                                         dropped == 1 ? "y" : "ies"));
    }
    std::vector<int32_t> without;
    for (int32_t r = 0, d = 0; r < trace_.world; ++r) {
      if (static_cast<size_t>(d) < dumps_.size() && dumps_[static_cast<size_t>(d)].rank == r) {
        ++d;
      } else {
        without.push_back(r);
      }
    }
    if (!without.empty()) {
      trace_.notes.push_back(fmt::format("no dump for rank{} {}: {} as issuing nothing", without.size() == 1 ? "" : "s",
                                         sim::format_ranks(without), without.size() == 1 ? "it appears" : "they appear"));
    }
    for (const std::string& text : stop_order) {
      const std::vector<int32_t>& ranks = stops[text];
      trace_.notes.push_back(fmt::format("rank{} {}: {}", ranks.size() == 1 ? "" : "s", sim::format_ranks(ranks), text));
    }
  }

  RecordedOp op_of(const FrDump& dump, const FrEntry& e, uint32_t g, const FrPg& pg) {
    RecordedOp op;
    op.kind = e.name.kind;
    op.group = g;
    const bool output_side = op.kind == sim::OpKind::RECV || op.kind == sim::OpKind::SCATTER;
    op.size = output_side ? e.out_bytes : e.in_bytes;
    const std::optional<sim::DType> dtype = output_side ? (e.out_dtype ? e.out_dtype : e.in_dtype) : (e.in_dtype ? e.in_dtype : e.out_dtype);
    if (dtype) op.dtype = *dtype;
    if (op.kind == sim::OpKind::SEND || op.kind == sim::OpKind::RECV) {
      const auto profiling_name = [&] {
        return op.kind == sim::OpKind::SEND ? fmt::format("nccl:send {}->{}", e.name.local_self, e.name.local_peer)
                                            : fmt::format("nccl:recv {}<-{}", e.name.local_self, e.name.local_peer);
      };
      const auto size = static_cast<int32_t>(pg.ranks.size());
      if (e.name.local_self >= size || e.name.local_peer >= size) {
        fail_entry(dump, e, fmt::format("'{}' names a rank outside process group '{}' of {} ranks", profiling_name(), pg.name, size));
      }
      if (pg.ranks[static_cast<size_t>(e.name.local_self)] != dump.rank) {
        fail_entry(dump, e, fmt::format("'{}': group rank {} of process group '{}' is rank {}, not this dump's rank {}",
                                        profiling_name(), e.name.local_self, pg.name,
                                        pg.ranks[static_cast<size_t>(e.name.local_self)], dump.rank));
      }
      op.peer = pg.ranks[static_cast<size_t>(e.name.local_peer)];
    } else if (sim::has_root(op.kind)) {
      // The dump does not record roots: every member is taken to name the same one.
      op.peer = trace_.groups[g].ranks.front();
    }
    return op;
  }

  std::string stop_of(const FrDump& dump, const std::vector<RecordedOp>& ops, const std::vector<const FrEntry*>& kept) {
    (void)dump;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (kept[i]->state == FrState::COMPLETED) continue;
      const size_t later = ops.size() - i - 1;
      const FrEntry& e = *kept[i];
      const int64_t seq = is_p2p(e) ? e.p2p_seq : e.collective_seq;
      return fmt::format("stopped in {} #{} on {} ({}){}", describe_op(trace_, ops[i]), seq, trace_.groups[ops[i].group].name,
                         e.state == FrState::STARTED ? "started" : "scheduled, not started",
                         later == 0 ? "" : fmt::format(", {} later op{} enqueued", later, later == 1 ? "" : "s"));
    }
    if (ops.empty()) return "no entries";
    return fmt::format("all {} recorded op{} completed", ops.size(), ops.size() == 1 ? "" : "s");
  }

  std::vector<FrDump> dumps_;
  std::vector<std::string>* warnings_ = nullptr;
  RecordedTrace trace_;
  std::map<GroupKey, uint32_t> group_of_;
  bool default_taken_ = false;
  const FrDump* cache_dump_ = nullptr;
  std::vector<std::pair<uint32_t, const FrPg*>> cache_;
};

FrDump parse_dump(const std::string& path, std::string_view data) {
  size_t i = 0;
  while (i < data.size() && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) ++i;
  if (!data.empty() && static_cast<uint8_t>(data[0]) == 0x80) return parse_pickle_dump(path, data);
  if (i < data.size() && data[i] == '{') return parse_json_dump(path, data);
  if (data.empty()) throw ImportError(path, {}, "the file is empty");
  throw ImportError(path, {}, "neither a JSON nor a pickle Flight Recorder dump (JSON starts with '{', pickle with byte 0x80)");
}

}  // namespace

int32_t rank_of_dump_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* ext : {".json", ".pkl", ".pickle", ".txt"}) {
    const std::string e(ext);
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      name.resize(name.size() - e.size());
      break;
    }
  }
  size_t start = name.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1])) != 0) --start;
  if (start == name.size() || name.size() - start > 9) return -1;
  return std::stoi(name.substr(start));
}

namespace {

void check_dump_name(const std::string& path) {
  const int32_t rank = rank_of_dump_name(path);
  if (rank < 0) {
    throw ImportError(path, {}, "cannot tell the rank of this dump: its file name must end in the rank, as PyTorch "
                                "writes them (e.g. nccl_trace_rank_3 or nccl_trace_rank_3.json)");
  }
  if (rank >= FR_MAX_RANKS) throw ImportError(path, {}, fmt::format("rank {} (from the file name): at most {} ranks are read", rank, FR_MAX_RANKS));
}

}  // namespace

RecordedTrace import_flight_recorder_data(const std::vector<std::string>& paths, const std::vector<std::string>& data,
                                          std::vector<std::string>* warnings) {
  std::vector<FrDump> dumps;
  for (size_t i = 0; i < paths.size(); ++i) {
    check_dump_name(paths[i]);
    const int32_t rank = rank_of_dump_name(paths[i]);
    FrDump dump = parse_dump(paths[i], data[i]);
    dump.rank = rank;
    dumps.push_back(std::move(dump));
  }
  if (dumps.empty()) throw ImportError("", {}, "no dumps given");
  RecordedTrace trace = Builder(std::move(dumps), warnings).run();
  trace.source = "lockstep import flight-recorder";
  return trace;
}

RecordedTrace import_flight_recorder(const std::vector<std::string>& paths, std::vector<std::string>* warnings) {
  for (const std::string& path : paths) check_dump_name(path);
  if (paths.empty()) throw ImportError("", {}, "no dumps given");
  // Dumps are independent: read them on a few threads, each into its own slot; the first error
  // in file order is reported, so the outcome does not depend on the threads.
  std::vector<FrDump> dumps(paths.size());
  std::vector<std::optional<ImportError>> errors(paths.size());
  std::atomic<size_t> next{0};
  // The dumps read at once share PICKLE_MEMORY_TOTAL_BYTES: each reserves its own bound before
  // it is read (a thread waits until there is room) and gives it back after.
  std::mutex mutex;
  std::condition_variable freed;
  uint64_t reserved = 0;
  auto work = [&] {
    for (size_t i = next++; i < paths.size(); i = next++) {
      uint64_t bound = 0;
      try {
        sim::InputFile file;
        if (!file.open(paths[i], int64_t{1} << 34)) throw ImportError(paths[i], {}, "cannot read file: " + file.error());
        bound = pickle_memory_bound(file.text().size());
        {
          std::unique_lock<std::mutex> lock(mutex);
          freed.wait(lock, [&] { return reserved + bound <= PICKLE_MEMORY_TOTAL_BYTES; });
          reserved += bound;
        }
        struct Release {
          std::mutex& mutex;
          std::condition_variable& freed;
          uint64_t& reserved;
          uint64_t bound;
          ~Release() {
            {
              const std::lock_guard<std::mutex> lock(mutex);
              reserved -= bound;
            }
            freed.notify_all();
          }
        } release{mutex, freed, reserved, bound};
        FrDump dump = parse_dump(paths[i], file.text());
        dump.rank = rank_of_dump_name(paths[i]);
        dumps[i] = std::move(dump);
      } catch (const ImportError& error) {
        errors[i] = error;
      } catch (const std::bad_alloc&) {
        errors[i] = ImportError(paths[i], {}, "out of memory while reading this dump");
      }
    }
  };
  const size_t threads = std::min<size_t>({paths.size(), std::max(1u, std::thread::hardware_concurrency()), 8});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  for (const auto& error : errors) {
    if (error) throw *error;
  }
  RecordedTrace trace = Builder(std::move(dumps), warnings).run();
  trace.source = "lockstep import flight-recorder";
  return trace;
}

}  // namespace lockstep::import
