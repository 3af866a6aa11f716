// Flight Recorder dumps -> a recorded schedule: the dumps' entries (read by
// import/flight_recorder_dump.cc, from JSON or pickle alike) checked against each other and
// turned into ops.
#include "import/flight_recorder.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "import/json_pull.h"
#include "import/pickle_reader.h"
#include "sim/input_file.h"
#include "sim/loader.h"
#include "import/flight_recorder_dump.h"

namespace lockstep::import {

namespace {

using fr::FrDump;
using fr::FrEntry;
using fr::FrOpName;
using fr::FrPg;
using fr::FrState;
using fr::parse_dump;
using fr::parse_version;

// ---------------------------------------------------------------------------------------------
// Dumps -> schedule.

std::string sanitize(std::string_view text) {
  std::string out;
  for (const char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) != 0) out = "pg_" + out;
  return out;
}

// The name a process group gets from its desc (`dp`, `tp`), or from its pg name without one.
std::string base_of(const FrPg& pg) {
  return pg.desc.empty() || pg.desc == "undefined" ? sanitize(pg.name) : sanitize(pg.desc);
}

// Ascending ranks as a part of a group name: "3", "0to3", "0to6by2", "0_1_5", else
// "0to9_12ranks".
std::string ranks_suffix(const std::vector<int32_t>& ranks) {
  if (ranks.size() == 1) return std::to_string(ranks.front());
  const int32_t step = ranks[1] - ranks[0];
  bool arithmetic = step > 0;
  for (size_t i = 2; i < ranks.size() && arithmetic; ++i) arithmetic = ranks[i] - ranks[i - 1] == step;
  if (arithmetic) return fmt::format("{}to{}{}", ranks.front(), ranks.back(), step == 1 ? "" : fmt::format("by{}", step));
  if (ranks.size() <= 6) {
    std::string out;
    for (int32_t r : ranks) out += (out.empty() ? "" : "_") + std::to_string(r);
    return out;
  }
  return fmt::format("{}to{}_{}ranks", ranks.front(), ranks.back(), ranks.size());
}

struct GroupKey {
  std::string name;
  std::vector<int32_t> ranks;  // sorted
  auto operator<=>(const GroupKey&) const = default;
};

class Builder {
 public:
  Builder(std::vector<FrDump> dumps, std::vector<std::string>* warnings) : dumps_(std::move(dumps)), warnings_(warnings) {}

  RecordedTrace run() {
    std::sort(dumps_.begin(), dumps_.end(), [](const FrDump& a, const FrDump& b) { return a.rank < b.rank; });
    for (size_t i = 1; i < dumps_.size(); ++i) {
      if (dumps_[i].rank == dumps_[i - 1].rank) {
        throw ImportError(dumps_[i].path, {}, fmt::format("a second dump of rank {} (the first is {})", dumps_[i].rank, dumps_[i - 1].path));
      }
    }
    check_versions();
    collect_groups();
    build_ops();
    return std::move(trace_);
  }

 private:
  [[noreturn]] void fail_entry(const FrDump& dump, const FrEntry& entry, const std::string& message) {
    throw ImportError(dump.path, entry.at, fmt::format("entry {}{}: {}", entry.index,
                                                 entry.record_id >= 0 ? fmt::format(" (record_id {})", entry.record_id) : "",
                                                 message));
  }

