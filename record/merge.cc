#include "record/merge.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "record/nccl_abi.h"
#include "record/record_format.h"
#include "record/recordings.h"
#include "sim/trace_format.h"

namespace lockstep::record {

namespace {

using nlohmann::json;

// One record of a raw file, every field it may have.
struct RawRec {
  uint64_t seq = 0;
  uint64_t tid = 0;
  Call call = Call::COUNT_;
  int line = 0;
  uint64_t comm = 0, parent = 0, stream = 0, id = 0, of = 0, count = 0, dropped = 0;
  int64_t nranks = -1, rank = -1, ndev = -1, color = 0, key = 0, index = 0, device = -1, user_rank = -1;
  int64_t dtype = -1, root = -1, peer = -1, result = 0, signal = 0;
};

struct Process {
  std::string file;
  std::string host;
  int64_t pid = 0;
  int64_t env_rank = -1;
  std::vector<RawRec> recs;
  bool truncated = false;
};

// The merge's problems, at most MergeOptions::max_errors of each kind.
class Errors : public Problems {
 public:
  Errors(MergeResult& result, size_t max) : Problems(result.errors, result.warnings, max) {}
};

std::optional<Call> call_of(const std::string& name) {
  for (size_t i = 0; i < static_cast<size_t>(Call::COUNT_); ++i) {
    if (name == call_name(static_cast<Call>(i))) return static_cast<Call>(i);
  }
  return std::nullopt;
}

bool is_op(Call call) { return call >= Call::ALL_REDUCE && call <= Call::RECV; }

// Reads the fields of one record. "" when fine, else what is wrong.
std::string read_record(const json& j, RawRec& r) {
  if (!j.is_object()) return "a record is a JSON object";
  auto uint_of = [&](const char* key, uint64_t& out, bool required) -> std::string {
    auto it = j.find(key);
    if (it == j.end()) return required ? fmt::format("missing \"{}\"", key) : "";
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      return fmt::format("\"{}\" must be a non-negative integer", key);
    }
    out = it->get<uint64_t>();
    return "";
  };
  auto int_of = [&](const char* key, int64_t& out, bool required) -> std::string {
    auto it = j.find(key);
    if (it == j.end()) return required ? fmt::format("missing \"{}\"", key) : "";
    if (!it->is_number_integer()) return fmt::format("\"{}\" must be an integer", key);
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return fmt::format("\"{}\" is out of range", key);
    }
    out = it->get<int64_t>();
    if (out < INT32_MIN || out > INT32_MAX) return fmt::format("\"{}\" is out of range", key);
    return "";
  };
  auto hex_of = [&](const char* key, uint64_t& out, bool required) -> std::string {
    auto it = j.find(key);
    if (it == j.end()) return required ? fmt::format("missing \"{}\"", key) : "";
    if (!it->is_string()) return fmt::format("\"{}\" must be a hexadecimal string", key);
    std::string text = it->get<std::string>();
    if (text.rfind("0x", 0) == 0) text = text.substr(2);
    if (text.empty() || text.size() > 16) return fmt::format("\"{}\" must be a hexadecimal string", key);
    uint64_t value = 0;
    for (char c : text) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return fmt::format("\"{}\" must be a hexadecimal string", key);
      value = value << 4 | static_cast<uint64_t>(digit);
    }
    out = value;
    return "";
  };
  std::string problem = uint_of("seq", r.seq, true);
  if (problem.empty()) problem = uint_of("tid", r.tid, true);
  if (!problem.empty()) return problem;
  auto call = j.find("call");
  if (call == j.end() || !call->is_string()) return "missing \"call\"";
  const std::optional<Call> known = call_of(call->get<std::string>());
  if (!known) return fmt::format("unknown call \"{}\"", call->get<std::string>());
  r.call = *known;
  std::vector<std::string> problems;
  switch (r.call) {
    case Call::GET_UNIQUE_ID:
      problems = {hex_of("id", r.id, true)};
      break;
    case Call::COMM_INIT_RANK:
    case Call::COMM_INIT_RANK_CONFIG:
      problems = {hex_of("id", r.id, true), int_of("nranks", r.nranks, true), int_of("rank", r.rank, true)};
      if (problems[1].empty() && problems[2].empty() && (r.nranks < 1 || r.rank < 0 || r.rank >= r.nranks)) {
        problems.push_back(fmt::format("rank {} of {} ranks", r.rank, r.nranks));
      }
      break;
    case Call::COMM_INIT_ALL:
      problems = {int_of("ndev", r.ndev, true)};
      if (problems[0].empty() && r.ndev < 1) problems.push_back("\"ndev\" must be at least 1");
      break;
    case Call::COMM_SPLIT:
      problems = {hex_of("parent", r.parent, true), int_of("color", r.color, true), int_of("key", r.key, true)};
      break;
    case Call::CREATED:
      problems = {uint_of("of", r.of, true),          int_of("index", r.index, true),
                  hex_of("comm", r.comm, true),       int_of("device", r.device, false),
                  int_of("user_rank", r.user_rank, false), int_of("nranks", r.nranks, false)};
      break;
    case Call::FAILED:
      problems = {uint_of("of", r.of, true), int_of("result", r.result, true)};
      break;
    case Call::SIGNAL:
      problems = {int_of("signal", r.signal, true), uint_of("dropped", r.dropped, false)};
      break;
    case Call::EXIT:
      problems = {uint_of("dropped", r.dropped, false)};
      break;
    case Call::GROUP_START:
    case Call::GROUP_END:
      break;
    case Call::COMM_DESTROY:
    case Call::COMM_ABORT:
    case Call::COMM_FINALIZE:
      problems = {hex_of("comm", r.comm, true)};
      break;
    default: {
      int64_t redop = -1;
      problems = {hex_of("comm", r.comm, true), uint_of("count", r.count, true), int_of("dtype", r.dtype, true),
                  hex_of("stream", r.stream, true), int_of("redop", redop, false)};
      if (r.call == Call::SEND || r.call == Call::RECV) {
        problems.push_back(int_of("peer", r.peer, true));
      } else if (r.call == Call::BROADCAST || r.call == Call::BCAST || r.call == Call::REDUCE ||
                 r.call == Call::GATHER || r.call == Call::SCATTER) {
        problems.push_back(int_of("root", r.root, true));
      }
      if (problems[2].empty() && nccl_abi::dtype_bytes(static_cast<nccl_abi::DataType>(r.dtype)) == 0) {
        problems.push_back(fmt::format("unknown NCCL data type {}", r.dtype));
      }
      if (problems[1].empty() && r.count > (uint64_t{1} << 48)) problems.push_back("\"count\" is out of range");
      break;
    }
  }
  for (const std::string& p : problems) {
    if (!p.empty()) return p;
  }
  return "";
}

