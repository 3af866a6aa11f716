// The scenario loader's checks after the programs are loaded: every `wait` has its `async`;
// warnings for what is never used, and for an exit before queued GPU work (sim/queued_work.h).
#include "sim/yaml_loader.h"

#include <set>
#include <span>

#include "sim/queued_work.h"

namespace lockstep::sim::yaml {

void Loader::check_handles() {
  std::set<std::pair<int32_t, std::string_view>> asyncs;
  std::set<std::string_view> any_async;
  for (const HandleUse& use : asyncs_) {
    asyncs.emplace(use.owner, use.name);
    any_async.insert(use.name);
  }
  for (const HandleUse& use : waits_) {
    if (asyncs.count({use.owner, use.name}) != 0 || asyncs.count({-1, use.name}) != 0 ||
        (use.owner == -1 && any_async.count(use.name) != 0)) {
      continue;
    }
    std::vector<std::string> names;
    for (const auto& [owner, name] : asyncs) {
      if (owner == use.owner || owner == -1 || use.owner == -1) names.emplace_back(name);
    }
    names = sorted(names);
    error(use.loc, "unknown handle " + quoted(use.name) + did_you_mean(use.name, names) +
                       (names.empty() ? "; no operation has 'async'" : "; handles: " + join(names)));
  }
}

void Loader::warn_unused() {
  std::vector<bool> used;
  if (!scenario_.params.empty()) {
    for (const RankProgram& program : scenario_.programs) {
      for (const ThreadDef& thread : program) mark_used(thread.body(), used);
    }
    for (const Define& def : scenario_.defines) mark_used(def.body, used);
  }
  for (size_t i = 0; i < scenario_.params.size(); ++i) {
    const size_t slot = Scenario::FIRST_PARAM_SLOT + i;
    if (slot < used.size() && used[slot]) continue;
    if (i < params_in_sizes_.size() && params_in_sizes_[i]) continue;  // the world or a mesh size
    warning(scenario_.params[i].loc,
            "parameter " + quoted(scenario_.params[i].name) + " is never used");
  }
  const auto warn = [&](SourceLoc at, std::string message) { warning(at, std::move(message)); };
  warn_unused_groups(scenario_, group_used_, warn);
  warn_exits_before_queued_work(scenario_, path_, warn);
  for (size_t i = 0; i < scenario_.defines.size(); ++i) {
    if (define_called_[i]) continue;
    warning(scenario_.defines[i].loc,
            "define " + quoted(scenario_.defines[i].name) + " is never called");
  }
  std::set<std::pair<int32_t, std::string_view>> waits;
  std::set<std::string_view> any_wait;
  for (const HandleUse& use : waits_) {
    waits.emplace(use.owner, use.name);
    any_wait.insert(use.name);
  }
  std::set<std::pair<int32_t, std::string_view>> warned;
  for (const HandleUse& use : asyncs_) {
    if (waits.count({use.owner, use.name}) != 0 || waits.count({-1, use.name}) != 0 ||
        (use.owner == -1 && any_wait.count(use.name) != 0) ||
        !warned.emplace(use.owner, use.name).second) {
      continue;
    }
    warning(use.loc, "handle " + quoted(use.name) + " is never waited for (no 'wait: " +
                         std::string(use.name) + "')");
  }
}

void Loader::mark_used(std::span<const Stmt> body, std::vector<bool>& used) {
  for (const Stmt& stmt : body) {
    const StmtExtra& extra = stmt.extra();
    for (const Expr* expr :
         {&stmt.size, &stmt.peer, &extra.root, &stmt.duration, &extra.count, &extra.cond}) {
      mark_used_slots(*expr, used);
    }
    for (const Expr& arg : extra.args) mark_used_slots(arg, used);
    for (const Expr& split : extra.send_splits) mark_used_slots(split, used);
    for (const Expr& split : extra.recv_splits) mark_used_slots(split, used);
    mark_used(stmt.body, used);
    mark_used(extra.else_body, used);
    for (const Branch& branch : stmt.branches) mark_used(branch.body, used);
  }
}

}  // namespace lockstep::sim::yaml
