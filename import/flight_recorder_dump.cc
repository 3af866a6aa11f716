// Reading one rank's Flight Recorder dump (JSON or pickle) into its entries.
#include "import/flight_recorder_dump.h"

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

#include "import/flight_recorder.h"

namespace lockstep::import::fr {

namespace {

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
  if (rest == "coalesced") {
    out.coalesced_end = true;
    return "";
  }
  // PyTorch's names for each op are the op table's (sim/ops.h).
  if (const sim::OpInfo* known = sim::find_torch_op(rest); known != nullptr && known->kind != sim::OpKind::ALL_TO_ALL_SINGLE) {
    out.kind = known->kind;
    if (known->kind == sim::OpKind::SEND || known->kind == sim::OpKind::RECV) {
      const std::string_view arrow = known->kind == sim::OpKind::SEND ? "->" : "<-";
      const size_t at = meta.find(arrow);
      auto number = [](std::string_view digits, int32_t& value) {
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        return ec == std::errc() && ptr == digits.data() + digits.size() && value >= 0;
      };
      if (at == std::string_view::npos || !number(meta.substr(0, at), out.local_self) ||
          !number(meta.substr(at + 2), out.local_peer)) {
        return fmt::format("profiling_name '{}': expected '{} A{}B' with group ranks A and B", text, rest, arrow);
      }
    }
    return "";
  }
  std::vector<std::string> names;
  for (const sim::OpInfo& op : sim::OPS) {
    if (op.kind == sim::OpKind::ALL_TO_ALL_SINGLE) continue;
    for (std::string_view name : op.torch) {
      if (!name.empty()) names.emplace_back(name);
    }
  }
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

}  // namespace

bool parse_version(std::string_view text, int& major, int& minor) {
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos) return false;
  auto number = [](std::string_view digits, int& value) {
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return ec == std::errc() && ptr == digits.data() + digits.size();
  };
  return number(text.substr(0, dot), major) && number(text.substr(dot + 1), minor);
}

FrDump parse_dump(const std::string& path, std::string_view data) {
  size_t i = 0;
  while (i < data.size() && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) ++i;
  if (!data.empty() && static_cast<uint8_t>(data[0]) == 0x80) return parse_pickle_dump(path, data);
  if (i < data.size() && data[i] == '{') return parse_json_dump(path, data);
  if (data.empty()) throw ImportError(path, {}, "the file is empty");
  throw ImportError(path, {}, "neither a JSON nor a pickle Flight Recorder dump (JSON starts with '{', pickle with byte 0x80)");
}

}  // namespace lockstep::import::fr
