#include "export/promela.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "sim/expr.h"
#include "sim/loader.h"
#include "sim/output_file.h"
#include "sim/trace_format.h"

namespace lockstep::exporter {

namespace {

using sim::OpKind;
using sim::Stmt;
using sim::StmtKind;

// Kernel descriptors in a rank's queue: {kind, id, n}.
constexpr int K_COLL = 1;   // id: collective slot; n: members of the communicator
constexpr int K_SEND = 2;   // id: send; n: 1 if eager
constexpr int K_RECV = 3;   // id: receive
constexpr int K_GROUP = 4;  // an NCCL group: the next n descriptors start together

constexpr int SPIN_MAX_PROCESSES = 255;  // pan's limit, init included
constexpr int64_t MAX_ARRAY = 32'000;    // indices and counters are shorts

// Counters along one path of one thread, and their maxima over every path.
struct Counts {
  std::map<int, int64_t> cs;     // per (rank, comm) index: collectives issued
  std::map<int, int64_t> ac;     // per (rank, comm) index: agreed chooses reached
  std::map<int, int64_t> sends;  // per send key
  std::map<int, int64_t> recvs;  // per receive key
  int64_t queued = 0;            // queue entries since the last drain (one host thread) or in all

  void max_with(const Counts& other) {
    auto merge = [](std::map<int, int64_t>& into, const std::map<int, int64_t>& from) {
      for (const auto& [key, value] : from) into[key] = std::max(into[key], value);
    };
    merge(cs, other.cs);
    merge(ac, other.ac);
    merge(sends, other.sends);
    merge(recvs, other.recvs);
    queued = std::max(queued, other.queued);
  }
};

struct SendKey {
  uint32_t comm = 0;
  int32_t src = 0;
  int32_t dst = 0;
  int recv_key = 0;
  int64_t bound = 0;
};

struct RecvKey {
  uint32_t comm = 0;
  int32_t dst = 0;
  int64_t bound = 0;
  bool wildcard = false;
  std::vector<int> send_keys;  // sends to dst on comm, by source
};

struct Walk {
  int32_t rank = 0;
  bool multi = false;   // the rank runs several host threads
  bool gated = false;   // ... and may exit or crash (its device is gated, its kernels published)
  std::string queue;    // the rank's kernel queue
  std::string kernels_of;  // the suffix of its rank's runk_/abort_ inlines
  std::vector<int64_t> env;
  int call_depth = 0;
  Counts path;
  Counts max;
  int64_t kernels = 0;  // queue entries issued on the longest path (multi: the queue's bound)
  std::string code;
  int depth = 1;
};

class Exporter {
 public:
  Exporter(const sim::Scenario& scenario, const PromelaOptions& options)
      : sc_(scenario), opt_(options), p_(options.prefix) {}

