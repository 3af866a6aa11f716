// The trace loader: the header line (name, world, groups) and its semantics and link.
#include "sim/trace_loader.h"

#include <algorithm>
#include <map>

namespace lockstep::sim::trace {

bool TraceLoader::load_header(std::string_view text) {
  if (!reader_.read_object(text, members_)) {
    error({line_, reader_.error_col()}, reader_.error_message());
    return false;
  }
  const auto has = [&](std::string_view key) {
    return std::any_of(members_.begin(), members_.end(),
                       [&](const JsonMember& m) { return m.key == key; });
  };
  if (!has("lockstep_trace") && has("op")) {
    error({line_, 1}, "expected the trace header on the first line, got an operation");
    return false;
  }
  const std::map<std::string_view, const JsonMember*> keys = header_keys(members_);
  if (!load_version(keys)) return false;
  const auto find = [&](std::string_view key) {
    const auto found = keys.find(key);
    return found == keys.end() ? nullptr : found->second;
  };
  const SourceLoc header_loc{line_, 1};
  for (std::string_view required : {"scenario", "world"}) {
    if (find(required) == nullptr) {
      error(header_loc, "missing required key " + quoted(required) + " in the header");
    }
  }
  if (const JsonMember* m = find("scenario")) load_name(m->value);
  if (const JsonMember* m = find("description")) load_text(m->value, scenario_.description);
  if (const JsonMember* m = find("source")) load_text(m->value, scenario_.source_url);
  if (const JsonMember* m = find("expect")) load_expect(m->value);
  const bool world_ok = find("world") != nullptr && load_world(*find("world"));
  if (world_ok) define_world_group(find("world")->col);
  if (const JsonMember* m = find("groups"); m != nullptr && world_ok) load_groups(m->value);
  if (const JsonMember* m = find("semantics")) load_semantics(m->value);
  return world_ok;
}

std::map<std::string_view, const JsonMember*> TraceLoader::header_keys(const std::vector<JsonMember>& header) {
  std::map<std::string_view, const JsonMember*> keys;
  std::vector<std::string> valid(HEADER_KEYS.begin(), HEADER_KEYS.end());
  for (const JsonMember& member : header) {
    if (std::find(HEADER_KEYS.begin(), HEADER_KEYS.end(), member.key) == HEADER_KEYS.end()) {
      error(at(member), unknown_message("key", member.key, " in the header", valid, valid));
      continue;
    }
    const auto [it, inserted] = keys.emplace(member.key, &member);
    if (!inserted) report_duplicate(member, it->second->col);
  }
  return keys;
}

void TraceLoader::report_duplicate(const JsonMember& member, uint32_t first_col) {
  error(at(member), "duplicate key " + quoted(member.key) + " (first given at column " +
                        std::to_string(first_col) + ")");
}

bool TraceLoader::load_version(const std::map<std::string_view, const JsonMember*>& keys) {
  const auto found = keys.find("lockstep_trace");
  if (found == keys.end()) {
    error({line_, 1}, "missing required key 'lockstep_trace' in the header (the format "
                      "version: " + std::to_string(TRACE_FORMAT_VERSION) + ")");
    return false;
  }
  const JsonValue& value = found->second->value;
  if (!expect_kind(value, JsonKind::INTEGER, "an integer (the format version)")) return false;
  if (value.integer == TRACE_FORMAT_VERSION) return true;
  error(at(value), "unsupported trace format version " + std::to_string(value.integer) +
                       "; this build reads version " + std::to_string(TRACE_FORMAT_VERSION));
  return false;
}

void TraceLoader::load_name(const JsonValue& value) {
  if (!expect_kind(value, JsonKind::STRING, "a string")) return;
  if (value.text.empty()) error(at(value), "the scenario name is empty");
  scenario_.name = std::string(value.text);
}

void TraceLoader::load_text(const JsonValue& value, std::string& out) {
  if (expect_kind(value, JsonKind::STRING, "a string")) out = std::string(value.text);
}

void TraceLoader::load_expect(const JsonValue& value) {
  if (!expect_kind(value, JsonKind::STRING, "a string")) return;
  scenario_.expect_loc = at(value);
  scenario_.expect = parse_verdict(value.text);
  if (scenario_.expect) return;
  std::vector<std::string> verdicts;
  for (int v = 0; v <= static_cast<int>(Verdict::INCONCLUSIVE); ++v) {
    verdicts.emplace_back(verdict_name(static_cast<Verdict>(v)));
  }
  error(at(value), invalid_value_message(value.text, "expect", verdicts));
}

bool TraceLoader::load_world(const JsonMember& member) {
  const std::optional<int64_t> world = integer_of(member.value, "an integer", "world", 1);
  if (!world) return false;
  if (*world > limits_.max_world) {
    error(at(member.value), "world " + std::to_string(*world) + " exceeds the limit of " +
                                std::to_string(limits_.max_world) +
                                " ranks (raise it with --max-world)");
    return false;
  }
  scenario_.world = static_cast<int32_t>(*world);
  state_of_rank_.assign(static_cast<size_t>(scenario_.world), -1);
  return true;
}

void TraceLoader::define_world_group(uint32_t col) {
  std::vector<int32_t> ranks(static_cast<size_t>(scenario_.world));
  for (int32_t rank = 0; rank < scenario_.world; ++rank) ranks[static_cast<size_t>(rank)] = rank;
  add_group(make_group("world", {line_, col}, std::move(ranks), scenario_.world));
}

bool TraceLoader::check_group_bound(SourceLoc loc) {
  const auto slots = static_cast<uint64_t>(scenario_.groups.size() + 1) *
                     static_cast<uint64_t>(scenario_.world);
  if (slots <= MAX_TRACE_GROUP_SLOTS) return true;
  error(loc, "more groups than the limit of " +
                 std::to_string(MAX_TRACE_GROUP_SLOTS / static_cast<uint64_t>(scenario_.world)) +
                 " for a world of " + std::to_string(scenario_.world) + " ranks");
  return false;
}

uint32_t TraceLoader::add_group(GroupDef group) {
  const auto index = static_cast<uint32_t>(scenario_.groups.size());
  group_index_.emplace(group.name, index);
  scenario_.groups.push_back(std::move(group));
  group_used_.push_back(index == 0);
  return index;
}

void TraceLoader::load_groups(const JsonValue& value) {
  if (!expect_kind(value, JsonKind::OBJECT, "an object of groups")) return;
  std::map<std::string_view, uint32_t> seen;
  for (const JsonMember& member : value.members) {
    if (const auto [it, inserted] = seen.emplace(member.key, member.col); !inserted) {
      report_duplicate(member, it->second);
      continue;
    }
    if (!check_group_name(member.key, at(member)) || !check_group_bound(at(member))) continue;
    if (std::optional<std::vector<int32_t>> ranks = ranks_of(member.value, member.key)) {
      add_group(make_group(std::string(member.key), at(member), std::move(*ranks),
                           scenario_.world));
    }
  }
}

bool TraceLoader::check_group_name(std::string_view name, SourceLoc loc) {
  if (name == "world") {
    error(loc, "group 'world' is predefined and may not be redefined");
    return false;
  }
  if (is_identifier(name)) return true;
  error(loc, "invalid group name " + quoted(name) +
                 "; a name is a letter or '_' followed by letters, digits or '_'");
  return false;
}

std::optional<std::vector<int32_t>> TraceLoader::ranks_of(const JsonValue& value, std::string_view group) {
  if (!expect_kind(value, JsonKind::ARRAY, "an array of ranks")) return std::nullopt;
  if (value.items.empty()) {
    error(at(value), "group " + quoted(group) + " has no ranks");
    return std::nullopt;
  }
  std::vector<int32_t> ranks;
  std::vector<bool> seen(static_cast<size_t>(scenario_.world), false);
  bool ok = true;
  for (const JsonValue& item : value.items) {
    const std::optional<int32_t> rank = rank_of(item);
    if (rank && seen[static_cast<size_t>(*rank)]) {
      error(at(item), "rank " + std::to_string(*rank) + " appears twice in group " +
                          quoted(group));
      ok = false;
    } else if (rank) {
      seen[static_cast<size_t>(*rank)] = true;
      ranks.push_back(*rank);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

void TraceLoader::load_semantics(const JsonValue& value) {
  if (!expect_kind(value, JsonKind::OBJECT, "an object of semantics settings")) return;
  std::vector<std::string> keys = setting_keys(false);
  keys.emplace_back("link");
  std::map<std::string_view, uint32_t> seen;
  for (const JsonMember& member : value.members) {
    if (const auto [it, inserted] = seen.emplace(member.key, member.col); !inserted) {
      report_duplicate(member, it->second);
    } else if (member.key == "link") {
      load_link(member.value);
    } else if (const SemanticsSetting* setting = find_setting(member.key, false)) {
      load_setting(*setting, member.value);
    } else {
      error(at(member), unknown_message("key", member.key, " in semantics", keys, keys));
    }
  }
}

void TraceLoader::load_setting(const SemanticsSetting& setting, const JsonValue& value) {
  const std::string_view key = setting.trace_key;
  std::optional<int64_t> got;
  switch (setting.kind) {
    case SettingKind::CHOICE:
      if (auto index = choice_of(value, key, setting.choices)) got = static_cast<int64_t>(*index);
      break;
    case SettingKind::FLAG:
      if (expect_kind(value, JsonKind::BOOL, "true or false")) got = value.boolean ? 1 : 0;
      break;
    case SettingKind::BYTES: got = integer_of(value, "a size in bytes", key, setting.minimum); break;
    case SettingKind::COUNT: got = integer_of(value, "an integer", key, setting.minimum); break;
    case SettingKind::DURATION: got = integer_of(value, "a duration in nanoseconds", key, setting.minimum); break;
  }
  if (got) setting.set(scenario_.semantics, *got);
}

void TraceLoader::load_link(const JsonValue& value) {
  if (!expect_kind(value, JsonKind::OBJECT, "an object")) return;
  static const std::vector<std::string> keys = {"latency_ns", "bandwidth_bytes_per_s"};
  std::map<std::string_view, uint32_t> seen;
  for (const JsonMember& member : value.members) {
    if (const auto [it, inserted] = seen.emplace(member.key, member.col); !inserted) {
      report_duplicate(member, it->second);
    } else if (member.key == "latency_ns") {
      if (auto ns = integer_of(member.value, "a duration in nanoseconds", member.key, 0)) {
        scenario_.link.latency_ns = *ns;
      }
    } else if (member.key == "bandwidth_bytes_per_s") {
      if (auto rate = integer_of(member.value, "an integer", member.key, 1)) {
        scenario_.link.bandwidth_bytes_per_s = static_cast<double>(*rate);
      }
    } else {
      error(at(member), unknown_message("key", member.key, " in link", keys, keys));
    }
  }
}

std::optional<size_t> TraceLoader::choice_of(const JsonValue& value, std::string_view key,
                                const std::vector<std::string>& choices) {
  if (!expect_kind(value, JsonKind::STRING, "a string")) return std::nullopt;
  const auto found = std::find(choices.begin(), choices.end(), value.text);
  if (found != choices.end()) return static_cast<size_t>(found - choices.begin());
  error(at(value), invalid_value_message(value.text, key, choices));
  return std::nullopt;
}

}  // namespace lockstep::sim::trace
