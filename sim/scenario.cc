#include "sim/scenario.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <utility>

#include "sim/input_file.h"

namespace lockstep::sim {

Stmt RecordedOp::to_stmt() const {
  Stmt made;
  made.kind = StmtKind::OP;
  made.op = op;
  made.loc = {line, col};
  made.dtype = dtype;
  made.group = group;
  if ((flags & SIZE) != 0) made.size = Expr::constant(value, {line, value_col});
  if ((flags & DURATION) != 0) made.duration = Expr::constant(value, {line, value_col});
  if ((flags & ROOT) != 0) {
    made.set_extra().root = Expr::constant(peer, {line, peer_col});
    made.has_root = true;
  }
  if ((flags & PEER) != 0) {
    made.peer = Expr::constant(peer, {line, peer_col});
    made.has_peer = true;
    made.peer_any = (flags & PEER_ANY) != 0;
  }
  if (op == OpKind::BARRIER) made.size = Expr::constant(dtype_bytes(dtype), made.loc);
  return made;
}

void ThreadDef::build() const {
  RecordedBody& recorded = *recorded_;
  std::call_once(recorded.built, [&] {
    StmtList body{StmtAllocator<Stmt>(recorded.arena)};
    body.reserve(recorded.ops.size());
    if (recorded.arena != nullptr) populate_pages(body.data(), body.capacity() * sizeof(Stmt));
    for (const RecordedOp& op : recorded.ops) {
      if (op.side()) {
        body.push_back(std::move(recorded.stmts[op.side_index()]));
      } else {
        body.push_back(op.to_stmt());
      }
    }
    body_ = std::move(body);
    recorded.ops = {};
    recorded.stmts = {};
  });
}

bool ThreadDef::may_end_early() const {
  if (recorded_ == nullptr) return true;
  const auto ends = [](OpKind op) { return op == OpKind::EXIT || op == OpKind::CRASH; };
  const RecordedBody& recorded = *recorded_;
  if (recorded.ops.empty()) {  // made already (or empty)
    return std::any_of(body_.begin(), body_.end(), [&](const Stmt& stmt) { return ends(stmt.op); });
  }
  return std::any_of(recorded.ops.begin(), recorded.ops.end(), [&](const RecordedOp& op) { return !op.side() && ends(op.op); }) ||
         std::any_of(recorded.stmts.begin(), recorded.stmts.end(), [&](const Stmt& stmt) { return ends(stmt.op); });
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::INT8: return "int8";
    case DType::UINT8: return "uint8";
    case DType::INT32: return "int32";
    case DType::UINT32: return "uint32";
    case DType::INT64: return "int64";
    case DType::UINT64: return "uint64";
    case DType::FP16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::FP32: return "fp32";
    case DType::FP64: return "fp64";
    case DType::FP8_E4M3: return "fp8_e4m3";
    case DType::FP8_E5M2: return "fp8_e5m2";
  }
  return "?";
}

uint32_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::INT8: case DType::UINT8: case DType::FP8_E4M3: case DType::FP8_E5M2: return 1;
    case DType::FP16: case DType::BF16: return 2;
    case DType::INT32: case DType::UINT32: case DType::FP32: return 4;
    case DType::INT64: case DType::UINT64: case DType::FP64: return 8;
  }
  return 1;
}

namespace {

struct DTypeSpelling {
  std::string_view name;
  DType dtype;
};

constexpr std::array<DTypeSpelling, 19> DTYPE_SPELLINGS = {{
    {"int8", DType::INT8},         {"uint8", DType::UINT8},   {"int32", DType::INT32},
    {"uint32", DType::UINT32},     {"int64", DType::INT64},   {"uint64", DType::UINT64},
    {"fp16", DType::FP16},         {"float16", DType::FP16},  {"half", DType::FP16},
    {"bf16", DType::BF16},         {"bfloat16", DType::BF16}, {"fp32", DType::FP32},
    {"float32", DType::FP32},      {"float", DType::FP32},    {"fp64", DType::FP64},
    {"float64", DType::FP64},      {"double", DType::FP64},   {"fp8_e4m3", DType::FP8_E4M3},
    {"fp8_e5m2", DType::FP8_E5M2},
}};

}  // namespace

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeSpelling& entry : DTYPE_SPELLINGS) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