  PromelaExport run() {
    PromelaExport out;
    check_semantics();
    comm_base_.resize(sc_.groups.size());
    uint32_t total = 0;
    for (size_t g = 0; g < sc_.groups.size(); ++g) {
      comm_base_[g] = total;
      total += static_cast<uint32_t>(sc_.groups[g].comms.size());
    }
    comm_count_ = total;
    comm_slots_.assign(comm_count_, 0);
    comm_agreed_.assign(comm_count_, 0);
    std::string procs;
    std::string starts;
    int processes = 0;
    int live_ranks = 0;
    int64_t locals_bytes = 0;
    std::string rank_globals;
    for (int32_t r = 0; r < sc_.world && out.diagnostics.empty() && diags_.empty(); ++r) {
      const sim::RankProgram& program = sc_.program_of(r);
      if (program.empty()) continue;
      ++live_ranks;
      const bool multi = program.size() > 1;
      bool exits = false;
      for (const sim::ThreadDef& thread : program) {
        std::vector<bool> seen(sc_.defines.size(), false);
        exits = exits || may_exit(thread.body(), seen);
      }
      int64_t rank_kernels = 0;
      Counts rank_max;
      for (size_t t = 0; t < program.size(); ++t) {
        Walk w;
        w.rank = r;
        w.multi = multi;
        w.gated = multi && exits;
        w.queue = multi ? fmt::format("{}q{}", p_, r) : "q";
        w.kernels_of = multi ? fmt::format("r{}", r) : "l";
        w.env = initial_env(r);
        const bool finished = walk_block(w, program[t].body());
        if (!multi) {
          if (finished) {
            line(w, fmt::format("{}drain();", p_));
            if (opt_.stuck_as_assertion) line(w, fmt::format("{0}fin = {0}fin + 1", p_));
          }
          procs += single_proctype(w, program[t].name);
        } else {
          if (finished) thread_end(w);
          procs += thread_proctype(w, t, program[t].name);
        }
        starts += fmt::format("run {}r{}_{}(); ", p_, r, t);
        ++processes;
        locals_bytes += 40 + 5 * static_cast<int64_t>(max_group_) + (multi ? 0 : 5 * (w.max.queued + 1));
        rank_kernels += multi ? w.kernels : w.max.queued;
        // A rank's counters are shared by its threads: its bound is the sum of theirs.
        for (const auto& [k, v] : w.max.cs) rank_max.cs[k] += v;
        for (const auto& [k, v] : w.max.ac) rank_max.ac[k] += v;
        for (const auto& [k, v] : w.max.sends) rank_max.sends[k] += v;
        for (const auto& [k, v] : w.max.recvs) rank_max.recvs[k] += v;
      }
      for (const auto& [k, v] : rank_max.cs) {
        comm_slots_[rc_comm_[static_cast<size_t>(k)]] = std::max(comm_slots_[rc_comm_[static_cast<size_t>(k)]], v);
      }
      for (const auto& [k, v] : rank_max.ac) {
        comm_agreed_[rc_comm_[static_cast<size_t>(k)]] = std::max(comm_agreed_[rc_comm_[static_cast<size_t>(k)]], v);
      }
      for (const auto& [k, v] : rank_max.sends) send_keys_[static_cast<size_t>(k)].bound = v;
      for (const auto& [k, v] : rank_max.recvs) recv_keys_[static_cast<size_t>(k)].bound = v;
      if (multi) {
        multi_ranks_.emplace_back(r, exits);
        const int64_t cap = std::max<int64_t>(1, rank_kernels);
        rank_globals += fmt::format("chan {}q{} = [{}] of {{ byte, short, short }};\n", p_, r, cap);
        rank_globals += fmt::format("short {0}kiss{1}, {0}kdone{1};\nbyte {0}live{1} = {2};\n", p_, r, program.size());
        locals_bytes += 5 * cap + 16;
        if (exits) {
          rank_globals += fmt::format("bit {0}dead{1};\nbyte {0}blk{1};\nbyte {0}gc{1};\nbyte {0}gt{1}[{2}];\n"
                                      "short {0}gid{1}[{2}], {0}gn{1}[{2}];\n",
                                      p_, r, max_group_);
        }
        procs += device_proctype(r, exits);
        starts += fmt::format("run {}dev{}(); ", p_, r);
        ++processes;
        locals_bytes += 40 + 5 * static_cast<int64_t>(max_group_);
      }
      if (rank_kernels > 255) {
        error({}, fmt::format("rank {} queues up to {} kernels at once; a SPIN channel holds at most 255", r, rank_kernels));
      }
    }
    for (Diagnostic& d : diags_) out.diagnostics.push_back(std::move(d));
    if (!out.diagnostics.empty()) return out;
    bool any_wildcard = false;
    for (const RecvKey& key : recv_keys_) any_wildcard = any_wildcard || (key.wildcard && !key.send_keys.empty());
    if (any_wildcard) {
      procs += matcher_proctype();
      starts += fmt::format("run {}matcher(); ", p_);
      ++processes;
    }
    if (opt_.stuck_as_assertion) {
      procs += fmt::format("proctype {0}watch() {{\n  timeout -> assert({0}fin == {1})\n}}\n\n", p_, live_ranks);
      starts += fmt::format("run {}watch(); ", p_);
      ++processes;
    }
    if (processes + 1 > SPIN_MAX_PROCESSES) {
      out.diagnostics.push_back(sim::Diagnostic{sc_.path, {}, sim::Severity::ERROR,
                                                fmt::format("the model needs {} processes (one per host thread, one "
                                                            "device per rank with several threads, init); SPIN runs at "
                                                            "most {}", processes + 1, SPIN_MAX_PROCESSES)});
      return out;
    }
    // Bases of the arrays, now that every bound is known.
    std::string defines;
    int64_t slots = 0;
    for (uint32_t c = 0; c < comm_count_; ++c) {
      defines += fmt::format("#define {}CB{} {}\n", p_, c, slots);
      slots += comm_slots_[c];
    }
    int64_t agreed = 0;
    for (uint32_t c = 0; c < comm_count_; ++c) {
      if (comm_agreed_[c] == 0) continue;
      defines += fmt::format("#define {}AB{} {}\n", p_, c, agreed);
      agreed += comm_agreed_[c];
    }
    int64_t sends = 0;
    for (size_t k = 0; k < send_keys_.size(); ++k) {
      defines += fmt::format("#define {}SB{} {}\n", p_, k, sends);
      sends += send_keys_[k].bound;
    }
    int64_t recvs = 0;
    for (size_t k = 0; k < recv_keys_.size(); ++k) {
      defines += fmt::format("#define {}RB{} {}\n", p_, k, recvs);
      recvs += recv_keys_[k].bound;
    }
    for (int64_t n : {slots, agreed, sends, recvs, static_cast<int64_t>(sigs_.size())}) {
      if (n > MAX_ARRAY) {
        out.diagnostics.push_back(sim::Diagnostic{sc_.path, {}, sim::Severity::ERROR,
                                                  fmt::format("the model needs arrays of {} elements; the export "
                                                              "supports at most {}", n, MAX_ARRAY)});
        return out;
      }
    }
    const std::string sig_type = sigs_.size() < 255 ? "byte" : "short";
    auto dim = [](int64_t n) { return std::max<int64_t>(1, n); };
    std::string globals;
    globals += fmt::format("bit {}mismatched;  /* a mismatch was found: every wait passes, the model drains */\n", p_);
    if (opt_.stuck_as_assertion) globals += fmt::format("short {}fin;  /* ranks finished, exited or crashed */\n", p_);
    globals += fmt::format("short {}carr[{}];  /* per collective slot: members whose kernel runs */\n", p_, dim(slots));
    globals += fmt::format("{} {}csig[{}];  /* per slot: the first issuer's kind/size/dtype/root/tag */\n", sig_type, p_, dim(slots));
    globals += fmt::format("short {}cs[{}];  /* per (rank, communicator): collectives issued */\n", p_, dim(static_cast<int64_t>(rc_comm_.size())));
    if (agreed > 0) {
      globals += fmt::format("byte {}agr[{}];  /* agreed chooses: the branch taken, + 1 */\n", p_, agreed);
      globals += fmt::format("short {}ac[{}];\n", p_, dim(static_cast<int64_t>(rc_comm_.size())));
    }
    globals += fmt::format("byte {}sst[{}];  /* sends: 0 queued, 1 running, 2 done, 3 aborted */\n", p_, dim(sends));
    globals += fmt::format("{} {}ssig[{}];\nshort {}smatch[{}];  /* the receive it matched, + 1 */\n", sig_type, p_, dim(sends), p_, dim(sends));
    globals += fmt::format("byte {}rst[{}];  /* receives: as sends */\n", p_, dim(recvs));
    globals += fmt::format("{} {}rsig[{}];\nshort {}rsrc[{}], {}rmatch[{}];  /* source (-1: any); the send matched, + 1 */\n",
                           sig_type, p_, dim(recvs), p_, dim(recvs), p_, dim(recvs));
    globals += fmt::format("short {0}ns[{1}], {0}ms[{1}];  /* per (comm, src, dst): sends issued, matched */\n", p_,
                           dim(static_cast<int64_t>(send_keys_.size())));
    globals += fmt::format("short {0}nr[{1}], {0}mr[{1}];  /* per (comm, dst): receives issued, matched */\n", p_,
                           dim(static_cast<int64_t>(recv_keys_.size())));
    globals += rank_globals;

    const int64_t sig_bytes = sig_type == "byte" ? 1 : 2;
    const int64_t global_bytes = 8 + slots * (2 + sig_bytes) + agreed * 3 + sends * (3 + sig_bytes) + recvs * (5 + sig_bytes) +
                                 static_cast<int64_t>(rc_comm_.size()) * 4 +
                                 4 * static_cast<int64_t>(send_keys_.size() + recv_keys_.size());
    PromelaModel model;
    model.processes = processes;
    model.ops = ops_;
    model.vector_bytes = (global_bytes + locals_bytes + 16 * (processes + 1)) * 5 / 4 + 1024;
    model.start = starts;
    std::string text;
    if (opt_.prefix.empty()) {
      text += fmt::format("/* Generated by `lockstep export promela` from {} (scenario {}).\n", sc_.path, sc_.name);
      text += "   lockstep's semantics for this scenario (docs/spin.md): an invalid end state is a deadlock\n"
              "   or hang, an assertion violation a mismatch.\n";
      text += fmt::format("   pan.c needs -DVECTORSZ={} (an upper estimate of the state vector). */\n\n", model.vector_bytes);
    } else {
      text += fmt::format("/* model {}: {} */\n", opt_.prefix, sc_.path);
    }
    text += defines + "\n" + globals + "\n" + inlines() + "\n" + procs;
    if (opt_.prefix.empty()) text += fmt::format("init {{\n  atomic {{ {}}}\n}}\n", starts);
    model.text = std::move(text);
    out.model = std::move(model);
    return out;
  }

