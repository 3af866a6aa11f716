#include "import/pipeline_csv.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "import/line_reader.h"

namespace lockstep::import {

namespace {

enum class Act : uint8_t { F, I, B, W, BW, UNSHARD, RESHARD, REDUCE_GRAD, SEND_F, RECV_F, SEND_B, RECV_B };

struct Action {
  Act act = Act::F;
  int32_t stage = 0;
  int32_t microbatch = -1;  // -1: none (UNSHARD, RESHARD)
  sim::SourceLoc at;
  std::string text;
};

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

class CsvImporter {
 public:
  CsvImporter(std::string path, const PipelineOptions& options) : path_(std::move(path)), options_(options) {}

  RecordedTrace run() {
    read();
    const bool old_dialect = detect_dialect();
    map_stages();
    bool with_comms = false;
    for (const auto& row : rows_) {
      for (const Action& a : row) with_comms = with_comms || a.act == Act::SEND_F || a.act == Act::RECV_F || a.act == Act::SEND_B || a.act == Act::RECV_B;
    }
    trace_.world = static_cast<int32_t>(rows_.size());
    trace_.ranks.assign(rows_.size(), {});
    std::vector<int32_t> all(rows_.size());
    for (size_t r = 0; r < rows_.size(); ++r) all[r] = static_cast<int32_t>(r);
    trace_.add_group("world", all);
    for (size_t r = 0; r < rows_.size(); ++r) build_rank(static_cast<int32_t>(r), old_dialect, with_comms);
    size_t actions = 0;
    for (const auto& row : rows_) actions += row.size();
    trace_.notes.insert(trace_.notes.begin(), fmt::format(
        "read {} action{} of {} rank{} and {} stage{} ({}, {} dialect); sends are rendezvous: each completes only when its receive runs",
        actions, actions == 1 ? "" : "s", rows_.size(), rows_.size() == 1 ? "" : "s", stage_rank_.size(),
        stage_rank_.size() == 1 ? "" : "s", with_comms ? "with comms" : "compute only: sends and receives added around each compute",
        old_dialect ? "old BW" : "B"));
    if (skipped_ > 0) trace_.notes.push_back(fmt::format("{} UNSHARD/RESHARD/REDUCE_GRAD action{} left out (they are not pipeline communication)", skipped_, skipped_ == 1 ? "" : "s"));
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
        while (!cell.empty() && (cell.back() == ' ' || cell.back() == '"')) cell.remove_suffix(1);
        if (!cell.empty() && cell != "None") row.push_back(parse_action(cell, {number, static_cast<uint32_t>(col + 1)}));
        start = end + 1;
      }
    }
    if (!reader.error().empty()) throw ImportError(path_, {reader.line_number() + 1, 1}, "cannot read file: " + reader.error());
    if (rows_.empty()) fail({}, "no rows: a schedule CSV has one row of actions per rank");
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
      fail(at, fmt::format("invalid action '{}': expected STAGE ACTION MICROBATCH such as 0F0, 1B2, 2SEND_F0, 1RECV_B3 "
                           "(actions: B, BW, F, I, RECV_B, RECV_F, REDUCE_GRAD, RESHARD, SEND_B, SEND_F, UNSHARD, W)", cell));
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
    for (const auto& row : rows_) {
      for (const Action& a : row) {
        has_bw = has_bw || a.act == Act::BW;
        has_i = has_i || a.act == Act::I;
        has_b = has_b || a.act == Act::B;
        has_w = has_w || a.act == Act::W;
      }
    }
    if (has_bw && has_i) {
      for (const auto& row : rows_) {
        for (const Action& a : row) {
          if (a.act == Act::BW) fail(a.at, "'BW' (old dialect) and 'I' (current dialect) in one file");
        }
      }
    }
    return has_bw || (has_b && has_w && !has_i);
  }

  bool is_compute(Act act) const { return act == Act::F || act == Act::I || act == Act::B || act == Act::W || act == Act::BW; }