  void check_versions() {
    std::set<std::string> versions;
    std::map<std::string, std::vector<const FrDump*>> newer;  // version -> its dumps
    for (const FrDump& dump : dumps_) {
      int major = 0, minor = 0;
      if (!parse_version(dump.version, major, minor) || major != 2 || minor < FR_MIN_MINOR) {
        throw ImportError(dump.path, {}, fmt::format("unknown Flight Recorder version '{}'; versions 2.{} to 2.{} are read, "
                                                     "and newer 2.x ones as 2.{}",
                                                     dump.version, FR_MIN_MINOR, FR_MAX_MINOR, FR_MAX_MINOR));
      }
      if (minor > FR_MAX_MINOR) newer[dump.version].push_back(&dump);
      versions.insert(dump.version);
    }
    std::string list;
    for (const std::string& v : versions) list += (list.empty() ? "" : ", ") + v;
    trace_.notes.push_back(fmt::format("read {} Flight Recorder dump{} (version {})", dumps_.size(), dumps_.size() == 1 ? "" : "s", list));
    if (warnings_ == nullptr) return;
    for (const auto& [version, dumps] : newer) {
      std::set<std::string> unknown;
      for (const FrDump* dump : dumps) unknown.insert(dump->unknown_fields.begin(), dump->unknown_fields.end());
      std::string fields;
      for (const std::string& field : unknown) fields += (fields.empty() ? "" : ", ") + field;
      warnings_->push_back(fmt::format(
          "{}{}: warning: Flight Recorder version {} is newer than 2.{}, the newest this lockstep knows: read as 2.{}; {}",
          dumps.front()->path, dumps.size() == 1 ? "" : fmt::format(" (and {} more dump{})", dumps.size() - 1, dumps.size() == 2 ? "" : "s"),
          version, FR_MAX_MINOR, FR_MAX_MINOR,
          fields.empty() ? fmt::format("every field in it is one 2.{} has", FR_MAX_MINOR) : "fields not understood: " + fields));
    }
  }

  // Groups: (pg name, ranks) of every dump's pg_config. Two ranks that both belong to what the
  // other calls pg X, with different members, disagree.
  void collect_groups() {
    int32_t world = 0;
    for (const FrDump& dump : dumps_) {
      world = std::max(world, dump.rank + 1);
      for (const FrPg& pg : dump.pg_config) {
        for (int32_t r : pg.ranks) {
          if (r >= FR_MAX_RANKS) {
            throw ImportError(dump.path, {}, fmt::format("pg_config '{}' names rank {}: at most {} ranks are read", pg.name, r, FR_MAX_RANKS));
          }
        }
        // The first rank listed twice, in list order.
        std::vector<int32_t> sorted = pg.ranks;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
          std::set<int32_t> seen;
          for (int32_t r : pg.ranks) {
            if (!seen.insert(r).second) throw ImportError(dump.path, {}, fmt::format("pg_config '{}' lists rank {} twice", pg.name, r));
          }
        }
        if (!sorted.empty()) world = std::max(world, sorted.back() + 1);
        if (pg.ranks.empty()) throw ImportError(dump.path, {}, fmt::format("pg_config '{}' has no ranks", pg.name));
      }
    }
    trace_.world = world;
    trace_.ranks.assign(static_cast<size_t>(world), {});
    std::vector<int32_t> all(static_cast<size_t>(world));
    for (int32_t r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
    trace_.add_group("world", all);

    // The groups each name base stands for (the group of all ranks named default_pg or 0 is world).
    std::map<std::string, std::set<GroupKey>> sharing;
    for (const FrDump& dump : dumps_) {
      for (const FrPg& pg : dump.pg_config) {
        std::vector<int32_t> sorted = pg.ranks;
        std::sort(sorted.begin(), sorted.end());
        if (sorted == all && (pg.desc == "default_pg" || pg.name == "0")) continue;
        sharing[base_of(pg)].insert(GroupKey{pg.name, sorted});
      }
    }

    // Who says what about each pg name (members only).
    std::map<std::string, std::pair<std::vector<int32_t>, const FrDump*>> claims;  // name -> first member claim
    std::set<std::string> used_names{"world"};
    for (const FrDump& dump : dumps_) {
      for (const FrPg& pg : dump.pg_config) {
        std::vector<int32_t> sorted = pg.ranks;
        std::sort(sorted.begin(), sorted.end());
        const bool member = std::binary_search(sorted.begin(), sorted.end(), dump.rank);
        for (const auto& [other_name, claim] : claims) {
          if (other_name != pg.name || claim.first == sorted) continue;
          const auto& [other_ranks, other_dump] = claim;
          const bool overlap = std::binary_search(other_ranks.begin(), other_ranks.end(), dump.rank) ||
                               std::binary_search(sorted.begin(), sorted.end(), other_dump->rank);
          if (member && overlap) {
            throw ImportError(dump.path, {}, fmt::format(
                "ranks disagree on process group '{}': rank {} ({}) says its ranks are [{}], rank {} ({}) says [{}]",
                pg.name, other_dump->rank, other_dump->path, sim::format_ranks(other_ranks), dump.rank, dump.path,
                sim::format_ranks(sorted)));
          }
        }
        if (member && !claims.contains(pg.name)) claims[pg.name] = {sorted, &dump};
        GroupKey key{pg.name, sorted};
        if (group_of_.contains(key)) continue;
        uint32_t index = 0;
        if (sorted != all || (pg.desc != "default_pg" && pg.name != "0") || default_taken_) {
          // A desc (`dp`) that names one group is its name; one that several groups share names
          // each of them with its ranks too (`dp_0to3`, `dp_4to7`).
          const std::string base = base_of(pg);
          std::string name = sharing[base].size() > 1 ? base + "_" + ranks_suffix(sorted) : base;
          const std::string unique = name;
          for (int n = 2; used_names.contains(name); ++n) name = fmt::format("{}_{}", unique, n);
          used_names.insert(name);
          index = trace_.add_group(name, sorted);
          group_note(pg, name);
        } else {
          default_taken_ = true;
          group_note(pg, "world");
        }
        group_of_[key] = index;
      }
    }
  }

