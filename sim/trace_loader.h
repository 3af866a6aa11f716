// The trace loader: JSON Lines -> Scenario with every static check of the YAML loader. Private
// to sim/: its members are defined by concern in trace_format.cc (the entry, diagnostics),
// trace_scan.cc (the scan: lines, the fast path, placing ops, the second part's reading),
// trace_header.cc (the header and semantics), trace_lines.cc (operation lines by the JSON
// reader, NCCL groups), trace_groups.cc (groups, the end of the file) and trace_part.cc (a large
// trace's second half on a thread of its own).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "sim/json_line_reader.h"
#include "sim/loader.h"
#include "sim/semantics_table.h"
#include "sim/stmt_arena.h"
#include "sim/trace_format.h"
#include "sim/trace_tables.h"

namespace lockstep::sim::trace {

class TooManyErrors {};

// A group a rank made with new_group.
struct CreatedGroup {
  uint32_t group = 0;
  uint32_t thread = 0;
  uint32_t line = 0;
};

// An NCCL group a thread has open: group_start lines minus group_end lines (nesting counts
// once, as in NCCL), the NCCL_GROUP statement the ops go into, and where it was opened.
struct OpenGroup {
  uint32_t depth = 0;
  uint32_t stmt = 0;  // index into the thread's ops (one in the side table)
  SourceLoc loc;      // the outermost group_start's operation name
};

// What the loader keeps per rank that has lines.
struct RankState {
  int32_t rank = 0;
  RankProgram program;  // the threads' names and positions; their ops are in `recorded`
  std::vector<std::shared_ptr<RecordedBody>> recorded;  // per thread of `program`
  std::vector<OpenGroup> open;  // per thread of `program`
  uint32_t last_thread = 0;
  bool last_is_main = false;  // program[last_thread] is "main"
  std::vector<CreatedGroup> created;  // sorted by group
  std::map<std::string, std::vector<uint32_t>, std::less<>> handles;  // threads issuing each
};

// A wait whose handle its thread has not issued before: checked at the end of the file.
struct PendingWait {
  uint32_t state = 0;
  uint32_t thread = 0;
  std::string handle;
  SourceLoc loc;
};

// A group name used before any line created it, or a new_group group used before this rank's
// new_group line: checked when the whole file is read.
struct PendingUse {
  uint32_t state = 0;   // index into ranks_
  uint32_t thread = 0;
  size_t stmt = 0;      // index into the thread's ops (one in the side table)
  size_t inner = SIZE_MAX;  // index into that statement's body when the op is in an NCCL group
  std::string name;     // the group's name
  SourceLoc loc;        // of the group's name
  bool unknown = false; // the name was unknown on its line: members are checked at the end
};

class TraceLoader {
 public:
  TraceLoader(SourceText text, const std::string& path,
              std::span<const ParamOverride> overrides, const LoadLimits& limits)
      : source_(std::move(text)), text_(source_.view()), path_(path), overrides_(overrides),
        limits_(limits), fast_path_(limits.trace_fast_path) {}

  LoadResult run();

 private:
  // ----- diagnostics

  void error(SourceLoc at, std::string message);

  void warning(SourceLoc at, std::string message);

  SourceLoc at(const JsonValue& value) const { return {line_, value.col}; }
  SourceLoc at(const JsonMember& member) const { return {line_, member.col}; }

  bool expect_kind(const JsonValue& value, JsonKind kind, std::string_view what);

  // A non-empty string, or nullopt (reported).
  std::optional<std::string_view> name_of(const JsonValue& value, std::string_view key);

  // An integer of at least `min`, or nullopt (reported).
  std::optional<int64_t> integer_of(const JsonValue& value, std::string_view what,
                                    std::string_view name, int64_t min);

  // Reports a rank outside [0, world).
  bool check_in_world(int64_t rank, SourceLoc loc);

  std::optional<int32_t> rank_of(const JsonValue& value);

  // ----- the file

  void load();

  // Whether a line (without its end of line) has nothing but spaces and tabs: skipped.
  static bool is_blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

  // The line at `pos` (without its end of line); advances `pos`. False at the end of the text
  // (or, while a second part is read beside this loader, at that part's start).
  bool next_line(size_t& pos, std::string_view& line) const;

  // ----- header

  // Loads the header; false when operations cannot be checked (no valid world).
  bool load_header(std::string_view text);

  // The header's keys by name; unknown and duplicate keys are reported and left out.
  std::map<std::string_view, const JsonMember*> header_keys(const std::vector<JsonMember>& header);

  void report_duplicate(const JsonMember& member, uint32_t first_col);

  bool load_version(const std::map<std::string_view, const JsonMember*>& keys);

  void load_name(const JsonValue& value);

  void load_text(const JsonValue& value, std::string& out);

  void load_expect(const JsonValue& value);