 private:
  using Diagnostic = sim::Diagnostic;

  void error(sim::SourceLoc loc, std::string message) {
    const auto key = std::make_pair(loc.line, loc.col);
    if (loc.line != 0 && !reported_.insert(key).second) return;  // one per statement, not per rank
    diags_.push_back(Diagnostic{sc_.path, loc, sim::Severity::ERROR, std::move(message)});
  }

  void unsupported(sim::SourceLoc loc, const std::string& what) {
    error(loc, fmt::format("export promela: {} is outside the subset SPIN models (docs/spin.md)", what));
  }

  void check_semantics() {
    const sim::Semantics defaults;
    if (sc_.semantics.comm_concurrency != 0) unsupported({}, "semantics comm_concurrency");
    if (sc_.semantics.timeout_ns != defaults.timeout_ns) {
      unsupported({}, "semantics timeout (the watchdog needs virtual time)");
    }
    if (sc_.launch.given) unsupported(sc_.launch.loc, "'launch' (process initialisation)");
  }

  std::vector<int64_t> initial_env(int32_t rank) const {
    std::vector<int64_t> env(sc_.slot_names.size(), 0);
    env[sim::Scenario::SLOT_RANK] = rank;
    env[sim::Scenario::SLOT_WORLD] = sc_.world;
    for (size_t i = 0; i < sc_.params.size(); ++i) env[sim::Scenario::FIRST_PARAM_SLOT + i] = sc_.params[i].value;
    int64_t stride = 1;
    for (const sim::MeshDim& dim : sc_.mesh) {
      if (dim.coord_slot >= 0) env[static_cast<size_t>(dim.coord_slot)] = (rank / stride) % dim.size;
      if (dim.size_slot >= 0) env[static_cast<size_t>(dim.size_slot)] = dim.size;
      stride *= dim.size;
    }
    return env;
  }

  bool may_exit(std::span<const Stmt> block, std::vector<bool>& seen) const {
    for (const Stmt& stmt : block) {
      if (stmt.kind == StmtKind::OP && (stmt.op == OpKind::EXIT || stmt.op == OpKind::CRASH)) return true;
      if (may_exit(stmt.body, seen) || may_exit(stmt.extra().else_body, seen)) return true;
      for (const sim::Branch& branch : stmt.branches) {
        if (may_exit(branch.body, seen)) return true;
      }
      if (stmt.kind == StmtKind::CALL && !seen[stmt.extra().callee]) {
        seen[stmt.extra().callee] = true;
        if (may_exit(sc_.defines[stmt.extra().callee].body, seen)) return true;
      }
    }
    return false;
  }

  std::optional<int64_t> eval(Walk& w, const sim::Expr& expr) {
    try {
      return sim::eval_expr(expr, w.env);
    } catch (const sim::EvalError& e) {
      error(e.loc, fmt::format("{} (on rank {})", e.what(), w.rank));
      return std::nullopt;
    }
  }

  void line(Walk& w, const std::string& text) {
    w.code.append(static_cast<size_t>(2 * w.depth), ' ');
    w.code += text;
    w.code += '\n';
  }

  int rc_index(int32_t rank, uint32_t comm) {
    auto [it, added] = rc_.try_emplace({rank, comm}, static_cast<int>(rc_comm_.size()));
    if (added) rc_comm_.push_back(comm);
    return it->second;
  }

  int recv_key(uint32_t comm, int32_t dst) {
    auto [it, added] = recv_index_.try_emplace({comm, dst}, static_cast<int>(recv_keys_.size()));
    if (added) recv_keys_.push_back(RecvKey{comm, dst, 0, false, {}});
    return it->second;
  }

  int send_key(uint32_t comm, int32_t src, int32_t dst) {
    auto [it, added] = send_index_.try_emplace({comm, src, dst}, static_cast<int>(send_keys_.size()));
    if (added) {
      const int rk = recv_key(comm, dst);
      send_keys_.push_back(SendKey{comm, src, dst, rk, 0});
      recv_keys_[static_cast<size_t>(rk)].send_keys.push_back(it->second);
    }
    return it->second;
  }

