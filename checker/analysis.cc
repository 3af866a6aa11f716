#include "checker/analysis.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <sstream>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <fmt/format.h>

#include "checker/bug_class.h"
#include "checker/rank_set.h"

namespace lockstep::checker {

using sim::OpKind;
using sim::RankStatus;
using sim::Verdict;

std::string format_size(int64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  int64_t value = bytes;
  while (unit < 4 && value != 0 && value % 1024 == 0) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{}{}", value, units[unit]);
}

std::string format_duration(int64_t ns) {
  if (ns >= 60'000'000'000LL && ns % 60'000'000'000LL == 0) return fmt::format("{}min", ns / 60'000'000'000LL);
  if (ns >= 1'000'000'000LL) return fmt::format("{:.3f}s", static_cast<double>(ns) / 1e9);
  if (ns >= 1'000'000LL) return fmt::format("{:.3f}ms", static_cast<double>(ns) / 1e6);
  if (ns >= 1'000LL) return fmt::format("{:.3f}us", static_cast<double>(ns) / 1e3);
  return fmt::format("{}ns", ns);
}


namespace {

std::string where(const sim::Scenario& scenario, const sim::OpRecord& rec) {
  return rec.op.stmt ? scenario.location(rec.op.stmt->loc) : scenario.path;
}

std::vector<MeshAxis> mesh_axes(const sim::Scenario& scenario) {
  std::vector<MeshAxis> axes;
  for (const sim::MeshDim& dim : scenario.mesh) axes.push_back({dim.name, dim.size});
  return axes;
}

// "ranks 31,63,...,4063 (dp=0-126, pp=3, tp=7)": ranges, and, on a mesh of more than
// MESH_COORDINATES_FROM ranks, its coordinates where the set is a box of the mesh.
constexpr int32_t MESH_COORDINATES_FROM = 16;

std::string rank_list(const sim::Scenario& scenario, const std::vector<int32_t>& ranks) {
  std::string out = format_ranks(ranks);
  if (scenario.world <= MESH_COORDINATES_FROM) return out;
  const std::string coords = mesh_coordinates(ranks, mesh_axes(scenario));
  if (!coords.empty()) out += " (" + coords + ")";
  return out;
}

// Which instance of its group an op of `rank` is on: "" for a group with one communicator,
// "[dp=3, pp=1]" for a mesh dimension's (the rank's other coordinates), "[4-7]" otherwise.
std::string group_instance(const sim::Scenario& scenario, const sim::OpRecord& rec, int32_t rank) {
  if (!sim::is_collective(rec.op.kind) && !sim::is_p2p(rec.op.kind)) return "";
  if (rec.op.group >= scenario.groups.size()) return "";
  const sim::GroupDef& group = scenario.groups[rec.op.group];
  if (group.single()) return "";
  if (group.mesh_dim >= 0) {
    std::string out;
    int64_t rest = rank;
    std::vector<std::string> parts;
    for (size_t d = 0; d < scenario.mesh.size(); ++d) {
      const int64_t coord = rest % scenario.mesh[d].size;
      rest /= scenario.mesh[d].size;
      if (static_cast<int32_t>(d) != group.mesh_dim) parts.push_back(fmt::format("{}={}", scenario.mesh[d].name, coord));
    }
    for (size_t i = parts.size(); i-- > 0;) out += (out.empty() ? "" : ",") + parts[i];
    return "[" + out + "]";
  }
  const std::vector<int32_t>* comm = group.comm_for(rank);
  return comm ? "[" + format_rank_set(*comm, 3) + "]" : "";
}

// describe_op with the group's instance: "allreduce #3 on dp[pp=3,tp=7]".
std::string op_text(const sim::Scenario& scenario, const sim::OpRecord& rec, int32_t rank) {
  std::string text = describe_op(scenario, rec);
  const std::string instance = group_instance(scenario, rec, rank);
  if (instance.empty()) return text;
  const std::string suffix = " on " + scenario.groups[rec.op.group].name;
  if (text.ends_with(suffix)) return text + instance;
  return text;
}

// What a rank is doing at the end: "it finished", "it waits in send to rank 0 #1 on world (...)".
std::string rank_state(const sim::Scenario& scenario, const sim::ExecutionResult& result, int32_t rank) {
  switch (result.rank_status[static_cast<size_t>(rank)]) {
    case RankStatus::FINISHED: return "finished";
    case RankStatus::EXITED: return "exited";
    case RankStatus::CRASHED: return "crashed";
    case RankStatus::NOT_STARTED: return "never started";
    default: break;
  }
  for (const sim::StuckOp& s : result.stuck) {
    for (const sim::QueuedBehind& q : s.queued_behind) {
      if (q.rank != rank) continue;
      std::string threads;
      for (size_t i = 0; i < q.threads.size(); ++i) {
        threads += i == 0 ? "" : i + 1 == q.threads.size() ? " and " : ", ";
        threads += q.threads[i];
      }
      return fmt::format("is queued behind {} ({}) on stream {}, shared by threads {}", op_text(scenario, q.behind, rank),
                         where(scenario, q.behind), q.stream, threads);
    }
  }
  for (const sim::StuckOp& s : result.stuck) {
    if (s.rank == rank) return fmt::format("waits in {} ({})", op_text(scenario, s.op, rank), where(scenario, s.op));
  }
  return "is blocked";
}

// "rank 3 never issued it: it finished", grouping ranks with the same state.
void describe_missing(const sim::Scenario& scenario, const sim::ExecutionResult& result,
                      const std::vector<int32_t>& ranks, const std::string& what, std::string& line) {
  std::map<std::string, std::vector<int32_t>> by_state;
  std::vector<std::string> order;
  for (int32_t r : ranks) {
    std::string state = rank_state(scenario, result, r);
    if (!by_state.count(state)) order.push_back(state);
    by_state[state].push_back(r);
  }
  for (const std::string& state : order) {
    const std::vector<int32_t>& group = by_state[state];
    if (group.size() == 1) {
      line += fmt::format("; {} {}: it {}", rank_list(scenario, group), what, state);
      continue;
    }
    // The states are worded for one rank ("waits in", "is blocked"): agree with "they".
    std::string plural = state;
    if (plural.starts_with("waits ")) plural = "wait " + plural.substr(6);
    else if (plural.starts_with("is ")) plural = "are " + plural.substr(3);
    line += fmt::format("; {} {}: they {}", rank_list(scenario, group), what, plural);
  }
}

// A hang in init_process_group (`launch:`): who waits, who never joined and why, and what
// PyTorch shows after the store timeout (docs/semantics.md, "Initialisation").
std::vector<std::string> explain_init(const sim::Scenario& scenario, const sim::ExecutionResult& result) {
  std::vector<int32_t> waiting;
  std::vector<int32_t> missing;
  int32_t believed = scenario.world;
  std::string backend_init;
  for (const sim::StuckOp& s : result.stuck) {
    if (s.op.op.kind != OpKind::INIT) continue;
    waiting.push_back(s.rank);
    missing = s.never_issued;
    if (const sim::LaunchProcess* p = launch_process(scenario, s.op.op.stmt)) {
      believed = p->world_size;
      backend_init = p->init_method;
    }
  }
  std::vector<std::string> lines;
  std::string text = fmt::format("{} wait{} in init_process_group on world (world_size {}, {})", rank_list(scenario, waiting),
                                 waiting.size() == 1 ? "s" : "", believed,
                                 scenario.location(scenario.launch.loc));
  for (int32_t r : missing) {
    const sim::LaunchProcess* raised = nullptr;
    for (const sim::LaunchProcess& p : scenario.launch.processes) {
      if (p.rank == r) raised = &p;  // it did not join, so it raised
    }
    if (raised != nullptr) {
      text += fmt::format("; rank {} never joined: its process ({}) passes world_size {} and raises at init "
                          "(NCCL WARN Invalid rank requested : {}/{})",
                          r, scenario.location(raised->loc), raised->world_size, r, raised->world_size);
    } else {
      text += fmt::format("; rank {} never joined: no process was started as rank {}", r, r);
    }
  }
  for (const sim::LaunchProcess& p : scenario.launch.processes) {
    if (p.rank >= scenario.world && p.rank >= p.world_size) {
      text += fmt::format("; the process at {} passes rank {} with world_size {} and raises at init (NCCL WARN "
                          "Invalid rank requested : {}/{})",
                          scenario.location(p.loc), p.rank, p.world_size, p.rank, p.world_size);
    }
  }
  if (believed > scenario.world) {
    text += fmt::format("; ranks {}-{} of world_size {} never joined: the scenario's world has {} ranks and no "
                        "process was started for them",
                        scenario.world, believed - 1, believed, scenario.world);
  }
  lines.push_back(std::move(text));
  const bool master = std::find(waiting.begin(), waiting.end(), 0) != waiting.end();
  if (backend_init.rfind("file://", 0) == 0) {
    lines.push_back("PyTorch's FileStore rendezvous then waits until its timeout (default 30min)");
  } else if (master) {
    lines.push_back(fmt::format("after the store timeout (default 30min) rank 0 raises: torch.distributed.DistStoreError: "
                                "Timed out after 1800 seconds waiting for clients. {}/{} clients joined.",
                                waiting.size(), believed));
  } else {
    lines.push_back("after the store timeout (default 30min) the others raise: torch.distributed.DistNetworkError: "
                    "The client socket has timed out after 1800s while trying to connect to (MASTER_ADDR, MASTER_PORT)");
  }
  return lines;
}

constexpr size_t MAX_EXPLANATION_LINES = 16;

std::vector<std::string> explain_stuck(const sim::Scenario& scenario, const sim::ExecutionResult& result) {
  if (!result.stuck.empty() && result.stuck.front().op.op.kind == OpKind::INIT) return explain_init(scenario, result);
  // Collectives: one line per (group, seq) listing every rank waiting in it. P2p: one line each.
  struct Line {
    int32_t first_rank;
    std::string text;
  };
  std::vector<Line> lines;
  // By (group, communicator of the group, seq): two tp groups' waits are two lines.
  std::map<std::tuple<uint32_t, int32_t, uint32_t>, std::vector<const sim::StuckOp*>> collectives;
  for (const sim::StuckOp& s : result.stuck) {
    if (sim::is_collective(s.op.op.kind)) {
      const sim::GroupDef& group = scenario.groups[s.op.op.group];
      const auto r = static_cast<size_t>(s.rank);
      const int32_t comm = r < group.comm_of_rank.size() ? group.comm_of_rank[r] : -1;
      collectives[{s.op.op.group, comm, s.op.seq}].push_back(&s);
      continue;
    }
    if (s.op.op.kind == OpKind::NEW_GROUP) {  // matched like a collective, apart from them
      collectives[{UINT32_MAX, -1, s.op.seq}].push_back(&s);
      continue;
    }
    std::string text = fmt::format("rank {} waits in {} ({})", s.rank, op_text(scenario, s.op, s.rank), where(scenario, s.op));
    const char* peer_op = s.op.op.kind == OpKind::SEND ? "the matching recv" : "the matching send";
    std::vector<int32_t> behind;
    for (int32_t r : s.waiting_for) {
      if (std::find(s.never_issued.begin(), s.never_issued.end(), r) == s.never_issued.end()) behind.push_back(r);
    }
    describe_missing(scenario, result, s.never_issued, fmt::format("never issued {}", peer_op), text);
    describe_missing(scenario, result, behind, fmt::format("issued {} but never ran it", peer_op), text);
    lines.push_back({s.rank, std::move(text)});
  }
  for (const auto& [key, ops] : collectives) {
    std::vector<int32_t> waiting;
    std::set<int32_t> never;
    std::set<int32_t> behind;
    for (const sim::StuckOp* s : ops) {
      waiting.push_back(s->rank);
      never.insert(s->never_issued.begin(), s->never_issued.end());
    }
    for (const sim::StuckOp* s : ops) {
      for (int32_t r : s->waiting_for) {
        if (!never.count(r) && std::find(waiting.begin(), waiting.end(), r) == waiting.end()) behind.insert(r);
      }
    }
    const sim::OpRecord& rec = ops.front()->op;
    std::string text = fmt::format("{} wait{} in {} ({})", rank_list(scenario, waiting), waiting.size() == 1 ? "s" : "",
                                   op_text(scenario, rec, ops.front()->rank), where(scenario, rec));
    describe_missing(scenario, result, {never.begin(), never.end()}, "never issued it", text);
    describe_missing(scenario, result, {behind.begin(), behind.end()}, "issued it but never ran it", text);
    lines.push_back({waiting.front(), std::move(text)});
  }
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) { return a.first_rank < b.first_rank; });
  std::vector<std::string> out;
  // At scale, point-to-point waits are a line each: past MAX_EXPLANATION_LINES, the rest are
  // counted (the stuck ops, every one, are in the --json report).
  const size_t shown = lines.size() > MAX_EXPLANATION_LINES ? MAX_EXPLANATION_LINES - 1 : lines.size();
  for (size_t i = 0; i < shown; ++i) out.push_back(std::move(lines[i].text));
  if (shown < lines.size()) {
    out.push_back(fmt::format("... and {} more lines like these (the --json report lists every stuck op)", lines.size() - shown));
  }
  return out;
}

std::string stuck_signature(const sim::Scenario& scenario, const std::vector<sim::StuckOp>& stuck) {
  std::string sig;
  for (const sim::StuckOp& s : stuck) {
    sig += fmt::format("{}:{}:{}:{};", s.rank, sim::op_kind_name(s.op.op.kind), s.op.seq, where(scenario, s.op));
  }
  return sig;
}

}  // namespace

std::vector<int32_t> find_wait_cycle(int32_t world, const std::vector<sim::StuckOp>& stuck) {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph graph(static_cast<size_t>(world));
  std::set<std::pair<int32_t, int32_t>> edges;
  for (const sim::StuckOp& s : stuck) {
    for (int32_t w : s.waiting_for) {
      if (edges.insert({s.rank, w}).second) boost::add_edge(static_cast<size_t>(s.rank), static_cast<size_t>(w), graph);
    }
  }
  std::vector<int> component(static_cast<size_t>(world));
  boost::strong_components(graph, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, graph)));
  std::map<int, int> size;
  for (int c : component) ++size[c];
  // The lowest rank on a cycle: in a component of two or more ranks.
  int32_t start = -1;
  for (int32_t r = 0; r < world && start < 0; ++r) {
    if (size[component[static_cast<size_t>(r)]] > 1) start = r;
  }
  if (start < 0) return {};
  // Shortest cycle through `start` inside its component, by breadth-first search; ties go to
  // the lower rank, so the cycle is deterministic.
  const int comp = component[static_cast<size_t>(start)];
  std::vector<int32_t> parent(static_cast<size_t>(world), -1);
  std::vector<int32_t> queue{start};
  int32_t last = -1;
  for (size_t head = 0; head < queue.size() && last < 0; ++head) {
    const int32_t v = queue[head];
    std::vector<int32_t> next;
    for (auto [it, end] = boost::adjacent_vertices(static_cast<size_t>(v), graph); it != end; ++it) next.push_back(static_cast<int32_t>(*it));
    std::sort(next.begin(), next.end());
    for (int32_t w : next) {
      if (component[static_cast<size_t>(w)] != comp) continue;
      if (w == start) {
        last = v;
        break;
      }
      if (parent[static_cast<size_t>(w)] < 0) {
        parent[static_cast<size_t>(w)] = v;
        queue.push_back(w);
      }
    }
  }
  std::vector<int32_t> cycle;
  for (int32_t v = last; v != start; v = parent[static_cast<size_t>(v)]) cycle.push_back(v);
  cycle.push_back(start);
  std::reverse(cycle.begin(), cycle.end());
  cycle.push_back(start);
  return cycle;
}

