#include "import/pipeline_csv.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "import/line_reader.h"

namespace lockstep::import {

namespace {

enum class Act : uint8_t {
  F, I, B, W, BW, UNSHARD, RESHARD, REDUCE_GRAD, SEND_F, RECV_F, SEND_B, RECV_B, OVERLAP_F_B
};

struct Action {
  Act act = Act::F;
  int32_t stage = 0;
  int32_t microbatch = -1;  // -1: none (UNSHARD, RESHARD, REDUCE_GRAD, OVERLAP_F_B)
  sim::SourceLoc at;
  std::string text;
  std::vector<Action> subs;  // OVERLAP_F_B: the compute actions it runs, in order
};

constexpr const char* ACTION_NAMES =
    "B, BW, F, I, OVERLAP_F_B, RECV_B, RECV_F, REDUCE_GRAD, RESHARD, SEND_B, SEND_F, UNSHARD, W";

std::optional<Act> act_of(std::string_view name) {
  static const std::pair<const char*, Act> KNOWN[] = {
      {"F", Act::F},           {"I", Act::I},           {"B", Act::B},           {"W", Act::W},
      {"BW", Act::BW},         {"UNSHARD", Act::UNSHARD}, {"RESHARD", Act::RESHARD},
      {"REDUCE_GRAD", Act::REDUCE_GRAD},
      {"SEND_F", Act::SEND_F}, {"RECV_F", Act::RECV_F}, {"SEND_B", Act::SEND_B}, {"RECV_B", Act::RECV_B},
  };
  for (const auto& [known, act] : KNOWN) {
    if (name == known) return act;
  }
  return std::nullopt;
}

bool is_compute(Act act) { return act == Act::F || act == Act::I || act == Act::B || act == Act::W || act == Act::BW; }
bool is_p2p(Act act) { return act == Act::SEND_F || act == Act::RECV_F || act == Act::SEND_B || act == Act::RECV_B; }

// The leaves of a row (an OVERLAP_F_B cell is its sub-actions).
template <typename F>
void for_each_leaf(const std::vector<Action>& row, F&& f) {
  for (const Action& a : row) {
    if (a.act == Act::OVERLAP_F_B) {
      for (const Action& sub : a.subs) f(sub);
    } else {
      f(a);
    }
  }
}

// (act, stage, microbatch): what PyTorch's lowering remembers of an action.
using Done = std::tuple<Act, int32_t, int32_t>;

class CsvImporter {
 public:
  CsvImporter(std::string path, const PipelineOptions& options) : path_(std::move(path)), options_(options) {}

  RecordedTrace run() {
    read();
    old_dialect_ = detect_dialect();
    map_stages();
    bool with_comms = false;
    for (const auto& row : rows_) for_each_leaf(row, [&](const Action& a) { with_comms = with_comms || is_p2p(a.act); });
    size_t actions = 0;
    for (const auto& row : rows_) actions += row.size();
    const auto pp = static_cast<int32_t>(rows_.size());
    const int32_t dp = std::max(options_.data_parallel, 1);
    if (static_cast<int64_t>(pp) * dp > (int64_t{1} << 20)) fail({}, fmt::format("{} ranks x --with-dp {}: more than 2^20 ranks", pp, dp));
    if (!with_comms) lower();
    trace_.world = pp * dp;
    trace_.ranks.assign(static_cast<size_t>(trace_.world), {});
    std::vector<int32_t> all(static_cast<size_t>(trace_.world));
    for (int32_t r = 0; r < trace_.world; ++r) all[static_cast<size_t>(r)] = r;
    trace_.add_group("world", all);
    if (options_.data_parallel > 0) {
      // torchtitan's mesh order ("pp" outermost): global rank = pp rank x dp + dp rank.
      for (int32_t d = 0; d < dp; ++d) {
        std::vector<int32_t> ranks;
        for (int32_t p = 0; p < pp; ++p) ranks.push_back(p * dp + d);
        pp_group_.push_back(trace_.add_group(fmt::format("pp{}", d), ranks));
      }
      for (int32_t p = 0; p < pp; ++p) {
        std::vector<int32_t> ranks;
        for (int32_t d = 0; d < dp; ++d) ranks.push_back(p * dp + d);
        dp_group_.push_back(trace_.add_group(fmt::format("dp{}", p), ranks));
      }
    }
    for (int32_t d = 0; d < dp; ++d) {
      for (int32_t p = 0; p < pp; ++p) build_rank(p, d);
    }
    trace_.notes.insert(trace_.notes.begin(), fmt::format(
        "read {} action{} of {} rank{} and {} stage{} ({}, {} dialect); sends are rendezvous: each completes only when its receive runs",
        actions, actions == 1 ? "" : "s", pp, pp == 1 ? "" : "s", stage_rank_.size(), stage_rank_.size() == 1 ? "" : "s",
        with_comms ? "with comms" : "compute only: sends and receives added as PyTorch's schedule runtime adds them",
        old_dialect_ ? "old BW" : "B"));
    if (options_.data_parallel > 0) {
      trace_.notes.push_back(fmt::format("--with-dp {}: {} pipelines of {} ranks (rank = pp rank x {} + dp rank); UNSHARD is "
                                         "an all-gather and REDUCE_GRAD a reduce-scatter on dpP, sends and receives on ppD",
                                         dp, dp, pp, dp));
    } else if (skipped_ > 0) {
      trace_.notes.push_back(fmt::format("{} UNSHARD/RESHARD/REDUCE_GRAD action{} left out (data-parallel communication: "
                                         "--with-dp N makes them collectives)", skipped_, skipped_ == 1 ? "" : "s"));
    }
    for (const std::string& note : unposted_notes_) trace_.notes.push_back(note);
    trace_.source = "lockstep import pipeline-csv";
    return std::move(trace_);
  }