  int sig(const std::string& key) {
    auto [it, added] = sigs_.try_emplace(key, static_cast<int>(sigs_.size()) + 1);
    return it->second;
  }

  static void bump(std::map<int, int64_t>& path, std::map<int, int64_t>& max, int key, int64_t by = 1) {
    const int64_t v = path[key] += by;
    max[key] = std::max(max[key], v);
  }

  void queue_entries(Walk& w, int64_t n) {
    w.path.queued += n;
    w.max.queued = std::max(w.max.queued, w.path.queued);
    w.kernels = std::max(w.kernels, w.path.queued);
  }

  // One issued communication op: the statements that record it (no d_step around them).
  // Leaves the collective slot in `sl`. False when the op cannot be issued (a diagnostic).
  bool issue(Walk& w, const Stmt& stmt, std::string& code, std::string* describe = nullptr) {
    if (!sim::op_info(stmt.op).promela) {
      unsupported(stmt.loc, fmt::format("'{}'", sim::op_kind_name(stmt.op)));
      return false;
    }
    const sim::GroupDef& group = sc_.groups[stmt.group];
    const std::vector<int32_t>* members = group.comm_for(w.rank);
    if (members == nullptr) {
      error(stmt.loc, fmt::format("rank {} issues {} on group '{}' but is not a member of it", w.rank,
                                  sim::op_kind_name(stmt.op), group.name));
      return false;
    }
    if (group.from_new_group) {
      unsupported(stmt.loc, "a group made by new_group");
      return false;
    }
    if (!stmt.handle.empty()) {
      unsupported(stmt.loc, "'async' (a handle waited for later)");
      return false;
    }
    const uint32_t comm = comm_base_[stmt.group] + static_cast<uint32_t>(group.comm_of_rank[static_cast<size_t>(w.rank)]);
    const std::optional<int64_t> size = eval(w, stmt.size);
    if (!size) return false;
    const std::string tag = stmt.tag.str();
    auto in_comm = [&](int64_t r) { return std::binary_search(members->begin(), members->end(), static_cast<int32_t>(r)); };
    auto check_rank = [&](const sim::Expr& expr, int64_t value, std::string_view role) {
      if (value < 0 || value >= sc_.world || !in_comm(value)) {
        error(expr.loc, fmt::format("{} {} is not a member of group '{}' (on rank {})", role, value, group.name, w.rank));
        return false;
      }
      return true;
    };
    const std::string where = sc_.location(stmt.loc);
    ++ops_;
    if (sim::is_collective(stmt.op)) {
      int64_t root = -1;
      if (stmt.has_root) {
        const std::optional<int64_t> value = eval(w, stmt.extra().root);
        if (!value || !check_rank(stmt.extra().root, *value, "root")) return false;
        root = *value;
      }
      const int s = sig(fmt::format("{}|{}|{}|{}|{}", sim::op_kind_name(stmt.op), *size, sim::dtype_name(stmt.dtype), root, tag));
      const int rc = rc_index(w.rank, comm);
      bump(w.path.cs, w.max.cs, rc);
      if (describe) *describe = fmt::format("{} {}B on {} ({})", sim::op_kind_name(stmt.op), *size, group.name, where);
      code += fmt::format("/* {} {}B on {} ({}) */ ", sim::op_kind_name(stmt.op), *size, group.name, where);
      code += fmt::format("sl = {0}CB{1} + {0}cs[{2}]; {0}cs[{2}] = {0}cs[{2}] + 1; "
                          "if :: {0}csig[sl] == 0 -> {0}csig[sl] = {3} :: {0}csig[sl] == {3} -> skip :: else -> {0}mismatch() fi; "
                          "{4}!{5},sl,{6}; ",
                          p_, comm, rc, s, w.queue, K_COLL, members->size());
      return true;
    }
    // Point to point.
    const int s = sig(fmt::format("p2p|{}|{}|{}", *size, sim::dtype_name(stmt.dtype), tag));
    if (stmt.op == OpKind::SEND) {
      const std::optional<int64_t> peer = eval(w, stmt.peer);
      if (!peer || !check_rank(stmt.peer, *peer, "destination")) return false;
      if (*peer == w.rank) {
        error(stmt.peer.loc, fmt::format("rank {} sends to itself", w.rank));
        return false;
      }
      const int k = send_key(comm, w.rank, static_cast<int32_t>(*peer));
      bump(w.path.sends, w.max.sends, k);
      const bool eager = sc_.semantics.sends_eagerly(*size);
      code += fmt::format("/* send {}B to {} on {} ({}) */ ", *size, *peer, group.name, where);
      code += fmt::format("sl = {0}SB{1} + {0}ns[{1}]; {0}ns[{1}] = {0}ns[{1}] + 1; {0}ssig[sl] = {2}; {3}!{4},sl,{5}; "
                          "{0}match{6}(); ",
                          p_, k, s, w.queue, K_SEND, eager ? 1 : 0, send_keys_[static_cast<size_t>(k)].recv_key);
      return true;
    }
    int64_t src = -1;
    if (!stmt.peer_any) {
      const std::optional<int64_t> peer = eval(w, stmt.peer);
      if (!peer || !check_rank(stmt.peer, *peer, "source")) return false;
      if (*peer == w.rank) {
        error(stmt.peer.loc, fmt::format("rank {} receives from itself", w.rank));
        return false;
      }
      src = *peer;
    }
    const int k = recv_key(comm, w.rank);
    if (src < 0) recv_keys_[static_cast<size_t>(k)].wildcard = true;
    bump(w.path.recvs, w.max.recvs, k);
    code += fmt::format("/* recv {}B from {} on {} ({}) */ ", *size, src < 0 ? std::string("any") : std::to_string(src),
                        group.name, where);
    code += fmt::format("sl = {0}RB{1} + {0}nr[{1}]; {0}nr[{1}] = {0}nr[{1}] + 1; {0}rsrc[sl] = {2}; {0}rsig[sl] = {3}; "
                        "{4}!{5},sl,0; {0}match{1}(); ",
                        p_, k, src, s, w.queue, K_RECV);
    return true;
  }

