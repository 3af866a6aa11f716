// The scenario loader: `launch:` (processes and their init), `link:` and `semantics:`.
#include "sim/yaml_loader.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "sim/semantics_table.h"

namespace lockstep::sim::yaml {

void Loader::load_launch(const Entry& entry) {
  Launch& launch = scenario_.launch;
  launch.given = true;
  launch.loc = entry.key_node->loc;
  if (!expect_kind(*entry.value, NodeKind::MAP, "a map of launch settings")) return;
  const std::vector<std::string> keys = {"backend", "init", "world_size", "processes"};
  std::string backend = "nccl";
  std::string init = "env://";
  int64_t world_size = scenario_.world;
  const Node* processes = nullptr;
  for (const Entry& setting : known_entries(entries_of(*entry.value), keys, " in 'launch'")) {
    if (setting.key == "backend") {
      if (auto value = launch_backend(*setting.value)) backend = *value;
    } else if (setting.key == "init") {
      if (auto value = launch_init(*setting.value)) init = *value;
    } else if (setting.key == "world_size") {
      if (auto value = launch_world_size(*setting.value)) world_size = *value;
    } else {
      processes = setting.value;
    }
  }
  if (scenario_.world <= 0) return;  // reported already
  if (processes == nullptr) {  // one process per rank
    for (int32_t r = 0; r < scenario_.world; ++r) {
      add_process(r, world_size, backend, init, entry.key_node->loc);
    }
    return;
  }
  if (!expect_kind(*processes, NodeKind::LIST, "a list of processes")) return;
  if (processes->items.empty()) {
    error(processes->loc, "'processes' starts no process; list at least one");
    return;
  }
  const int64_t max_processes = 2 * static_cast<int64_t>(scenario_.world);
  const std::vector<std::string> process_keys = {"rank", "world_size", "backend", "init"};
  for (const Node* item : processes->items) {
    if (!expect_kind(*item, NodeKind::MAP, "a process: {rank: R, world_size: W, backend: B, init: URL}")) continue;
    std::optional<std::pair<int64_t, int64_t>> ranks;
    int64_t own_world = world_size;
    std::string own_backend = backend;
    std::string own_init = init;
    bool ok = true;
    bool has_rank = false;
    for (const Entry& key : known_entries(entries_of(*item), process_keys, " in a launch process")) {
      if (key.key == "rank") {
        has_rank = true;
        ranks = launch_ranks(*key.value);
        ok = ok && ranks.has_value();
      } else if (key.key == "world_size") {
        const auto value = launch_world_size(*key.value);
        ok = ok && value.has_value();
        if (value) own_world = *value;
      } else if (key.key == "backend") {
        const auto value = launch_backend(*key.value);
        ok = ok && value.has_value();
        if (value) own_backend = *value;
      } else {
        const auto value = launch_init(*key.value);
        ok = ok && value.has_value();
        if (value) own_init = *value;
      }
    }
    if (!has_rank) {
      error(item->loc, "a launch process needs 'rank' (the rank it passes to init_process_group)");
      continue;
    }
    if (!ok) continue;
    for (int64_t r = ranks->first; r <= ranks->second; ++r) {
      if (static_cast<int64_t>(launch.processes.size()) >= max_processes) {
        error(item->loc, "launch starts more than " + std::to_string(max_processes) +
                             " processes (twice the world of " + std::to_string(scenario_.world) + ")");
        return;
      }
      if (r < own_world && r >= scenario_.world) {
        error(item->loc, "process rank " + std::to_string(r) + " (world_size " + std::to_string(own_world) +
                             ") has no program: the scenario's world is " + std::to_string(scenario_.world) +
                             " (ranks 0-" + std::to_string(scenario_.world - 1) + ")");
        ok = false;
        break;
      }
      add_process(static_cast<int32_t>(r), own_world, own_backend, own_init, item->loc);
    }
  }
  if (has_error() || launch.processes.empty()) return;
  // Processes that all agree on a smaller world than the scenario's: the scenario is wrong.
  bool joins = false;
  int64_t agreed = -1;
  bool all_agree = true;
  for (const LaunchProcess& p : launch.processes) {
    if (p.rank >= p.world_size) continue;  // it raises at init (modelled)
    joins = true;
    if (agreed < 0) agreed = p.world_size;
    all_agree = all_agree && p.world_size == agreed;
  }
  if (!joins) {
    error(processes->loc, "no launched process can join: every rank is outside its own world_size");
  } else if (all_agree && agreed < scenario_.world) {
    error(processes->loc, "every process that joins passes world_size " + std::to_string(agreed) +
                              ", fewer than the scenario's world of " + std::to_string(scenario_.world) +
                              "; set 'world: " + std::to_string(agreed) + "' if that is the job");
  }
}

void Loader::add_process(int32_t rank, int64_t world_size, const std::string& backend, const std::string& init,
                 SourceLoc loc) {
  LaunchProcess& p = scenario_.launch.processes.emplace_back();
  p.rank = rank;
  p.world_size = static_cast<int32_t>(world_size);
  p.backend = backend;
  p.init_method = init;
  p.loc = loc;
  p.stmt.kind = StmtKind::OP;
  p.stmt.op = OpKind::INIT;
  p.stmt.loc = loc;
  p.stmt.group = 0;
}

std::optional<std::string> Loader::launch_backend(const Node& node) {
  static const std::vector<std::string> backends = {"nccl", "gloo"};
  const std::optional<std::string> value = string_of(node);
  if (!value) return std::nullopt;
  if (std::find(backends.begin(), backends.end(), *value) != backends.end()) return value;
  error(node.loc, invalid_value_message(*value, "backend", backends));
  return std::nullopt;
}

std::optional<std::string> Loader::launch_init(const Node& node) {
  static const std::vector<std::string> schemes = {"env://", "tcp://", "file://"};
  const std::optional<std::string> value = string_of(node);
  if (!value) return std::nullopt;
  for (const std::string& scheme : schemes) {
    if (value->rfind(scheme, 0) == 0 && (scheme == "env://" ? value->size() == scheme.size() : value->size() > scheme.size())) {
      return value;
    }
  }
  const size_t colon = value->find("://");
  const std::string scheme = colon == std::string::npos ? *value : value->substr(0, colon + 3);
  error(node.loc, "invalid init method " + quoted(*value) + did_you_mean(scheme, schemes) +
                      "; valid init methods: env://, tcp://HOST:PORT, file://PATH");
  return std::nullopt;
}

std::optional<int64_t> Loader::launch_world_size(const Node& node) {
  const std::optional<int64_t> value = constant_of(node, Unit::NONE, "an integer", "world_size", 1);
  if (!value) return std::nullopt;
  if (*value > limits_.max_world) {
    error(node.loc, "world_size " + std::to_string(*value) + " exceeds the limit of " +
                        std::to_string(limits_.max_world) + " ranks" + world_limit_hint());
    return std::nullopt;
  }
  return value;
}

std::optional<std::pair<int64_t, int64_t>> Loader::launch_ranks(const Node& node) {
  if (node.kind == NodeKind::SCALAR) {
    const std::string_view text = node.value;
    const size_t dash = text.find('-', 1);
    if (dash != std::string_view::npos) {
      int64_t a = 0, b = 0;
      const auto [pa, ea] = std::from_chars(text.data(), text.data() + dash, a);
      const auto [pb, eb] = std::from_chars(text.data() + dash + 1, text.data() + text.size(), b);
      if (ea != std::errc() || eb != std::errc() || pa != text.data() + dash || pb != text.data() + text.size() ||
          a < 0 || b < a) {
        error(node.loc, "invalid rank range " + quoted(text) + "; write 'A-B' with 0 <= A <= B");
        return std::nullopt;
      }
      if (b >= limits_.max_world) {
        error(node.loc, "rank " + std::to_string(b) + " exceeds the limit of " + std::to_string(limits_.max_world) +
                            " ranks" + world_limit_hint());
        return std::nullopt;
      }
      return std::pair(a, b);
    }
  }
  const std::optional<int64_t> rank = constant_of(node, Unit::NONE, "an integer", "rank", 0);
  if (!rank) return std::nullopt;
  if (*rank >= limits_.max_world) {
    error(node.loc, "rank " + std::to_string(*rank) + " exceeds the limit of " + std::to_string(limits_.max_world) +
                        " ranks" + world_limit_hint());
    return std::nullopt;
  }
  return std::pair(*rank, *rank);
}

void Loader::load_link(const Entry& entry) {
  if (!expect_kind(*entry.value, NodeKind::MAP, "a map of link settings")) return;
  const std::vector<Entry> entries = entries_of(*entry.value);
  for (const Entry& setting : entries) {
    if (setting.key == "latency" || setting.key == "bandwidth") {
      load_link_setting(setting, scenario_.link);
    }
  }
  scenario_.group_link.assign(scenario_.groups.size(), std::nullopt);
  std::vector<std::string> valid = {"bandwidth", "latency"};
  for (const GroupDef& group : scenario_.groups) valid.push_back(group.name);
  for (const Entry& setting : entries) {
    if (setting.key == "latency" || setting.key == "bandwidth") continue;
    const auto group = std::find_if(scenario_.groups.begin(), scenario_.groups.end(),
                                    [&](const GroupDef& g) { return g.name == setting.key; });
    if (group == scenario_.groups.end()) {
      error(setting.key_node->loc, unknown_message("key", setting.key, " in 'link'", valid) +
                                       " (a group's own link is 'GROUP: {latency, bandwidth}')");
      continue;
    }
    if (!expect_kind(*setting.value, NodeKind::MAP, "a map {latency, bandwidth}")) continue;
    Link link = scenario_.link;
    const std::string where = " in the link of " + quoted(setting.key);
    for (const Entry& field :
         known_entries(entries_of(*setting.value), {"bandwidth", "latency"}, where)) {
      load_link_setting(field, link);
    }
    scenario_.group_link[static_cast<size_t>(group - scenario_.groups.begin())] = link;
  }
}

void Loader::load_link_setting(const Entry& setting, Link& link) {
  if (setting.key == "latency") {
    if (auto ns = constant_of(*setting.value, Unit::NANOSECONDS, "a duration", "latency", 0)) {
      link.latency_ns = *ns;
    }
  } else if (auto bandwidth = bandwidth_of(*setting.value)) {
    link.bandwidth_bytes_per_s = *bandwidth;
  }
}

std::optional<double> Loader::bandwidth_of(const Node& node) {
  if (!expect_kind(node, NodeKind::SCALAR, "a bandwidth")) return std::nullopt;
  const std::string_view text = node.value;
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) != 0 ||
                                  text[digits] == '.')) {
    ++digits;
  }
  double number = 0;
  const auto [end, failure] = std::from_chars(text.data(), text.data() + digits, number);
  if (digits == 0 || failure != std::errc() || end != text.data() + digits) {
    error(node.loc, "invalid bandwidth " + quoted(text) +
                        "; expected a number and a unit, e.g. 100GB/s or 400Gbps");
    return std::nullopt;
  }
  std::string_view unit = text.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (unit.empty()) {
    error(node.loc, "bandwidth needs a unit (e.g. 100GB/s)");
    return std::nullopt;
  }
  std::vector<std::string> units;
  for (const BandwidthUnit& candidate : BANDWIDTH_UNITS) {
    if (candidate.suffix == unit) {
      const double bytes_per_s = number * candidate.bytes_per_s;
      if (!(bytes_per_s > 0)) {
        error(node.loc, "bandwidth must be positive, got " + quoted(text));
        return std::nullopt;
      }
      return bytes_per_s;
    }
    units.emplace_back(candidate.suffix);
  }
  error(node.loc, "unknown bandwidth unit " + quoted(unit) + did_you_mean(unit, units) +
                      "; bandwidth units: " + join(units));
  return std::nullopt;
}