  void map_stages() {
    for (size_t r = 0; r < rows_.size(); ++r) {
      for (const Action& a : rows_[r]) {
        if (!is_compute(a.act)) continue;
        auto [it, added] = stage_rank_.emplace(a.stage, static_cast<int32_t>(r));
        if (!added && it->second != static_cast<int32_t>(r)) {
          fail(a.at, fmt::format("stage {} runs on rank {} and on rank {}: a stage belongs to one rank", a.stage, it->second, r));
        }
      }
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

  RecordedOp p2p(sim::OpKind kind, int32_t peer, std::string_view tag, std::string_view handle) {
    RecordedOp op;
    op.kind = kind;
    op.peer = peer;
    op.size = options_.activation_bytes;
    op.tag = trace_.intern(tag);
    op.handle = handle.empty() ? 0 : trace_.intern(handle);
    return op;
  }

  void build_rank(int32_t rank, bool old_dialect, bool with_comms) {
    std::vector<RecordedOp>& ops = trace_.ranks[static_cast<size_t>(rank)];
    std::map<std::string, bool> recv_posted;  // handle -> waited
    std::vector<uint32_t> sends;              // handles to wait at the end
    auto wait = [&](const std::string& handle) {
      RecordedOp op;
      op.kind = sim::OpKind::WAIT;
      op.handle = trace_.intern(handle);
      ops.push_back(op);
    };
    for (const Action& a : rows_[static_cast<size_t>(rank)]) {
      const int32_t s = a.stage, m = a.microbatch;
      if (!is_compute(a.act) && a.act != Act::SEND_F && a.act != Act::RECV_F && a.act != Act::SEND_B && a.act != Act::RECV_B) {
        ++skipped_;
        continue;
      }
      if (rank_of_stage(s, a) != rank && is_compute(a.act)) fail(a.at, "internal: stage on another rank");
      if (!is_compute(a.act)) {
        if (rank_of_stage(s, a) != rank) {
          fail(a.at, fmt::format("'{}' on rank {}: stage {} runs on rank {}", a.text, rank, s, rank_of_stage(s, a)));
        }
        const bool forward = a.act == Act::SEND_F || a.act == Act::RECV_F;
        const bool send = a.act == Act::SEND_F || a.act == Act::SEND_B;
        const int32_t other = forward == send ? s + 1 : s - 1;  // SEND_F, RECV_B: next stage; RECV_F, SEND_B: previous
        if (other < 0 || other >= stages_) fail(a.at, fmt::format("'{}': stage {} has no stage {} to talk to", a.text, s, other));
        const int32_t peer = rank_of_stage(other, a);
        const std::string tag = fmt::format("{}.s{}.mb{}", forward ? "act" : "grad", forward ? std::min(s, other) : std::max(s, other), m);
        const std::string handle = fmt::format("{}{}.s{}.mb{}", send ? "send_" : "recv_", forward ? "f" : "b", s, m);
        if (peer == rank) fail(a.at, fmt::format("'{}': stages {} and {} both run on rank {}: nothing to send", a.text, s, other, rank));
        ops.push_back(p2p(send ? sim::OpKind::SEND : sim::OpKind::RECV, peer, tag, handle));
        if (send) sends.push_back(ops.back().handle);
        else recv_posted[handle] = false;
        continue;
      }
      // A compute action: its input first.
      const bool forward = a.act == Act::F;
      const bool sends_grad = a.act == Act::I || a.act == Act::B || a.act == Act::BW || (old_dialect && a.act == Act::B);
      const bool needs_grad = a.act != Act::F && a.act != Act::W;  // backward input needs the next stage's gradient
      if (forward && s > 0 && rank_of_stage(s - 1, a) != rank) {
        const std::string handle = fmt::format("recv_f.s{}.mb{}", s, m);
        if (with_comms) {
          auto it = recv_posted.find(handle);
          if (it == recv_posted.end()) fail(a.at, fmt::format("'{}' needs stage {}'s output from rank {}, but no {}RECV_F{} comes before it", a.text, s - 1, rank_of_stage(s - 1, a), s, m));
          if (!it->second) wait(handle);
          it->second = true;
        } else {
          ops.push_back(p2p(sim::OpKind::RECV, rank_of_stage(s - 1, a), fmt::format("act.s{}.mb{}", s - 1, m), ""));
        }
      }
      if (needs_grad && s + 1 < stages_ && rank_of_stage(s + 1, a) != rank) {
        const std::string handle = fmt::format("recv_b.s{}.mb{}", s, m);
        if (with_comms) {
          auto it = recv_posted.find(handle);
          if (it == recv_posted.end()) fail(a.at, fmt::format("'{}' needs stage {}'s gradient from rank {}, but no {}RECV_B{} comes before it", a.text, s + 1, rank_of_stage(s + 1, a), s, m));
          if (!it->second) wait(handle);
          it->second = true;
        } else {
          ops.push_back(p2p(sim::OpKind::RECV, rank_of_stage(s + 1, a), fmt::format("grad.s{}.mb{}", s + 1, m), ""));
        }
      }
      RecordedOp compute;
      compute.kind = sim::OpKind::COMPUTE;
      compute.size = a.act == Act::F ? options_.forward_ns
                     : a.act == Act::W ? options_.backward_weight_ns
                     : a.act == Act::I || (old_dialect && a.act == Act::B) ? options_.backward_input_ns
                     : options_.full_backward_ns;
      ops.push_back(compute);
      if (with_comms) continue;
      if (forward && s + 1 < stages_ && rank_of_stage(s + 1, a) != rank) {
        const std::string handle = fmt::format("send_f.s{}.mb{}", s, m);
        ops.push_back(p2p(sim::OpKind::SEND, rank_of_stage(s + 1, a), fmt::format("act.s{}.mb{}", s, m), handle));
        sends.push_back(ops.back().handle);
      }
      if (sends_grad && s > 0 && rank_of_stage(s - 1, a) != rank) {
        const std::string handle = fmt::format("send_b.s{}.mb{}", s, m);
        ops.push_back(p2p(sim::OpKind::SEND, rank_of_stage(s - 1, a), fmt::format("grad.s{}.mb{}", s, m), handle));
        sends.push_back(ops.back().handle);
      }
    }
    // Receives never waited for, then every send (as the schedule runtime does at the end of a step).
    for (const auto& [handle, waited] : recv_posted) {
      if (!waited) wait(handle);
    }
    for (uint32_t handle : sends) {
      RecordedOp op;
      op.kind = sim::OpKind::WAIT;
      op.handle = handle;
      ops.push_back(op);
    }
  }

  std::string path_;
  PipelineOptions options_;
  std::vector<std::vector<Action>> rows_;
  std::map<int32_t, int32_t> stage_rank_;
  int32_t stages_ = 0;
  size_t skipped_ = 0;
  RecordedTrace trace_;
};

}  // namespace

RecordedTrace import_pipeline_csv(const std::string& path, const PipelineOptions& options) {
  return CsvImporter(path, options).run();
}

}  // namespace lockstep::import