  std::string kiss(const Walk& w, int64_t n = 1) const {
    return w.multi ? fmt::format("{0}kiss{1} = {0}kiss{1} + {2}; ", p_, w.rank, n) : std::string();
  }

  // A host thread waits for every kernel its rank issued so far (sync, thread end).
  void wait_all(Walk& w) {
    if (!w.multi) {
      line(w, fmt::format("{}drain();", p_));
      w.path.queued = 0;
      return;
    }
    line(w, fmt::format("atomic {{ tgt = {0}kiss{1}{2} }};", p_, w.rank, w.gated ? fmt::format("; {0}blk{1}++", p_, w.rank) : ""));
    line(w, fmt::format("({0}kdone{1} >= tgt || {0}mismatched);", p_, w.rank));
    line(w, fmt::format("d_step {{ tgt = 0{} }};", w.gated ? fmt::format("; {0}blk{1}--", p_, w.rank) : ""));
  }

  void thread_end(Walk& w) {
    line(w, fmt::format("atomic {{ tgt = {0}kiss{1}{2} }};", p_, w.rank, w.gated ? fmt::format("; {0}blk{1}++", p_, w.rank) : ""));
    line(w, fmt::format("({0}kdone{1} >= tgt || {0}mismatched);", p_, w.rank));
    std::string done = fmt::format("tgt = 0; {0}live{1} = {0}live{1} - 1", p_, w.rank);
    if (w.gated) done += fmt::format("; {0}blk{1}--", p_, w.rank);
    if (opt_.stuck_as_assertion) done += fmt::format("; if :: {0}live{1} == 0 -> {0}fin = {0}fin + 1 :: else -> skip fi", p_, w.rank);
    line(w, fmt::format("d_step {{ {} }}", done));
  }

  void op(Walk& w, const Stmt& stmt, bool& alive) {
    switch (stmt.op) {
      case OpKind::COMPUTE:
      case OpKind::SLEEP:
        return;  // always complete; only `run` and the watchdog read time
      case OpKind::SYNC:
        if (!stmt.stream.empty()) {
          unsupported(stmt.loc, "'sync' on one stream");
          return;
        }
        ++ops_;
        wait_all(w);
        return;
      case OpKind::WAIT:
        unsupported(stmt.loc, "'wait' (async handles)");
        return;
      case OpKind::NEW_GROUP:
        unsupported(stmt.loc, "'new_group'");
        return;
      case OpKind::EXIT:
      case OpKind::CRASH: {
        ++ops_;
        const std::string what = fmt::format("/* {} ({}) */ ", sim::op_kind_name(stmt.op), sc_.location(stmt.loc));
        std::string body = fmt::format("{}{}abort_{}();", what, p_, w.kernels_of);
        if (w.multi) body += fmt::format(" {0}dead{1} = 1;", p_, w.rank);
        if (opt_.stuck_as_assertion) body += fmt::format(" {0}fin = {0}fin + 1;", p_);
        line(w, fmt::format("d_step {{ {} }};", body));
        line(w, "goto out;");
        alive = false;
        return;
      }
      default:
        if (!sim::is_collective(stmt.op) && !sim::is_p2p(stmt.op)) {
          unsupported(stmt.loc, fmt::format("'{}'", sim::op_kind_name(stmt.op)));
          return;
        }
        break;
    }
    std::string code;
    if (!issue(w, stmt, code)) return;
    queue_entries(w, 1);
    line(w, fmt::format("d_step {{ {}{}}};", code, kiss(w)));
    if (stmt.op == OpKind::BARRIER) {
      // The host waits for the barrier (ProcessGroupNCCL: an all-reduce, then a host wait).
      if (!w.multi) {
        line(w, fmt::format("{}drain();", p_));
        w.path.queued = 0;
      } else {
        if (w.gated) line(w, fmt::format("d_step {{ {0}blk{1}++ }};", p_, w.rank));
        line(w, fmt::format("({0}carr[sl] == {1} || {0}mismatched);", p_, sc_.groups[stmt.group].comm_for(w.rank)->size()));
        line(w, fmt::format("d_step {{ sl = 0{} }};", w.gated ? fmt::format("; {0}blk{1}--", p_, w.rank) : ""));
      }
    }
  }

  void nccl_group(Walk& w, const Stmt& stmt) {
    std::string code;
    int n = 0;
    for (const Stmt& child : stmt.body) {
      if (child.kind != StmtKind::OP || !(sim::is_collective(child.op) || sim::is_p2p(child.op))) {
        unsupported(child.loc, "an NCCL group member that is not a collective or point-to-point op");
        return;
      }
      std::string one;
      if (!issue(w, child, one)) return;
      code += one;
      ++n;
    }
    if (n == 0) return;
    max_group_ = std::max(max_group_, n);
    queue_entries(w, n + 1);
    line(w, fmt::format("d_step {{ /* NCCL group ({}) */ {}!{},0,{}; {}{}}};", sc_.location(stmt.loc), w.queue, K_GROUP, n,
                        code, kiss(w)));
  }