// Parses one raw file into `process`; false on an error that stops it.
bool parse_file(const std::string& name, const std::string& text, Process& process, Errors& errors,
                uint64_t& records, const MergeOptions& options) {
  process.file = name;
  const bool read = read_recording<RawRec>(
      name, text, RecordingFormat{"lockstep_record", RAW_FORMAT_VERSION, "lockstep's recorder"}, errors, records,
      options.max_records, process.truncated,
      [&](const json& j) {
        if (auto host = j.find("host"); host != j.end() && host->is_string()) process.host = host->get<std::string>();
        if (auto pid = j.find("pid"); pid != j.end() && pid->is_number_integer()) process.pid = pid->get<int64_t>();
        if (auto rank = j.find("env_rank"); rank != j.end() && rank->is_number_integer()) {
          process.env_rank = rank->get<int64_t>();
        }
        return std::string();
      },
      [](const json& j, int line, RawRec& r) {
        r.line = line;
        return read_record(j, r);
      },
      [&](RawRec&& r) { process.recs.push_back(r); });
  std::stable_sort(process.recs.begin(), process.recs.end(),
                   [](const RawRec& a, const RawRec& b) { return a.seq < b.seq; });
  return read;
}

// ---------------------------------------------------------------------------------------------
// Processes -> ranks and communicators.

enum class CommKind { ROOT, ALL, SPLIT };

struct GComm {
  std::string key;
  CommKind kind = CommKind::ROOT;
  std::string created_by;  // NCCL function
  int64_t nranks = -1;     // declared (ROOT, ALL)
  size_t parent = SIZE_MAX;  // SPLIT: index into comms
  int64_t color = 0;
  size_t order = 0;        // first sight, in file order then call order
  struct Member {
    size_t entity;
    int64_t rank;        // in this communicator (SPLIT: computed)
    int64_t split_key;   // SPLIT
    std::string file;
    int line;
  };
  std::vector<Member> members;
  int64_t rank_of(size_t entity) const {
    for (const Member& m : members) {
      if (m.entity == entity) return m.rank;
    }
    return -1;
  }
};

