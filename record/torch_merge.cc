#include "record/torch_merge.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "record/recordings.h"
#include "sim/trace_format.h"

namespace lockstep::record {

namespace {

using nlohmann::json;

constexpr int64_t FORMAT_VERSION = 1;

// One record of a rank's file, every field it may have.
struct Rec {
  int line = 0;
  uint64_t seq = 0;
  std::string thread;
  std::string call;
  // an operation
  std::optional<sim::OpKind> op;  // none: not an operation; a group is `is_group`
  bool is_group = false;
  int64_t group = 0;                 // 0 world, K the K-th new_group, -1 named by group_ranks
  std::vector<int32_t> group_ranks;  // group -1
  int64_t size = 0;
  std::optional<sim::DType> dtype;
  int64_t root = -1;
  int64_t peer = -1;
  bool peer_any = false;
  int64_t handle = 0;
  bool payload = false;  // the data-dependent payload of an object collective under --fake
  std::vector<int64_t> send_splits, recv_splits;  // all_to_all_single: bytes to and from each member
  std::vector<Rec> ops;  // a group's operations
  std::string source, function;
  // init_process_group, initialized
  std::string backend;
  int64_t world_size = -1, rank = -1;
  // new_group
  std::optional<std::vector<int32_t>> ranks;  // none: every rank
  bool local = false;
  std::string desc;
  // raised, uncaught, thread_error, unrecorded
  uint64_t of = 0;
  std::string type, message, of_call;
  bool peer_failure = false;
};

struct Process {
  std::string file;
  int64_t pid = 0;
  int64_t env_rank = -1, env_world_size = -1;
  std::string mode;
  std::vector<Rec> recs;
};

class Reader {
 public:
  Reader(const json& j, std::string& problem) : j_(j), problem_(problem) {}

  bool has(const char* key) const { return j_.contains(key); }

  int64_t integer(const char* key, bool required, int64_t fallback = 0) {
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail(fmt::format("missing \"{}\"", key));
      return fallback;
    }
    if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX})) {
      fail(fmt::format("\"{}\" must be an integer", key));
      return fallback;
    }
    return it->get<int64_t>();
  }

  std::string text(const char* key, bool required) {
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail(fmt::format("missing \"{}\"", key));
      return "";
    }
    if (!it->is_string()) {
      fail(fmt::format("\"{}\" must be a string", key));
      return "";
    }
    return it->get<std::string>();
  }

  bool boolean(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end()) return false;
    if (!it->is_boolean()) {
      fail(fmt::format("\"{}\" must be true or false", key));
      return false;
    }
    return it->get<bool>();
  }

  // A list of ranks (each 0 <= r < 2^31), or none when the key holds null or is absent.
  std::optional<std::vector<int32_t>> ranks(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return std::nullopt;
    std::vector<int32_t> out;
    if (!it->is_array()) {
      fail(fmt::format("\"{}\" must be a list of ranks", key));
      return out;
    }
    for (const json& r : *it) {
      if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > INT32_MAX) {
        fail(fmt::format("\"{}\" must be a list of ranks", key));
        return out;
      }
      out.push_back(static_cast<int32_t>(r.get<int64_t>()));
    }
    std::sort(out.begin(), out.end());
    if (std::adjacent_find(out.begin(), out.end()) != out.end()) fail(fmt::format("\"{}\" lists a rank twice", key));
    return out;
  }

  void fail(const std::string& what) {
    if (problem_.empty()) problem_ = what;
  }

 private:
  const json& j_;
  std::string& problem_;
};

std::optional<sim::OpKind> op_of(const std::string& name) {
  const sim::OpInfo* op = sim::find_op_named(name);
  if (op == nullptr || op->op_class == sim::OpClass::HOST) return std::nullopt;
  return op->kind;
}