  void choose(Walk& w, const Stmt& stmt, bool& alive) {
    const size_t count = stmt.branches.size();
    if (stmt.agreed) {
      const sim::GroupDef& group = sc_.groups[stmt.group];
      if (group.comm_for(w.rank) == nullptr) {
        error(stmt.loc, fmt::format("rank {} reaches a choice agreed on group '{}' but is not a member of it", w.rank, group.name));
        return;
      }
      const uint32_t comm = comm_base_[stmt.group] + static_cast<uint32_t>(group.comm_of_rank[static_cast<size_t>(w.rank)]);
      const int rc = rc_index(w.rank, comm);
      bump(w.path.ac, w.max.ac, rc);
      std::string pick;
      for (size_t b = 0; b < count; ++b) pick += fmt::format(":: br = {} ", b + 1);
      line(w, fmt::format("atomic {{ /* choose agreed on {} ({}) */ sl = {}AB{} + {}ac[{}]; {}ac[{}] = {}ac[{}] + 1; "
                          "if :: {}agr[sl] == 0 -> if {}fi; {}agr[sl] = br :: else -> br = {}agr[sl] fi; sl = 0 }};",
                          group.name, sc_.location(stmt.loc), p_, comm, p_, rc, p_, rc, p_, rc, p_, pick, p_, p_));
    } else {
      line(w, fmt::format("/* choose ({}) */", sc_.location(stmt.loc)));
    }
    line(w, "if");
    const Counts before = w.path;
    const std::vector<int64_t> env = w.env;
    Counts after;
    bool any_alive = false;
    for (size_t b = 0; b < count; ++b) {
      w.path = before;
      w.env = env;
      line(w, stmt.agreed ? fmt::format(":: br == {} -> br = 0; /* {} */", b + 1, stmt.branches[b].label)
                          : fmt::format(":: skip; /* {} */", stmt.branches[b].label));
      ++w.depth;
      const bool branch_alive = walk_block(w, stmt.branches[b].body);
      --w.depth;
      if (branch_alive) {
        any_alive = true;
        after.max_with(w.path);
      }
    }
    line(w, "fi;");
    w.env = env;
    w.path = any_alive ? after : before;
    alive = any_alive;
  }

  // Returns false when every path through the block ends the thread (exit, crash).
  bool walk_block(Walk& w, std::span<const Stmt> block) {
    for (const Stmt& stmt : block) {
      if (!diags_.empty() && diags_.size() >= 64) return false;
      if (ops_ > opt_.max_ops) {
        error({}, fmt::format("the model would expand more than {} operations", opt_.max_ops));
        return false;
      }
      bool alive = true;
      switch (stmt.kind) {
        case StmtKind::OP:
          op(w, stmt, alive);
          break;
        case StmtKind::NCCL_GROUP:
          nccl_group(w, stmt);
          break;
        case StmtKind::REPEAT: {
          const std::optional<int64_t> count = eval(w, stmt.extra().count);
          if (!count) return false;
          if (*count < 0) {
            error(stmt.extra().count.loc, fmt::format("repeat count {} is negative (on rank {})", *count, w.rank));
            return false;
          }
          for (int64_t i = 0; i < *count && alive; ++i) {
            if (stmt.extra().var_slot >= 0) w.env[static_cast<size_t>(stmt.extra().var_slot)] = i;
            alive = walk_block(w, stmt.body);
            if (ops_ > opt_.max_ops) return false;
          }
          break;
        }
        case StmtKind::IF: {
          const std::optional<int64_t> cond = eval(w, stmt.extra().cond);
          if (!cond) return false;
          alive = walk_block(w, *cond != 0 ? stmt.body : stmt.extra().else_body);
          break;
        }
        case StmtKind::CHOOSE:
          choose(w, stmt, alive);
          break;
        case StmtKind::CALL: {
          const sim::Define& define = sc_.defines.at(stmt.extra().callee);
          if (w.call_depth >= 128) {
            error(stmt.loc, fmt::format("call of '{}' exceeds the limit of 128 nested calls (on rank {})", define.name, w.rank));
            return false;
          }
          std::vector<int64_t> args;
          for (const sim::Expr& arg : stmt.extra().args) {
            const std::optional<int64_t> value = eval(w, arg);
            if (!value) return false;
            args.push_back(*value);
          }
          const std::vector<int64_t> saved = w.env;
          for (size_t i = 0; i < args.size() && i < define.param_slots.size(); ++i) {
            w.env[static_cast<size_t>(define.param_slots[i])] = args[i];
          }
          ++w.call_depth;
          alive = walk_block(w, define.body);
          --w.call_depth;
          w.env = saved;
          break;
        }
      }
      if (!alive) return false;
    }
    return true;
  }

  std::string locals(bool single, int64_t queue) const {
    std::string out;
    if (single) out += fmt::format("  chan q = [{}] of {{ byte, short, short }};\n", std::max<int64_t>(1, queue));
    out += "  byte t, gi, br; short id, n, sl, tgt;\n";
    if (single) out += fmt::format("  byte gc; byte gt[{0}]; short gid[{0}], gn[{0}];\n", max_group_);
    return out;
  }

  std::string single_proctype(Walk& w, const std::string& thread) const {
    return fmt::format("proctype {}r{}_0() {{  /* rank {}, thread {} */\n{}  atomic {{\n{}  }};\nout: skip\n}}\n\n", p_,
                       w.rank, w.rank, thread, locals(true, w.max.queued), w.code);
  }

  std::string thread_proctype(Walk& w, size_t t, const std::string& thread) const {
    std::string body = w.code;
    if (w.gated) {
      body = fmt::format("  {{\n{}  }} unless {{ {}dead{} }};\n", w.code, p_, w.rank);
    }
    return fmt::format("proctype {}r{}_{}() {{  /* rank {}, thread {} */\n{}{}out: skip\n}}\n\n", p_, w.rank, t, w.rank, thread,
                       locals(false, 0), body);
  }

  // The GPU side of a rank with several host threads: its kernels, in issue order.
  std::string device_proctype(int32_t r, bool gated) const {
    std::string out = fmt::format("proctype {}dev{}() {{  /* rank {}: its kernels in issue order */\n", p_, r, r);
    out += "  byte t, gi; short id, n;\n";
    if (!gated) out += fmt::format("  byte gc; byte gt[{0}]; short gid[{0}], gn[{0}];\n", max_group_);
    // A rank's kernel starts as soon as it may (lockstep's progress is eager), except that while
    // a rank that may exit has one host thread left and it is not blocked, that thread issues
    // its next ops first (lockstep runs a lone thread in one burst).
    const std::string gate = gated ? fmt::format(" && ({0}live{1} != 1 || {0}blk{1} > 0)", p_, r) : "";
    std::string loop = fmt::format("end: do\n  :: atomic {{ nempty({0}q{1}){2} -> {0}q{1}?t,id,n; {0}runk_r{1}(); {0}kdone{1} = {0}kdone{1} + 1 }}\n  od\n",
                                   p_, r, gate);
    if (gated) loop = fmt::format("  {{\n{}  }} unless {{ {}dead{} }}\n", loop, p_, r);
    out += loop + "}\n\n";
    return out;
  }

