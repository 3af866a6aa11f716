#include "import/nccl_log.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "import/line_reader.h"
#include "sim/input_file.h"

namespace lockstep::import {

namespace {

struct Position {
  uint32_t file = 0;
  uint32_t line = 0;
  auto operator<=>(const Position&) const = default;
};

struct InitLine {
  Position at;
  uint32_t device = 0;   // index into devices
  uint64_t comm = 0;     // the communicator's address in its process
  int32_t rank = 0;      // in the communicator
  int32_t nranks = 0;
  std::string comm_id;   // "commId 0x..." (NCCL 2.18+), "" when absent
};

struct CollLine {
  Position at;
  uint32_t device = 0;
  uint64_t comm = 0;
  sim::OpKind kind = sim::OpKind::ALLREDUCE;
  sim::DType dtype = sim::DType::FP32;
  int64_t bytes = 0;
  int32_t root = 0;      // comm-local root, or the peer of Send/Recv
  uint64_t op_count = 0;
  uint32_t nccl_group = 0;
  uint32_t init = UINT32_MAX;  // the last Init COMPLETE of (device, comm) before it; none: UINT32_MAX
};

struct Device {
  std::string name;  // "host:pid [dev]"
};

// Thread state for ncclGroupStart/End nesting.
struct ThreadGroup {
  int depth = 0;
  uint32_t id = 0;
};

// A logging thread ("HOST:PID:TID [DEV]"): its device and group state.
struct LogThread {
  uint32_t device = 0;
  ThreadGroup group;
  // The communicator of this thread's last call and its init, while no init line came since.
  uint64_t cached_comm = 0;
  uint32_t cached_init = UINT32_MAX;
  uint64_t cached_epoch = UINT64_MAX;
};

// Heterogeneous lookup: find by string_view without making a string per line.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

// `text == word` with the length known at compile time (the compare is inlined).
template <size_t N>
bool is_word(std::string_view text, const char (&word)[N]) {
  return text.size() == N - 1 && std::memcmp(text.data(), word, N - 1) == 0;
}

// The offset of `needle` in `text`, or npos: memchr for its first byte (which should be rare in
// the text), then a compare of known length.
template <size_t N>
size_t find_text(std::string_view text, const char (&needle)[N]) {
  constexpr size_t LENGTH = N - 1;
  const char* const begin = text.data();
  const char* const last = begin + text.size();
  const char* at = begin;
  while (static_cast<size_t>(last - at) >= LENGTH) {
    at = static_cast<const char*>(std::memchr(at, needle[0], static_cast<size_t>(last - at) - LENGTH + 1));
    if (at == nullptr) return std::string_view::npos;
    if (std::memcmp(at + 1, needle + 1, LENGTH - 1) == 0) return static_cast<size_t>(at - begin);
    ++at;
  }
  return std::string_view::npos;
}

bool parse_u64(std::string_view text, uint64_t& value, int base = 10) {
  if (base == 16 && text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

bool parse_i32(std::string_view text, int32_t& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

// The offset of the first space at or after `i` (size: none); memchr underneath.
size_t next_space(std::string_view text, size_t i) {
  const size_t at = text.find(' ', std::min(i, text.size()));
  return at == std::string_view::npos ? text.size() : at;
}

// Splits on spaces.
void tokens_of(std::string_view text, std::vector<std::string_view>& out) {
  out.clear();
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const size_t start = i;
    i = next_space(text, i);
    if (i > start) out.push_back(text.substr(start, i - start));
  }
}

std::optional<std::pair<sim::DType, int64_t>> nccl_dtype(int32_t code) {
  switch (code) {
    case 0: return std::pair{sim::DType::INT8, 1};
    case 1: return std::pair{sim::DType::UINT8, 1};
    case 2: return std::pair{sim::DType::INT32, 4};
    case 3: return std::pair{sim::DType::UINT32, 4};
    case 4: return std::pair{sim::DType::INT64, 8};
    case 5: return std::pair{sim::DType::UINT64, 8};
    case 6: return std::pair{sim::DType::FP16, 2};
    case 7: return std::pair{sim::DType::FP32, 4};
    case 8: return std::pair{sim::DType::FP64, 8};
    case 9: return std::pair{sim::DType::BF16, 2};
    case 10: return std::pair{sim::DType::FP8_E4M3, 1};
    case 11: return std::pair{sim::DType::FP8_E5M2, 1};
    default: return std::nullopt;
  }
}

std::optional<sim::OpKind> nccl_op(std::string_view name) {
  const sim::OpInfo* op = sim::find_nccl_op(name);
  return op != nullptr ? std::optional(op->kind) : std::nullopt;
}

class LogReader {
 public:
  RecordedTrace run(const std::vector<std::string>& paths) {
    for (uint32_t f = 0; f < paths.size(); ++f) read_file(f, paths[f]);
    return build(paths);
  }

 private:
  [[noreturn]] void fail(const std::string& path, uint32_t line, size_t col, const std::string& message) {
    throw ImportError(path, {line, static_cast<uint32_t>(col + 1)}, message);
  }

  uint32_t device_of(std::string_view host_pid, std::string_view dev) {
    std::string name = fmt::format("{} [{}]", host_pid, dev);
    auto [it, added] = device_index_.emplace(name, static_cast<uint32_t>(devices_.size()));
    if (added) devices_.push_back({std::move(name)});
    return it->second;
  }

  void read_file(uint32_t f, const std::string& path) {
    sim::InputFile file;
    if (!file.open(path, INT64_MAX)) throw ImportError(path, {}, "cannot read file: " + file.error());
    const std::string_view text = file.text();
    // Most lines are calls: room for them up front (untouched room costs no memory).
    colls_.reserve(colls_.size() + text.size() / 128);
    std::string_view line;
    std::vector<std::string_view> tokens;
    size_t next = 0;
    uint32_t number = 0;
    while (next < text.size()) {
      // The next line without its "\n" (and "\r"), at most LineReader::MAX_LINE_BYTES long.
      const void* nl = std::memchr(text.data() + next, '\n', text.size() - next);
      const size_t line_end = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - text.data()) : text.size();
      if (line_end - next > LineReader::MAX_LINE_BYTES) {
        throw ImportError(path, {number + 1, 1}, "cannot read file: a line longer than 16 MiB");
      }
      line = text.substr(next, line_end - next);
      next = line_end + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      ++number;
      ++lines_;
      size_t marker = find_text(line, " NCCL INFO ");
      size_t marker_len = 11;
      if (marker == std::string_view::npos) {
        marker = find_text(line, " NCCL TRACE ");
        marker_len = 12;
        if (marker == std::string_view::npos) continue;
      }
      std::string_view message = line.substr(marker + marker_len);
      // "host:pid:tid [dev]" just before the marker (TRACE lines have a time and function between).
      const std::string_view prefix = line.substr(0, marker);
      const size_t open = prefix.rfind(" [") != std::string_view::npos ? prefix.rfind(" [") + 1
                                                                       : (prefix.rfind('[') == 0 ? 0 : std::string_view::npos);
      const bool is_coll = find_text(message, ": opCount ") != std::string_view::npos;
      const bool is_init = find_text(message, "Init COMPLETE") != std::string_view::npos;
      const bool is_group = find_text(message, "Group") != std::string_view::npos;  // 'G' is rare; 'n' is not
      const bool is_group_start = is_group && find_text(message, "ncclGroupStart()") != std::string_view::npos;
      const bool is_group_end = is_group && find_text(message, "ncclGroupEnd()") != std::string_view::npos;
      if (!is_coll && !is_init && !is_group_start && !is_group_end) continue;
      const size_t close = open == std::string_view::npos ? std::string_view::npos : prefix.find(']', open);
      if (open == std::string_view::npos || close == std::string_view::npos) {
        fail(path, number, 0, "cannot tell which process logged this line: expected 'HOST:PID:TID [DEVICE] NCCL INFO'");
      }
      const std::string_view dev = prefix.substr(open + 1, close - open - 1);
      std::string_view head = prefix.substr(0, open);
      while (!head.empty() && head.back() == ' ') head.remove_suffix(1);
      const size_t head_start = head.rfind(' ') == std::string_view::npos ? 0 : head.rfind(' ') + 1;
      const std::string_view host_pid_tid = head.substr(head_start);
      const size_t tid_colon = host_pid_tid.rfind(':');
      if (tid_colon == std::string_view::npos || tid_colon == 0 || host_pid_tid.find(':') == tid_colon) {
        fail(path, number, head_start, "cannot tell which process logged this line: expected 'HOST:PID:TID [DEVICE] NCCL INFO'");
      }
      const std::string_view thread_key = line.substr(static_cast<size_t>(host_pid_tid.data() - line.data()),
                                                      static_cast<size_t>(dev.data() + dev.size() + 1 - host_pid_tid.data()));
      auto found = threads_.find(thread_key);
      if (found == threads_.end()) {
        const uint32_t made = device_of(host_pid_tid.substr(0, tid_colon), dev);
        found = threads_.emplace(std::string(thread_key), LogThread{made, {}}).first;
      }
      LogThread& thread = found->second;
      const uint32_t device = thread.device;
      if (is_group_start || is_group_end) {
        ThreadGroup& group = thread.group;
        if (is_group_start) {
          if (group.depth++ == 0) group.id = ++next_group_;
        } else if (group.depth > 0) {
          --group.depth;
        }
        continue;
      }
      // Skip a "[N] " some launchers put after the marker.
      if (!message.empty() && message[0] == '[') {
        const size_t end = message.find("] ");
        if (end != std::string_view::npos && end < 8) message.remove_prefix(end + 2);
      }
      const size_t message_col = static_cast<size_t>(message.data() - line.data());
      tokens_of(message, tokens);
      if (is_init) {
        InitLine init;
        init.at = {f, number};
        init.device = device;
        bool has_comm = false, has_rank = false, has_nranks = false;
        for (size_t i = 0; i + 1 < tokens.size(); ++i) {
          if (tokens[i] == "comm") has_comm = parse_u64(tokens[i + 1], init.comm, 16);
          else if (tokens[i] == "rank") has_rank = parse_i32(tokens[i + 1], init.rank);
          else if (tokens[i] == "nranks" || tokens[i] == "nRanks") has_nranks = parse_i32(tokens[i + 1], init.nranks);
          else if (tokens[i] == "commId" || tokens[i] == "commHash") init.comm_id = std::string(tokens[i + 1]);
        }
        if (!has_comm || !has_rank || !has_nranks || init.nranks < 1 || init.rank < 0 || init.rank >= init.nranks) {
          fail(path, number, message_col, "an 'Init COMPLETE' line without 'comm ADDRESS rank R nranks N'");
        }
        if (init.nranks > (1 << 20)) fail(path, number, message_col, "a communicator of more than 1048576 ranks");
        last_init_[{init.device, init.comm}] = static_cast<uint32_t>(inits_.size());
        ++init_epoch_;
        inits_.push_back(std::move(init));
        continue;
      }
      // "OpName: opCount X sendbuff P recvbuff P count N datatype D op O root R comm P [nranks=N] stream P"
      const size_t colon = message.find(": opCount ");
      const std::string_view op_name = message.substr(0, colon);
      const std::optional<sim::OpKind> kind = nccl_op(op_name);
      if (!kind) {
        fail(path, number, message_col, fmt::format("unknown op '{}'; known ops: AllGather, AllReduce, AllToAll, Broadcast, "
                                                    "Gather, Recv, Reduce, ReduceScatter, Scatter, Send", op_name));
      }
      CollLine coll;
      coll.at = {f, number};
      coll.device = device;
      coll.kind = *kind;
      coll.nccl_group = 0;
      if (thread.group.depth > 0) coll.nccl_group = thread.group.id;
      uint64_t count = 0;
      int32_t dtype = -1;
      bool has_count = false, has_comm = false;
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        const std::string_view key = tokens[i];
        const std::string_view value = tokens[i + 1];
        bool ok = true;
        if (is_word(key, "opCount")) ok = parse_u64(value, coll.op_count, 16);
        else if (is_word(key, "count")) ok = has_count = parse_u64(value, count);
        else if (is_word(key, "datatype")) ok = parse_i32(value, dtype);
        else if (is_word(key, "root")) ok = parse_i32(value, coll.root);
        else if (is_word(key, "comm")) ok = has_comm = parse_u64(value, coll.comm, 16);
        else continue;
        if (!ok) {
          fail(path, number, static_cast<size_t>(value.data() - line.data()), fmt::format("invalid value '{}' for '{}'", value, key));
        }
        ++i;
      }
      if (!has_count || !has_comm || dtype < 0) {
        fail(path, number, message_col, fmt::format("a {} line without 'count', 'datatype' and 'comm'", op_name));
      }
      const auto type = nccl_dtype(dtype);
      if (!type) fail(path, number, message_col, fmt::format("unknown NCCL datatype {} (0 to 11 are known)", dtype));
      coll.dtype = type->first;
      if (count > static_cast<uint64_t>(INT64_MAX / 16)) fail(path, number, message_col, "count out of range");
      coll.bytes = static_cast<int64_t>(count) * type->second;
      // Lines are read in (file, line) order: the last init read is the last one before it.
      if (thread.cached_epoch != init_epoch_ || thread.cached_comm != coll.comm) {
        const auto init = last_init_.find({device, coll.comm});
        thread.cached_init = init != last_init_.end() ? init->second : UINT32_MAX;
        thread.cached_comm = coll.comm;
        thread.cached_epoch = init_epoch_;
      }
      coll.init = thread.cached_init;
      colls_.push_back(coll);
    }
  }

  RecordedTrace build(const std::vector<std::string>& paths) {
    RecordedTrace trace;
    trace.source = "lockstep import nccl-log";
    if (inits_.empty()) {
      throw ImportError(paths.front(), {}, "no 'Init COMPLETE' line: run with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,COLL "
                                           "(INIT is on by default) so that communicators can be mapped to ranks");
    }
    int32_t world = 0;
    for (const InitLine& init : inits_) world = std::max(world, init.nranks);
    // Each device's global rank: its rank in a communicator of all ranks.
    std::vector<int32_t> global(devices_.size(), -1);
    std::map<int32_t, uint32_t> device_of_rank;
    for (const InitLine& init : inits_) {
      if (init.nranks != world || global[init.device] >= 0) continue;
      auto [it, added] = device_of_rank.emplace(init.rank, init.device);
      if (!added) {
        throw ImportError(paths[init.at.file], {init.at.line, 1}, fmt::format(
            "ranks disagree: {} and {} both say they are rank {} of the {} ranks",
            devices_[it->second].name, devices_[init.device].name, init.rank, world));
      }
      global[init.device] = init.rank;
    }
    // Communicators: one per commId (or per (size, k-th init of that size on a device) without one).
    struct Comm {
      std::string id;
      int32_t nranks = 0;
      std::vector<int32_t> members;  // comm rank -> global rank (-1: not logged)
      Position first;
      uint32_t group = UINT32_MAX;  // made at its first op: communicators without ops get none
      std::vector<int32_t> sorted;  // its ranks, ascending
    };
    std::vector<Comm> comms;
    std::map<std::string, size_t> comm_by_id;
    std::vector<size_t> comm_of_init(inits_.size());
    std::map<std::pair<uint32_t, int32_t>, int> kth;  // (device, nranks) -> inits seen
    for (size_t i = 0; i < inits_.size(); ++i) {
      const InitLine& init = inits_[i];
      const int32_t g = global[init.device];
      if (g < 0) {
        throw ImportError(paths[init.at.file], {init.at.line, 1}, fmt::format(
            "cannot tell the global rank of {}: it logged no 'Init COMPLETE' of a communicator of all {} ranks",
            devices_[init.device].name, world));
      }
      const int k = kth[{init.device, init.nranks}]++;
      const std::string key = !init.comm_id.empty() ? init.comm_id : fmt::format("size {} #{}", init.nranks, k);
      auto [it, added] = comm_by_id.emplace(key, comms.size());
      if (added) comms.push_back({key, init.nranks, std::vector<int32_t>(static_cast<size_t>(init.nranks), -1), init.at, UINT32_MAX, {}});
      Comm& comm = comms[it->second];
      if (comm.nranks != init.nranks) {
        throw ImportError(paths[init.at.file], {init.at.line, 1}, fmt::format(
            "ranks disagree on communicator {}: {} ranks here, {} in an earlier line", key, init.nranks, comm.nranks));
      }
      int32_t& member = comm.members[static_cast<size_t>(init.rank)];
      if (member >= 0 && member != g) {
        throw ImportError(paths[init.at.file], {init.at.line, 1}, fmt::format(
            "ranks disagree on communicator {}: ranks {} and {} both say they are its rank {}", key, member, g, init.rank));
      }
      member = g;
      comm_of_init[i] = it->second;
    }
    trace.world = world;
    trace.ranks.assign(static_cast<size_t>(world), {});
    std::vector<int32_t> all(static_cast<size_t>(world));
    for (int32_t r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
    trace.add_group("world", all);
    bool world_taken = false;
    int next_name = 1;
    for (Comm& comm : comms) {
      std::vector<int32_t> ranks;
      for (int32_t m : comm.members) {
        if (m >= 0) ranks.push_back(m);
      }
      std::vector<int32_t> sorted = ranks;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
        throw ImportError(paths[comm.first.file], {comm.first.line, 1}, fmt::format(
            "ranks disagree on communicator {}: a rank is a member twice", comm.id));
      }
      comm.sorted = sorted;
      if (comm.nranks == world && !world_taken && sorted == all) {
        world_taken = true;
        comm.group = 0;
      }
    }
    // colls_ are in (file, line) order, as read. The last opCount per (rank, communicator):
    // a slot per distinct (device, communicator) of the inits.
    std::vector<uint32_t> slot_of_init(inits_.size());
    std::map<std::pair<uint32_t, size_t>, uint32_t> slots;
    for (size_t i = 0; i < inits_.size(); ++i) {
      slot_of_init[i] = slots.emplace(std::pair{inits_[i].device, comm_of_init[i]}, static_cast<uint32_t>(slots.size())).first->second;
    }
    std::vector<uint64_t> last_op_count(slots.size(), 0);
    std::vector<size_t> ops_of_device(devices_.size(), 0);
    for (const CollLine& coll : colls_) ++ops_of_device[coll.device];
    for (size_t d = 0; d < devices_.size(); ++d) {
      if (global[d] >= 0) trace.ranks[static_cast<size_t>(global[d])].reserve(ops_of_device[d]);
    }
    size_t out_of_order = 0;
    for (const CollLine& coll : colls_) {
      const size_t init = coll.init;
      if (init == UINT32_MAX) {
        throw ImportError(paths[coll.at.file], {coll.at.line, 1}, fmt::format(
            "{} uses communicator 0x{:x} before any 'Init COMPLETE' line of it", devices_[coll.device].name, coll.comm));
      }
      Comm& comm = comms[comm_of_init[init]];
      if (comm.group == UINT32_MAX) comm.group = trace.add_group(fmt::format("comm{}", next_name++), comm.sorted);
      const int32_t rank = global[coll.device];
      RecordedOp op;
      op.kind = coll.kind;
      op.dtype = coll.dtype;
      op.size = coll.bytes;
      op.group = comm.group;
      op.nccl_group = coll.nccl_group;
      if (coll.kind == sim::OpKind::SEND || coll.kind == sim::OpKind::RECV || sim::has_root(coll.kind)) {
        if (coll.root < 0 || coll.root >= comm.nranks || comm.members[static_cast<size_t>(coll.root)] < 0) {
          throw ImportError(paths[coll.at.file], {coll.at.line, 1}, fmt::format(
              "{} rank {} of communicator {} is not known (no Init COMPLETE line of it)",
              sim::is_p2p(coll.kind) ? "peer" : "root", coll.root, comm.id));
        }
        op.peer = comm.members[static_cast<size_t>(coll.root)];
      }
      uint64_t& last = last_op_count[slot_of_init[init]];
      if (coll.op_count < last) ++out_of_order;
      last = coll.op_count;
      trace.ranks[static_cast<size_t>(rank)].push_back(op);
    }
    for (const Comm& comm : comms) {
      trace.notes.push_back(fmt::format("communicator {} of {} rank{} ({}): {}{}", comm.id, comm.nranks, comm.nranks == 1 ? "" : "s",
                                        sim::format_ranks(comm.sorted),
                                        comm.group == UINT32_MAX ? "no ops" : "group " + trace.groups[comm.group].name,
                                        static_cast<int32_t>(comm.sorted.size()) < comm.nranks
                                            ? fmt::format(" ({} of its ranks logged no Init COMPLETE)", comm.nranks - static_cast<int32_t>(comm.sorted.size()))
                                            : ""));
    }
    trace.notes.insert(trace.notes.begin(), fmt::format("read {} line{} of {} file{}: {} NCCL call{} of {} rank{} on {} communicator{}",
                                                        lines_, lines_ == 1 ? "" : "s", paths.size(), paths.size() == 1 ? "" : "s",
                                                        colls_.size(), colls_.size() == 1 ? "" : "s", world, world == 1 ? "" : "s",
                                                        comms.size(), comms.size() == 1 ? "" : "s"));
    if (next_group_ > 0) trace.notes.push_back(fmt::format("{} NCCL group{} from ncclGroupStart/ncclGroupEnd lines", next_group_, next_group_ == 1 ? "" : "s"));
    if (out_of_order > 0) {
      trace.notes.push_back(fmt::format("{} call{} logged with a smaller opCount than the call before on the same communicator: "
                                        "kept in line order", out_of_order, out_of_order == 1 ? "" : "s"));
    }
    return trace;
  }

  std::vector<Device> devices_;
  std::unordered_map<std::string, uint32_t> device_index_;
  std::unordered_map<std::string, LogThread, TextHash, std::equal_to<>> threads_;
  uint32_t next_group_ = 0;
  std::vector<InitLine> inits_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> last_init_;  // (device, comm address) -> the last init
  uint64_t init_epoch_ = 0;                                        // init lines read so far
  std::vector<CollLine> colls_;
  uint64_t lines_ = 0;
};

}  // namespace

RecordedTrace import_nccl_logs(const std::vector<std::string>& paths) {
  if (paths.empty()) throw ImportError("", {}, "no logs given");
  return LogReader().run(paths);
}

}  // namespace lockstep::import
