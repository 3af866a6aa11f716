// The trace loader's scan: the file line by line, the fast path for common operation lines, placing
// each op in its rank's thread, the arenas, and the second part's reading.
#include "sim/trace_loader.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>

namespace lockstep::sim::trace {

void TraceLoader::load() {
  for (const ParamOverride& override_ : overrides_) {
    error({}, "unknown parameter " + quoted(override_.name) + " in -D " + override_.name + "=" +
                  override_.value + "; a trace has no parameters");
  }
  if (text_.size() > static_cast<uint64_t>(limits_.max_file_bytes)) {
    error({}, "file exceeds the limit of " + std::to_string(limits_.max_file_bytes) +
                  " bytes (raise it with --max-file-bytes)");
    return;
  }
  size_t pos = 0;
  bool header_seen = false;
  bool ops_ok = false;
  uint32_t line = 0;
  std::string_view text;
  const bool ends_in_newline = !text_.empty() && text_.back() == '\n';
  stop_ = text_.size();
  while (true) {
    // An operation line the fast path takes is read from the text directly.
    if (ops_ok && fast_path_ && line < UINT32_MAX && pos < stop_) {
      line_ = line + 1;
      size_t length = 0;
      const std::string_view rest(text_.data() + pos, text_.size() - pos);
      const bool taken = ends_in_newline ? fast_op_line<false>(rest, length) : fast_op_line<true>(rest, length);
      if (taken) {
        ++line;
        pos += length;
        continue;
      }
    }
    if (!next_line(pos, text)) {
      if (part_ == nullptr) break;
      take_part(pos, line);  // at the second part's start: its lines, then the rest
      continue;
    }
    if (line == UINT32_MAX) {
      error({}, "the trace has more than " + std::to_string(UINT32_MAX) + " lines");
      return;
    }
    line_ = ++line;
    if (is_blank(text)) continue;
    if (!header_seen) {
      header_seen = true;
      ops_ok = load_header(text);
      if (ops_ok && ends_in_newline) start_part(pos);
    } else if (ops_ok && !load_op_line(text)) {
      return;
    }
  }
  if (!header_seen) {
    error({}, "empty trace file");
    return;
  }
  if (ops_ok) finish();
}

bool TraceLoader::next_line(size_t& pos, std::string_view& line) const {
  if (pos >= stop_) return false;
  size_t end = text_.find('\n', pos);
  if (end == std::string_view::npos) end = text_.size();
  line = text_.substr(pos, end - pos);
  pos = end + 1;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return true;
}

template <bool BOUNDED>
bool TraceLoader::fast_op_line(std::string_view rest, size_t& length) {
  if (ops_ >= limits_.max_ops) return false;
  const char* const begin = rest.data();
  const char* const end = begin + rest.size();
  const char* p = begin;
  const auto col = [begin](const char* at_char) { return static_cast<uint32_t>(at_char - begin + 1); };
  // Whether `at` is inside the text. Without BOUNDED the text ends in a newline, which ends
  // every loop below: a scan never passes it, so it needs no bound.
  const auto more = [end](const char* at) { return !BOUNDED || at < end; };
  // A string's contents after its opening quote, up to (and past) its closing quote.
  const auto plain_string = [&](std::string_view& out) __attribute__((always_inline)) {
    const char* const from = p;
    // Eight bytes at a time while eight are left (SWAR): the first quote, backslash or
    // control character found by masks; the bytes before it belong to the string.
    while (end - p >= 8) {
      uint64_t word = 0;
      std::memcpy(&word, p, 8);
      const uint64_t stops = byte_is(word, '"') | byte_is(word, '\\') | byte_below_space(word);
      if (stops == 0) {
        p += 8;
        continue;
      }
      p += __builtin_ctzll(stops) / 8;
      break;
    }
    while (more(p) && *p != '"') {
      if (*p == '\\' || static_cast<unsigned char>(*p) < 0x20) return false;
      ++p;
    }
    if (!more(p)) return false;
    out = std::string_view(from, static_cast<size_t>(p - from));
    ++p;
    return true;
  };
  // An integer at `p` into `value`; advances `p` past it.
  const auto integer = [&](FastValue& value) __attribute__((always_inline)) {
    const bool negative = *p == '-';
    if (negative) ++p;
    const char* const digits = p;
    uint64_t magnitude = 0;
    if (end - p >= 8) {
      // Up to eight digits at once (SWAR): the digits' bytes as values 0-9, the leading
      // ones found by a mask, then combined in three multiplications.
      uint64_t chunk = 0;
      std::memcpy(&chunk, p, 8);
      const uint64_t x = chunk ^ 0x3030303030303030ULL;
      const uint64_t not_digit =
          (((x & 0x7f7f7f7f7f7f7f7fULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
      const int count = not_digit == 0 ? 8 : __builtin_ctzll(not_digit) / 8;
      if (count > 0) {
        uint64_t v = x << (64 - 8 * count);  // little endian: the first digit lowest
        v = (v * 2561) >> 8 & 0x00ff00ff00ff00ffULL;
        v = (v * 6553601) >> 16 & 0x0000ffff0000ffffULL;
        magnitude = (v * 42949672960001ULL) >> 32;
        p += count;
      }
    }
    while (more(p) && *p >= '0' && *p <= '9' && p - digits < 18) {
      magnitude = magnitude * 10 + static_cast<uint64_t>(*p - '0');
      ++p;
    }
    // 18 digits at most (no overflow), no leading zero, no fraction or exponent.
    if (p == digits || (more(p) && (*p >= '0' && *p <= '9'))) return false;
    if (*digits == '0' && p - digits > 1) return false;
    if (more(p) && (*p == '.' || *p == 'e' || *p == 'E')) return false;
    value.is_string = false;
    value.integer = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return true;
  };
  // After a value: past the comma and the blanks before the next key (0), past the closing
  // brace (1), or neither (-1).
  const auto after_value = [&]() __attribute__((always_inline)) {
    if (pair_at<BOUNDED>(p, end, ',', ' ')) {
      p += 2;  // the common `, `
      p = skip_blanks<BOUNDED>(p, end);
      return 0;
    }
    p = skip_blanks<BOUNDED>(p, end);
    if (more(p) && *p == ',') {
      ++p;
      p = skip_blanks<BOUNDED>(p, end);
      return 0;
    }
    if (more(p) && *p == '}') {
      ++p;
      return 1;
    }
    return -1;
  };
  std::array<FastValue, KEY_COUNT> values;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  KeySet seen = 0;
  p = skip_blanks<BOUNDED>(p, end);
  if (!more(p) || *p != '{') return false;
  ++p;
  // The start that writers give every line, `{"rank": R, "op": "NAME"`, by two compares of
  // known length; on anything else the line is read key by key from its brace.
  const char* const after_brace = p;
  if (end - p >= 8 && std::memcmp(p, "\"rank\": ", 8) == 0) {
    FastValue& rank = values[static_cast<size_t>(Key::RANK)];
    rank.key_col = col(p);
    p += 8;
    rank.col = col(p);
    if (more(p) && *p >= '0' && *p <= '9' && integer(rank) && end - p >= 9 && std::memcmp(p, ", \"op\": \"", 9) == 0) {
      FastValue& op = values[static_cast<size_t>(Key::OP)];
      op.key_col = col(p + 2);
      op.col = col(p + 8);
      p += 9;
      op.is_string = true;
      std::string_view text;
      if (plain_string(text)) {
        op.text = text.data();
        op.size = static_cast<uint32_t>(text.size());
        seen = bit(Key::RANK) | bit(Key::OP);
      }
    }
  }
  bool ended = false;
  if (seen != 0) {
    const int next = after_value();
    if (next < 0) return false;
    ended = next > 0;
  } else {
    p = skip_blanks<BOUNDED>(after_brace, end);
  }
  while (!ended) {
    if (!more(p) || *p != '"') return false;
    const uint32_t key_col = col(p);
    ++p;
    Key id = Key::RANK;
    if (!fast_key(p, end, id) || (seen & bit(id)) != 0) return false;
    seen |= bit(id);
    FastValue& value = values[static_cast<size_t>(id)];
    value.key_col = key_col;
    if (pair_at<BOUNDED>(p, end, ':', ' ')) {
      p += 2;  // the common `": "`
    } else {
      p = skip_blanks<BOUNDED>(p, end);
      if (!more(p) || *p != ':') return false;
      ++p;
    }
    p = skip_blanks<BOUNDED>(p, end);
    if (!more(p)) return false;
    value.col = col(p);
    if (*p == '"') {
      ++p;
      value.is_string = true;
      std::string_view text;
      if (!plain_string(text)) return false;
      value.text = text.data();
      value.size = static_cast<uint32_t>(text.size());
    } else if (!integer(value)) {
      return false;
    }
    const int next = after_value();
    if (next < 0) return false;
    if (next > 0) break;
  }
  // The end of the line: what next_line takes as one (a newline, a carriage return before
  // it or before the end of the file, or the end of the file).
  p = skip_blanks<BOUNDED>(p, end);
  if (more(p) && *p == '\r') ++p;
  if (more(p) && *p != '\n') return false;
  length = static_cast<size_t>(p - begin) + (more(p) ? 1 : 0);

  // The checks of the general path; any that fails sends the line there.
  const auto has = [&](Key key) { return (seen & bit(key)) != 0; };
  const auto get = [&](Key key) -> const FastValue& { return values[static_cast<size_t>(key)]; };
  const auto in_world = [&](const FastValue& v) {
    return !v.is_string && v.integer >= 0 && v.integer < scenario_.world;
  };
  const auto name = [&](const FastValue& v) { return v.is_string && v.size != 0; };
  const auto count = [&](const FastValue& v) { return !v.is_string && v.integer >= 0; };
  if (!has(Key::RANK) || !has(Key::OP) || !in_world(get(Key::RANK)) || !get(Key::OP).is_string) {
    return false;
  }
  const OpSpec* spec = fast_op(get(Key::OP).str());
  if (spec == nullptr || spec->kind == OpKind::WAIT || spec->kind == OpKind::NEW_GROUP) return false;
  const KeySet args = seen & ~(bit(Key::RANK) | bit(Key::OP) | bit(Key::THREAD));
  if ((args & ~spec->args) != 0 || (spec->required & ~args) != 0) return false;
  if (has(Key::THREAD) && !name(get(Key::THREAD))) return false;
  if (has(Key::SIZE) && !count(get(Key::SIZE))) return false;
  if (has(Key::DURATION) && !count(get(Key::DURATION))) return false;
  if (has(Key::ROOT) && !in_world(get(Key::ROOT))) return false;
  if (has(Key::TO) && !in_world(get(Key::TO))) return false;
  const bool from_any = has(Key::FROM) && get(Key::FROM).is_string;
  if (has(Key::FROM) && (from_any ? get(Key::FROM).str() != "any" : !in_world(get(Key::FROM)))) {
    return false;
  }
  if ((seen & (bit(Key::TAG) | bit(Key::STREAM) | bit(Key::ASYNC))) != 0) {
    for (Key key : {Key::TAG, Key::STREAM, Key::ASYNC}) {
      if (has(key) && !name(get(key))) return false;
    }
  }
  DType dtype = DType::BF16;
  if (has(Key::DTYPE)) {
    if (!get(Key::DTYPE).is_string) return false;
    const std::string_view text = get(Key::DTYPE).str();
    if (text.empty() || text != last_dtype_name_) {
      const std::optional<DType> parsed = parse_dtype(text);
      if (!parsed) return false;
      last_dtype_name_ = text;
      last_dtype_ = *parsed;
    }
    dtype = last_dtype_;
  }
  const auto rank = static_cast<int32_t>(get(Key::RANK).integer);
  uint32_t group = 0;
  if (has(Key::GROUP)) {
    if (!name(get(Key::GROUP))) return false;
    const std::string_view group_name = get(Key::GROUP).str();
    if (group_name != last_group_name_) {
      const auto found = group_index_.find(group_name);
      if (found == group_index_.end()) return false;
      last_group_name_ = group_name;
      last_group_ = found->second;
    }
    group = last_group_;
    const GroupDef& def = scenario_.groups[group];
    if (def.from_new_group) return false;
    if (group != 0 && def.single()) {
      const auto member = [&](int64_t r) { return def.comm_for(static_cast<int32_t>(r)) != nullptr; };
      if (!member(rank)) return false;
      if (has(Key::TO) && !member(get(Key::TO).integer)) return false;
      if (has(Key::FROM) && !from_any && !member(get(Key::FROM).integer)) return false;
      if (has(Key::ROOT) && !member(get(Key::ROOT).integer)) return false;
    }
  }

  const bool names = (seen & (bit(Key::TAG) | bit(Key::STREAM) | bit(Key::ASYNC))) != 0;
  // A record keeps the columns of a value and a peer in 16 bits (a longer line: a statement).
  const bool short_line = length <= RecordedOp::MAX_VALUE_COL;
  // A part takes only lines that become records of a thread "main" (merge_part).
  if (in_part_ && (names || !short_line || has(Key::THREAD))) return false;

  // The line is good: place it as the general path would.
  ++ops_;
  const SourceLoc op_loc{line_, get(Key::OP).key_col};
  const auto loc = [&](Key key) { return SourceLoc{line_, get(key).col}; };
  enter_rank(rank);
  const std::string_view thread = has(Key::THREAD) ? get(Key::THREAD).str() : "main";
  if (!has(Key::THREAD) && ranks_[current_state_].last_is_main) {
    current_thread_ = ranks_[current_state_].last_thread;  // the common line: no thread named
  } else if (!place_thread(rank, thread, has(Key::THREAD) ? loc(Key::THREAD) : op_loc, op_loc)) {
    return true;
  }
  placed_ = true;
  const bool uses_group = has(Key::GROUP) || is_collective(spec->kind) || is_p2p(spec->kind);
  if (!names && short_line && open_group().depth == 0) {
    // The common op: a flat record (RecordedOp), made into a statement when first read.
    RecordedOp& op = recorded().ops.emplace_back();
    op.line = line_;
    op.col = op_loc.col;
    op.op = spec->kind;
    op.dtype = dtype;
    op.group = group;
    uint8_t flags = 0;
    // No operation takes both a size and a duration, or a root and a peer.
    if (has(Key::SIZE)) {
      op.value = get(Key::SIZE).integer;
      op.value_col = static_cast<uint16_t>(get(Key::SIZE).col);
      flags |= RecordedOp::SIZE;
    } else if (has(Key::DURATION)) {
      op.value = get(Key::DURATION).integer;
      op.value_col = static_cast<uint16_t>(get(Key::DURATION).col);
      flags |= RecordedOp::DURATION;
    }
    if (has(Key::ROOT)) {
      op.peer = static_cast<int32_t>(get(Key::ROOT).integer);
      op.peer_col = static_cast<uint16_t>(get(Key::ROOT).col);
      flags |= RecordedOp::ROOT;
    } else if (has(Key::TO)) {
      op.peer = static_cast<int32_t>(get(Key::TO).integer);
      op.peer_col = static_cast<uint16_t>(get(Key::TO).col);
      flags |= RecordedOp::PEER;
    } else if (has(Key::FROM)) {
      op.peer = from_any ? 0 : static_cast<int32_t>(get(Key::FROM).integer);
      op.peer_col = static_cast<uint16_t>(get(Key::FROM).col);
      flags |= from_any ? RecordedOp::PEER | RecordedOp::PEER_ANY : RecordedOp::PEER;
    }
    op.flags = flags;
    if (uses_group) group_used_[group] = true;
    return true;
  }
  // An op with names, or in an NCCL group: a statement in the side table.
  if (open_group().depth > 0) {
    const SourceLoc async_loc = has(Key::ASYNC) ? loc(Key::ASYNC) : SourceLoc{};
    if (!check_in_nccl_group(*spec, loc(Key::OP), has(Key::ASYNC) ? &async_loc : nullptr)) return true;
  }
  Stmt& stmt = new_op();
  stmt.kind = StmtKind::OP;
  stmt.op = spec->kind;
  stmt.loc = op_loc;
  stmt.dtype = dtype;
  stmt.group = group;
  if (uses_group) group_used_[group] = true;
  // The statement is new: its expressions are constants already (of value 0), set in place.
  const auto constant = [&](Expr& expr, int64_t value, Key key) {
    expr.value = value;
    expr.loc = loc(key);
  };
  if (has(Key::SIZE)) constant(stmt.size, get(Key::SIZE).integer, Key::SIZE);
  if (has(Key::DURATION)) constant(stmt.duration, get(Key::DURATION).integer, Key::DURATION);
  if (has(Key::ROOT)) {
    constant(stmt.set_extra().root, get(Key::ROOT).integer, Key::ROOT);
    stmt.has_root = true;
  }
  if (has(Key::TO)) {
    constant(stmt.peer, get(Key::TO).integer, Key::TO);
    stmt.has_peer = true;
  }
  if (has(Key::FROM)) {
    constant(stmt.peer, from_any ? 0 : get(Key::FROM).integer, Key::FROM);
    stmt.has_peer = true;
    stmt.peer_any = from_any;
  }
  if (has(Key::TAG)) stmt.tag = scenario_.names->intern(get(Key::TAG).str());
  if (has(Key::STREAM)) stmt.stream = scenario_.names->intern(get(Key::STREAM).str());
  if (has(Key::ASYNC)) {
    stmt.handle = scenario_.names->intern(get(Key::ASYNC).str());
    std::vector<uint32_t>& threads = ranks_[current_state_].handles[stmt.handle.str()];
    if (std::find(threads.begin(), threads.end(), current_thread_) == threads.end()) {
      threads.push_back(current_thread_);
    }
  }
  if (stmt.op == OpKind::BARRIER) {
    stmt.size.value = dtype_bytes(stmt.dtype);
    stmt.size.loc = stmt.loc;
  }
  return true;
}

template <size_t N>
bool TraceLoader::starts(const char* p, const char* end, const char (&name)[N]) {
  return static_cast<size_t>(end - p) >= N - 1 && std::memcmp(p, name, N - 1) == 0;
}

[[gnu::always_inline]] inline bool TraceLoader::fast_key(const char*& p, const char* end, Key& id) {
  const auto is = [&](bool match, Key found, size_t length) {
    id = found;
    p += match ? length + 1 : 0;
    return match;
  };
  if (p == end) return false;
  switch (*p) {
    case 'r':
      if (starts(p, end, "rank\"")) return is(true, Key::RANK, 4);
      if (starts(p, end, "root\"")) return is(true, Key::ROOT, 4);
      return is(starts(p, end, "ranks\""), Key::RANKS, 5);
    case 'o': return is(starts(p, end, "op\""), Key::OP, 2);
    case 's':
      if (starts(p, end, "size\"")) return is(true, Key::SIZE, 4);
      return is(starts(p, end, "stream\""), Key::STREAM, 6);
    case 'd':
      if (starts(p, end, "duration_ns\"")) return is(true, Key::DURATION, 11);
      return is(starts(p, end, "dtype\""), Key::DTYPE, 5);
    case 't':
      if (starts(p, end, "to\"")) return is(true, Key::TO, 2);
      if (starts(p, end, "tag\"")) return is(true, Key::TAG, 3);
      return is(starts(p, end, "thread\""), Key::THREAD, 6);
    case 'f': return is(starts(p, end, "from\""), Key::FROM, 4);
    case 'g': return is(starts(p, end, "group\""), Key::GROUP, 5);
    case 'a': return is(starts(p, end, "async\""), Key::ASYNC, 5);
    case 'h': return is(starts(p, end, "handle\""), Key::HANDLE, 6);
    case 'n': return is(starts(p, end, "name\""), Key::NAME, 4);
    default: return false;
  }
}

template <bool BOUNDED>
[[gnu::always_inline]] inline bool TraceLoader::pair_at(const char* p, const char* end, char a, char b) {
  if (BOUNDED && end - p < 2) return false;
  if (!BOUNDED && *p != a) return false;  // the newline that ends the text stops here
  uint16_t pair = 0;
  std::memcpy(&pair, p, 2);
  return pair == static_cast<uint16_t>(static_cast<unsigned char>(a) | static_cast<unsigned char>(b) << 8);
}

uint64_t TraceLoader::byte_is(uint64_t word, char c) {
  constexpr uint64_t ONES = 0x0101010101010101ULL;
  constexpr uint64_t LOW7 = 0x7f7f7f7f7f7f7f7fULL;
  const uint64_t x = word ^ (ONES * static_cast<unsigned char>(c));
  return ~(((x & LOW7) + LOW7) | x) & ~LOW7;
}

uint64_t TraceLoader::byte_below_space(uint64_t word) {
  constexpr uint64_t LOW7 = 0x7f7f7f7f7f7f7f7fULL;
  return ~(((word & LOW7) + 0x6060606060606060ULL) | word) & ~LOW7;
}

template <bool BOUNDED>
[[gnu::always_inline]] inline const char* TraceLoader::skip_blanks(const char* p, const char* end) {
  // A byte above ' ' ends the blanks at once: the common case is one compare.
  while ((!BOUNDED || p < end) && static_cast<unsigned char>(*p) <= ' ' && (*p == ' ' || *p == '\t')) ++p;
  return p;
}

template <size_t N>
bool TraceLoader::same(const char* text, const char (&name)[N]) {
  return std::memcmp(text, name, N - 1) == 0;
}

const OpSpec* TraceLoader::fast_op(std::string_view name) {
  // By length first: most lengths hold one or two ops.
  for (const OpSpec& spec : OP_SPECS) {
    if (spec.name.size() == name.size() && spec.name == name) return &spec;
  }
  return nullptr;
}

Stmt& TraceLoader::new_side_stmt(RecordedBody& body) {
  RecordedOp& op = body.ops.emplace_back();
  op.flags = RecordedOp::SIDE;
  op.value = static_cast<int64_t>(body.stmts.size());
  return body.stmts.emplace_back();
}

Stmt& TraceLoader::new_op() {
  RecordedBody& body = recorded();
  const OpenGroup& group = open_group();
  return group.depth > 0 ? side_stmt(body, group.stmt).body.emplace_back() : new_side_stmt(body);
}

void TraceLoader::drop_op() {
  RecordedBody& body = recorded();
  const OpenGroup& group = open_group();
  if (group.depth > 0) {
    side_stmt(body, group.stmt).body.pop_back();
  } else {
    body.stmts.pop_back();
    body.ops.pop_back();
  }
}

bool TraceLoader::check_in_nccl_group(const OpSpec& spec, const LineKeys& keys) {
  const JsonMember* async = keys.get(Key::ASYNC);
  const SourceLoc async_loc = async != nullptr ? at(async->value) : SourceLoc{};
  return check_in_nccl_group(spec, at(keys.get(Key::OP)->value), async != nullptr ? &async_loc : nullptr);
}

bool TraceLoader::check_in_nccl_group(const OpSpec& spec, SourceLoc op_loc, const SourceLoc* async_loc) {
  const OpenGroup& group = open_group();
  if (group.depth == 0) return true;
  const std::string where = " (group_start at line " + std::to_string(group.loc.line) + ")";
  if (!is_collective(spec.kind) && !is_p2p(spec.kind)) {
    error(op_loc, "only communication operations may appear in an NCCL group" + where +
                      ", got " + quoted(spec.name));
    return false;
  }
  // The engine issues a group as one unit that the main stream waits for: it has no handles.
  if (async_loc != nullptr) {
    error(*async_loc, "'async' is not allowed in an NCCL group" + where +
                          ": the main stream waits for the whole group");
    return false;
  }
  return true;
}

bool TraceLoader::place(int32_t rank, const LineKeys& keys) {
  enter_rank(rank);
  std::string_view name = "main";
  const JsonMember* thread = keys.get(Key::THREAD);
  if (thread != nullptr) {
    const std::optional<std::string_view> given = name_of(thread->value, "thread");
    if (!given) return false;
    name = *given;
  }
  const SourceLoc op_loc = at(*keys.get(Key::OP));
  return place_thread(rank, name, thread != nullptr ? at(thread->value) : op_loc, op_loc);
}

[[gnu::always_inline]] inline void TraceLoader::enter_rank(int32_t rank) {
  int32_t& state = state_of_rank_[static_cast<size_t>(rank)];
  if (state < 0) {
    state = static_cast<int32_t>(ranks_.size());
    ranks_.emplace_back().rank = rank;
  }
  current_state_ = static_cast<uint32_t>(state);
}

[[gnu::always_inline]] inline bool TraceLoader::place_thread(int32_t rank, std::string_view name, SourceLoc name_loc, SourceLoc op_loc) {
  const RankState& rs = ranks_[current_state_];
  if (rs.last_thread < rs.program.size()) {
    // Compared in line: a thread name is short, and a call to memcmp cost more than this.
    const std::string& last = rs.program[rs.last_thread].name;
    bool same_name = last.size() == name.size();
    for (size_t i = 0; same_name && i < name.size(); ++i) same_name = last[i] == name[i];
    if (same_name) {
      current_thread_ = rs.last_thread;
      return true;
    }
  }
  return place_other_thread(rank, name, name_loc, op_loc);
}

[[gnu::noinline]] bool TraceLoader::place_other_thread(int32_t rank, std::string_view name, SourceLoc name_loc,
                                          SourceLoc op_loc) {
  RankState& rs = ranks_[current_state_];
  const size_t found = thread_index(rs, name);
  if (found == SIZE_MAX && rs.program.size() >= MAX_TRACE_THREADS_PER_RANK) {
    error(name_loc, "rank " + std::to_string(rank) + " has more than the limit of " +
                        std::to_string(MAX_TRACE_THREADS_PER_RANK) + " threads");
    return false;
  }
  current_thread_ = found == SIZE_MAX ? add_thread(rs, name, op_loc) : static_cast<uint32_t>(found);
  rs.last_thread = current_thread_;
  rs.last_is_main = rs.program[current_thread_].name == "main";
  return true;
}

size_t TraceLoader::thread_index(const RankState& rs, std::string_view name) {
  const auto found = std::find_if(rs.program.begin(), rs.program.end(),
                                  [&](const ThreadDef& t) { return t.name == name; });
  return found == rs.program.end() ? SIZE_MAX : static_cast<size_t>(found - rs.program.begin());
}

uint32_t TraceLoader::add_thread(RankState& rs, std::string_view name, SourceLoc op_loc) {
  rs.program.push_back(ThreadDef{std::string(name), op_loc});
  rs.open.emplace_back();
  auto& recorded = *rs.recorded.emplace_back(std::make_shared<RecordedBody>());
  recorded.ops = std::vector<RecordedOp, StmtAllocator<RecordedOp>>(StmtAllocator<RecordedOp>(ops_arena()));
  recorded.arena = stmt_arena();
  // A rank's first thread gets the average share of the file's lines up front: growing
  // a million statements by doubling cost a tenth of the load (copies and page faults).
  // Its pages are backed at once: a page fault per 4 KiB of statements was a sixth.
  // On a large trace, the statements of every rank come from one arena in huge pages
  // (StmtArena): backing and freeing them by 4 KiB pages was most of the load.
  if (rs.program.size() == 1) {
    recorded.ops.reserve(expected_ops_per_rank());
    // In the arena a thread of its own backs the pages (make_arenas); on the heap, here.
    if (ops_arena_ == nullptr || !ops_arena_->owns(recorded.ops.data())) {
      populate_pages(recorded.ops.data(), recorded.ops.capacity() * sizeof(RecordedOp));
    }
  }
  return static_cast<uint32_t>(rs.program.size() - 1);
}

void TraceLoader::read_part(size_t pos, uint32_t line, const std::atomic<bool>& cancel) {
  while (pos < text_.size()) {
    if (line % 4096 == 0 && cancel.load(std::memory_order_relaxed)) break;
    line_ = line + 1;
    size_t length = 0;
    if (!fast_op_line<false>(std::string_view(text_.data() + pos, text_.size() - pos), length)) {
      size_t next = pos;
      std::string_view text;
      next_line(next, text);
      if (!is_blank(text)) break;
      length = next - pos;
    }
    ++line;
    pos += length;
  }
  part_pos_ = pos;
  part_line_ = line;
}

size_t TraceLoader::expected_ops_per_rank() {
  if (expected_ops_per_rank_ == SIZE_MAX) {
    expected_ops_per_rank_ = count_lines() / static_cast<size_t>(std::max(scenario_.world, 1)) + 1;
  }
  return expected_ops_per_rank_;
}

size_t TraceLoader::count_lines() {
  if (line_count_ == SIZE_MAX) line_count_ = count_newlines(text_);
  return line_count_;
}

std::shared_ptr<StmtArena> TraceLoader::make_arena(size_t bytes_per_line) {
  const size_t bytes = (count_lines() + static_cast<size_t>(std::max(scenario_.world, 1))) * bytes_per_line;
  return bytes >= MIN_ARENA_BYTES ? std::make_shared<StmtArena>(bytes) : nullptr;
}

std::shared_ptr<StmtArena> TraceLoader::ops_arena() {
  if (!arenas_made_) make_arenas();
  return ops_arena_;
}

std::shared_ptr<StmtArena> TraceLoader::stmt_arena() {
  if (!arenas_made_) make_arenas();
  return stmt_arena_;
}

void TraceLoader::make_arenas() {
  arenas_made_ = true;
  ops_arena_ = make_arena(sizeof(RecordedOp));
  // The ops are written front to back (a rank's first line reserves its share next), and
  // all of the arena is used: its pages are backed ahead of the writes, beside them.
  if (ops_arena_ != nullptr) ops_arena_->populate_in_background();
  stmt_arena_ = make_arena(sizeof(Stmt));
}

}  // namespace lockstep::sim::trace