struct Entity {
  size_t process;  // PHANTOM: a rank nobody recorded; SIZE_MAX: folded into another
  int64_t device;  // PHANTOM: its rank in the communicator that misses it
};

constexpr size_t PHANTOM = SIZE_MAX - 1;

enum class EventKind { CREATE, SPLIT, OP };

struct Event {
  uint64_t seq;
  uint64_t tid;
  EventKind kind;
  Call call;
  size_t comm;       // CREATE: the new one; SPLIT: the parent; OP: its communicator
  uint64_t group;    // NCCL group (process-wide number), 0 outside groups
  uint64_t count;
  int64_t dtype;
  int64_t root_or_peer;  // in the communicator
  uint64_t stream;
  std::string file;
  int line;
};

struct Merger {
  const MergeOptions& options;
  MergeResult& result;
  Errors& errors;
  std::vector<Process>& processes;

  std::vector<Entity> entities;
  std::map<std::pair<size_t, int64_t>, size_t> entity_index;
  std::vector<std::vector<Event>> events;  // per entity
  std::vector<GComm> comms;
  std::unordered_map<std::string, size_t> comm_index;
  size_t sight = 0;

  size_t entity_of(size_t process, int64_t device) {
    auto [it, inserted] = entity_index.try_emplace({process, device}, entities.size());
    if (inserted) {
      entities.push_back({process, device});
      events.emplace_back();
    }
    return it->second;
  }

  size_t comm_of(const std::string& key, CommKind kind, const std::string& created_by) {
    auto [it, inserted] = comm_index.try_emplace(key, comms.size());
    if (inserted) {
      GComm c;
      c.key = key;
      c.kind = kind;
      c.created_by = created_by;
      c.order = sight++;
      comms.push_back(std::move(c));
    }
    return it->second;
  }

  void add_member(size_t comm, size_t entity, int64_t rank, int64_t split_key, const std::string& file, int line) {
    GComm& c = comms[comm];
    for (const GComm::Member& m : c.members) {
      if (m.entity == entity) {
        errors.error(file, line, fmt::format("this rank joins the communicator created at {}:{} a second time", m.file, m.line));
        return;
      }
      if (c.kind != CommKind::SPLIT && m.rank == rank) {
        errors.error(file, line,
                     fmt::format("rank {} of this communicator was already created by {}:{}", rank, m.file, m.line));
        return;
      }
    }
    c.members.push_back({entity, rank, split_key, file, line});
  }

