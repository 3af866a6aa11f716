#include "gpu_validation/replay_plan.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "sim/hash.h"

namespace lockstep::gpu {

namespace {

constexpr std::array<std::string_view, 17> KIND_NAMES = {
    "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "all_to_all_single",
    "allgather_v", "gather",  "scatter",        "barrier",   "send",   "recv",       "new_group",
    "local",     "exit",      "crash"};

constexpr std::array<std::string_view, 6> STATUS_NAMES = {"running", "completed", "stuck", "exited", "crashed", "failed"};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool to_i64(const std::string& text, int64_t& value) {
  try {
    size_t used = 0;
    value = std::stoll(text, &used);
    return used == text.size();
  } catch (...) {
    return false;
  }
}

template <typename T>
bool to_int(const std::string& text, T& value) {
  int64_t v = 0;
  if (!to_i64(text, v)) return false;
  value = static_cast<T>(v);
  return true;
}

}  // namespace

std::vector<int32_t> PlanGroup::members_with(int32_t rank) const {
  std::vector<int32_t> members;
  const int32_t c = comm_of_rank[static_cast<size_t>(rank)];
  for (size_t r = 0; r < comm_of_rank.size(); ++r) {
    if (c >= 0 && comm_of_rank[r] == c) members.push_back(static_cast<int32_t>(r));
  }
  return members;
}

int index_in(const std::vector<int32_t>& members, int32_t rank) {
  for (size_t j = 0; j < members.size(); ++j) {
    if (members[j] == rank) return static_cast<int>(j);
  }
  return -1;
}

bool holds_slot(const std::vector<PlanOp>& ops, size_t i) {
  const PlanOp& op = ops[i];
  if (!plan_kind_communicates(op.kind) || op.kind == PlanKind::NEW_GROUP || op.eager) return false;
  return op.batch < 0 || i == 0 || ops[i - 1].batch != op.batch;
}

uint32_t tag_hash(std::string_view tag) {
  if (tag.empty()) return 0;
  const uint64_t wide = fnv1a(tag);
  const auto h = static_cast<uint32_t>(wide ^ (wide >> 32));
  return h == 0 ? 1 : h;
}

uint64_t seeded_value(int32_t rank, uint32_t seq, int64_t element, uint32_t dtype, uint32_t tag, uint64_t limit) {
  const uint64_t raw = static_cast<uint64_t>(rank) * 131u + static_cast<uint64_t>(seq) * 17u +
                       static_cast<uint64_t>(element) * 7u + static_cast<uint64_t>(dtype) * 29u +
                       static_cast<uint64_t>(tag) * 37u;
  return 1 + raw % (limit == 0 ? 1 : limit);
}

std::string_view plan_kind_name(PlanKind kind) { return KIND_NAMES[static_cast<size_t>(kind)]; }

std::optional<PlanKind> parse_plan_kind(std::string_view name) {
  for (size_t i = 0; i < KIND_NAMES.size(); ++i) {
    if (KIND_NAMES[i] == name) return static_cast<PlanKind>(i);
  }
  return std::nullopt;
}

bool plan_kind_communicates(PlanKind kind) {
  return kind != PlanKind::LOCAL && kind != PlanKind::EXIT && kind != PlanKind::CRASH;
}

std::string format_plan(const Plan& plan) {
  std::ostringstream out;
  out << "lockstep-replay-plan 4\n" << "world " << plan.world << "\n";
  out << "order " << (plan.order == IssueOrder::FREE ? "free" : "granted") << "\n";
  if (plan.comm_concurrency > 0) out << "comm_concurrency " << plan.comm_concurrency << "\n";
  for (const PlanGroup& g : plan.groups) {
    out << "group " << g.name;
    for (int32_t c : g.comm_of_rank) out << " " << c;
    out << "\n";
  }
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    out << "rank " << r << " " << plan.ranks[r].size() << "\n";
    for (const PlanOp& op : plan.ranks[r]) {
      out << "op " << op.index << " " << op.step << " " << plan_kind_name(op.kind) << " " << op.name << " " << op.group << " "
          << op.size_bytes << " " << op.dtype << " " << op.dtype_bytes << " " << op.peer << " " << op.root << " "
          << op.seq << " " << op.new_group << " " << op.batch << " " << op.tag << " " << (op.eager ? 1 : 0) << " "
          << static_cast<int64_t>(op.start == UINT32_MAX ? -1 : static_cast<int64_t>(op.start)) << " " << op.match << " "
          << (op.stream.empty() ? "main" : op.stream) << " " << op.deps.size();
      for (uint32_t d : op.deps) out << " " << d;
      out << " " << op.gates.size();
      for (uint32_t g : op.gates) out << " " << g;
      out << "\n";
      if (!op.recv_splits.empty()) {
        out << "splits " << op.send_splits.size();
        for (int64_t bytes : op.send_splits) out << " " << bytes;
        for (int64_t bytes : op.recv_splits) out << " " << bytes;
        out << "\n";
      }
    }
  }
  return out.str();
}

std::optional<Plan> read_plan_file(const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read the plan file";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_plan(text.str(), error);
}