  // Wildcard receives take a sent message (a send that started, or was aborted) when they run.
  std::string matcher_proctype() const {
    std::string out = fmt::format("proctype {}matcher() {{  /* wildcard receives: every choice of sender */\nend: do\n", p_);
    for (size_t k = 0; k < recv_keys_.size(); ++k) {
      const RecvKey& key = recv_keys_[k];
      if (!key.wildcard) continue;
      for (int s : key.send_keys) {
        const std::string head = fmt::format("{}RB{} + {}mr[{}]", p_, k, p_, k);
        const std::string send = fmt::format("{}SB{} + {}ms[{}]", p_, s, p_, s);
        out += fmt::format("  :: d_step {{ {0}mr[{1}] < {0}nr[{1}] && {0}rsrc[{2}] == -1 && {0}rst[{2}] == 1 && "
                           "{0}ms[{3}] < {0}ns[{3}] && {0}sst[{4}] != 0 -> /* rank {5} takes rank {6}'s send */\n"
                           "       {0}pair({4}, {2}); {0}ms[{3}] = {0}ms[{3}] + 1; {0}mr[{1}] = {0}mr[{1}] + 1; {0}match{1}(); skip }}\n",
                           p_, k, head, s, send, key.dst, send_keys_[static_cast<size_t>(s)].src);
      }
    }
    out += "  od\n}\n\n";
    return out;
  }


  // The inlines that run a kernel taken from a queue, and that abort a rank's kernels, over the
  // given names (Promela's inline takes no arrays as arguments).
  std::string kernel_inlines(const std::string& suffix, const std::string& q, const std::string& gt, const std::string& gid,
                             const std::string& gn, const std::string& gc) const {
    return fmt::format(
        "/* Runs the kernel just taken from {1} (t, id, n): its ops start together, then complete. */\n"
        "inline {0}runk_{6}() {{\n"
        "  d_step {{\n"
        "    if\n"
        "    :: t == 4 -> {5} = n; gi = 0; do :: gi < {5} -> {1}?{2}[gi],{3}[gi],{4}[gi]; gi++ :: else -> break od\n"
        "    :: else -> {5} = 1; {2}[0] = t; {3}[0] = id; {4}[0] = n\n"
        "    fi;\n"
        "    gi = 0; do :: gi < {5} -> {0}start({2}[gi], {3}[gi], {4}[gi]); gi++ :: else -> break od; gi = 0\n"
        "  }};\n"
        "  do :: gi < {5} -> ({0}isdone({2}[gi], {3}[gi], {4}[gi]) || {0}mismatched); gi++ :: else -> break od;\n"
        "  skip;  /* SPIN: a loop must not exit straight into a d_step */\n"
        "  d_step {{ gi = 0; do :: gi < {5} -> {2}[gi] = 0; {3}[gi] = 0; {4}[gi] = 0; gi++ :: else -> break od; gi = 0; {5} = 0; t = 0; id = 0; n = 0 }}\n"
        "}}\n\n"
        "/* exit or crash: running ops never complete (a collective loses a member), queued ones are\n"
        "   aborted. */\n"
        "inline {0}abort_{6}() {{\n"
        "  gi = 0;\n"
        "  do\n"
        "  :: gi < {5} ->\n"
        "     if\n"
        "     :: {2}[gi] == 1 && {0}carr[{3}[gi]] < {4}[gi] -> {0}carr[{3}[gi]] = {0}carr[{3}[gi]] - 1\n"
        "     :: {2}[gi] == 2 && {0}sst[{3}[gi]] != 2 -> {0}sst[{3}[gi]] = 3\n"
        "     :: {2}[gi] == 3 && {0}rst[{3}[gi]] != 2 -> {0}rst[{3}[gi]] = 3\n"
        "     :: else -> skip\n"
        "     fi;\n"
        "     gi++\n"
        "  :: else -> break\n"
        "  od;\n"
        "  gi = 0;\n"
        "  do\n"
        "  :: nempty({1}) -> {1}?t,id,n; if :: t == 2 -> {0}sst[id] = 3 :: t == 3 -> {0}rst[id] = 3 :: else -> skip fi\n"
        "  :: empty({1}) -> break\n"
        "  od;\n"
        "  t = 0; id = 0; n = 0\n"
        "}}\n\n",
        p_, q, gt, gid, gn, gc, suffix);
  }