 private:
  [[noreturn]] void fail(sim::SourceLoc at, const std::string& message) { throw ImportError(path_, at, message); }

  void read() {
    LineReader reader(path_);
    if (!reader.ok()) throw ImportError(path_, {}, "cannot read file: " + reader.error());
    std::string_view line;
    while (reader.next(line)) {
      const uint32_t number = reader.line_number();
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank line
      if (rows_.size() >= (1u << 16)) fail({number, 1}, "more than 65536 rows (ranks)");
      std::vector<Action>& row = rows_.emplace_back();
      size_t start = 0;
      while (start <= line.size()) {
        size_t end = line.find(',', start);
        if (end == std::string_view::npos) end = line.size();
        std::string_view cell = line.substr(start, end - start);
        size_t col = start;
        while (!cell.empty() && (cell.front() == ' ' || cell.front() == '"')) {
          cell.remove_prefix(1);
          ++col;
        }
        while (!cell.empty() && (cell.back() == ' ' || cell.back() == '"' || cell.back() == '\r')) cell.remove_suffix(1);
        if (!cell.empty() && cell != "None") row.push_back(parse_cell(cell, {number, static_cast<uint32_t>(col + 1)}));
        start = end + 1;
      }
    }
    if (!reader.error().empty()) throw ImportError(path_, {reader.line_number() + 1, 1}, "cannot read file: " + reader.error());
    if (rows_.empty()) fail({}, "no rows: a schedule CSV has one row of actions per rank");
  }

  // A cell: one action, or `(ACTION;ACTION...)OVERLAP_F_B` (PyTorch's DualPipeV writes a
  // forward and a backward that run overlapped that way).
  Action parse_cell(std::string_view cell, sim::SourceLoc at) {
    if (cell.front() != '(') return parse_action(cell, at);
    const size_t close = cell.find(')');
    const std::string_view kind = close == std::string_view::npos ? std::string_view() : cell.substr(close + 1);
    if (kind != "OVERLAP_F_B") {
      fail(at, fmt::format("invalid action '{}': a cell in parentheses is (ACTION;ACTION)OVERLAP_F_B, such as (0F3;3B1)OVERLAP_F_B", cell));
    }
    Action overlap;
    overlap.act = Act::OVERLAP_F_B;
    overlap.at = at;
    overlap.text = std::string(cell);
    size_t start = 1;
    while (start <= close) {
      size_t end = cell.find(';', start);
      if (end == std::string_view::npos || end > close) end = close;
      std::string_view sub = cell.substr(start, end - start);
      uint32_t col = at.col + static_cast<uint32_t>(start);
      while (!sub.empty() && sub.front() == ' ') {
        sub.remove_prefix(1);
        ++col;
      }
      while (!sub.empty() && sub.back() == ' ') sub.remove_suffix(1);
      if (!sub.empty()) {
        Action a = parse_action(sub, {at.line, col});
        if (!is_compute(a.act)) fail(a.at, fmt::format("'{}' in '{}': OVERLAP_F_B runs compute actions (F, I, B, W) only", sub, cell));
        overlap.subs.push_back(std::move(a));
      }
      start = end + 1;
    }
    if (overlap.subs.empty()) fail(at, fmt::format("'{}' overlaps no action", cell));
    return overlap;
  }

