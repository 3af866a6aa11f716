#include "sim/describe.h"

#include <cstdint>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace lockstep::sim {

const LaunchProcess* launch_process(const Scenario& scenario, const Stmt* stmt) {
  for (const LaunchProcess& process : scenario.launch.processes) {
    if (&process.stmt == stmt) return &process;
  }
  return nullptr;
}

std::string describe_op(const Scenario& scenario, const OpRecord& rec) {
  const OpInstance& op = rec.op;
  if (op.kind == OpKind::INIT) {
    if (const LaunchProcess* p = launch_process(scenario, op.stmt)) {
      return fmt::format("init_process_group on world (rank {}, world_size {}, {}, {})", p->rank, p->world_size,
                         p->backend, p->init_method);
    }
    return "init_process_group on world";
  }
  const std::string& group = scenario.groups[op.group].name;
  const std::string_view kind = op_kind_name(op.kind);
  // Point to point: the sequence number (per group, source and destination) once matched;
  // a send has one from its issue, a receive only when matched.
  const std::string seq = rec.seq > 0 ? fmt::format(" #{}", rec.seq) : std::string();
  if (op.kind == OpKind::SEND) return fmt::format("send to rank {}{} on {}", op.peer, seq, group);
  if (op.kind == OpKind::RECV) {
    if (op.peer >= 0) return fmt::format("recv from rank {}{} on {}", op.peer, seq, group);
    if (rec.matched_peer >= 0) return fmt::format("recv from any (matched rank {}){} on {}", rec.matched_peer, seq, group);
    return fmt::format("recv from any on {}", group);
  }
  if (is_collective(op.kind)) return fmt::format("{} #{} on {}", kind, rec.seq, group);
  if (op.kind == OpKind::NEW_GROUP && op.stmt != nullptr) {
    // The k-th new_group of every rank matches (a collective over world): name what it makes.
    const GroupDef& made = scenario.groups[op.stmt->new_group];
    std::vector<int32_t> members = made.comms.empty() ? std::vector<int32_t>() : made.comms.front();
    std::string ranks;
    for (size_t i = 0; i < members.size(); ++i) ranks += (i ? "," : "") + std::to_string(members[i]);
    return fmt::format("new_group #{} '{}' of ranks {}", rec.seq, made.name, ranks);
  }
  return std::string(kind);
}

}  // namespace lockstep::sim