  void group_note(const FrPg& pg, const std::string& name) {
    trace_.notes.push_back(fmt::format("process group '{}'{} ranks [{}] is group {}", pg.name,
                                       pg.desc.empty() ? "" : fmt::format(" ({})", pg.desc),
                                       sim::format_ranks([&] {
                                         std::vector<int32_t> r = pg.ranks;
                                         std::sort(r.begin(), r.end());
                                         return r;
                                       }()),
                                       name));
  }

  // The group and pg_config entry an entry of `dump` belongs to (cached per dump and pg).
  std::pair<uint32_t, const FrPg*> group_of(const FrDump& dump, const FrEntry& entry) {
    if (cache_dump_ != &dump) {
      cache_dump_ = &dump;
      cache_.assign(dump.entry_pgs.size(), {UINT32_MAX, nullptr});
    }
    auto& cached = cache_[entry.pg];
    if (cached.second == nullptr) cached = resolve_group(dump, entry);
    return cached;
  }

  std::pair<uint32_t, const FrPg*> resolve_group(const FrDump& dump, const FrEntry& entry) {
    const std::string& name = dump.entry_pgs[entry.pg].first;
    for (const FrPg& pg : dump.pg_config) {
      if (pg.name != name) continue;
      std::vector<int32_t> sorted = pg.ranks;
      std::sort(sorted.begin(), sorted.end());
      if (!std::binary_search(sorted.begin(), sorted.end(), dump.rank)) continue;
      return {group_of_.at(GroupKey{pg.name, sorted}), &pg};
    }
    fail_entry(dump, entry, fmt::format("process group '{}' is not in this dump's pg_config with rank {} as a member", name, dump.rank));
  }

  bool is_p2p(const FrEntry& e) const {
    if (e.is_p2p >= 0) return e.is_p2p == 1;
    return e.name.kind == sim::OpKind::SEND || e.name.kind == sim::OpKind::RECV;
  }