std::vector<std::string> dtype_spellings() {
  std::vector<std::string> names;
  for (const DTypeSpelling& entry : DTYPE_SPELLINGS) names.emplace_back(entry.name);
  return names;
}

std::string dtype_error(std::string_view name) {
  const std::vector<std::string> valid = dtype_spellings();
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string hint = lower.starts_with("bf") || lower.starts_with("brain") ? " (did you mean 'bf16'?)"
                                                                                : did_you_mean(name, valid);
  return "invalid value " + quoted(name) + " for 'dtype'" + hint + "; valid values: " + join(sorted(valid));
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::OK: return "ok";
    case Verdict::DEADLOCK: return "deadlock";
    case Verdict::HANG: return "hang";
    case Verdict::MISMATCH: return "mismatch";
    case Verdict::TIMEOUT: return "timeout";
    case Verdict::INCONCLUSIVE: return "inconclusive";
  }
  return "?";
}

std::optional<Verdict> parse_verdict(std::string_view name) {
  static constexpr std::array<Verdict, 6> all = {Verdict::OK, Verdict::DEADLOCK, Verdict::HANG,
                                                 Verdict::MISMATCH, Verdict::TIMEOUT,
                                                 Verdict::INCONCLUSIVE};
  for (Verdict v : all) {
    if (verdict_name(v) == name) return v;
  }
  return std::nullopt;
}

GroupDef make_group(std::string name, SourceLoc loc, std::vector<int32_t> ranks, int32_t world) {
  GroupDef group;
  group.name = std::move(name);
  group.loc = loc;
  group.comm_of_rank.assign(static_cast<size_t>(std::max(world, 0)), -1);
  for (int32_t r : ranks) {
    if (r >= 0 && r < world) group.comm_of_rank[static_cast<size_t>(r)] = 0;
  }
  group.comms.push_back(std::move(ranks));
  return group;
}

void warn_unused_groups(const Scenario& scenario, const std::vector<bool>& used,
                        const std::function<void(SourceLoc, std::string)>& warning) {
  for (size_t i = 1; i < scenario.groups.size(); ++i) {
    if (i < used.size() && used[i]) continue;
    warning(scenario.groups[i].loc, "group " + quoted(scenario.groups[i].name) + " is never used");
  }
}

}  // namespace lockstep::sim

namespace lockstep::sim {

SourceText::SourceText(std::string text) {
  auto owned = std::make_shared<const std::string>(std::move(text));
  view_ = *owned;
  owner_ = std::move(owned);
}

SourceText::SourceText(InputFile file) {
  auto owned = std::make_shared<const InputFile>(std::move(file));
  view_ = owned->text();
  owner_ = std::move(owned);
}

const std::string& Name::empty_string() {
  static const std::string empty;
  return empty;
}

Name NamePool::intern(std::string_view text) {
  if (text.empty()) return Name();
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = index_.find(text);
  if (found != index_.end()) return Name(found->second);
  const std::string& stored = texts_.emplace_back(text);
  index_.emplace(std::string_view(stored), &stored);
  return Name(&stored);
}

const Expr& ExprList::at(size_t i) const {
  if (i >= size()) throw std::out_of_range("expression argument " + std::to_string(i) + " of " + std::to_string(size()));
  return (*items_.get())[i];
}

const Expr& ExprList::operator[](size_t i) const { return (*items_.get())[i]; }

Expr& ExprList::operator[](size_t i) { return items_.make()[i]; }

const Expr* ExprList::end() const { return begin() + size(); }

const Expr* ExprList::begin() const { return items_.get() ? items_.get()->data() : nullptr; }

void ExprList::push_back(Expr expr) { items_.make().push_back(std::move(expr)); }

}  // namespace lockstep::sim