  Action parse_action(std::string_view cell, sim::SourceLoc at) {
    Action action;
    action.at = at;
    action.text = std::string(cell);
    size_t i = 0;
    while (i < cell.size() && std::isdigit(static_cast<unsigned char>(cell[i])) != 0) ++i;
    size_t j = cell.size();
    while (j > i && std::isdigit(static_cast<unsigned char>(cell[j - 1])) != 0) --j;
    const std::string_view name = cell.substr(i, j - i);
    const std::optional<Act> act = i == 0 ? std::nullopt : act_of(name);
    if (!act) {
      fail(at, fmt::format("invalid action '{}': expected STAGE ACTION MICROBATCH such as 0F0, 1B2, 2SEND_F0, 1RECV_B3, "
                           "or (0F3;3B1)OVERLAP_F_B (actions: {})", cell, ACTION_NAMES));
    }
    action.act = *act;
    const auto number = [&](std::string_view digits, int32_t& value) {
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc() || ptr != digits.data() + digits.size()) fail(at, fmt::format("number out of range in '{}'", cell));
    };
    number(cell.substr(0, i), action.stage);
    if (j < cell.size()) number(cell.substr(j), action.microbatch);
    const bool needs_microbatch = *act != Act::UNSHARD && *act != Act::RESHARD && *act != Act::REDUCE_GRAD;
    if (needs_microbatch && action.microbatch < 0) fail(at, fmt::format("action '{}' has no microbatch index", cell));
    return action;
  }

  // The old dialect wrote full backward as BW and backward-input as B; the current one writes
  // I for backward-input and B for full backward.
  bool detect_dialect() {
    bool has_bw = false, has_i = false, has_b = false, has_w = false;
    const Action* first_bw = nullptr;
    for (const auto& row : rows_) {
      for_each_leaf(row, [&](const Action& a) {
        if (a.act == Act::BW && first_bw == nullptr) first_bw = &a;
        has_bw = has_bw || a.act == Act::BW;
        has_i = has_i || a.act == Act::I;
        has_b = has_b || a.act == Act::B;
        has_w = has_w || a.act == Act::W;
      });
    }
    if (has_bw && has_i) fail(first_bw->at, "'BW' (old dialect) and 'I' (current dialect) in one file");
    return has_bw || (has_b && has_w && !has_i);
  }

  // Backward-input or full backward: needs the next stage's gradient, sends one to the previous.
  bool is_backward(Act act) const { return act == Act::I || act == Act::B || act == Act::BW; }

  void map_stages() {
    for (size_t r = 0; r < rows_.size(); ++r) {
      for_each_leaf(rows_[r], [&](const Action& a) {
        if (!is_compute(a.act)) return;
        auto [it, added] = stage_rank_.emplace(a.stage, static_cast<int32_t>(r));
        if (!added && it->second != static_cast<int32_t>(r)) {
          fail(a.at, fmt::format("stage {} runs on rank {} and on rank {}: a stage belongs to one rank", a.stage, it->second, r));
        }
      });
    }
    if (stage_rank_.empty()) fail({}, "no compute action (F, B, I, W): cannot tell which rank runs which stage");
    const int32_t stages = stage_rank_.rbegin()->first + 1;
    for (int32_t s = 0; s < stages; ++s) {
      if (!stage_rank_.contains(s)) fail({}, fmt::format("stage {} has no compute action, but stage {} does", s, stages - 1));
    }
    stages_ = stages;
  }