  bool load_world(const JsonMember& member);

  void define_world_group(uint32_t col);

  // Each group costs a slot per rank of the world (GroupDef::comm_of_rank): their number is
  // bounded so that groups times world stays under MAX_TRACE_GROUP_SLOTS.
  bool check_group_bound(SourceLoc loc);

  uint32_t add_group(GroupDef group);

  void load_groups(const JsonValue& value);

  bool check_group_name(std::string_view name, SourceLoc loc);

  // A list of distinct ranks in the world, sorted; nullopt when any is wrong (reported).
  std::optional<std::vector<int32_t>> ranks_of(const JsonValue& value, std::string_view group);

  // ----- semantics

  void load_semantics(const JsonValue& value);

  void load_setting(const SemanticsSetting& setting, const JsonValue& value);

  void load_link(const JsonValue& value);

  std::optional<size_t> choice_of(const JsonValue& value, std::string_view key,
                                  const std::vector<std::string>& choices);

  // ----- operation lines

  struct LineKeys {
    std::array<const JsonMember*, KEY_COUNT> member{};
    std::vector<const JsonMember*> unknown;
    const JsonMember* get(Key key) const { return member[static_cast<size_t>(key)]; }
  };

  // ----- the fast path

  // One value of a line read by the fast path: a string without escapes, or an integer.
  // No initialisers: a line fills only the values of its keys (the `seen` bits), and
  // zeroing all sixteen per line cost more than reading them.
  struct FastValue {
    int64_t integer;
    const char* text;
    uint32_t size;      // of text
    uint32_t col;       // of the value's first character
    uint32_t key_col;   // of the key's opening quote
    bool is_string;
    std::string_view str() const { return {text, size}; }
  };

  // The common operation line, read in one pass without building JSON values: keys without
  // escapes, each once; values that are strings without escapes or integers; every check
  // passing. `rest` is the text from the line's start to the end of the file: the scan finds
  // the line's end itself (no search for the newline first) and sets `length` to the bytes
  // the line takes with its end of line. A line that is anything else (or would give any
  // diagnostic) is left untouched (false) and read again by the general path, which reports
  // exactly what is wrong with it.
  template <bool BOUNDED>
  bool fast_op_line(std::string_view rest, size_t& length);

  // Whether the text at `p` starts with `name` (the closing quote included): a compare of known
  // length, which the compiler turns into one or two integer compares instead of a call.
  template <size_t N>
  static bool starts(const char* p, const char* end, const char (&name)[N]);

  // The key of an operation line whose name starts at `p` (after its opening quote): the name
  // and its closing quote are compared in place, without finding the quote first (no key
  // holds a quote, a backslash or a control character, so a key that is anything else fails
  // every compare). Advances `p` past the closing quote.
  [[gnu::always_inline]] static bool fast_key(const char*& p, const char* end, Key& id);

  // Whether the text at `p` starts with the two bytes `a`, `b` (one 16-bit compare).
  template <bool BOUNDED>
  [[gnu::always_inline]] static bool pair_at(const char* p, const char* end, char a, char b);

  // Per byte of `word`, the high bit set where the byte is `c` (exact: no carries between bytes).
  static uint64_t byte_is(uint64_t word, char c);
  // Per byte of `word`, the high bit set where the byte is below ' ' (a control character).
  static uint64_t byte_below_space(uint64_t word);

  // Past the blanks (spaces and tabs) at `p`.
  template <bool BOUNDED>
  [[gnu::always_inline]] static const char* skip_blanks(const char* p, const char* end);

  // Whether `text` (of the length of `name`) is `name`: a compare of known length, which the
  // compiler turns into one or two integer compares instead of a call.
  template <size_t N>
  static bool same(const char* text, const char (&name)[N]);

  // The operation named `name` (not a group marker): by length, then compares of known length.
  static const OpSpec* fast_op(std::string_view name);

  // One operation line; false when loading must stop (a bound was hit).
  bool load_op_line(std::string_view text);

  // ----- NCCL groups

  OpenGroup& open_group() { return ranks_[current_state_].open[current_thread_]; }

  // The current thread's ops.
  RecordedBody& recorded() { return *ranks_[current_state_].recorded[current_thread_]; }
  // Op `index` of a thread, one of its side table.
  static Stmt& side_stmt(RecordedBody& body, size_t index) { return body.stmts[body.ops[index].side_index()]; }
  // A new op of the current thread, as a statement in its side table.
  static Stmt& new_side_stmt(RecordedBody& body);

  // A new statement for the current line's op: in the thread's ops (its side table), or its
  // open NCCL group's.
  Stmt& new_op();
  // Takes back the statement new_op gave.
  void drop_op();

  // Only communication goes into an NCCL group (as in the YAML `group:`).
  bool check_in_nccl_group(const OpSpec& spec, const LineKeys& keys);