// The fields of an operation (a record, or one op of a group's "ops").
void read_op(const json& j, Rec& r, Reader& in, bool in_group) {
  const std::string op = in.text("op", true);
  r.group = in.integer("group", true);
  if (r.group < -1) in.fail("\"group\" must be -1 or more");
  if (r.group == -1) r.group_ranks = in.ranks("group_ranks").value_or(std::vector<int32_t>{});
  if (op == "group" && !in_group) {
    r.is_group = true;
    auto it = j.find("ops");
    if (it == j.end() || !it->is_array()) {
      in.fail("missing \"ops\" (a list of operations)");
      return;
    }
    for (const json& sub : *it) {
      Rec s;
      if (!sub.is_object()) {
        in.fail("an op of \"ops\" is not a JSON object");
        return;
      }
      std::string problem;
      Reader reader(sub, problem);
      read_op(sub, s, reader, true);
      if (!problem.empty()) {
        in.fail("in \"ops\": " + problem);
        return;
      }
      r.ops.push_back(std::move(s));
    }
    return;
  }
  r.op = op_of(op);
  if (!r.op) {
    in.fail(fmt::format("unknown op \"{}\"", op));
    return;
  }
  if (*r.op != sim::OpKind::BARRIER) {
    r.size = in.integer("size", true);
    if (r.size < 0 || r.size > (int64_t{1} << 56)) in.fail("\"size\" is out of range");
  }
  if (in.has("dtype")) {
    const std::string name = in.text("dtype", true);
    r.dtype = sim::parse_dtype(name);
    if (!r.dtype) in.fail(fmt::format("unknown dtype \"{}\"", name));
  }
  if (sim::has_root(*r.op)) {
    r.root = in.integer("root", true, -1);
    if (r.root < 0 || r.root > INT32_MAX) in.fail("\"root\" is not a rank");
  }
  if (sim::has_splits(*r.op)) {
    for (const auto& [key, out] : {std::pair{"send_splits", &r.send_splits}, std::pair{"recv_splits", &r.recv_splits}}) {
      if (out == &r.send_splits && !sim::lists_sends(*r.op)) continue;
      auto it = j.find(key);
      if (it == j.end() || !it->is_array()) {
        in.fail(fmt::format("missing \"{}\" (a list of sizes)", key));
        return;
      }
      for (const json& bytes : *it) {
        if (!bytes.is_number_integer() || bytes.get<int64_t>() < 0 || bytes.get<int64_t>() > (int64_t{1} << 56)) {
          in.fail(fmt::format("\"{}\" holds a size out of range", key));
          return;
        }
        out->push_back(bytes.get<int64_t>());
      }
    }
  }
  if (sim::is_p2p(*r.op)) {
    auto it = j.find("peer");
    if (it != j.end() && it->is_string() && it->get<std::string>() == "any" && *r.op == sim::OpKind::RECV) {
      r.peer_any = true;
    } else {
      r.peer = in.integer("peer", true, -1);
      if (r.peer < 0 || r.peer > INT32_MAX) in.fail("\"peer\" is not a rank (or \"any\" for a recv)");
    }
  }
  r.payload = in.boolean("payload");
}

// Reads one record. "" when fine, else what is wrong.
std::string read_record(const json& j, Rec& r) {
  if (!j.is_object()) return "a record is a JSON object";
  std::string problem;
  Reader in(j, problem);
  const int64_t seq = in.integer("seq", true);
  if (problem.empty() && seq < 1) return "\"seq\" must be at least 1";
  r.seq = static_cast<uint64_t>(seq);
  r.thread = in.text("thread", true);
  r.call = in.text("call", true);
  if (!problem.empty()) return problem;
  if (r.thread.empty()) return "\"thread\" is empty";
  r.source = in.text("source", false);
  r.function = in.text("function", false);
  if (r.call == "init_process_group" || r.call == "initialized") {
    r.backend = in.text("backend", false);
    r.world_size = in.integer("world_size", true);
    r.rank = in.integer("rank", true);
  } else if (r.call == "new_group") {
    r.group = in.integer("group", true);
    if (problem.empty() && r.group < 1) return "\"group\" of a new_group must be at least 1";
    r.ranks = in.ranks("ranks");
    if (r.ranks && r.ranks->empty()) in.fail("\"ranks\" is empty");
    r.local = in.boolean("local");
    r.desc = in.text("desc", false);
  } else if (r.call == "wait") {
    r.handle = in.integer("handle", true);
  } else if (r.call == "raised" || r.call == "uncaught") {
    r.of = static_cast<uint64_t>(std::max<int64_t>(in.integer(r.call == "raised" ? "of" : "in_call", false), 0));
    r.type = in.text("type", true);
    r.message = in.text("message", false);
    r.peer_failure = in.boolean("peer_failure");
  } else if (r.call == "thread_error") {
    r.type = in.text("type", true);
    r.message = in.text("message", false);
  } else if (r.call == "unrecorded") {
    r.of_call = in.text("of", true);
    r.message = in.text("message", false);
  } else if (r.call == "destroy_process_group" || r.call == "exit") {
    // nothing the trace needs
  } else if (j.contains("op")) {
    read_op(j, r, in, false);
    r.handle = in.integer("handle", false);
    if (r.handle < 0) in.fail("\"handle\" must be 1 or more");
  } else {
    return fmt::format("unknown call \"{}\" (a record of an operation has \"op\")", r.call);
  }
  return problem;
}