  std::string inlines() const {
    std::string out;
    const std::string& P = p_;
    out += fmt::format("inline {0}mismatch() {{ {0}mismatched = 1; assert(!{0}mismatched) }}\n\n", P);
    out += fmt::format(
        "/* A matched send s and receive r complete: an eager send once it started, a rendezvous pair\n"
        "   once both run. */\n"
        "inline {0}complete(s, r) {{\n"
        "  if\n"
        "  :: {0}rst[r] == 1 && {0}sst[s] == 2 -> {0}rst[r] = 2\n"
        "  :: {0}rst[r] == 1 && {0}sst[s] == 1 -> {0}sst[s] = 2; {0}rst[r] = 2\n"
        "  :: else -> skip\n"
        "  fi\n"
        "}}\n\n"
        "inline {0}pair(s, r) {{\n"
        "  {0}smatch[s] = r + 1; {0}rmatch[r] = s + 1;\n"
        "  if :: {0}ssig[s] != {0}rsig[r] -> {0}mismatch() :: else -> {0}complete(s, r) fi\n"
        "}}\n\n"
        "inline {0}start(tt, ii, nn) {{\n"
        "  if\n"
        "  :: tt == 1 -> {0}carr[ii] = {0}carr[ii] + 1\n"
        "  :: tt == 2 -> if :: nn -> {0}sst[ii] = 2 :: else -> {0}sst[ii] = 1 fi;\n"
        "     if :: {0}smatch[ii] > 0 -> {0}complete(ii, {0}smatch[ii] - 1) :: else -> skip fi\n"
        "  :: tt == 3 -> {0}rst[ii] = 1;\n"
        "     if :: {0}rmatch[ii] > 0 -> {0}complete({0}rmatch[ii] - 1, ii) :: else -> skip fi\n"
        "  fi\n"
        "}}\n\n"
        "#define {0}isdone(tt, ii, nn) ((tt == 1 && {0}carr[ii] == nn) || (tt == 2 && {0}sst[ii] == 2) || (tt == 3 && {0}rst[ii] == 2))\n\n"
        "/* One host thread: run what it queued, in order. */\n"
        "inline {0}drain() {{\n"
        "  do\n"
        "  :: nempty(q) -> q?t,id,n; {0}runk_l()\n"
        "  :: empty(q) -> break\n"
        "  od;\n"
        "  skip\n"
        "}}\n\n",
        P);
    out += kernel_inlines("l", "q", "gt", "gid", "gn", "gc");
    for (const auto& [r, gated] : multi_ranks_) {
      const std::string q = fmt::format("{}q{}", P, r);
      if (gated) {
        out += kernel_inlines(fmt::format("r{}", r), q, fmt::format("{}gt{}", P, r), fmt::format("{}gid{}", P, r),
                              fmt::format("{}gn{}", P, r), fmt::format("{}gc{}", P, r));
      } else {
        out += kernel_inlines(fmt::format("r{}", r), q, "gt", "gid", "gn", "gc");
      }
    }
    // Per (comm, dst): receives match in issue order; a named one takes the oldest unmatched send
    // of its source; a wildcard at the head waits for the matcher.
    for (size_t k = 0; k < recv_keys_.size(); ++k) {
      const RecvKey& key = recv_keys_[k];
      out += fmt::format("inline {}match{}() {{  /* receives of rank {} */\n  do\n", P, k, key.dst);
      for (int s : key.send_keys) {
        out += fmt::format("  :: {0}mr[{1}] < {0}nr[{1}] && {0}rsrc[{0}RB{1} + {0}mr[{1}]] == {2} && {0}ms[{3}] < {0}ns[{3}] ->\n"
                           "     {0}pair({0}SB{3} + {0}ms[{3}], {0}RB{1} + {0}mr[{1}]); {0}ms[{3}] = {0}ms[{3}] + 1; "
                           "{0}mr[{1}] = {0}mr[{1}] + 1\n",
                           P, k, send_keys_[static_cast<size_t>(s)].src, s);
      }
      out += "  :: else -> break\n  od\n}\n\n";
    }
    return out;
  }

  const sim::Scenario& sc_;
  PromelaOptions opt_;
  std::string p_;
  std::vector<Diagnostic> diags_;
  std::set<std::pair<uint32_t, uint32_t>> reported_;
  std::vector<uint32_t> comm_base_;
  uint32_t comm_count_ = 0;
  std::vector<int64_t> comm_slots_;   // per communicator: collective slots
  std::vector<int64_t> comm_agreed_;  // per communicator: agreed chooses
  std::map<std::pair<int32_t, uint32_t>, int> rc_;
  std::vector<uint32_t> rc_comm_;
  std::map<std::tuple<uint32_t, int32_t, int32_t>, int> send_index_;
  std::vector<SendKey> send_keys_;
  std::map<std::pair<uint32_t, int32_t>, int> recv_index_;
  std::vector<RecvKey> recv_keys_;
  std::map<std::string, int> sigs_;
  int max_group_ = 1;
  int64_t ops_ = 0;
  std::vector<std::pair<int32_t, bool>> multi_ranks_;  // ranks with several threads; may exit
};

}  // namespace

PromelaExport export_promela(const sim::Scenario& scenario, const PromelaOptions& options) {
  return Exporter(scenario, options).run();
}

std::string promela_batch(const std::vector<PromelaModel>& models) {
  std::string out = "/* Generated by lockstep: several models, one of which init starts. */\n\n";
  for (const PromelaModel& model : models) out += model.text + "\n";
  out += "init {\n  atomic {\n    if\n";
  for (const PromelaModel& model : models) out += fmt::format("    :: {}\n", model.start);
  out += "    fi\n  }\n}\n";
  return out;
}

int export_command(const ExportOptions& options, std::ostream& out, std::ostream& err) {
  const std::string& input = options.input;
  const std::string& output = options.output;
  const std::vector<sim::ParamOverride>& overrides = options.overrides;
  sim::LoadResult loaded = std::filesystem::path(input).extension() == ".jsonl" ? sim::load_trace_file(input, overrides)
                                                                                 : sim::load_scenario_file(input, overrides);
  for (const sim::Diagnostic& d : loaded.diagnostics) err << sim::format_diagnostic(d, loaded.text);
  if (!loaded.ok()) return 2;
  const PromelaExport exported = export_promela(*loaded.scenario);
  if (!exported.model) {
    for (const sim::Diagnostic& d : exported.diagnostics) err << sim::format_diagnostic(d, loaded.scenario->text);
    return 2;
  }
  if (const std::string problem = sim::write_output_file(output, exported.model->text); !problem.empty()) {
    err << fmt::format("{}: error: cannot write file: {}\n", output, problem);
    return 2;
  }
  out << fmt::format("{}: {} processes, {} ops; compile pan.c with -DVECTORSZ={}\n", output, exported.model->processes,
                     exported.model->ops, exported.model->vector_bytes);
  return 0;
}

}  // namespace lockstep::exporter