std::optional<Plan> parse_plan(const std::string& text, std::string& error) {
  std::istringstream in(text);
  std::string line;
  Plan plan;
  int line_no = 0;
  auto fail = [&](const std::string& what) {
    error = "plan line " + std::to_string(line_no) + ": " + what;
    return std::nullopt;
  };
  if (!std::getline(in, line) || line != "lockstep-replay-plan 4") {
    error = "not a lockstep replay plan (version 3)";
    return std::nullopt;
  }
  ++line_no;
  std::vector<PlanOp>* ops = nullptr;
  while (std::getline(in, line)) {
    ++line_no;
    const std::vector<std::string> w = split(line);
    if (w.empty()) continue;
    if (w[0] == "world" && w.size() == 2) {
      if (!to_int(w[1], plan.world) || plan.world <= 0) return fail("bad world");
      plan.ranks.resize(static_cast<size_t>(plan.world));
    } else if (w[0] == "order" && w.size() == 2) {
      if (w[1] != "granted" && w[1] != "free") return fail("bad order " + w[1]);
      plan.order = w[1] == "free" ? IssueOrder::FREE : IssueOrder::GRANTED;
    } else if (w[0] == "comm_concurrency" && w.size() == 2) {
      if (!to_i64(w[1], plan.comm_concurrency) || plan.comm_concurrency < 0) return fail("bad comm_concurrency");
    } else if (w[0] == "group" && w.size() >= 2) {
      PlanGroup g;
      g.name = w[1];
      for (size_t i = 2; i < w.size(); ++i) {
        int32_t c = 0;
        if (!to_int(w[i], c)) return fail("bad communicator");
        g.comm_of_rank.push_back(c);
      }
      if (static_cast<int32_t>(g.comm_of_rank.size()) != plan.world) return fail("group " + g.name + " does not list every rank");
      plan.groups.push_back(std::move(g));
    } else if (w[0] == "rank" && w.size() == 3) {
      size_t r = 0;
      if (!to_int(w[1], r) || r >= plan.ranks.size()) return fail("bad rank");
      ops = &plan.ranks[r];
    } else if (w[0] == "op" && w.size() >= 21 && ops != nullptr) {
      // op INDEX STEP KIND NAME GROUP SIZE DTYPE WIDTH PEER ROOT SEQ NEW_GROUP BATCH TAG EAGER START
      //    MATCH STREAM NDEPS DEPS... NGATES GATES...
      PlanOp op;
      const std::optional<PlanKind> kind = parse_plan_kind(w[3]);
      if (!kind) return fail("unknown op kind " + w[3]);
      op.kind = *kind;
      op.name = w[4];
      size_t deps = 0, gates = 0;
      int64_t eager = 0, start = 0;
      if (!to_int(w[1], op.index) || !to_int(w[2], op.step) || !to_int(w[5], op.group) || !to_i64(w[6], op.size_bytes) ||
          !to_int(w[7], op.dtype) || !to_int(w[8], op.dtype_bytes) || !to_int(w[9], op.peer) || !to_int(w[10], op.root) ||
          !to_int(w[11], op.seq) || !to_int(w[12], op.new_group) || !to_int(w[13], op.batch) || !to_int(w[14], op.tag) ||
          !to_i64(w[15], eager) || !to_i64(w[16], start) || !to_int(w[17], op.match) || !to_int(w[19], deps) ||
          deps > w.size() || w.size() < 21 + deps || !to_int(w[20 + deps], gates) || w.size() != 21 + deps + gates ||
          op.size_bytes < 0 || (op.dtype_bytes != 1 && op.dtype_bytes != 2 && op.dtype_bytes != 4 && op.dtype_bytes != 8)) {
        return fail("bad op");
      }
      op.stream = w[18];
      op.eager = eager != 0;
      op.start = start < 0 ? UINT32_MAX : static_cast<uint32_t>(start);
      if (op.group >= plan.groups.size() || op.new_group >= plan.groups.size()) return fail("op names an unknown group");
      for (size_t i = 0; i < deps; ++i) {
        uint32_t d = 0;
        if (!to_int(w[20 + i], d) || d >= ops->size()) return fail("bad dependency");
        op.deps.push_back(d);
      }
      for (size_t i = 0; i < gates; ++i) {
        uint32_t g = 0;
        if (!to_int(w[21 + deps + i], g) || g >= ops->size()) return fail("bad gate");
        op.gates.push_back(g);
      }
      ops->push_back(std::move(op));
    } else if (w[0] == "splits" && w.size() >= 2 && ops != nullptr && !ops->empty() &&
               ops->back().recv_splits.empty()) {
      // splits N SENT... RECEIVED...: the split sizes of the op before it
      size_t n = 0;
      if (!to_int(w[1], n) || n > w.size() || w.size() != 2 + 2 * n) return fail("bad splits");
      PlanOp& op = ops->back();
      for (size_t i = 0; i < 2 * n; ++i) {
        int64_t bytes = 0;
        if (!to_i64(w[2 + i], bytes) || bytes < 0) return fail("bad splits");
        (i < n ? op.send_splits : op.recv_splits).push_back(bytes);
      }
    } else {
      return fail("unexpected '" + line + "'");
    }
  }
  if (plan.world <= 0) {
    error = "plan without a world";
    return std::nullopt;
  }
  if (plan.order == IssueOrder::GRANTED && step_owners(plan).empty()) {
    size_t total = 0;
    for (const std::vector<PlanOp>& rank_ops : plan.ranks) total += rank_ops.size();
    if (total > 0) {
      error = "the ops' steps are not one global issue order";
      return std::nullopt;
    }
  }
  return plan;
}

