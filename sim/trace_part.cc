// The trace loader's second part: a large trace's second half read on a thread of its own, then
// taken as if read in one pass.
#include "sim/trace_loader.h"

#include <memory>
#include <thread>

namespace lockstep::sim::trace {

TraceLoader::TraceLoader(const TraceLoader& main, PartOf /*tag*/, int64_t max_ops)
    : source_(main.source_), text_(main.text_), path_(main.path_), limits_(main.limits_) {
  limits_.max_ops = max_ops;
  scenario_.world = main.scenario_.world;
  scenario_.groups = main.scenario_.groups;  // copies: `main` adds groups as it reads on
  group_index_ = main.group_index_;
  group_used_.assign(main.group_used_.size(), false);
  state_of_rank_.assign(main.state_of_rank_.size(), -1);
  expected_ops_per_rank_ = main.expected_ops_per_rank_;
  line_count_ = main.line_count_;
  ops_arena_ = main.ops_arena_;
  stmt_arena_ = main.stmt_arena_;
  arenas_made_ = true;
  stop_ = text_.size();
  in_part_ = true;
}

void TraceLoader::start_part(size_t pos) {
  if (!fast_path_ || limits_.trace_split_bytes <= 0 || std::thread::hardware_concurrency() == 1 ||
      text_.size() - pos < static_cast<uint64_t>(limits_.trace_split_bytes)) {
    return;
  }
  const size_t newline = text_.find('\n', pos + (text_.size() - pos) / 2);
  if (newline == std::string_view::npos || newline + 1 >= text_.size()) return;
  const size_t split = newline + 1;
  const size_t before = count_newlines(text_.substr(0, split));  // the lines before the part
  if (line_count_ == SIZE_MAX) line_count_ = before + count_newlines(text_.substr(split));
  // This loader takes at most one operation per line before the part.
  const int64_t part_ops = limits_.max_ops - static_cast<int64_t>(before);
  if (line_count_ >= UINT32_MAX || part_ops <= 0) return;
  expected_ops_per_rank();
  ops_arena();  // made before the part takes from it
  auto part = std::make_unique<Part>();
  part->loader.reset(new TraceLoader(*this, PartOf{}, part_ops));
  Part* const p = part.get();
  try {
    p->thread = std::thread([p, split, before] {
      try {
        p->loader->read_part(split, static_cast<uint32_t>(before), p->cancel);
      } catch (...) {
        p->failed = true;
      }
    });
  } catch (const std::system_error&) {
    return;  // no thread: this loader reads every line
  }
  part_ = std::move(part);
  stop_ = split;
}

void TraceLoader::take_part(size_t& pos, uint32_t& line) {
  const std::unique_ptr<Part> part = std::move(part_);
  stop_ = text_.size();
  part->thread.join();
  if (part->failed || !merge_part(*part->loader)) return;
  pos = part->loader->part_pos_;
  part_lines_ = part->loader->part_line_ - line;
  line = part->loader->part_line_;
}

bool TraceLoader::merge_part(TraceLoader& part) {
  for (const RankState& from : part.ranks_) {
    const int32_t state = state_of_rank_[static_cast<size_t>(from.rank)];
    if (state < 0) continue;
    const RankState& into = ranks_[static_cast<size_t>(state)];
    const size_t main = thread_index(into, "main");
    if (main == SIZE_MAX ? into.program.size() >= MAX_TRACE_THREADS_PER_RANK : into.open[main].depth != 0) {
      return false;
    }
  }
  // (The current rank, thread and `placed_` are the line's: the next line sets them.)
  for (RankState& from : part.ranks_) {
    int32_t& state = state_of_rank_[static_cast<size_t>(from.rank)];
    if (state < 0) {
      state = static_cast<int32_t>(ranks_.size());
      ranks_.push_back(std::move(from));
      continue;
    }
    RankState& into = ranks_[static_cast<size_t>(state)];
    size_t main = thread_index(into, "main");
    if (main == SIZE_MAX) main = add_thread(into, "main", from.program[0].loc);
    auto& ops = into.recorded[main]->ops;
    const auto& more = from.recorded[0]->ops;
    ops.reserve(ops.size() + more.size());
    ops.insert(ops.end(), more.begin(), more.end());
    into.last_thread = static_cast<uint32_t>(main);
    into.last_is_main = true;
  }
  ops_ += part.ops_;
  for (size_t i = 0; i < part.group_used_.size(); ++i) {
    if (part.group_used_[i]) group_used_[i] = true;
  }
  return true;
}

}  // namespace lockstep::sim::trace