  void build_ops() {
    uint32_t next_nccl_group = 1;
    // A ring buffer that wrapped lost its oldest entries: align each group to the first
    // collective every member that wrapped still has.
    std::map<uint32_t, int64_t> first_seq;  // group -> sequence number to start from
    std::vector<int32_t> wrapped;
    for (const FrDump& dump : dumps_) {
      if (dump.entries.empty() || dump.entries.front().record_id <= 0) continue;
      wrapped.push_back(dump.rank);
      std::map<uint32_t, int64_t> seen;
      for (const FrEntry& e : dump.entries) {
        if (e.name.coalesced_end || is_p2p(e)) continue;
        seen.emplace(group_of(dump, e).first, e.collective_seq);
      }
      for (const auto& [g, seq] : seen) first_seq[g] = std::max(first_seq[g], seq);
    }
    size_t dropped = 0;
    std::map<std::pair<uint32_t, int64_t>, std::vector<AllToAllMember>> all_to_alls;  // (group, seq) -> members
    std::map<std::string, std::vector<int32_t>> stops;  // where each rank stopped -> ranks
    std::vector<std::string> stop_order;                 // in order of their first rank
    for (const FrDump& dump : dumps_) {
      std::vector<RecordedOp>& ops = trace_.ranks[static_cast<size_t>(dump.rank)];
      std::vector<const FrEntry*> kept;  // parallel to ops
      ops.reserve(dump.entries.size());
      kept.reserve(dump.entries.size());
      bool started = first_seq.empty();
      for (size_t i = 0; i < dump.entries.size(); ++i) {
        const FrEntry& e = dump.entries[i];
        if (e.name.coalesced_end) {
          // The ops of this rank just before, on the same group with the same sequence number.
          const uint32_t g = group_of(dump, e).first;
          const bool p2p_group = e.is_p2p == 1 || (e.is_p2p < 0 && !kept.empty() && is_p2p(*kept.back()));
          const int64_t seq = p2p_group ? e.p2p_seq : e.collective_seq;
          size_t k = ops.size();
          while (k > 0 && ops[k - 1].nccl_group == 0 && ops[k - 1].group == g &&
                 (is_p2p(*kept[k - 1]) ? kept[k - 1]->p2p_seq : kept[k - 1]->collective_seq) == seq) {
            --k;
          }
          if (ops.size() - k > 1) {
            for (size_t j = k; j < ops.size(); ++j) ops[j].nccl_group = next_nccl_group;
            ++next_nccl_group;
          }
          continue;
        }
        const auto [g, pg] = group_of(dump, e);
        if (!started) {
          const auto it = first_seq.find(g);
          if (!is_p2p(e) && (it == first_seq.end() || e.collective_seq >= it->second)) started = true;
        }
        if (!is_p2p(e)) {
          const auto it = first_seq.find(g);
          if (it != first_seq.end() && e.collective_seq < it->second) {
            ++dropped;
            continue;
          }
        } else if (!started) {
          ++dropped;
          continue;
        }
        ops.push_back(op_of(dump, e, g, *pg));
        kept.push_back(&e);
        if (e.name.kind == sim::OpKind::ALL_TO_ALL) {
          all_to_alls[{g, e.collective_seq}].push_back({dump.rank, ops.size() - 1, e.in_bytes, e.out_bytes});
        }
      }
      std::string stop = stop_of(dump, ops, kept);
      if (!stops.contains(stop)) stop_order.push_back(stop);
      stops[stop].push_back(dump.rank);
    }
    for (const auto& [key, members] : all_to_alls) split_uneven(key.first, key.second, members);
    if (!wrapped.empty()) {
      trace_.notes.push_back(fmt::format("the ring buffer wrapped on rank{} {}: each group starts at the first collective "
                                         "all of them recorded ({} older entr{} left out)",
                                         wrapped.size() == 1 ? "" : "s", sim::format_ranks(wrapped), dropped,
                                         dropped == 1 ? "y" : "ies"));
    }
    std::vector<int32_t> without;
    for (int32_t r = 0, d = 0; r < trace_.world; ++r) {
      if (static_cast<size_t>(d) < dumps_.size() && dumps_[static_cast<size_t>(d)].rank == r) {
        ++d;
      } else {
        without.push_back(r);
      }
    }
    if (!without.empty()) {
      trace_.notes.push_back(fmt::format("no dump for rank{} {}: {} as issuing nothing", without.size() == 1 ? "" : "s",
                                         sim::format_ranks(without), without.size() == 1 ? "it appears" : "they appear"));
    }
    for (const std::string& text : stop_order) {
      const std::vector<int32_t>& ranks = stops[text];
      trace_.notes.push_back(fmt::format("rank{} {}: {}", ranks.size() == 1 ? "" : "s", sim::format_ranks(ranks), text));
    }
  }