  // `op_loc`: the operation's name; `async_loc`: the async value, null without one.
  bool check_in_nccl_group(const OpSpec& spec, SourceLoc op_loc, const SourceLoc* async_loc);

  // group_start opens the thread's NCCL group (a nested one only counts), group_end closes it.
  void load_group_mark(const OpSpec& spec, const LineKeys& keys);

  // ", thread 'NAME'" for a thread other than main, else "".
  std::string thread_words(uint32_t thread) const;

  // Every group still open at the end of the file is an error at its group_start.
  void check_groups_closed();

  // Sorts the line's members by key; reports duplicates. False when there was one.
  bool sort_keys(LineKeys& keys);

  const OpSpec* op_of(const LineKeys& keys);

  std::optional<int32_t> line_rank(const LineKeys& keys);

  // Reports arguments the op does not take, unknown keys and missing required arguments.
  bool check_args(const OpSpec& spec, const LineKeys& keys);

  // Finds (or makes) the rank's state and the thread of the line; false when the thread is bad.
  bool place(int32_t rank, const LineKeys& keys);

  // Makes the rank's state the current one (made on its first line).
  [[gnu::always_inline]] void enter_rank(int32_t rank);

  // The thread `name` of the current rank state (made on its first line); false when the rank
  // has too many threads (reported at `name_loc`).
  [[gnu::always_inline]] bool place_thread(int32_t rank, std::string_view name, SourceLoc name_loc, SourceLoc op_loc);

  // place_thread when the thread is not the rank's last one.
  [[gnu::noinline]] bool place_other_thread(int32_t rank, std::string_view name, SourceLoc name_loc,
                                            SourceLoc op_loc);

  // The index of `rs`'s thread `name`, or SIZE_MAX when it has none.
  static size_t thread_index(const RankState& rs, std::string_view name);

  // A new thread `name` of `rs`, first named by the operation at `op_loc`; its index.
  uint32_t add_thread(RankState& rs, std::string_view name, SourceLoc op_loc);

  // Loads the arguments into `stmt` (the group first: peers and roots are checked against it).
  bool load_args(const LineKeys& keys, Stmt& stmt, int32_t rank);

  bool load_arg(Key key, const JsonValue& value, Stmt& stmt);

  bool load_expr(const JsonValue& value, std::string_view what, std::string_view name, Expr& out);

  bool load_rank_expr(const JsonValue& value, Expr& out, bool& has);

  bool load_from(const JsonValue& value, Stmt& stmt);
  bool load_splits(const JsonValue& value, std::string_view name, std::vector<Expr>& out);

  bool load_string(const JsonValue& value, std::string_view key, Name& out);

  bool load_dtype(const JsonValue& value, Stmt& stmt);

  // Handles are per rank: a wait needs an `async` with its handle earlier in its own thread, or
  // anywhere in another thread of the rank (checked at the end).
  bool load_async(const JsonValue& value, Stmt& stmt);

  bool load_wait(const JsonValue& value, Stmt& stmt);

  void check_wait(const PendingWait& wait);

  // ----- groups

  // The group of an op. An unknown name may still be made by a later new_group line (of
  // another thread): it is checked at the end (`known` false).
  bool load_group(const JsonValue& value, Stmt& stmt, int32_t rank, bool& known);

  // Whether `rank` made `group` with new_group on an earlier line of the current thread, or on
  // any line of another thread so far.
  bool created_here(int32_t rank, uint32_t group) const;

  // The rank's new_group of `group`, or null (RankState::created is sorted by group).
  static const CreatedGroup* find_created(const RankState& rs, uint32_t group);

  void commit_pending();

  // The issuing rank, the peer and the root must be members of the op's group.
  bool check_members(const Stmt& stmt, int32_t rank, const JsonMember* group_member);

  // A new_group line: the group is made by its first line; later lines (of other ranks) must
  // give the same ranks, and no rank may make a name twice.
  bool load_new_group(const LineKeys& keys, Stmt& stmt, int32_t rank);

  bool same_new_group(uint32_t index, const std::vector<int32_t>& ranks, SourceLoc name_loc,
                      SourceLoc ranks_loc);

  bool record_creation(int32_t rank, uint32_t group, SourceLoc loc);

  // ----- the end of the file

  void finish();

  void resolve(PendingUse& use);

  bool check_created(const RankState& rs, const PendingUse& use, const Stmt& stmt);

  // ----- the second part: a large trace's lines on two threads

