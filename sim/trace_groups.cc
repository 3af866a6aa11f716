// The trace loader: the groups operations name and create, and the checks at the end of the file.
#include "sim/trace_loader.h"

#include <algorithm>

#include "sim/queued_work.h"

namespace lockstep::sim::trace {

bool TraceLoader::load_group(const JsonValue& value, Stmt& stmt, int32_t rank, bool& known) {
  const std::optional<std::string_view> name = name_of(value, "group");
  if (!name) return false;
  const auto found = group_index_.find(*name);
  if (found == group_index_.end()) {
    known = false;
    pending_unknown_ = true;
    pending_name_ = std::string(*name);
    pending_loc_ = at(value);
    return true;
  }
  stmt.group = found->second;
  group_used_[stmt.group] = true;
  const GroupDef& group = scenario_.groups[stmt.group];
  if (!group.from_new_group || rank < 0 || created_here(rank, stmt.group)) return true;
  pending_unknown_ = false;
  pending_name_ = group.name;  // this rank makes it later, or in another thread
  pending_loc_ = at(value);
  return true;
}

bool TraceLoader::created_here(int32_t rank, uint32_t group) const {
  const int32_t state = state_of_rank_[static_cast<size_t>(rank)];
  if (state < 0) return false;
  return find_created(ranks_[static_cast<size_t>(state)], group) != nullptr;
}

const CreatedGroup* TraceLoader::find_created(const RankState& rs, uint32_t group) {
  const auto found = std::lower_bound(
      rs.created.begin(), rs.created.end(), group,
      [](const CreatedGroup& c, uint32_t g) { return c.group < g; });
  return found != rs.created.end() && found->group == group ? &*found : nullptr;
}

void TraceLoader::commit_pending() {
  RecordedBody& body = recorded();
  const OpenGroup& group = open_group();
  const size_t stmt = group.depth > 0 ? group.stmt : body.ops.size() - 1;
  const size_t inner = group.depth > 0 ? side_stmt(body, group.stmt).body.size() - 1 : SIZE_MAX;
  pending_.push_back({current_state_, current_thread_, stmt, inner, std::move(pending_name_),
                      pending_loc_, pending_unknown_});
  pending_name_.clear();
}

bool TraceLoader::check_members(const Stmt& stmt, int32_t rank, const JsonMember* group_member) {
  const GroupDef& group = scenario_.groups[stmt.group];
  if (stmt.group == 0 || !group.single()) return true;
  const auto not_member = [&](int64_t r) {
    return group.comm_for(static_cast<int32_t>(r)) == nullptr;
  };
  const auto report = [&](int64_t r, SourceLoc loc) {
    error(loc, "rank " + std::to_string(r) + " is not a member of group " + quoted(group.name) +
                   " (ranks " + format_ranks(group.comms.front()) + ")");
  };
  bool ok = true;
  if (not_member(rank)) {
    report(rank, group_member != nullptr ? at(group_member->value) : stmt.loc);
    ok = false;
  }
  if (stmt.has_peer && !stmt.peer_any && not_member(stmt.peer.value)) {
    report(stmt.peer.value, stmt.peer.loc);
    ok = false;
  }
  if (stmt.has_root && not_member(stmt.extra().root.value)) {
    report(stmt.extra().root.value, stmt.extra().root.loc);
    ok = false;
  }
  return ok;
}

bool TraceLoader::load_new_group(const LineKeys& keys, Stmt& stmt, int32_t rank) {
  const JsonMember* name_member = keys.get(Key::NAME);
  const JsonMember* ranks_member = keys.get(Key::RANKS);
  if (name_member == nullptr || ranks_member == nullptr) return false;
  const std::optional<std::string_view> name = name_of(name_member->value, "name");
  if (!name || !check_group_name(*name, at(name_member->value))) return false;
  std::optional<std::vector<int32_t>> ranks = ranks_of(ranks_member->value, *name);
  if (!ranks) return false;
  const auto found = group_index_.find(*name);
  uint32_t index = 0;
  if (found == group_index_.end()) {
    if (!check_group_bound(at(name_member->value))) return false;
    GroupDef group = make_group(std::string(*name), at(name_member->value), std::move(*ranks),
                                scenario_.world);
    group.from_new_group = true;
    index = add_group(std::move(group));
    group_used_[index] = true;
  } else {
    index = found->second;
    if (!same_new_group(index, *ranks, at(*name_member), at(ranks_member->value))) return false;
  }
  stmt.new_group = index;
  stmt.group = 0;
  return rank < 0 || record_creation(rank, index, at(name_member->value));
}

bool TraceLoader::same_new_group(uint32_t index, const std::vector<int32_t>& ranks, SourceLoc name_loc,
                    SourceLoc ranks_loc) {
  const GroupDef& group = scenario_.groups[index];
  if (!group.from_new_group) {
    error(name_loc, "new_group name " + quoted(group.name) + " is already a group of the header");
    return false;
  }
  if (group.comms.front() == ranks) return true;
  error(ranks_loc, "new_group " + quoted(group.name) + " has ranks " + format_ranks(ranks) +
                       " here but ranks " + format_ranks(group.comms.front()) + " at line " +
                       std::to_string(group.loc.line));
  return false;
}

bool TraceLoader::record_creation(int32_t rank, uint32_t group, SourceLoc loc) {
  const int32_t state = state_of_rank_[static_cast<size_t>(rank)];
  if (state < 0) return true;  // the line's thread was bad: reported already
  RankState& rs = ranks_[static_cast<size_t>(state)];
  if (const CreatedGroup* first = find_created(rs, group)) {
    error(loc, "rank " + std::to_string(rank) + " makes group " +
                   quoted(scenario_.groups[group].name) + " a second time (first at line " +
                   std::to_string(first->line) + ")");
    return false;
  }
  const auto at_group = std::lower_bound(
      rs.created.begin(), rs.created.end(), group,
      [](const CreatedGroup& c, uint32_t g) { return c.group < g; });
  rs.created.insert(at_group, {group, current_thread_, line_});
  return true;
}

void TraceLoader::finish() {
  check_groups_closed();
  for (PendingUse& use : pending_) resolve(use);
  for (const PendingWait& wait : pending_waits_) check_wait(wait);
  RankProgram empty;
  std::sort(ranks_.begin(), ranks_.end(),
            [](const RankState& a, const RankState& b) { return a.rank < b.rank; });
  scenario_.rank_program.assign(static_cast<size_t>(scenario_.world), 0);
  for (RankState& rs : ranks_) {
    scenario_.rank_program[static_cast<size_t>(rs.rank)] =
        static_cast<uint32_t>(scenario_.programs.size());
    for (size_t t = 0; t < rs.program.size(); ++t) rs.program[t].set_recorded(std::move(rs.recorded[t]));
    scenario_.programs.push_back(std::move(rs.program));
  }
  if (ranks_.size() < static_cast<size_t>(scenario_.world)) {
    const auto index = static_cast<uint32_t>(scenario_.programs.size());
    scenario_.programs.emplace_back();
    for (size_t r = 0; r < state_of_rank_.size(); ++r) {
      if (state_of_rank_[r] < 0) scenario_.rank_program[r] = index;
    }
  }
  scenario_.slot_names = {"rank", "world"};
  scenario_.group_link.assign(scenario_.groups.size(), std::nullopt);
  if (errors_ == 0) warn_unused();
}

void TraceLoader::resolve(PendingUse& use) {
  RankState& rs = ranks_[use.state];
  Stmt& outer = side_stmt(*rs.recorded[use.thread], use.stmt);
  Stmt& stmt = use.inner == SIZE_MAX ? outer : outer.body[use.inner];
  line_ = stmt.loc.line;
  const auto found = group_index_.find(use.name);
  if (found == group_index_.end()) {
    std::vector<std::string> names;
    for (const GroupDef& group : scenario_.groups) names.push_back(group.name);
    error(use.loc, "unknown group " + quoted(use.name) + did_you_mean(use.name, names) +
                       "; groups: " + join(names));
    return;
  }
  stmt.group = found->second;
  group_used_[stmt.group] = true;
  const GroupDef& group = scenario_.groups[stmt.group];
  if (group.from_new_group && !check_created(rs, use, stmt)) return;
  if (use.unknown) check_members(stmt, rs.rank, nullptr);
}

bool TraceLoader::check_created(const RankState& rs, const PendingUse& use, const Stmt& stmt) {
  const CreatedGroup* created = find_created(rs, stmt.group);
  const std::string who = "rank " + std::to_string(rs.rank) + " uses group " + quoted(use.name);
  if (created == nullptr) {
    error(use.loc, who + " but never makes it with new_group");
    return false;
  }
  if (created->thread == use.thread && created->line > use.loc.line) {
    error(use.loc, who + " before its new_group at line " + std::to_string(created->line));
    return false;
  }
  return true;
}

void TraceLoader::warn_unused() {
  const auto warn = [&](SourceLoc at, std::string message) { warning(at, std::move(message)); };
  warn_unused_groups(scenario_, group_used_, warn);
  warn_exits_before_queued_work(scenario_, path_, warn);
}

}  // namespace lockstep::sim::trace