  struct AllToAllMember {
    int32_t rank;
    size_t op;  // index in the rank's ops
    int64_t in_bytes, out_bytes;
  };

  // One nccl:all_to_all of every member of group g, sizes uneven: an all_to_all_single with
  // split sizes (the dump records each rank's input and output, not its splits). Where what the
  // members send in all equals what they receive, it becomes one with splits that agree with
  // those totals (the first rank's bytes to the lowest ranks first); otherwise no splits can
  // agree, and it stays an all_to_all, whose sizes then differ, with a note saying why.
  void split_uneven(uint32_t g, int64_t seq, const std::vector<AllToAllMember>& members) {
    const std::vector<int32_t>& ranks = trace_.groups[g].ranks;
    if (members.size() != ranks.size()) return;  // a member never issued it: the check says so
    std::vector<const AllToAllMember*> by_member(ranks.size(), nullptr);
    for (const AllToAllMember& m : members) {
      const auto at = std::lower_bound(ranks.begin(), ranks.end(), m.rank);
      if (at == ranks.end() || *at != m.rank) return;
      by_member[static_cast<size_t>(at - ranks.begin())] = &m;
    }
    int64_t sent = 0, received = 0;
    bool even = true;
    for (const AllToAllMember* m : by_member) {
      if (m == nullptr) return;
      sent += m->in_bytes;
      received += m->out_bytes;
      even = even && m->in_bytes == by_member.front()->in_bytes && m->out_bytes == m->in_bytes;
    }
    if (even) return;
    if (sent != received) {
      trace_.notes.push_back(fmt::format("all_to_all #{} on {}: the ranks send {} in all but receive {}: their split sizes "
                                         "cannot agree (kept as an all_to_all of each rank's input)",
                                         seq, trace_.groups[g].name, format_bytes(sent), format_bytes(received)));
      return;
    }
    // Member i sends split[i][j] to member j: row sums the inputs, column sums the outputs.
    const size_t n = ranks.size();
    std::vector<std::vector<int64_t>> split(n, std::vector<int64_t>(n, 0));
    std::vector<int64_t> to_send(n), to_receive(n);
    for (size_t i = 0; i < n; ++i) {
      to_send[i] = by_member[i]->in_bytes;
      to_receive[i] = by_member[i]->out_bytes;
    }
    for (size_t i = 0, j = 0; i < n && j < n;) {
      const int64_t bytes = std::min(to_send[i], to_receive[j]);
      split[i][j] = bytes;
      to_send[i] -= bytes;
      to_receive[j] -= bytes;
      if (to_send[i] == 0) ++i;
      else ++j;
    }
    for (size_t i = 0; i < n; ++i) {
      RecordedTrace::Splits splits;
      for (size_t j = 0; j < n; ++j) {
        splits.send.push_back(split[i][j]);
        splits.recv.push_back(split[j][i]);
      }
      trace_.splits.push_back(std::move(splits));
      RecordedOp& op = trace_.ranks[static_cast<size_t>(ranks[i])][by_member[i]->op];
      op.kind = sim::OpKind::ALL_TO_ALL_SINGLE;
      op.splits = static_cast<uint32_t>(trace_.splits.size());
    }
    if (!uneven_noted_) {
      trace_.notes.push_back(fmt::format("uneven all_to_all (the first: #{} on {}): read as all_to_all_single with "
                                         "split sizes that agree with each rank's totals; a dump records totals, not "
                                         "splits (record --torch records them)",
                                         seq, trace_.groups[g].name));
      uneven_noted_ = true;
    }
  }