void Loader::load_semantics(const Entry& entry) {
  if (!expect_kind(*entry.value, NodeKind::MAP, "a map of semantics settings")) return;
  for (const Entry& item : entries_of(*entry.value)) {
    const Node& value = *item.value;
    const SemanticsSetting* setting = find_setting(item.key, true);
    if (item.key == "link") {
      error(item.key_node->loc, "'link' is a top-level key, not a semantics setting");
      continue;
    }
    if (setting == nullptr) {
      error(item.key_node->loc, unknown_message("key", item.key, " in semantics", setting_keys(true)));
      continue;
    }
    const std::string_view key = setting->yaml_key;
    std::optional<int64_t> got;
    switch (setting->kind) {
      case SettingKind::CHOICE:
      case SettingKind::FLAG:
        if (auto index = choice_of(value, key, setting->choices)) got = static_cast<int64_t>(*index);
        break;
      case SettingKind::BYTES: got = constant_of(value, Unit::BYTES, "a size", key, setting->minimum); break;
      case SettingKind::COUNT: got = constant_of(value, Unit::NONE, "an integer", key, setting->minimum); break;
      case SettingKind::DURATION: got = constant_of(value, Unit::NANOSECONDS, "a duration", key, setting->minimum); break;
    }
    if (got) setting->set(scenario_.semantics, *got);
  }
}

std::optional<size_t> Loader::choice_of(const Node& node, std::string_view key,
                                const std::vector<std::string>& choices) {
  const std::optional<std::string> value = string_of(node);
  if (!value) return std::nullopt;
  const auto found = std::find(choices.begin(), choices.end(), *value);
  if (found != choices.end()) return static_cast<size_t>(found - choices.begin());
  error(node.loc, invalid_value_message(*value, key, choices));
  return std::nullopt;
}

}  // namespace lockstep::sim::yaml
