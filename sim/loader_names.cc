// The scenario loader: the mesh, parameters (and -D overrides), groups, and the communicators
// programs create with new_group.
#include "sim/yaml_loader.h"

#include <algorithm>

namespace lockstep::sim::yaml {

void Loader::load_mesh(const Entry& entry) {
  mesh_given_ = true;
  if (!expect_kind(*entry.value, NodeKind::MAP, "a map of mesh dimensions")) return;
  const std::vector<Entry> dims = entries_of(*entry.value);
  if (dims.empty() && entry.value->items.empty()) {
    error(entry.value->loc, "the mesh has no dimensions");
  }
  int64_t product = 1;
  bool ok = !dims.empty();
  for (const Entry& dim : dims) {
    if (!check_name(*dim.key_node, "mesh dimension")) {
      ok = false;
      continue;
    }
    if (dim.key == "rank" || dim.key == "world") {
      error(dim.key_node->loc, "mesh dimension " + quoted(dim.key) +
                                   " clashes with the built-in name " + quoted(dim.key));
      ok = false;
      continue;
    }
    if (dim.value->kind == NodeKind::SCALAR && dim.value->value == dim.key) mesh_size_params_.insert(std::string(dim.key));
    MeshDim mesh_dim;
    mesh_dim.name = std::string(dim.key);
    mesh_dim.loc = dim.key_node->loc;
    const std::optional<int64_t> size = size_of_params(*dim.value, "mesh size");
    if (!size) {
      ok = false;
    } else if (ok && (__builtin_mul_overflow(product, *size, &product) ||
                      product > limits_.max_world)) {
      error(dim.value->loc, "the mesh has more ranks than the limit of " +
                                std::to_string(limits_.max_world) + world_limit_hint());
      ok = false;
    } else {
      mesh_dim.size = static_cast<int32_t>(*size);
    }
    scenario_.mesh.push_back(std::move(mesh_dim));
  }
  mesh_world_ = ok ? static_cast<int32_t>(product) : 0;
}

void Loader::finish_world() {
  if (mesh_given_) {
    if (world_node_ == nullptr) {
      scenario_.world = mesh_world_;
    } else if (scenario_.world > 0 && mesh_world_ > 0 && scenario_.world != mesh_world_) {
      std::string names;
      std::string sizes;
      for (const MeshDim& dim : scenario_.mesh) {
        names += (names.empty() ? "" : " * ") + dim.name;
        sizes += (sizes.empty() ? "" : " * ") + std::to_string(dim.size);
      }
      error(world_node_->loc, "world " + std::to_string(scenario_.world) +
                                  " does not match the mesh: " + names + " = " + sizes + " = " +
                                  std::to_string(mesh_world_));
    }
  } else if (world_node_ == nullptr) {
    error(root_loc_, "missing required key 'world'");
  }
  std::vector<int32_t> ranks(static_cast<size_t>(scenario_.world));
  for (int32_t rank = 0; rank < scenario_.world; ++rank) ranks[static_cast<size_t>(rank)] = rank;
  scenario_.groups.push_back(make_group("world", world_loc_, std::move(ranks), scenario_.world));
  group_used_.push_back(true);
  define_mesh_groups();
  bind_params();
}

void Loader::define_mesh_groups() {
  const int32_t world = scenario_.world;
  const bool build = mesh_world_ > 0 && mesh_world_ == world;
  int64_t stride = 1;
  for (size_t d = 0; d < scenario_.mesh.size(); ++d) {
    MeshDim& dim = scenario_.mesh[d];
    GroupDef group;
    group.name = dim.name;
    group.loc = dim.loc;
    group.mesh_dim = static_cast<int32_t>(d);
    group.comm_of_rank.assign(static_cast<size_t>(std::max(world, 0)), -1);
    if (build) {
      for (int64_t rank = 0; rank < world; ++rank) {
        if ((rank / stride) % dim.size != 0) continue;
        const auto comm = static_cast<int32_t>(group.comms.size());
        std::vector<int32_t> members;
        members.reserve(static_cast<size_t>(dim.size));
        for (int64_t k = 0; k < dim.size; ++k) {
          const int64_t member = rank + k * stride;
          members.push_back(static_cast<int32_t>(member));
          group.comm_of_rank[static_cast<size_t>(member)] = comm;
        }
        group.comms.push_back(std::move(members));
      }
    }
    stride *= dim.size;
    dim.group = static_cast<uint32_t>(scenario_.groups.size());
    scenario_.groups.push_back(std::move(group));
    group_used_.push_back(true);
  }
}

bool Loader::check_name(const Node& node, std::string_view what, bool in_expressions) {
  if (node.kind != NodeKind::SCALAR) return expect_kind(node, NodeKind::SCALAR, "a name");
  if (!is_identifier(node.value)) {
    error(node.loc, "invalid " + std::string(what) + " name " + quoted(node.value) +
                        "; a name is a letter or '_' followed by letters, digits or '_'");
    return false;
  }
  if (in_expressions && is_reserved_word(node.value)) {
    error(node.loc, quoted(node.value) + " is reserved and cannot name a " + std::string(what));
    return false;
  }
  return true;
}

void Loader::load_params(const Entry& entry) {
  if (!expect_kind(*entry.value, NodeKind::MAP, "a map of parameters")) return;
  for (const Entry& param : entries_of(*entry.value)) {
    if (!check_name(*param.key_node, "parameter")) continue;
    if (param.key == "rank" || param.key == "world") {
      error(param.key_node->loc, "parameter " + quoted(param.key) +
                                     " clashes with the built-in name " + quoted(param.key));
      continue;
    }
    const std::optional<Expr> value =
        expr_of(*param.value, Unit::NONE, "an integer, size or duration", {}, true);
    if (!value) continue;
    scenario_.params.push_back({std::string(param.key), value->value, param.key_node->loc, false});
  }
}

int32_t Loader::add_slot(std::string name, std::string kind) {
  scenario_.slot_names.push_back(std::move(name));
  slot_kinds_.push_back(std::move(kind));
  return static_cast<int32_t>(scenario_.slot_names.size()) - 1;
}

int32_t Loader::find_slot(std::string_view name) const {
  for (size_t slot = 0; slot < scenario_.slot_names.size(); ++slot) {
    if (scenario_.slot_names[slot] == name) return static_cast<int32_t>(slot);
  }
  return -1;
}

void Loader::bind_params() {
  scenario_.slot_names.clear();
  slot_kinds_.clear();
  add_slot("rank", "the built-in");
  add_slot("world", "the built-in");
  for (const Param& param : scenario_.params) {
    // A parameter a mesh dimension of its name takes its size from is that dimension's size:
    // in programs the name is the coordinate and NAME_size the size.
    add_slot(mesh_size_params_.count(param.name) != 0 ? param.name + " (the size of mesh dimension " + param.name + ")"
                                                      : param.name,
             "the parameter");
  }
  for (MeshDim& dim : scenario_.mesh) {
    for (const bool is_size : {false, true}) {
      const std::string name = is_size ? dim.name + "_size" : dim.name;
      const int32_t clash = find_slot(name);
      if (clash >= 0) {
        error(dim.loc, std::string(is_size ? "mesh variable " : "mesh dimension ") +
                           quoted(name) + " clashes with " + slot_kinds_[static_cast<size_t>(clash)] +
                           " " + quoted(name));
      }
      (is_size ? dim.size_slot : dim.coord_slot) = add_slot(name, "the mesh variable");
    }
  }
  base_scope_.clear();
  for (size_t slot = 0; slot < scenario_.slot_names.size(); ++slot) {
    base_scope_.push_back({scenario_.slot_names[slot], static_cast<int32_t>(slot)});
  }
  scope_ = base_scope_;
}

void Loader::apply_overrides() {
  for (const ParamOverride& override_ : overrides_) apply_override(override_);
}

void Loader::apply_override(const ParamOverride& override_) {
  const std::string flag = "-D " + override_.name + "=" + override_.value;
  const auto param = std::find_if(scenario_.params.begin(), scenario_.params.end(),
                                  [&](const Param& p) { return p.name == override_.name; });
  if (param == scenario_.params.end()) {
    std::vector<std::string> names;
    for (const Param& p : scenario_.params) names.push_back(p.name);
    std::string message =
        "unknown parameter " + quoted(override_.name) + " in " + flag + did_you_mean(override_.name, names);
    message +=
        names.empty() ? "; the scenario has no parameters" : "; parameters: " + join(names);
    error({}, message);
    return;
  }
  ExprSource source;
  source.text = override_.value;
  source.file = path_;
  source.exact_columns = false;
  source.any_unit = true;
  const std::string context = "in " + flag;
  source.context = context;
  if (const std::optional<Expr> value = parse_expr(source, diagnostics_)) {
    param->value = value->value;
    param->overridden = true;
  }
}

const MeshDim* Loader::mesh_dim_named(std::string_view name) const {
  for (const MeshDim& dim : scenario_.mesh) {
    if (dim.name == name) return &dim;
  }
  return nullptr;
}

void Loader::load_groups(const Entry& entry) {
  if (!expect_kind(*entry.value, NodeKind::MAP, "a map of groups")) return;
  for (const Entry& group : entries_of(*entry.value)) {
    if (group.key == "world") {
      error(group.key_node->loc, "group 'world' is predefined and may not be redefined");
      continue;
    }
    if (!check_name(*group.key_node, "group", false)) continue;
    if (mesh_dim_named(group.key) != nullptr) {
      error(group.key_node->loc, "group " + quoted(group.key) +
                                     " clashes with the mesh dimension " + quoted(group.key));
      continue;
    }
    std::vector<int32_t> ranks;
    if (expect_kind(*group.value, NodeKind::LIST, "a list of ranks")) {
      ranks = load_group_ranks(group.key, *group.value);
    }
    scenario_.groups.push_back(
        make_group(std::string(group.key), group.key_node->loc, std::move(ranks), scenario_.world));
    group_used_.push_back(false);
  }
}

std::vector<int32_t> Loader::load_group_ranks(std::string_view name, const Node& list) {
  std::vector<int32_t> ranks;
  std::vector<bool> seen(static_cast<size_t>(std::max(scenario_.world, 0)));
  for (const Node* item : list.items) {
    // A rank: an integer, or an expression over the parameters and `world` (-D moves it); or
    // "FIRST..LAST", the ranks from one expression to the other.
    int64_t first = 0;
    int64_t last = 0;
    const size_t dots = item->kind == NodeKind::SCALAR ? item->value.find("..") : std::string_view::npos;
    if (dots == std::string_view::npos) {
      const std::optional<int64_t> rank = value_of_params(*item, "a rank", true);
      if (!rank || !check_in_world(*rank, *item)) continue;
      first = last = *rank;
    } else {
      const Node lo = scalar_part(*item, 0, dots);
      const Node hi = scalar_part(*item, dots + 2, item->value.size() - dots - 2);
      const std::optional<int64_t> from = value_of_params(lo, "a rank", true);
      const std::optional<int64_t> to = value_of_params(hi, "a rank", true);
      if (!from || !to || !check_in_world(*from, lo) || !check_in_world(*to, hi)) continue;
      if (*to < *from) {
        error(item->loc, "empty rank range " + quoted(item->value) + " in group " + quoted(name) + " (" +
                             std::to_string(*from) + " > " + std::to_string(*to) + ")");
        continue;
      }
      first = *from;
      last = *to;
    }
    if (scenario_.world <= 0) continue;  // its error is said; ranks cannot be bounded
    for (int64_t r = first; r <= last; ++r) {
      if (seen[static_cast<size_t>(r)]) {
        error(item->loc, "rank " + std::to_string(r) + " appears twice in group " + quoted(name));
        break;
      }
      seen[static_cast<size_t>(r)] = true;
      ranks.push_back(static_cast<int32_t>(r));
    }
  }
  if (list.items.empty()) error(list.loc, "group " + quoted(name) + " has no ranks");
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::string Loader::world_ranks() const {
  const int32_t world = scenario_.world;
  return world == 1 ? "0" : world == 2 ? "0, 1" : "0-" + std::to_string(world - 1);
}

bool Loader::check_in_world(int64_t rank, const Node& at) {
  const int32_t world = scenario_.world;
  if (rank >= 0 && (world == 0 || rank < world)) return true;
  if (world == 0) {
    error(at.loc, "rank " + std::to_string(rank) + " is negative");
  } else {
    error(at.loc, "rank " + std::to_string(rank) + " is outside the world (ranks " +
                      world_ranks() + ")");
  }
  return false;
}

void Loader::check_member(const Expr& rank, const Node& at, uint32_t group) {
  if (!rank.is_constant() || !check_in_world(rank.value, at)) return;
  const GroupDef& def = scenario_.groups.at(group);
  // Only a single-communicator group has a membership that does not depend on the rank.
  if (group == 0 || !def.single() || def.comm_for(static_cast<int32_t>(rank.value)) != nullptr) {
    return;
  }
  error(at.loc, "rank " + std::to_string(rank.value) + " is not a member of group " +
                    quoted(def.name) + " (ranks " + format_ranks(def.comms.front()) + ")");
}

std::optional<uint32_t> Loader::group_of(const Node& value) {
  if (!expect_kind(value, NodeKind::SCALAR, "a group name")) return std::nullopt;
  for (size_t i = 0; i < scenario_.groups.size(); ++i) {
    if (scenario_.groups[i].name == value.value) return static_cast<uint32_t>(i);
  }
  std::vector<std::string> names;
  for (const GroupDef& group : scenario_.groups) names.push_back(group.name);
  error(value.loc, "unknown group " + quoted(value.value) + did_you_mean(value.value, names) +
                       "; groups: " + join(names));
  return std::nullopt;
}

void Loader::create_new_groups() {
  if (text_.find("new_group") == std::string_view::npos) return;
  std::vector<const Entry*> sections;
  for (std::string_view name : {"define", "program", "threads", "ranks"}) {
    const Entry* entry = top(name);
    if (entry != nullptr && (!is_program_key(name) || name == program_key_)) {
      sections.push_back(entry);
    }
  }
  std::sort(sections.begin(), sections.end(), [](const Entry* a, const Entry* b) {
    return a->key_node->loc.line < b->key_node->loc.line;
  });
  for (const Entry* section : sections) {
    if (section->key == "ranks" && section->value->kind == NodeKind::MAP) {
      for (size_t i = 0; i + 1 < section->value->items.size(); i += 2) {
        find_new_groups(*section->value->items[i + 1], section->value->items[i], 0);
      }
    } else {
      find_new_groups(*section->value, nullptr, 0);
    }
  }
}

void Loader::find_new_groups(const Node& node, const Node* owner, int32_t depth) {
  if (depth > 1000) return;
  for (size_t i = 0; i < node.items.size(); ++i) {
    const Node& child = *node.items[i];
    if (node.kind == NodeKind::LIST && child.kind == NodeKind::MAP) {
      for (size_t k = 0; k + 1 < child.items.size(); k += 2) {
        const Node& key = *child.items[k];
        if (key.kind == NodeKind::SCALAR && key.value == "new_group") {
          declare_new_group(key, *child.items[k + 1], owner);
          break;
        }
      }
    }
    if (node.kind == NodeKind::MAP && i % 2 == 0) continue;
    find_new_groups(child, owner, depth + 1);
  }
}

void Loader::declare_new_group(const Node& key, const Node& value, const Node* owner) {
  if (new_group_of_.count(&value) != 0) return;  // an alias of one already seen
  new_group_of_[&value] = -1;
  if (!expect_kind(value, NodeKind::MAP, "a map {name, ranks}")) return;
  const Node* name_node = nullptr;
  const Node* ranks_node = nullptr;
  bool ok = true;
  for (const Entry& entry : entries_of(value)) {
    if (entry.key == "name") {
      name_node = entry.value;
    } else if (entry.key == "ranks") {
      ranks_node = entry.value;
    } else {
      error(entry.key_node->loc,
            unknown_message("argument", entry.key, " for 'new_group'", {"name", "ranks"}));
      ok = false;
    }
  }
  for (const auto& [node, arg] : {std::pair(name_node, "name"), std::pair(ranks_node, "ranks")}) {
    if (node == nullptr && ok) error(key.loc, "'new_group' requires argument " + quoted(arg));
  }
  if (name_node == nullptr || ranks_node == nullptr) return;
  if (!expect_kind(*name_node, NodeKind::SCALAR, "a group name") ||
      !check_name(*name_node, "group", false)) {
    ok = false;
  }
  std::vector<int32_t> ranks;
  if (expect_kind(*ranks_node, NodeKind::LIST, "a list of ranks")) {
    const size_t before = diagnostics_.size();
    ranks = load_group_ranks(name_node->value, *ranks_node);
    ok = ok && diagnostics_.size() == before;
  } else {
    ok = false;
  }
  if (!ok) return;
  const std::string_view name = name_node->value;
  for (size_t i = 0; i < scenario_.groups.size(); ++i) {
    const GroupDef& group = scenario_.groups[i];
    if (group.name != name) continue;
    const std::string clash = "new_group name " + quoted(name) + " clashes with ";
    if (i == 0) {
      error(name_node->loc, clash + "the predefined group 'world'");
    } else if (group.mesh_dim >= 0) {
      error(name_node->loc, clash + "the mesh dimension " + quoted(name));
    } else if (!group.from_new_group) {
      error(name_node->loc, clash + "the group " + quoted(name) + " (line " +
                                std::to_string(group.loc.line) + ")");
    } else if (group.comms.front() == ranks) {
      // The same group written twice (in two branches, or in two ranks' records): one group.
      // A rank that runs both creates it twice, which the engine reports.
      new_group_of_[&value] = static_cast<int32_t>(i);
    } else {
      error(name_node->loc, "new_group name " + quoted(name) + " reused with other ranks (first created at line " +
                                std::to_string(group.loc.line) + ")");
    }
    return;
  }
  GroupDef group = make_group(std::string(name), key.loc, std::move(ranks), scenario_.world);
  group.from_new_group = true;
  new_group_of_[&value] = static_cast<int32_t>(scenario_.groups.size());
  new_group_owner_[scenario_.groups.size()] = owner;
  scenario_.groups.push_back(std::move(group));
  group_used_.push_back(true);
}

}  // namespace lockstep::sim::yaml