  RecordedOp op_of(const FrDump& dump, const FrEntry& e, uint32_t g, const FrPg& pg) {
    RecordedOp op;
    op.kind = e.name.kind;
    op.group = g;
    const bool output_side = op.kind == sim::OpKind::RECV || op.kind == sim::OpKind::SCATTER;
    op.size = output_side ? e.out_bytes : e.in_bytes;
    const std::optional<sim::DType> dtype = output_side ? (e.out_dtype ? e.out_dtype : e.in_dtype) : (e.in_dtype ? e.in_dtype : e.out_dtype);
    if (dtype) op.dtype = *dtype;
    if (op.kind == sim::OpKind::SEND || op.kind == sim::OpKind::RECV) {
      const auto profiling_name = [&] {
        return op.kind == sim::OpKind::SEND ? fmt::format("nccl:send {}->{}", e.name.local_self, e.name.local_peer)
                                            : fmt::format("nccl:recv {}<-{}", e.name.local_self, e.name.local_peer);
      };
      const auto size = static_cast<int32_t>(pg.ranks.size());
      if (e.name.local_self >= size || e.name.local_peer >= size) {
        fail_entry(dump, e, fmt::format("'{}' names a rank outside process group '{}' of {} ranks", profiling_name(), pg.name, size));
      }
      if (pg.ranks[static_cast<size_t>(e.name.local_self)] != dump.rank) {
        fail_entry(dump, e, fmt::format("'{}': group rank {} of process group '{}' is rank {}, not this dump's rank {}",
                                        profiling_name(), e.name.local_self, pg.name,
                                        pg.ranks[static_cast<size_t>(e.name.local_self)], dump.rank));
      }
      op.peer = pg.ranks[static_cast<size_t>(e.name.local_peer)];
    } else if (sim::has_root(op.kind)) {
      // The dump does not record roots: every member is taken to name the same one.
      op.peer = trace_.groups[g].ranks.front();
    }
    return op;
  }

  std::string stop_of(const FrDump& dump, const std::vector<RecordedOp>& ops, const std::vector<const FrEntry*>& kept) {
    (void)dump;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (kept[i]->state == FrState::COMPLETED) continue;
      const size_t later = ops.size() - i - 1;
      const FrEntry& e = *kept[i];
      const int64_t seq = is_p2p(e) ? e.p2p_seq : e.collective_seq;
      return fmt::format("stopped in {} #{} on {} ({}){}", describe_op(trace_, ops[i]), seq, trace_.groups[ops[i].group].name,
                         e.state == FrState::STARTED ? "started" : "scheduled, not started",
                         later == 0 ? "" : fmt::format(", {} later op{} enqueued", later, later == 1 ? "" : "s"));
    }
    if (ops.empty()) return "no entries";
    return fmt::format("all {} recorded op{} completed", ops.size(), ops.size() == 1 ? "" : "s");
  }

  std::vector<FrDump> dumps_;
  bool uneven_noted_ = false;
  std::vector<std::string>* warnings_ = nullptr;
  RecordedTrace trace_;
  std::map<GroupKey, uint32_t> group_of_;
  bool default_taken_ = false;
  const FrDump* cache_dump_ = nullptr;
  std::vector<std::pair<uint32_t, const FrPg*>> cache_;
};


}  // namespace

int32_t rank_of_dump_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* ext : {".json", ".pkl", ".pickle", ".txt"}) {
    const std::string e(ext);
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      name.resize(name.size() - e.size());
      break;
    }
  }
  size_t start = name.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1])) != 0) --start;
  if (start == name.size() || name.size() - start > 9) return -1;
  return std::stoi(name.substr(start));
}