namespace {

std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

WaitForGraph fold_wait_for(const sim::Scenario& scenario, const Bug& bug) {
  // Ranks in identical states are one node: the same status and, when stuck, the same op
  // (kind, group, seq, source). Ranks on the wait-for cycle keep a node each.
  const size_t world = static_cast<size_t>(std::max(scenario.world, 0));
  std::set<int32_t> on_cycle(bug.cycle.begin(), bug.cycle.end());
  std::vector<const sim::StuckOp*> stuck_of(world, nullptr);
  for (const sim::StuckOp& s : bug.stuck) {
    if (static_cast<size_t>(s.rank) < world && stuck_of[static_cast<size_t>(s.rank)] == nullptr) stuck_of[static_cast<size_t>(s.rank)] = &s;
  }
  std::set<int32_t> waited;
  for (const sim::StuckOp& s : bug.stuck) waited.insert(s.waiting_for.begin(), s.waiting_for.end());
  std::map<int32_t, std::string> mismatched;  // rank -> the op it issued
  if (bug.mismatch) {
    const sim::MismatchInfo& m = *bug.mismatch;
    for (const auto& [rank, rec] : {std::pair{m.rank_a, &m.op_a}, std::pair{m.rank_b, &m.op_b}}) {
      std::string text = op_text(scenario, *rec, rank);
      if (sim::is_collective(rec->op.kind) || sim::is_p2p(rec->op.kind)) {
        text += fmt::format(" of {} {}", format_size(rec->op.size_bytes), sim::dtype_name(rec->op.dtype));
      }
      mismatched[rank] = text + "\n" + where(scenario, *rec);
    }
  }
  WaitForGraph graph;
  std::vector<WaitForGraph::Node>& nodes = graph.nodes;
  std::map<std::string, size_t> node_of_key;
  std::vector<size_t> node_of(world, 0);
  for (size_t r = 0; r < world; ++r) {
    const auto rank = static_cast<int32_t>(r);
    std::string state = r < bug.rank_status.size() ? std::string(sim::rank_status_name(bug.rank_status[r])) : "";
    std::string key = state;
    if (const sim::StuckOp* s = stuck_of[r]) {
      state = fmt::format("waits in {}\n{}", describe_op(scenario, s->op), where(scenario, s->op));
      key = "stuck:" + state;
    }
    if (mismatched.count(rank)) {
      state = "issued " + mismatched[rank];
      key = fmt::format("mismatch:{}", rank);
    }
    if (key == state && waited.count(rank)) key = "waited for:" + state;  // apart from the bystanders
    if (on_cycle.count(rank)) key = fmt::format("cycle:{}", rank);
    auto [it, inserted] = node_of_key.emplace(key, nodes.size());
    if (inserted) nodes.push_back(WaitForGraph::Node{{}, state, on_cycle.count(rank) > 0});
    nodes[it->second].ranks.push_back(rank);
    node_of[r] = it->second;
  }
  // An edge per (node, node, op), labelled with the op; a count when several ranks wait so.
  std::map<std::tuple<size_t, size_t, std::string>, size_t> edges;
  std::vector<std::tuple<size_t, size_t, std::string>> order;
  for (const sim::StuckOp& s : bug.stuck) {
    for (int32_t w : s.waiting_for) {
      if (static_cast<size_t>(s.rank) >= world || static_cast<size_t>(w) >= world) continue;
      std::tuple<size_t, size_t, std::string> key{node_of[static_cast<size_t>(s.rank)], node_of[static_cast<size_t>(w)],
                                                  describe_op(scenario, s.op)};
      if (edges[key]++ == 0) order.push_back(key);
    }
  }
  for (const auto& key : order) {
    const auto& [from, to, label] = key;
    graph.edges.push_back(WaitForGraph::Edge{from, to, label, edges[key], false});
  }
  if (bug.mismatch && bug.mismatch->rank_a >= 0 && static_cast<size_t>(bug.mismatch->rank_a) < world &&
      bug.mismatch->rank_b >= 0 && static_cast<size_t>(bug.mismatch->rank_b) < world) {
    const size_t a = node_of[static_cast<size_t>(bug.mismatch->rank_a)];
    const size_t b = node_of[static_cast<size_t>(bug.mismatch->rank_b)];
    graph.edges.push_back(WaitForGraph::Edge{a, b, "differs in " + bug.mismatch->field, 1, true});
  }
  return graph;
}

std::string wait_for_dot(const sim::Scenario& scenario, const Bug& bug) {
  const WaitForGraph graph = fold_wait_for(scenario, bug);
  std::string out = "digraph G {\n";
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const WaitForGraph::Node& node = graph.nodes[n];
    out += fmt::format("{}[label=\"{}\\n{}\"{}];\n", n, dot_escape(node_label(node)), dot_escape(node.state),
                       node.cycle ? ",color=red" : "");
  }
  for (const WaitForGraph::Edge& edge : graph.edges) {
    if (edge.mismatch) {
      out += fmt::format("{}->{} [label=\"{}\",dir=none,color=red];\n", edge.from, edge.to, dot_escape(edge.label));
    } else {
      out += fmt::format("{}->{} [label=\"{}{}\"];\n", edge.from, edge.to, dot_escape(edge.label),
                         edge.count > 1 ? fmt::format(" (x{})", edge.count) : "");
    }
  }
  out += "}\n";
  return out;
}