  // One process: its calls as events of its ranks, its communicators' members.
  void walk(size_t p) {
    Process& process = processes[p];
    std::unordered_map<uint64_t, std::vector<const RawRec*>> created;  // by the seq of the call
    for (const RawRec& r : process.recs) {
      if (r.call == Call::CREATED) created[r.of].push_back(&r);
    }
    struct Instance {
      size_t comm;
      size_t entity;
    };
    std::unordered_map<uint64_t, Instance> live;  // communicator handle -> what it is
    std::map<std::pair<size_t, size_t>, int64_t> splits_of;  // (parent comm, entity) -> splits so far
    std::unordered_map<uint64_t, int> depth;     // per thread: ncclGroupStart nesting
    std::unordered_map<uint64_t, uint64_t> group_of;  // per thread: the open group's number
    uint64_t groups = 0;
    std::set<uint64_t> unknown_reported;
    ProcessSummary& summary = result.processes[p];
    summary.ending = "no end record (killed, or still running)";
    const auto device_of = [&](const RawRec& call, int64_t index) -> int64_t {
      auto it = created.find(call.seq);
      if (it == created.end()) return -1;
      for (const RawRec* c : it->second) {
        if (c->index == index) return c->device;
      }
      return -1;
    };
    const auto handle_of = [&](const RawRec& call, int64_t index) -> std::optional<const RawRec*> {
      auto it = created.find(call.seq);
      if (it == created.end()) return std::nullopt;
      for (const RawRec* c : it->second) {
        if (c->index == index) return c;
      }
      return std::nullopt;
    };
    const auto group_now = [&](uint64_t tid) -> uint64_t { return depth[tid] > 0 ? group_of[tid] : 0; };
    for (const RawRec& r : process.recs) {
      if (r.call != Call::CREATED && r.call != Call::FAILED && r.call != Call::EXIT && r.call != Call::SIGNAL &&
          r.call != Call::GET_UNIQUE_ID) {
        ++summary.calls;
      }
      switch (r.call) {
        case Call::COMM_INIT_RANK:
        case Call::COMM_INIT_RANK_CONFIG: {
          const size_t entity = entity_of(p, device_of(r, 0));
          const size_t comm = comm_of(fmt::format("id:{:016x}", r.id), CommKind::ROOT, call_name(r.call));
          if (comms[comm].nranks < 0) comms[comm].nranks = r.nranks;
          if (comms[comm].nranks != r.nranks) {
            errors.error(process.file, r.line,
                         fmt::format("{} ranks for a communicator that {} created with {}", r.nranks,
                                     comms[comm].members.empty() ? std::string("another rank") : comms[comm].members[0].file,
                                     comms[comm].nranks));
            break;
          }
          add_member(comm, entity, r.rank, 0, process.file, r.line);
          events[entity].push_back({r.seq, r.tid, EventKind::CREATE, r.call, comm, group_now(r.tid), 0, -1, -1, 0,
                                    process.file, r.line});
          if (auto h = handle_of(r, 0)) live[(*h)->comm] = {comm, entity};
          break;
        }
        case Call::COMM_INIT_ALL: {
          const size_t comm = comm_of(fmt::format("all:{}:{}", process.file, r.seq), CommKind::ALL, call_name(r.call));
          comms[comm].nranks = r.ndev;
          for (int64_t i = 0; i < r.ndev; ++i) {
            const int64_t device = device_of(r, i);
            const size_t entity = entity_of(p, device >= 0 ? device : i);
            add_member(comm, entity, i, 0, process.file, r.line);
            events[entity].push_back({r.seq, r.tid, EventKind::CREATE, r.call, comm, group_now(r.tid), 0, -1, -1, 0,
                                      process.file, r.line});
            if (auto h = handle_of(r, i)) live[(*h)->comm] = {comm, entity};
          }
          break;
        }
        case Call::COMM_SPLIT: {
          auto parent = live.find(r.parent);
          if (parent == live.end()) {
            errors.warning(process.file, r.line,
                           fmt::format("ncclCommSplit of communicator 0x{:x}, whose creation was not recorded; ignored", r.parent));
            break;
          }
          const Instance from = parent->second;
          const int64_t k = splits_of[{from.comm, from.entity}]++;
          events[from.entity].push_back({r.seq, r.tid, EventKind::SPLIT, r.call, from.comm, group_now(r.tid), 0, -1, -1,
                                         0, process.file, r.line});
          if (r.color == nccl_abi::SPLIT_NOCOLOR) break;
          if (r.color < 0) {
            errors.error(process.file, r.line, fmt::format("color {} (colors are >= 0, or NCCL_SPLIT_NOCOLOR)", r.color));
            break;
          }
          const size_t comm =
              comm_of(fmt::format("split:{}:{}:{}", comms[from.comm].key, k, r.color), CommKind::SPLIT, call_name(r.call));
          comms[comm].parent = from.comm;
          comms[comm].color = r.color;
          add_member(comm, from.entity, -1, r.key, process.file, r.line);
          if (auto h = handle_of(r, 0); h && (*h)->comm != 0) live[(*h)->comm] = {comm, from.entity};
          break;
        }
        case Call::GROUP_START:
          if (depth[r.tid]++ == 0) group_of[r.tid] = ++groups;
          break;
        case Call::GROUP_END:
          if (depth[r.tid] == 0) {
            errors.warning(process.file, r.line, "ncclGroupEnd without ncclGroupStart; ignored");
          } else {
            --depth[r.tid];
          }
          break;
        case Call::COMM_DESTROY:
        case Call::COMM_ABORT:
          live.erase(r.comm);
          break;
        case Call::EXIT:
          summary.ending = "exited";
          summary.dropped = r.dropped;
          break;
        case Call::SIGNAL:
          summary.ending = fmt::format("signal {}", r.signal);
          summary.dropped = r.dropped;
          break;
        case Call::FAILED:
          errors.warning(process.file, r.line, fmt::format("the call of record {} returned NCCL error {}", r.of, r.result));
          break;
        default:
          if (!is_op(r.call)) break;
          auto it = live.find(r.comm);
          if (it == live.end()) {
            if (unknown_reported.insert(r.comm).second) {
              errors.warning(process.file, r.line,
                             fmt::format("{} on communicator 0x{:x}, whose creation was not recorded (made by a call "
                                         "the recorder does not intercept, such as ncclCommShrink, or destroyed); "
                                         "its operations are left out",
                                         call_name(r.call), r.comm));
            }
            break;
          }
          const int64_t root_or_peer = r.call == Call::SEND || r.call == Call::RECV ? r.peer : r.root;
          events[it->second.entity].push_back({r.seq, r.tid, EventKind::OP, r.call, it->second.comm, group_now(r.tid),
                                               r.count, r.dtype, root_or_peer, r.stream, process.file, r.line});
          break;
      }
    }
  }