namespace {

void check_dump_name(const std::string& path) {
  const int32_t rank = rank_of_dump_name(path);
  if (rank < 0) {
    throw ImportError(path, {}, "cannot tell the rank of this dump: its file name must end in the rank, as PyTorch "
                                "writes them (e.g. nccl_trace_rank_3 or nccl_trace_rank_3.json)");
  }
  if (rank >= FR_MAX_RANKS) throw ImportError(path, {}, fmt::format("rank {} (from the file name): at most {} ranks are read", rank, FR_MAX_RANKS));
}

}  // namespace

RecordedTrace import_flight_recorder_data(const std::vector<std::string>& paths, const std::vector<std::string>& data,
                                          std::vector<std::string>* warnings) {
  std::vector<FrDump> dumps;
  for (size_t i = 0; i < paths.size(); ++i) {
    check_dump_name(paths[i]);
    const int32_t rank = rank_of_dump_name(paths[i]);
    FrDump dump = parse_dump(paths[i], data[i]);
    dump.rank = rank;
    dumps.push_back(std::move(dump));
  }
  if (dumps.empty()) throw ImportError("", {}, "no dumps given");
  RecordedTrace trace = Builder(std::move(dumps), warnings).run();
  trace.source = "lockstep import flight-recorder";
  return trace;
}

RecordedTrace import_flight_recorder(const std::vector<std::string>& paths, std::vector<std::string>* warnings) {
  for (const std::string& path : paths) check_dump_name(path);
  if (paths.empty()) throw ImportError("", {}, "no dumps given");
  // Dumps are independent: read them on a few threads, each into its own slot; the first error
  // in file order is reported, so the outcome does not depend on the threads.
  std::vector<FrDump> dumps(paths.size());
  std::vector<std::optional<ImportError>> errors(paths.size());
  std::atomic<size_t> next{0};
  // The dumps read at once share PICKLE_MEMORY_TOTAL_BYTES: each reserves its own bound before
  // it is read (a thread waits until there is room) and gives it back after.
  std::mutex mutex;
  std::condition_variable freed;
  uint64_t reserved = 0;
  auto work = [&] {
    for (size_t i = next++; i < paths.size(); i = next++) {
      uint64_t bound = 0;
      try {
        sim::InputFile file;
        if (!file.open(paths[i], int64_t{1} << 34)) throw ImportError(paths[i], {}, "cannot read file: " + file.error());
        bound = pickle_memory_bound(file.text().size());
        {
          std::unique_lock<std::mutex> lock(mutex);
          freed.wait(lock, [&] { return reserved + bound <= PICKLE_MEMORY_TOTAL_BYTES; });
          reserved += bound;
        }
        struct Release {
          std::mutex& mutex;
          std::condition_variable& freed;
          uint64_t& reserved;
          uint64_t bound;
          ~Release() {
            {
              const std::lock_guard<std::mutex> lock(mutex);
              reserved -= bound;
            }
            freed.notify_all();
          }
        } release{mutex, freed, reserved, bound};
        FrDump dump = parse_dump(paths[i], file.text());
        dump.rank = rank_of_dump_name(paths[i]);
        dumps[i] = std::move(dump);
      } catch (const ImportError& error) {
        errors[i] = error;
      } catch (const std::bad_alloc&) {
        errors[i] = ImportError(paths[i], {}, "out of memory while reading this dump");
      }
    }
  };
  const size_t threads = std::min<size_t>({paths.size(), std::max(1u, std::thread::hardware_concurrency()), 8});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  for (const auto& error : errors) {
    if (error) throw *error;
  }
  RecordedTrace trace = Builder(std::move(dumps), warnings).run();
  trace.source = "lockstep import flight-recorder";
  return trace;
}

}  // namespace lockstep::import