std::string node_label(const WaitForGraph::Node& node) {
  std::string label = format_ranks(node.ranks);
  if (node.ranks.size() > 1 && !label.ends_with(" ranks)")) label += fmt::format(" ({} ranks)", node.ranks.size());
  return label;
}

namespace {

std::optional<Bug> analyze_end(const sim::Scenario& scenario, const sim::ExecutionResult& result) {
  Bug bug;
  bug.rank_status = result.rank_status;
  if (result.end == sim::ExecutionEnd::MISMATCH) {
    const sim::MismatchInfo& m = *result.mismatch;
    bug.kind = Verdict::MISMATCH;
    auto detail = [&](const sim::OpRecord& rec) {
      if (rec.op.kind == OpKind::NEW_GROUP || rec.op.kind == OpKind::INIT) return fmt::format("{} ({})", describe_op(scenario, rec), where(scenario, rec));
      std::string text = fmt::format("{} of {} {}", describe_op(scenario, rec), format_size(rec.op.size_bytes),
                                     sim::dtype_name(rec.op.dtype));
      if (rec.op.root >= 0) text += fmt::format(" root {}", rec.op.root);
      if (rec.op.stmt && !rec.op.stmt->tag.empty()) text += fmt::format(" tag '{}'", rec.op.stmt->tag);
      return text + fmt::format(" ({})", where(scenario, rec));
    };
    const std::string what = sim::is_p2p(m.op_a.op.kind) ? "a matched send and recv" : fmt::format("operation #{} on {}", m.seq, scenario.groups[m.group].name);
    const char* verb = m.op_a.op.kind == OpKind::INIT ? "called" : "issued";  // processes call init
    bug.summary = fmt::format("{} differs in {}: rank {} {} {}, rank {} {} {}",
                              m.op_a.op.kind == OpKind::INIT ? std::string("init_process_group") : what, m.field,
                              m.rank_a, verb, detail(m.op_a), m.rank_b, verb, detail(m.op_b));
    if (m.split_from >= 0) {
      bug.summary += fmt::format("; rank {} sends {} to rank {}, which expects {} from it", m.split_from,
                                 format_size(m.split_sent), m.split_to, format_size(m.split_expected));
    }
    bug.explanation.push_back(bug.summary);
    if (m.op_a.op.kind == OpKind::INIT) {
      const sim::LaunchProcess* a = launch_process(scenario, m.op_a.op.stmt);
      const sim::LaunchProcess* b = launch_process(scenario, m.op_b.op.stmt);
      if (a != nullptr && b != nullptr) {
        if (m.field == "world_size") {
          bug.explanation.push_back(fmt::format(
              "NCCL's bootstrap root rejects it (NCCL WARN Bootstrap Root : mismatch in rank count from procs {} : {}) "
              "and every rank hangs in communicator init",
              a->rank == 0 ? a->world_size : b->world_size, a->rank == 0 ? b->world_size : a->world_size));
        } else if (m.field == "rank") {
          bug.explanation.push_back(fmt::format(
              "NCCL's bootstrap root rejects the second (NCCL WARN Bootstrap Root : rank {} of {} ranks has already "
              "checked in) and every rank hangs in communicator init",
              a->rank, a->world_size));
        } else if (m.field == "backend") {
          bug.explanation.push_back(fmt::format("the processes create different backends ({} and {}): their "
                                                "collectives can never match", a->backend, b->backend));
        } else {
          bug.explanation.push_back(fmt::format("the processes rendezvous at different stores ({} and {}): each "
                                                "waits for clients that never come", a->init_method, b->init_method));
        }
      }
    }
    bug.mismatch = m;
    bug.signature = fmt::format("mismatch:{}:{}:{}:{}", m.field, where(scenario, m.op_a), where(scenario, m.op_b), m.seq);
    return bug;
  }
  if (result.end == sim::ExecutionEnd::TIMEOUT) {
    bug.kind = Verdict::TIMEOUT;
    bug.stuck = result.stuck;
    // Ranks that waited the same time in the same op for the same ranks share a line.
    std::vector<std::string> order;
    std::map<std::string, std::vector<int32_t>> ranks;
    for (const sim::StuckOp& s : result.stuck) {
      std::string text = fmt::format("waited {} in {} ({}), past the {} watchdog timeout",
                                     format_duration(s.op.end_ns - s.op.start_ns), op_text(scenario, s.op, s.rank),
                                     where(scenario, s.op), format_duration(scenario.semantics.timeout_ns));
      if (!s.waiting_for.empty()) {
        std::vector<int32_t> late = s.waiting_for;
        text += fmt::format(" for {}", rank_list(scenario, late));
      }
      if (!ranks.count(text)) order.push_back(text);
      ranks[text].push_back(s.rank);
    }
    for (const std::string& text : order) bug.explanation.push_back(rank_list(scenario, ranks[text]) + " " + text);
    bug.summary = bug.explanation.front();
    bug.signature = "timeout:" + stuck_signature(scenario, result.stuck);
    return bug;
  }
  if (result.end != sim::ExecutionEnd::STUCK) return std::nullopt;
  bug.stuck = result.stuck;
  bug.cycle = find_wait_cycle(scenario.world, result.stuck);
  bug.kind = bug.cycle.empty() ? Verdict::HANG : Verdict::DEADLOCK;
  bug.explanation = explain_stuck(scenario, result);
  if (!bug.cycle.empty()) {
    // A long cycle shows its first and last hops and its length (the JSON has every rank).
    std::string text = "wait-for cycle: ";
    const size_t n = bug.cycle.size();
    for (size_t i = 0; i < n; ++i) {
      if (n > 12 && i == 6) {
        text += " -> ...";
        i = n - 4;
      }
      text += (i ? " -> " : "") + std::to_string(bug.cycle[i]);
    }
    if (n > 12) text += fmt::format(" ({} ranks)", n - 1);
    bug.explanation.push_back(text);
  }
  bug.summary = bug.explanation.empty() ? std::string("no rank can progress") : bug.explanation.front();
  bug.signature = std::string(sim::verdict_name(bug.kind)) + ":" + stuck_signature(scenario, result.stuck);
  return bug;
}

}  // namespace

std::optional<Bug> analyze(const sim::Scenario& scenario, const sim::ExecutionResult& result) {
  std::optional<Bug> bug = analyze_end(scenario, result);
  if (bug) bug->class_key = bug_class_key(scenario, *bug);
  return bug;
}

}  // namespace lockstep::checker