  // A process whose only rank has an unknown device (it hung in its first init) and one known:
  // they are the same rank.
  void fold_unknown_devices() {
    for (size_t p = 0; p < processes.size(); ++p) {
      auto unknown = entity_index.find({p, -1});
      if (unknown == entity_index.end()) continue;
      std::vector<size_t> known;
      for (const auto& [key, e] : entity_index) {
        if (key.first == p && key.second != -1) known.push_back(e);
      }
      if (known.size() != 1) continue;
      const size_t from = unknown->second, to = known[0];
      for (Event& e : events[from]) events[to].push_back(e);
      events[from].clear();
      for (GComm& c : comms) {
        for (GComm::Member& m : c.members) {
          if (m.entity == from) m.entity = to;
        }
      }
      entities[from].process = SIZE_MAX;  // gone
    }
  }
};

std::string join_ranks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i > 0 ? "," : "") + std::to_string(ranks[i]);
  return out;
}

// The op an NCCL call is (the op table names NCCL's calls, sim/ops.h), or none.
const sim::OpInfo* op_of_call(Call call) {
  const std::string_view name = call_name(call);
  return name.starts_with("nccl") ? sim::find_nccl_op(name.substr(4)) : nullptr;
}

std::optional<sim::OpKind> op_kind(Call call) {
  const sim::OpInfo* op = op_of_call(call);
  return op != nullptr ? std::optional(op->kind) : std::nullopt;
}

sim::DType dtype_of(int64_t nccl) {
  static constexpr sim::DType TABLE[] = {sim::DType::INT8,  sim::DType::UINT8,    sim::DType::INT32,
                                         sim::DType::UINT32, sim::DType::INT64,   sim::DType::UINT64,
                                         sim::DType::FP16,  sim::DType::FP32,     sim::DType::FP64,
                                         sim::DType::BF16,  sim::DType::FP8_E4M3, sim::DType::FP8_E5M2};
  return nccl >= 0 && nccl < 12 ? TABLE[nccl] : sim::DType::UINT8;
}

bool count_is_per_rank(Call call) {
  const sim::OpInfo* op = op_of_call(call);
  return op != nullptr && op->nccl_count_per_rank;
}

}  // namespace