  int32_t rank_of_stage(int32_t stage, const Action& a) {
    const auto it = stage_rank_.find(stage);
    if (it == stage_rank_.end()) fail(a.at, fmt::format("'{}' refers to stage {}, which no rank runs", a.text, stage));
    return it->second;
  }

  // Whether a compute action sends (F: its output to the next stage; backward: its gradient to
  // the previous one) to another rank.
  bool sends(const Action& a) {
    if (a.act == Act::F) return a.stage + 1 < stages_ && rank_of_stage(a.stage + 1, a) != rank_of_stage(a.stage, a);
    if (is_backward(a.act)) return a.stage > 0 && rank_of_stage(a.stage - 1, a) != rank_of_stage(a.stage, a);
    return false;
  }

  // Whether the input of a compute action is there (PyTorch's _ready_to_schedule): its receive
  // was placed, or the action that produces it ran on this rank.
  bool ready(const Action& a, const std::set<Done>& done) const {
    if (a.act == Act::F && a.stage > 0) {
      return done.contains({Act::RECV_F, a.stage, a.microbatch}) || done.contains({Act::F, a.stage - 1, a.microbatch});
    }
    if (is_backward(a.act) && a.stage + 1 < stages_) {
      for (Act producer : {Act::RECV_B, Act::I, Act::B, Act::BW}) {
        if (done.contains({producer, producer == Act::RECV_B ? a.stage : a.stage + 1, a.microbatch})) return true;
      }
      return false;
    }
    return true;
  }

  // A compute-only schedule as PyTorch's runtime lowers it (_add_send_recv): round by round,
  // each rank in order places its next action once its input is there, then its send and the
  // receive of the rank that takes the output. A schedule no order can place (PyTorch refuses
  // it: "Malformed compute schedule") is placed anyway, lowest rank first: its computes then
  // wait for receives that were never posted, which the check reports.
  void lower() {
    std::vector<std::vector<Action>> lowered(rows_.size());
    std::vector<std::set<Done>> done(rows_.size());
    std::vector<size_t> next(rows_.size(), 0);
    bool forced = false;
    const auto place = [&](size_t r) {
      const Action& action = rows_[r][next[r]++];
      lowered[r].push_back(action);
      const std::vector<Action> leaves = action.act == Act::OVERLAP_F_B ? action.subs : std::vector<Action>{action};
      for (const Action& a : leaves) {
        done[r].insert({a.act, a.stage, a.microbatch});
        if (!is_compute(a.act) || !sends(a)) continue;
        const bool forward = a.act == Act::F;
        Action send = a, recv = a;
        send.act = forward ? Act::SEND_F : Act::SEND_B;
        send.subs.clear();
        recv.act = forward ? Act::RECV_F : Act::RECV_B;
        recv.stage = forward ? a.stage + 1 : a.stage - 1;
        recv.subs.clear();
        lowered[r].push_back(send);
        done[r].insert({send.act, send.stage, send.microbatch});
        const auto peer = static_cast<size_t>(rank_of_stage(recv.stage, a));
        lowered[peer].push_back(recv);
        done[peer].insert({recv.act, recv.stage, recv.microbatch});
      }
    };
    for (;;) {
      bool left = false, progress = false;
      for (size_t r = 0; r < rows_.size(); ++r) {
        if (next[r] >= rows_[r].size()) continue;
        left = true;
        const Action& action = rows_[r][next[r]];
        bool all_ready = true;
        if (action.act == Act::OVERLAP_F_B) {
          for (const Action& sub : action.subs) all_ready = all_ready && ready(sub, done[r]);
        } else {
          all_ready = ready(action, done[r]);
        }
        if (!all_ready) continue;
        place(r);
        progress = true;
      }
      if (!left) break;
      if (progress) continue;
      forced = true;
      for (size_t r = 0; r < rows_.size(); ++r) {
        if (next[r] < rows_[r].size()) {
          place(r);
          break;
        }
      }
    }
    if (forced) {
      unposted_notes_.push_back("PyTorch's lowering cannot place this compute-only schedule (its runtime refuses it: "
                                "\"Malformed compute schedule\"); actions were placed lowest rank first");
    }
    rows_ = std::move(lowered);
  }

  // The global rank of pipeline rank p in data-parallel replica d.
  int32_t global(int32_t p, int32_t d) const { return options_.data_parallel > 0 ? p * options_.data_parallel + d : p; }