bool parse_file(const std::string& name, const std::string& text, Process& process, Problems& problems,
                uint64_t& records, const TorchMergeOptions& options) {
  process.file = name;
  bool truncated = false;
  const bool read = read_recording<Rec>(
      name, text, RecordingFormat{"lockstep_torch", FORMAT_VERSION, "lockstep's torch recorder"}, problems, records,
      options.max_records, truncated,
      [&](const json& j) {
        std::string problem;
        Reader in(j, problem);
        process.pid = in.integer("pid", false);
        process.env_rank = in.integer("env_rank", false, -1);
        process.env_world_size = in.integer("env_world_size", false, -1);
        process.mode = in.text("mode", false);
        return problem;
      },
      [](const json& j, int line, Rec& r) {
        r.line = line;
        return read_record(j, r);
      },
      [&](Rec&& r) { process.recs.push_back(std::move(r)); });
  std::stable_sort(process.recs.begin(), process.recs.end(), [](const Rec& a, const Rec& b) { return a.seq < b.seq; });
  return read;
}

std::string identifier(const std::string& text) {
  std::string out;
  for (const char c : text) out += std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) != 0) out = "g_" + out;
  return out;
}

std::string ranks_list(const std::vector<int32_t>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

bool is_op(const Rec& r) { return r.op.has_value() || r.is_group; }

class Merger {
 public:
  Merger(std::vector<Process>& processes, const TorchMergeOptions& options, TorchMergeResult& result)
      : processes_(processes), options_(options), result_(result), problems_(result.errors, result.warnings, options.max_errors) {}

  void run() {
    if (!assign_ranks()) return;
    make_groups();
    if (problems_.any()) return;
    build_programs();
    if (problems_.any()) return;
    summarize();
    const std::string problem = sim::trace_write_problem(scenario_);
    if (!problem.empty()) {
      problems_.error("(recordings)", 0, "internal: the merged schedule cannot be written: " + problem);
      return;
    }
    number_sources();
    result_.scenario = std::move(scenario_);
  }

  Problems& problems() { return problems_; }

 private:
  // Each process's rank and the world: from init_process_group (what it asked for, and what it
  // got); a process that never called it takes its RANK and WORLD_SIZE only where no process
  // that called it says otherwise (a launcher that started the ranks itself, mp.spawn, has the
  // environment of rank 0 but is not a rank).
  bool assign_ranks() {
    int64_t world = -1;
    const Process* world_process = nullptr;
    rank_of_.assign(processes_.size(), -1);
    std::vector<bool> joined(processes_.size(), false);
    const auto agree = [&](const Process& process, int64_t size, int line) {
      if (size < 1) return;
      if (world >= 1 && size != world) {
        problems_.error(process.file, line, fmt::format("world size {} here, but {} says {}", size, world_process->file, world));
      } else if (world < 1) {
        world = size;
        world_process = &process;
      }
    };
    for (size_t p = 0; p < processes_.size(); ++p) {
      const Process& process = processes_[p];
      const Rec* said = nullptr;
      for (const Rec& r : process.recs) {
        if (r.call == "initialized") {
          said = &r;
          break;
        }
        if (r.call == "init_process_group" && said == nullptr) said = &r;
      }
      if (said == nullptr) continue;
      joined[p] = true;
      rank_of_[p] = said->rank >= 0 ? said->rank : process.env_rank;
      agree(process, said->world_size >= 1 ? said->world_size : process.env_world_size, said->line);
    }
    for (size_t p = 0; p < processes_.size(); ++p) {
      if (!joined[p] && world < 1) agree(processes_[p], processes_[p].env_world_size, 0);
    }
    if (problems_.any()) return false;
    if (world < 1) {
      problems_.error("(recordings)", 0, "no process called init_process_group and none has a WORLD_SIZE: nothing to merge");
      return false;
    }
    if (world > options_.max_world) {
      problems_.error(world_process->file, 0, fmt::format("world size {}; at most {} (TorchMergeOptions::max_world)", world, options_.max_world));
      return false;
    }
    scenario_.world = static_cast<int32_t>(world);
    process_of_rank_.assign(static_cast<size_t>(world), SIZE_MAX);
    for (size_t p = 0; p < processes_.size(); ++p) {
      const int64_t rank = rank_of_[p];
      if (!joined[p] || rank < 0) continue;
      if (rank >= world) {
        problems_.error(processes_[p].file, 0, fmt::format("rank {} of a world of {} ranks", rank, world));
        continue;
      }
      size_t& slot = process_of_rank_[static_cast<size_t>(rank)];
      if (slot != SIZE_MAX) {
        problems_.error(processes_[p].file, 0, fmt::format("rank {} is also {}", rank, processes_[slot].file));
        continue;
      }
      slot = p;
    }
    for (size_t p = 0; p < processes_.size(); ++p) {
      const int64_t rank = processes_[p].env_rank;
      if (joined[p]) continue;
      rank_of_[p] = -1;
      if (rank >= 0 && rank < world && process_of_rank_[static_cast<size_t>(rank)] == SIZE_MAX) {
        rank_of_[p] = rank;  // a rank that never reached init_process_group
        process_of_rank_[static_cast<size_t>(rank)] = p;
      }
    }
    return !problems_.any();
  }

  uint32_t add_group(const std::string& base, const std::vector<int32_t>& ranks, bool from_new_group) {
    std::string name = base;
    for (int n = 2; taken_.contains(name); ++n) name = fmt::format("{}_{}", base, n);
    taken_.insert(name);
    sim::GroupDef group = sim::make_group(name, {}, ranks, scenario_.world);
    group.from_new_group = from_new_group;
    scenario_.groups.push_back(std::move(group));
    return static_cast<uint32_t>(scenario_.groups.size() - 1);
  }

  std::vector<int32_t> all_ranks() const {
    std::vector<int32_t> all(static_cast<size_t>(scenario_.world));
    for (int32_t r = 0; r < scenario_.world; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }

  // world, then the groups of new_group calls (rank by rank, in call order), then groups the
  // recorder knew only by their ranks.
  //
  // A trace does not say when a thread started: the checker runs a rank's threads from its
  // start. A group that a thread uses but another thread made would then be used before it
  // exists. Such a group is one of the header (it exists from the start), and the new_group
  // calls that made it rendezvous on a group of their own, NAME_made.
  void make_groups() {
    scenario_.groups.push_back(sim::make_group("world", {}, all_ranks(), scenario_.world));
    taken_.insert("world");
    using Key = std::tuple<int64_t, std::vector<int32_t>, bool, std::string>;
    const auto key_of = [&](const Rec& r) { return Key{r.group, r.ranks.value_or(all_ranks()), r.local, r.desc}; };
    std::set<Key> shared;
    for (size_t rank = 0; rank < process_of_rank_.size(); ++rank) {
      const size_t p = process_of_rank_[rank];
      if (p == SIZE_MAX) continue;
      std::map<int64_t, std::pair<std::string, Key>> made_by;  // new_group index -> (thread, key)
      for (Rec& r : processes_[p].recs) {
        if (r.call == "new_group") made_by.insert_or_assign(r.group, std::pair{r.thread, key_of(r)});
        for (Rec* op : ops_of(r)) {
          auto it = made_by.find(op->group);
          if (op->group > 0 && it != made_by.end() && it->second.first != r.thread) shared.insert(it->second.second);
        }
      }
    }
    std::map<Key, std::pair<uint32_t, uint32_t>> made;  // key -> (the ops' group, the new_group's group)
    std::map<std::vector<int32_t>, uint32_t> unnamed;
    group_of_.assign(processes_.size(), {});
    made_of_.assign(processes_.size(), {});
    for (size_t rank = 0; rank < process_of_rank_.size(); ++rank) {
      const size_t p = process_of_rank_[rank];
      if (p == SIZE_MAX) continue;
      Process& process = processes_[p];
      for (Rec& r : process.recs) {
        if (r.call == "new_group") {
          const Key key = key_of(r);
          const std::vector<int32_t>& ranks = std::get<1>(key);
          if (ranks.back() >= scenario_.world) {
            problems_.error(process.file, r.line, fmt::format("new_group of ranks {} in a world of {} ranks", ranks_list(ranks), scenario_.world));
            continue;
          }
          auto it = made.find(key);
          if (it == made.end()) {
            const std::string base = r.desc.empty() ? fmt::format("group{}", r.group) : identifier(r.desc);
            const bool across = shared.contains(key);
            const uint32_t ops = add_group(base, ranks, !r.local && !across);
            const uint32_t rendezvous = across && !r.local ? add_group(scenario_.groups[ops].name + "_made", ranks, true) : ops;
            it = made.emplace(key, std::pair{ops, rendezvous}).first;
            result_.groups.push_back(fmt::format("{} = new_group(ranks={}{}{}) at {}{}", scenario_.groups[ops].name,
                                                 ranks_list(ranks), r.desc.empty() ? "" : fmt::format(", group_desc='{}'", r.desc),
                                                 r.local ? ", use_local_synchronization=True" : "",
                                                 r.source.empty() ? "?" : r.source,
                                                 rendezvous == ops ? "" : fmt::format(" (used by another thread: its new_group calls meet on {})",
                                                                                      scenario_.groups[rendezvous].name)));
          }
          group_of_[p][r.group] = it->second.first;
          made_of_[p][r.group] = it->second.second;
        }
        for (Rec* op : ops_of(r)) {
          if (op->group != -1 || op->group_ranks.empty()) continue;
          if (op->group_ranks.back() >= scenario_.world) continue;  // reported where the op is read
          if (!unnamed.contains(op->group_ranks)) {
            unnamed[op->group_ranks] = add_group(fmt::format("pg{}", unnamed.size() + 1), op->group_ranks, false);
            result_.groups.push_back(fmt::format("{} = a process group not made by new_group: ranks {}",
                                                 scenario_.groups[unnamed[op->group_ranks]].name, ranks_list(op->group_ranks)));
          }
        }
      }
    }
    unnamed_ = std::move(unnamed);
  }

  static std::vector<Rec*> ops_of(Rec& r) {
    std::vector<Rec*> out;
    if (r.op) out.push_back(&r);
    for (Rec& sub : r.ops) out.push_back(&sub);
    return out;
  }

  // The trace group of an op of process p, or none (with a warning).
  std::optional<uint32_t> group_index(size_t p, const Rec& op, const Rec& record) {
    if (op.group == 0) return 0;
    if (op.group == -1) {
      auto it = unnamed_.find(op.group_ranks);
      if (it != unnamed_.end()) return it->second;
    } else {
      auto it = group_of_[p].find(op.group);
      if (it != group_of_[p].end()) return it->second;
    }
    problems_.warning(processes_[p].file, record.line,
                      fmt::format("{} on a process group whose creation was not recorded; left out", record.call));
    return std::nullopt;
  }

  bool member(uint32_t group, int64_t rank) const {
    const std::vector<int32_t>& ranks = scenario_.groups[group].comms.front();
    return std::binary_search(ranks.begin(), ranks.end(), static_cast<int32_t>(rank));
  }

  // One op as a statement, or none (with a warning) when it cannot be in the trace.
  std::optional<sim::Stmt> statement(size_t p, int32_t rank, const Rec& op, const Rec& record) {
    const std::optional<uint32_t> group = group_index(p, op, record);
    if (!group) return std::nullopt;
    const Process& process = processes_[p];
    const std::string& name = scenario_.groups[*group].name;
    const auto refuse = [&](const std::string& why) -> std::optional<sim::Stmt> {
      problems_.warning(process.file, record.line, fmt::format("{} at {}: {}; left out", record.call, record.source, why));
      return std::nullopt;
    };
    if (!member(*group, rank)) return refuse(fmt::format("rank {} is not a member of {}", rank, name));
    sim::Stmt stmt;
    stmt.op = *op.op;
    stmt.group = *group;
    stmt.loc = {static_cast<uint32_t>(record.line), 1};
    stmt.size = sim::Expr::constant(stmt.op == sim::OpKind::BARRIER ? 0 : op.size);
    if (op.dtype) stmt.dtype = *op.dtype;
    if (stmt.op == sim::OpKind::BARRIER) stmt.size = sim::Expr::constant(sim::dtype_bytes(stmt.dtype));
    if (sim::has_root(stmt.op)) {
      if (!member(*group, op.root)) return refuse(fmt::format("its root {} is not a member of {}", op.root, name));
      stmt.has_root = true;
      stmt.set_extra().root = sim::Expr::constant(op.root);
    }
    if (sim::is_p2p(stmt.op)) {
      stmt.has_peer = true;
      if (op.peer_any) {
        stmt.peer_any = true;
      } else {
        if (!member(*group, op.peer)) return refuse(fmt::format("its peer {} is not a member of {}", op.peer, name));
        if (op.peer == rank) return refuse("it sends to or receives from its own rank");
        stmt.peer = sim::Expr::constant(op.peer);
      }
    }
    if (sim::has_splits(stmt.op)) {
      const size_t members = scenario_.groups[*group].comm_for(rank)->size();
      const bool sends = sim::lists_sends(stmt.op);
      if ((sends && op.send_splits.size() != members) || op.recv_splits.size() != members) {
        return refuse(fmt::format("its split sizes are not one per member of {}", name));
      }
      for (int64_t bytes : op.send_splits) stmt.set_extra().send_splits.push_back(sim::Expr::constant(bytes));
      for (int64_t bytes : op.recv_splits) stmt.set_extra().recv_splits.push_back(sim::Expr::constant(bytes));
    }
    if (op.payload) payload_unknown_ = true;
    return stmt;
  }

  // Rank by rank, thread by thread: the statements, and where each came from.
  void build_programs() {
    const auto n = static_cast<size_t>(scenario_.world);
    scenario_.name = options_.name;
    scenario_.source_url = options_.source;
    scenario_.path = "trace.jsonl";
    scenario_.rank_program.resize(n);
    scenario_.programs.resize(n);
    origins_.resize(n);
    for (size_t rank = 0; rank < n; ++rank) {
      scenario_.rank_program[rank] = static_cast<uint32_t>(rank);
      const size_t p = process_of_rank_[rank];
      if (p != SIZE_MAX) build_rank(p, static_cast<int32_t>(rank));
    }
  }

  void build_rank(size_t p, int32_t rank) {
    Process& process = processes_[p];
    sim::RankProgram& program = scenario_.programs[static_cast<size_t>(rank)];
    std::vector<std::vector<const Rec*>>& origins = origins_[static_cast<size_t>(rank)];
    const auto thread_of = [&](const std::string& python_name) -> size_t {
      const std::string name = python_name == "MainThread" ? "main" : python_name;
      for (size_t t = 0; t < program.size(); ++t) {
        if (program[t].name == name) return t;
      }
      program.push_back(sim::ThreadDef(name, {}));
      origins.emplace_back();
      return program.size() - 1;
    };
    const auto append = [&](const Rec& record, sim::Stmt stmt) {
      const size_t t = thread_of(record.thread);
      program[t].mutable_body().push_back(std::move(stmt));
      origins[t].push_back(&record);
    };
    std::map<int64_t, std::string> handles;  // async handle -> its name; "" once waited for or in a group
    for (const Rec& r : process.recs) {
      if (r.call == "new_group") {
        const auto it = made_of_[p].find(r.group);
        if (it == made_of_[p].end()) continue;
        sim::Stmt stmt;
        stmt.loc = {static_cast<uint32_t>(r.line), 1};
        if (scenario_.groups[it->second].from_new_group) {
          stmt.op = sim::OpKind::NEW_GROUP;
          stmt.new_group = it->second;
        } else if (member(it->second, rank)) {
          // use_local_synchronization: only the members meet.
          stmt.op = sim::OpKind::BARRIER;
          stmt.group = it->second;
          stmt.size = sim::Expr::constant(sim::dtype_bytes(stmt.dtype));
          stmt.tag = scenario_.names->intern("new_group");
        } else {
          continue;
        }
        append(r, std::move(stmt));
      } else if (r.op) {
        std::optional<sim::Stmt> stmt = statement(p, rank, r, r);
        if (!stmt) continue;
        if (r.handle > 0) {
          const std::string name = fmt::format("{}.{}", r.call, r.handle);
          stmt->handle = scenario_.names->intern(name);
          handles[r.handle] = name;
        }
        append(r, std::move(*stmt));
      } else if (r.is_group) {
        sim::Stmt group;
        group.kind = sim::StmtKind::NCCL_GROUP;
        group.loc = {static_cast<uint32_t>(r.line), 1};
        for (const Rec& sub : r.ops) {
          if (std::optional<sim::Stmt> stmt = statement(p, rank, sub, r)) group.body.push_back(std::move(*stmt));
        }
        if (r.handle > 0) handles[r.handle] = "";  // an NCCL group completes as a whole: nothing to wait for
        if (group.body.empty()) continue;
        if (group.body.size() == 1) {
          sim::Stmt only = std::move(group.body.front());
          append(r, std::move(only));
        } else {
          append(r, std::move(group));
        }
      } else if (r.call == "wait") {
        auto it = handles.find(r.handle);
        if (it == handles.end() || it->second.empty()) continue;
        sim::Stmt stmt;
        stmt.op = sim::OpKind::WAIT;
        stmt.loc = {static_cast<uint32_t>(r.line), 1};
        stmt.handle = scenario_.names->intern(it->second);
        it->second.clear();
        append(r, std::move(stmt));
      } else if (r.call == "uncaught" && !r.peer_failure) {
        sim::Stmt stmt;
        stmt.op = sim::OpKind::CRASH;
        stmt.loc = {static_cast<uint32_t>(r.line), 1};
        append(r, std::move(stmt));
      } else if (r.call == "unrecorded") {
        problems_.warning(process.file, r.line, fmt::format("{} at {} could not be read ({}); not in the trace", r.of_call, r.source, r.message));
      } else if (r.call == "thread_error") {
        problems_.warning(process.file, r.line, fmt::format("thread {} ended with {}: {}", r.thread, r.type, r.message));
      }
    }
  }

  void summarize() {
    std::vector<size_t> order;
    for (size_t rank = 0; rank < process_of_rank_.size(); ++rank) {
      if (process_of_rank_[rank] != SIZE_MAX) order.push_back(process_of_rank_[rank]);
    }
    std::vector<int32_t> missing;
    for (size_t rank = 0; rank < process_of_rank_.size(); ++rank) {
      if (process_of_rank_[rank] == SIZE_MAX) missing.push_back(static_cast<int32_t>(rank));
    }
    for (size_t p = 0; p < processes_.size(); ++p) {
      if (rank_of_[p] < 0) order.push_back(p);
    }
    if (!missing.empty()) {
      problems_.warning("(recordings)", 0, fmt::format("no process recorded rank{} {}: in the trace as issuing nothing",
                                                       missing.size() == 1 ? "" : "s", sim::format_ranks(missing)));
    }
    for (size_t p : order) {
      const Process& process = processes_[p];
      result_.fake = result_.fake || process.mode == "fake";
      for (const Rec& r : process.recs) {
        if (r.call == "init_process_group" && result_.backend.empty()) result_.backend = r.backend;
      }
      TorchProcess summary;
      summary.file = process.file;
      summary.pid = process.pid;
      summary.rank = static_cast<int32_t>(rank_of_[p]);
      summary.mode = process.mode;
      summary.ending = "no end record (stopped, killed, or still running)";
      bool initialized = false;
      for (const Rec& r : process.recs) {
        if (r.call == "initialized") initialized = true;
        if (is_op(r) || r.call == "new_group" || r.call == "wait" || r.call == "init_process_group" ||
            r.call == "destroy_process_group") {
          ++summary.calls;
          summary.last = fmt::format("{} at {}", r.call, r.source.empty() ? "?" : r.source);
        }
        if (r.call == "exit" && summary.ending.rfind("raised", 0) != 0) summary.ending = "exited";
        if (r.call == "uncaught") {
          summary.ending = fmt::format("raised {}{}{} at {}", r.type, r.message.empty() ? "" : ": ",
                                       first_line(r.message), r.source.empty() ? "?" : r.source);
          if (r.peer_failure) summary.ending += " (its collective failed because a peer went away)";
        }
      }
      if (summary.last.empty()) summary.last = initialized ? "no torch.distributed call after init" : "no torch.distributed call";
      result_.processes.push_back(std::move(summary));
    }
    if (payload_unknown_) {
      result_.warnings.push_back(
          "(recordings): warning: --fake: the payloads of *_object collectives are recorded with size 0 (their size "
          "comes from what the first collective would have received)");
    }
  }

  static std::string first_line(const std::string& text) {
    const size_t end = text.find('\n');
    return end == std::string::npos ? text : text.substr(0, end) + " ...";
  }

  // The line of every op in the written trace (sim::write_trace's order: rank by rank, thread
  // by thread; an NCCL group is its group_start line, its ops and its group_end line).
  void number_sources() {
    int32_t line = 1;  // the header
    for (int32_t rank = 0; rank < scenario_.world; ++rank) {
      const sim::RankProgram& program = scenario_.programs[static_cast<size_t>(rank)];
      for (size_t t = 0; t < program.size(); ++t) {
        const auto& body = program[t].body();
        for (size_t i = 0; i < body.size(); ++i) {
          const Rec& record = *origins_[static_cast<size_t>(rank)][t][i];
          const size_t lines = body[i].kind == sim::StmtKind::NCCL_GROUP ? body[i].body.size() + 2 : 1;
          for (size_t k = 0; k < lines; ++k) {
            result_.sources.push_back({++line, rank, program[t].name, record.call,
                                       record.source.empty() ? "?" : record.source, record.function});
          }
        }
      }
    }
  }

  std::vector<Process>& processes_;
  const TorchMergeOptions& options_;
  TorchMergeResult& result_;
  Problems problems_;
  sim::Scenario scenario_;
  std::vector<int64_t> rank_of_;             // per process
  std::vector<size_t> process_of_rank_;      // per rank, SIZE_MAX: none
  std::vector<std::map<int64_t, uint32_t>> group_of_;  // per process: new_group index -> the ops' group
  std::vector<std::map<int64_t, uint32_t>> made_of_;   // per process: new_group index -> its new_group's group
  std::map<std::vector<int32_t>, uint32_t> unnamed_;
  std::set<std::string> taken_;
  std::vector<std::vector<std::vector<const Rec*>>> origins_;  // per rank, thread, statement
  bool payload_unknown_ = false;
};

}  // namespace

TorchMergeResult merge_torch_texts(const std::vector<std::pair<std::string, std::string>>& files,
                                   const TorchMergeOptions& options) {
  TorchMergeResult result;
  Problems problems(result.errors, result.warnings, options.max_errors);
  if (!recordings_present(files.size(), options.max_files,
                          "no recordings: no rank imported torch.distributed with the recorder armed", problems)) {
    return result;
  }
  std::vector<Process> processes(files.size());
  uint64_t records = 0;
  for (size_t i = 0; i < files.size() && !problems.full(); ++i) {
    parse_file(files[i].first, files[i].second, processes[i], problems, records, options);
  }
  if (problems.any()) return result;
  Merger merger(processes, options, result);
  merger.run();
  if (!result.errors.empty()) result.scenario.reset();
  return result;
}

TorchMergeResult merge_torch_files(std::vector<std::string> paths, const TorchMergeOptions& options) {
  TorchMergeResult failed;
  Problems problems(failed.errors, failed.warnings, options.max_errors);
  const auto files = read_recordings(std::move(paths), options.max_files, options.max_file_bytes, problems);
  if (problems.any()) return failed;
  return merge_torch_texts(files, options);
}

}  // namespace lockstep::record