MergeResult merge_texts(const std::vector<std::pair<std::string, std::string>>& files, const MergeOptions& options) {
  MergeResult result;
  Errors errors(result, options.max_errors);
  if (!recordings_present(files.size(), options.max_files, "no recordings: no process called NCCL through the recorder", errors)) {
    return result;
  }
  std::vector<Process> processes(files.size());
  uint64_t records = 0;
  for (size_t i = 0; i < files.size() && !errors.full(); ++i) {
    if (!parse_file(files[i].first, files[i].second, processes[i], errors, records, options)) continue;
  }
  result.processes.resize(processes.size());
  for (size_t i = 0; i < processes.size(); ++i) {
    result.processes[i].file = processes[i].file;
    result.processes[i].host = processes[i].host;
    result.processes[i].pid = processes[i].pid;
    result.processes[i].env_rank = processes[i].env_rank;
  }
  if (errors.any()) return result;

  Merger m{options, result, errors, processes, {}, {}, {}, {}, {}, 0};
  for (size_t p = 0; p < processes.size(); ++p) m.walk(p);
  m.fold_unknown_devices();
  if (errors.any()) return result;

  // Ranks nobody recorded: when every recorded rank is a member of the largest communicator that
  // misses some of its ranks, the missing ones are processes that never called its init (or
  // whose recording is missing). They become ranks that issue nothing, so that the check sees
  // who never joined.
  size_t largest = SIZE_MAX;
  for (size_t c = 0; c < m.comms.size(); ++c) {
    const GComm& comm = m.comms[c];
    if (comm.kind == CommKind::SPLIT || static_cast<int64_t>(comm.members.size()) >= comm.nranks) continue;
    if (largest == SIZE_MAX || comm.nranks > m.comms[largest].nranks) largest = c;
  }
  std::vector<int64_t> phantom_ranks;  // in `largest`
  if (largest != SIZE_MAX) {
    bool covers = true;
    for (size_t e = 0; e < m.entities.size(); ++e) {
      if (m.entities[e].process != SIZE_MAX && m.comms[largest].rank_of(e) < 0) covers = false;
    }
    if (covers && m.comms[largest].nranks <= (int64_t{1} << 20)) {
      for (int64_t r = 0; r < m.comms[largest].nranks; ++r) {
        bool present = false;
        for (const GComm::Member& mem : m.comms[largest].members) present = present || mem.rank == r;
        if (present) continue;
        const size_t e = m.entity_of(PHANTOM, r);
        m.comms[largest].members.push_back({e, r, 0, m.comms[largest].members.front().file, m.comms[largest].members.front().line});
        phantom_ranks.push_back(r);
      }
    }
  }

  // The ranks that remain, in file order then device.
  std::vector<size_t> alive;
  for (size_t e = 0; e < m.entities.size(); ++e) {
    if (m.entities[e].process != SIZE_MAX) alive.push_back(e);
  }
  if (alive.empty()) {
    errors.error("(recordings)", 0, "no communicator was created in any recorded process");
    return result;
  }
  const auto n = static_cast<int64_t>(alive.size());

  // Split communicators: ranks by (key, rank in the parent). Parents come first in `comms`.
  for (GComm& c : m.comms) {
    if (c.kind != CommKind::SPLIT) continue;
    const GComm& parent = m.comms[c.parent];
    std::stable_sort(c.members.begin(), c.members.end(), [&](const GComm::Member& a, const GComm::Member& b) {
      return std::pair{a.split_key, parent.rank_of(a.entity)} < std::pair{b.split_key, parent.rank_of(b.entity)};
    });
    for (size_t i = 0; i < c.members.size(); ++i) c.members[i].rank = static_cast<int64_t>(i);
    c.nranks = static_cast<int64_t>(c.members.size());
  }

  // Global ranks.
  std::vector<int32_t> global(m.entities.size(), -1);
  size_t world = SIZE_MAX;
  for (size_t c = 0; c < m.comms.size(); ++c) {
    const GComm& comm = m.comms[c];
    if (comm.kind == CommKind::SPLIT || comm.nranks != n || static_cast<int64_t>(comm.members.size()) != n) continue;
    if (world == SIZE_MAX || comm.order < m.comms[world].order) world = c;
  }
  if (world != SIZE_MAX) {
    for (const GComm::Member& mem : m.comms[world].members) global[mem.entity] = static_cast<int32_t>(mem.rank);
    result.rank_rule = fmt::format("global ranks are the ranks of the first communicator that holds all {} ranks "
                                   "({} at {}:{})",
                                   n, m.comms[world].created_by, m.comms[world].members.front().file,
                                   m.comms[world].members.front().line);
  } else {
    std::vector<size_t> order = alive;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (m.entities[a].process == PHANTOM || m.entities[b].process == PHANTOM) {
        return std::pair{m.entities[a].process == PHANTOM, m.entities[a].device} <
               std::pair{m.entities[b].process == PHANTOM, m.entities[b].device};
      }
      const Process& pa = processes[m.entities[a].process];
      const Process& pb = processes[m.entities[b].process];
      auto key = [](const Process& p, const Entity& e) {
        return std::tuple{p.env_rank < 0, p.env_rank, p.host, p.pid, e.device};
      };
      return key(pa, m.entities[a]) < key(pb, m.entities[b]);
    });
    for (size_t i = 0; i < order.size(); ++i) global[order[i]] = static_cast<int32_t>(i);
    result.rank_rule = fmt::format("no communicator holds all {} ranks: global ranks follow the launcher's rank "
                                   "variable (RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID), then "
                                   "host, pid and device",
                                   n);
  }
  for (size_t e : alive) {
    if (m.entities[e].process != PHANTOM) result.processes[m.entities[e].process].ranks.push_back(global[e]);
  }
  if (!phantom_ranks.empty()) {
    const GComm& comm = m.comms[largest];
    std::vector<int32_t> missing;
    for (int64_t r : phantom_ranks) {
      for (const GComm::Member& mem : comm.members) {
        if (mem.rank == r) missing.push_back(global[mem.entity]);
      }
    }
    std::sort(missing.begin(), missing.end());
    errors.warning(comm.members.front().file, comm.members.front().line,
                   fmt::format("{} of the {} ranks of this {} never recorded it (global {} {}): a process that never "
                               "called it, or whose recording is missing; in the trace as {} that issue{} nothing",
                               missing.size(), comm.nranks, comm.created_by, missing.size() == 1 ? "rank" : "ranks",
                               join_ranks(missing), missing.size() == 1 ? "a rank" : "ranks",
                               missing.size() == 1 ? "s" : ""));
  }
  for (ProcessSummary& s : result.processes) std::sort(s.ranks.begin(), s.ranks.end());

  // The scenario.
  sim::Scenario s;
  s.name = options.name;
  s.source_url = options.source;
  s.path = "trace.jsonl";
  s.world = static_cast<int32_t>(n);
  std::vector<int32_t> all(static_cast<size_t>(n));
  for (int32_t r = 0; r < s.world; ++r) all[static_cast<size_t>(r)] = r;
  s.groups.push_back(sim::make_group("world", {}, all, s.world));
  std::vector<int64_t> group_of(m.comms.size(), -1);
  if (world != SIZE_MAX) group_of[world] = 0;
  std::vector<size_t> by_rank(static_cast<size_t>(n));
  for (size_t e : alive) by_rank[static_cast<size_t>(global[e])] = e;
  for (size_t& events_sorted : by_rank) {
    std::stable_sort(m.events[events_sorted].begin(), m.events[events_sorted].end(),
                     [](const Event& a, const Event& b) { return a.seq < b.seq; });
  }
  const auto members_global = [&](const GComm& c) {
    std::vector<int32_t> ranks;
    for (const GComm::Member& mem : c.members) ranks.push_back(global[mem.entity]);
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  };
  const auto describe = [&](const GComm& c) {
    if (c.kind == CommKind::SPLIT) {
      const int64_t parent = group_of[c.parent];
      return fmt::format("ncclCommSplit of {} (color {})",
                         parent >= 0 ? s.groups[static_cast<size_t>(parent)].name : std::string("?"), c.color);
    }
    return c.created_by;
  };
  for (size_t r = 0; r < by_rank.size(); ++r) {
    for (const Event& e : m.events[by_rank[r]]) {
      if (group_of[e.comm] >= 0) continue;
      const GComm& c = m.comms[e.comm];
      group_of[e.comm] = static_cast<int64_t>(s.groups.size());
      s.groups.push_back(sim::make_group(fmt::format("comm{}", s.groups.size()), {}, members_global(c), s.world));
    }
  }
  std::vector<size_t> comm_of_group(s.groups.size(), SIZE_MAX);
  for (size_t c = 0; c < m.comms.size(); ++c) {
    if (group_of[c] >= 0) comm_of_group[static_cast<size_t>(group_of[c])] = c;
  }
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (comm_of_group[g] == SIZE_MAX) continue;  // world without a communicator of all ranks
    const GComm& comm = m.comms[comm_of_group[g]];
    const std::vector<int32_t> ranks = members_global(comm);
    result.groups.push_back(fmt::format("{} = {}: ranks {}", s.groups[g].name, describe(comm), join_ranks(ranks)));
    if (comm.kind != CommKind::SPLIT && static_cast<int64_t>(comm.members.size()) < comm.nranks) {
      errors.warning(comm.members.front().file, comm.members.front().line,
                     fmt::format("{} was created for {} ranks; only {} of them recorded it (ranks {}): a process that "
                                 "never called {}, or whose recording is missing",
                                 s.groups[g].name, comm.nranks, comm.members.size(), join_ranks(ranks),
                                 comm.created_by));
    }
  }

  s.rank_program.resize(static_cast<size_t>(n));
  s.programs.resize(static_cast<size_t>(n));
  for (int32_t r = 0; r < s.world; ++r) {
    s.rank_program[static_cast<size_t>(r)] = static_cast<uint32_t>(r);
    sim::RankProgram& program = s.programs[static_cast<size_t>(r)];
    std::vector<uint64_t> tids;
    std::unordered_map<uint64_t, uint64_t> stream_names;
    // Per thread: the ops of the NCCL group being read, emitted at its end.
    struct Open {
      uint64_t group = 0;
      std::vector<sim::Stmt> stmts;
    };
    std::unordered_map<uint64_t, Open> open;
    const auto thread_of = [&](uint64_t tid) -> sim::ThreadDef& {
      auto it = std::find(tids.begin(), tids.end(), tid);
      if (it == tids.end()) {
        tids.push_back(tid);
        program.push_back({tids.size() == 1 ? "main" : fmt::format("thread{}", tids.size()), {}, {}});
        return program.back();
      }
      return program[static_cast<size_t>(it - tids.begin())];
    };
    // An NCCL group of several ops is one NCCL_GROUP statement (group_start ... group_end in the
    // trace); a group of one op is that op.
    const auto close_group = [&](uint64_t tid) {
      Open& o = open[tid];
      if (o.stmts.empty()) return;
      sim::ThreadDef& thread = thread_of(tid);
      if (o.stmts.size() == 1) {
        thread.mutable_body().push_back(std::move(o.stmts.front()));
      } else {
        sim::Stmt group;
        group.kind = sim::StmtKind::NCCL_GROUP;
        group.loc = o.stmts.front().loc;
        group.body = std::move(o.stmts);
        thread.mutable_body().push_back(std::move(group));
      }
      o.stmts.clear();
      o.group = 0;
    };
    const size_t entity = by_rank[static_cast<size_t>(r)];
    for (const Event& e : m.events[entity]) {
      thread_of(e.tid);
      Open& o = open[e.tid];
      if (o.group != e.group) close_group(e.tid);
      const GComm& comm = m.comms[e.comm];
      sim::Stmt stmt;
      stmt.group = static_cast<uint32_t>(group_of[e.comm]);
      stmt.loc = {static_cast<uint32_t>(e.line), 1};
      if (e.kind != EventKind::OP) {
        stmt.op = sim::OpKind::BARRIER;
        stmt.size = sim::Expr::constant(sim::dtype_bytes(stmt.dtype));
        stmt.tag = s.names->intern(call_name(e.call));
      } else {
        stmt.op = *op_kind(e.call);
        stmt.dtype = dtype_of(e.dtype);
        const uint64_t per_rank = count_is_per_rank(e.call) ? static_cast<uint64_t>(std::max<int64_t>(comm.nranks, 1)) : 1;
        const uint64_t bytes = e.count * nccl_abi::dtype_bytes(static_cast<nccl_abi::DataType>(e.dtype)) * per_rank;
        stmt.size = sim::Expr::constant(static_cast<int64_t>(bytes));
        auto [it, inserted] = stream_names.try_emplace(e.stream, stream_names.size());
        stmt.stream = s.names->intern(fmt::format("cuda:{}", it->second));
        if (sim::has_root(stmt.op) || sim::is_p2p(stmt.op)) {
          int32_t target = -1;
          for (const GComm::Member& mem : comm.members) {
            if (mem.rank == e.root_or_peer) target = global[mem.entity];
          }
          if (target < 0) {
            errors.warning(e.file, e.line,
                           fmt::format("{} {} {} of {}, which has no recorded rank {}; left out", call_name(e.call),
                                       sim::is_p2p(stmt.op) ? "with peer" : "with root", e.root_or_peer,
                                       s.groups[stmt.group].name, e.root_or_peer));
            continue;
          }
          if (sim::is_p2p(stmt.op)) {
            stmt.has_peer = true;
            stmt.peer = sim::Expr::constant(target);
          } else {
            stmt.has_root = true;
            stmt.set_extra().root = sim::Expr::constant(target);
          }
        }
      }
      if (e.group != 0) {
        o.group = e.group;
        o.stmts.push_back(std::move(stmt));
      } else {
        thread_of(e.tid).mutable_body().push_back(std::move(stmt));
      }
    }
    for (uint64_t tid : tids) close_group(tid);  // a group never ended: its ops were issued
  }
  if (errors.any()) return result;
  const std::string problem = sim::trace_write_problem(s);
  if (!problem.empty()) {
    errors.error("(recordings)", 0, "internal: the merged schedule cannot be written: " + problem);
    return result;
  }
  result.scenario = std::move(s);
  return result;
}

MergeResult merge_files(std::vector<std::string> paths, const MergeOptions& options) {
  MergeResult failed;
  Errors errors(failed, options.max_errors);
  const auto files = read_recordings(std::move(paths), options.max_files, options.max_file_bytes, errors);
  if (errors.any()) return failed;
  return merge_texts(files, options);
}

}  // namespace lockstep::record