  uint32_t pp_group(int32_t d) const { return options_.data_parallel > 0 ? pp_group_[static_cast<size_t>(d)] : 0; }

  RecordedOp p2p(sim::OpKind kind, int32_t peer, uint32_t group, std::string_view tag, std::string_view handle) {
    RecordedOp op;
    op.kind = kind;
    op.peer = peer;
    op.group = group;
    op.size = options_.activation_bytes;
    op.tag = trace_.intern(tag);
    op.handle = handle.empty() ? 0 : trace_.intern(handle);
    return op;
  }

  RecordedOp wait_op(uint32_t handle) {
    RecordedOp op;
    op.kind = sim::OpKind::WAIT;
    op.handle = handle;
    return op;
  }

  // A receive nobody will send to: on a group of the two ranks that carries nothing else.
  uint32_t never_posted_group(int32_t a, int32_t b) {
    const auto key = std::pair{std::min(a, b), std::max(a, b)};
    auto it = never_posted_.find(key);
    if (it == never_posted_.end()) {
      it = never_posted_.emplace(key, trace_.add_group(fmt::format("never_posted_{}_{}", key.first, key.second),
                                                        {key.first, key.second})).first;
    }
    return it->second;
  }

  void build_rank(int32_t p, int32_t d) {
    const int32_t rank = global(p, d);
    std::vector<RecordedOp>& ops = trace_.ranks[static_cast<size_t>(rank)];
    std::map<std::string, bool> recv_posted;  // handle -> waited
    std::vector<uint32_t> sends;              // handles, waited at the end (last first)
    std::map<int32_t, std::vector<uint32_t>> unsharding;  // stage -> all-gathers not yet waited
    std::map<int32_t, int32_t> unshards;                  // stage -> UNSHARDs so far
    const auto wait_unshard = [&](int32_t stage) {
      for (uint32_t handle : unsharding[stage]) ops.push_back(wait_op(handle));
      unsharding.erase(stage);
    };
    const auto input = [&](const Action& a, bool forward) {
      const int32_t from = forward ? a.stage - 1 : a.stage + 1;
      const int32_t peer_p = rank_of_stage(from, a);
      const std::string handle = fmt::format("recv_{}.s{}.mb{}", forward ? "f" : "b", a.stage, a.microbatch);
      auto it = recv_posted.find(handle);
      if (it != recv_posted.end()) {
        if (!it->second) ops.push_back(wait_op(trace_.intern(handle)));
        it->second = true;
        return;
      }
      // The receive was never posted: PyTorch's runtime stops there ("before receiving input").
      // It is a receive that never completes, on a group nothing else uses, and the rank's host
      // waits for it (nothing after it is issued, as in the runtime): the check reports the hang
      // at it.
      const int32_t peer = global(peer_p, d);
      ops.push_back(p2p(sim::OpKind::RECV, peer, never_posted_group(rank, peer),
                        fmt::format("{}.s{}.mb{}", forward ? "act" : "grad", from, a.microbatch), ""));
      RecordedOp stop;  // the rank goes no further: the host waits for that receive
      stop.kind = sim::OpKind::SYNC;
      ops.push_back(stop);
      if (d > 0) return;  // every replica runs the same schedule: said once
      unposted_notes_.push_back(fmt::format(
          "rank {}: '{}' needs stage {}'s {} from rank {}, but no {}{}{} comes before it: a receive that never completes "
          "(group {})", rank, a.text, from, forward ? "output" : "gradient", peer, a.stage, forward ? "RECV_F" : "RECV_B",
          a.microbatch, trace_.groups[never_posted_group(rank, peer)].name));
    };
    const auto compute = [&](const Action& a) {
      if (rank_of_stage(a.stage, a) != p) fail(a.at, "internal: stage on another rank");
      if (a.act == Act::F && a.stage > 0 && rank_of_stage(a.stage - 1, a) != p) input(a, true);
      if (is_backward(a.act) && a.stage + 1 < stages_ && rank_of_stage(a.stage + 1, a) != p) input(a, false);
      wait_unshard(a.stage);
      RecordedOp op;
      op.kind = sim::OpKind::COMPUTE;
      op.size = a.act == Act::F ? options_.forward_ns
                : a.act == Act::W ? options_.backward_weight_ns
                : a.act == Act::I || (old_dialect_ && a.act == Act::B) ? options_.backward_input_ns
                : options_.full_backward_ns;
      ops.push_back(op);
    };
    const auto data_parallel = [&](const Action& a) {
      if (options_.data_parallel <= 0) {
        if (d == 0) ++skipped_;
        return;
      }
      if (a.act == Act::RESHARD) {
        wait_unshard(a.stage);
        return;
      }
      RecordedOp op;
      op.group = dp_group_[static_cast<size_t>(p)];
      op.size = options_.dp_bytes;
      if (a.act == Act::UNSHARD) {
        op.kind = sim::OpKind::ALLGATHER;
        op.tag = trace_.intern(fmt::format("unshard.s{}", a.stage));
        op.handle = trace_.intern(fmt::format("unshard.s{}.{}", a.stage, unshards[a.stage]++));
        unsharding[a.stage].push_back(op.handle);
      } else {
        wait_unshard(a.stage);
        op.kind = sim::OpKind::REDUCE_SCATTER;
        op.tag = trace_.intern(fmt::format("reduce_grad.s{}", a.stage));
      }
      ops.push_back(op);
    };
    for (const Action& a : rows_[static_cast<size_t>(p)]) {
      if (a.act == Act::OVERLAP_F_B) {
        for (const Action& sub : a.subs) compute(sub);
        continue;
      }
      if (is_compute(a.act)) {
        compute(a);
        continue;
      }
      if (!is_p2p(a.act)) {
        data_parallel(a);
        continue;
      }
      const int32_t s = a.stage, m = a.microbatch;
      if (rank_of_stage(s, a) != p) fail(a.at, fmt::format("'{}' on rank {}: stage {} runs on rank {}", a.text, p, s, rank_of_stage(s, a)));
      const bool forward = a.act == Act::SEND_F || a.act == Act::RECV_F;
      const bool send = a.act == Act::SEND_F || a.act == Act::SEND_B;
      const int32_t other = forward == send ? s + 1 : s - 1;  // SEND_F, RECV_B: next stage; RECV_F, SEND_B: previous
      if (other < 0 || other >= stages_) fail(a.at, fmt::format("'{}': stage {} has no stage {} to talk to", a.text, s, other));
      const int32_t peer_p = rank_of_stage(other, a);
      if (peer_p == p) fail(a.at, fmt::format("'{}': stages {} and {} both run on rank {}: nothing to send", a.text, s, other, p));
      const std::string tag = fmt::format("{}.s{}.mb{}", forward ? "act" : "grad", forward ? std::min(s, other) : std::max(s, other), m);
      const std::string handle = fmt::format("{}{}.s{}.mb{}", send ? "send_" : "recv_", forward ? "f" : "b", s, m);
      ops.push_back(p2p(send ? sim::OpKind::SEND : sim::OpKind::RECV, global(peer_p, d), pp_group(d), tag, handle));
      if (send) sends.push_back(ops.back().handle);
      else recv_posted[handle] = false;
    }
    // Receives never waited for, unshards never used, then every send (the runtime waits for
    // its sends at the end of the step, the last one first).
    for (const auto& [handle, waited] : recv_posted) {
      if (!waited) ops.push_back(wait_op(trace_.intern(handle)));
    }
    while (!unsharding.empty()) wait_unshard(unsharding.begin()->first);
    for (auto it = sends.rbegin(); it != sends.rend(); ++it) ops.push_back(wait_op(*it));
  }

  std::string path_;
  PipelineOptions options_;
  std::vector<std::vector<Action>> rows_;
  std::map<int32_t, int32_t> stage_rank_;
  int32_t stages_ = 0;
  bool old_dialect_ = false;
  size_t skipped_ = 0;
  std::vector<uint32_t> pp_group_, dp_group_;
  std::map<std::pair<int32_t, int32_t>, uint32_t> never_posted_;
  std::vector<std::string> unposted_notes_;
  RecordedTrace trace_;
};

}  // namespace

RecordedTrace import_pipeline_csv(const std::string& path, const PipelineOptions& options) {
  return CsvImporter(path, options).run();
}

}  // namespace lockstep::import