  // A large trace is read by two loaders at once: this one from the first operation line to the
  // middle of the file, and a part loader (a TraceLoader of its own, on a thread of its own)
  // from there to the end, by the fast path only, up to the first line it does not take. When
  // this one reaches the middle, it takes the part's ranks, threads and records as if it had
  // read those lines itself (take_part), then reads on from where the part stopped; or, when
  // its own lines would have the part's read otherwise, reads them itself. The part takes only
  // lines whose meaning depends on nothing before them but the header and what take_part
  // checks: operations of a group of the header, without a thread (so of thread "main"), tag,
  // stream or handle, on lines shorter than 65,536 bytes, and blank lines.
  struct Part {
    std::unique_ptr<TraceLoader> loader;
    std::atomic<bool> cancel = false;  // set when this loader stops before the part's start
    bool failed = false;               // the part threw (out of memory): its lines are read here
    std::thread thread;
    Part() = default;
    Part(const Part&) = delete;
    Part& operator=(const Part&) = delete;
    ~Part() {
      cancel = true;
      if (thread.joinable()) thread.join();
    }
  };
  struct PartOf {};

  // A part loader of `main` (after its header), whose operations may number `max_ops`.
  TraceLoader(const TraceLoader& main, PartOf /*tag*/, int64_t max_ops);

  // After the header (whose line ends before `pos`, in a text that ends in a newline): starts a
  // part loader on the second half of the lines when the trace is large enough.
  void start_part(size_t pos);

  // The part loader's work: the lines from `pos` (whose first has number `line` + 1) by the
  // fast path, and blank lines, up to the first line it does not take or the end.
  void read_part(size_t pos, uint32_t line, const std::atomic<bool>& cancel);

  // At the part's start (`pos`, after `line` lines): waits for the part, takes its lines when
  // this loader's state lets it, and moves `pos` and `line` past them.
  void take_part(size_t& pos, uint32_t& line);

  // Takes the ranks, threads and records of `part` as reading its lines here would have made
  // them; false (and nothing changed) when those lines would be read otherwise here: into an
  // NCCL group left open, or making a thread past a rank's limit.
  bool merge_part(TraceLoader& part);

  void warn_unused();

  SourceText source_;
  std::string_view text_;  // source_
  std::string path_;
  std::span<const ParamOverride> overrides_;
  LoadLimits limits_;
  std::vector<Diagnostic> diagnostics_;
  size_t errors_ = 0;
  Scenario scenario_;

  JsonLineReader reader_;
  std::vector<JsonMember> members_;  // of the current line
  uint32_t line_ = 0;                // the current line
  int64_t ops_ = 0;

  std::map<std::string, uint32_t, std::less<>> group_index_;
  std::vector<bool> group_used_;
  std::vector<int32_t> state_of_rank_;  // size world: index into ranks_, -1 without lines
  size_t expected_ops_per_rank_ = SIZE_MAX;  // lines / world, counted on first use

  size_t expected_ops_per_rank();
  size_t line_count_ = SIZE_MAX;  // newlines in the text, counted on first use
  size_t count_lines();
  // The arenas of the threads' ops and of their statements when made: room for one of each
  // per line and one per rank (what the first threads reserve, and more), made on first use;
  // none for a small trace, where a 2 MiB page would cost more than it saves. The statements'
  // is only address space until the statements are made.
  static constexpr size_t MIN_ARENA_BYTES = size_t{8} << 20;
  std::shared_ptr<StmtArena> make_arena(size_t bytes_per_line);
  std::shared_ptr<StmtArena> ops_arena();
  std::shared_ptr<StmtArena> stmt_arena();
  void make_arenas();
  std::shared_ptr<StmtArena> ops_arena_;
  std::shared_ptr<StmtArena> stmt_arena_;
  bool arenas_made_ = false;
  std::vector<RankState> ranks_;        // in order of first line
  uint32_t current_state_ = 0;
  uint32_t current_thread_ = 0;
  Stmt scratch_;                        // an op of a line that has errors
  std::string pending_name_;            // the current line's group, to check at the end
  SourceLoc pending_loc_;
  bool pending_unknown_ = false;
  std::vector<PendingUse> pending_;
  std::vector<PendingWait> pending_waits_;
  bool placed_ = false;                 // the current line's op goes into ranks_[current_state_]
  bool fast_path_ = true;               // try fast_op_line first (LoadLimits::trace_fast_path)
  size_t stop_ = 0;                     // where this loader's lines end for now (next_line)
  std::unique_ptr<Part> part_;          // the second part while it is read (start_part)
  bool in_part_ = false;                // this is a part loader
  size_t part_pos_ = 0;                 // a part loader's end: the first line it did not take
  uint32_t part_line_ = 0;              // and the lines before it
  uint64_t part_lines_ = 0;             // the lines a part read, taken (LoadResult::trace_part_lines)
  std::string_view last_dtype_name_;    // the fast path's last dtype (a view into the text)
  DType last_dtype_ = DType::BF16;
  std::string last_group_name_;         // the fast path's last group name and its index
  uint32_t last_group_ = 0;
};

}  // namespace lockstep::sim::trace