std::vector<int32_t> step_owners(const Plan& plan) {
  size_t total = 0;
  for (const std::vector<PlanOp>& ops : plan.ranks) total += ops.size();
  std::vector<int32_t> owner(total, -1);
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    uint32_t previous = 0;
    for (size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const uint32_t step = plan.ranks[r][i].step;
      // Each step once, and a rank's steps rising with its issue order.
      if (step >= total || owner[step] >= 0 || (i > 0 && step <= previous)) return {};
      owner[step] = static_cast<int32_t>(r);
      previous = step;
    }
  }
  return owner;
}

std::string_view frontier_status_name(FrontierStatus status) { return STATUS_NAMES[static_cast<size_t>(status)]; }

std::string format_frontier(const Frontier& f) {
  std::ostringstream out;
  out << "lockstep-frontier 1\n"
      << "rank " << f.rank << "\n"
      << "pid " << f.pid << "\n"
      << "status " << frontier_status_name(f.status) << "\n"
      << "completed " << f.completed << " " << f.total << "\n";
  if (f.next) {
    const FrontierOp& op = f.next->op;
    out << "next " << f.next->step << " " << (f.next->granted ? 1 : 0) << " " << op.index << " " << op.kind << " "
        << op.group << " " << op.seq << " " << op.peer << "\n";
  }
  for (const FrontierOp& op : f.ops) {
    out << "op " << op.index << " " << op.kind << " " << op.group << " " << op.seq << " " << op.peer;
    if (!op.problem.empty()) out << " " << op.problem;
    out << "\n";
  }
  return out.str();
}

std::optional<Frontier> parse_frontier(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != "lockstep-frontier 1") return std::nullopt;
  Frontier f;
  while (std::getline(in, line)) {
    const std::vector<std::string> w = split(line);
    if (w.empty()) continue;
    if (w[0] == "rank" && w.size() == 2) {
      if (!to_int(w[1], f.rank)) return std::nullopt;
    } else if (w[0] == "pid" && w.size() == 2) {
      if (!to_int(w[1], f.pid)) return std::nullopt;
    } else if (w[0] == "status" && w.size() == 2) {
      bool known = false;
      for (size_t i = 0; i < STATUS_NAMES.size(); ++i) {
        if (STATUS_NAMES[i] == w[1]) {
          f.status = static_cast<FrontierStatus>(i);
          known = true;
        }
      }
      if (!known) return std::nullopt;
    } else if (w[0] == "completed" && w.size() == 3) {
      if (!to_int(w[1], f.completed) || !to_int(w[2], f.total)) return std::nullopt;
    } else if (w[0] == "next" && w.size() == 8) {
      FrontierNext next;
      int64_t granted = 0;
      if (!to_int(w[1], next.step) || !to_i64(w[2], granted) || !to_int(w[3], next.op.index) || !to_int(w[6], next.op.seq) ||
          !to_int(w[7], next.op.peer)) {
        return std::nullopt;
      }
      next.granted = granted != 0;
      next.op.kind = w[4];
      next.op.group = w[5];
      f.next = std::move(next);
    } else if (w[0] == "op" && w.size() >= 6) {
      FrontierOp op;
      if (!to_int(w[1], op.index) || !to_int(w[4], op.seq) || !to_int(w[5], op.peer)) return std::nullopt;
      op.kind = w[2];
      op.group = w[3];
      // The problem is the rest of the line after the sixth word.
      size_t pos = 0;
      for (int words = 0; words < 6; ++words) {
        pos = line.find_first_not_of(' ', pos);
        pos = line.find(' ', pos);
        if (pos == std::string::npos) break;
      }
      if (pos != std::string::npos) op.problem = line.substr(pos + 1);
      f.ops.push_back(std::move(op));
    } else {
      return std::nullopt;
    }
  }
  if (f.rank < 0) return std::nullopt;
  return f;
}

void write_frontier(const std::string& dir, const Frontier& frontier) {
  const std::string path = dir + "/frontier." + std::to_string(frontier.rank);
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << format_frontier(frontier);
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

std::optional<Plan> worker_plan(int argc, char** argv, const char* worker, const char* verb) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PLAN OUTDIR STALL_SECONDS (started by %s)\n", worker, verb);
    return std::nullopt;
  }
  std::string error;
  std::optional<Plan> plan = read_plan_file(argv[1], error);
  if (!plan) std::fprintf(stderr, "%s: %s: %s\n", worker, argv[1], error.c_str());
  return plan;
}

}  // namespace lockstep::gpu
