// The scenario loader: a YAML tree -> Scenario, every static check, all problems collected as
// diagnostics. Private to sim/: its members are defined by concern in loader.cc (the top level,
// expressions), loader_names.cc (mesh, params, groups), loader_settings.cc (launch, link,
// semantics), loader_statements.cc (defines, programs, statements, operations) and
// loader_checks.cc (handles, unused names).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/expr.h"
#include "sim/loader.h"
#include "sim/loader_tables.h"
#include "sim/yaml_tree.h"

namespace lockstep::sim::yaml {

// "unknown THING 'name'WHERE (did you mean 'x'?); valid THINGs: a, b, c" (the list sorted).
std::string unknown_message(std::string_view thing, std::string_view name, std::string_view where,
                            const std::vector<std::string>& valid);

// Words of the expression language that no parameter or variable may take.
bool is_reserved_word(std::string_view name);

// One key of a map, with the key and value nodes.
struct Entry {
  std::string_view key;
  const Node* key_node = nullptr;
  const Node* value = nullptr;
};

// An `async: H` or a `wait: H`, in a program (or -1: in a define, shared by every program).
struct HandleUse {
  std::string_view name;
  SourceLoc loc;
  int32_t owner = -1;
};

class Loader {
 public:
  // `source` is the file's text, which a loaded scenario keeps (shared, not copied).
  Loader(SourceText source, const std::string& path, std::span<const ParamOverride> overrides,
         const LoadLimits& limits)
      : source_(std::move(source)), text_(source_.view()), path_(path), overrides_(overrides), limits_(limits) {}

  LoadResult run();

 private:
  using KeyLoader = void (Loader::*)(const Entry&);
  using Step = void (Loader::*)();

  struct TopLevelKey {
    std::string_view name;
    bool required;
    KeyLoader load;
    Step after = nullptr;  // runs whether or not the key is present
  };

  // In the order they are loaded: later keys depend on earlier ones (mesh and world, params,
  // groups, defines).
  static const std::vector<TopLevelKey>& top_level_keys();

  static bool is_program_key(std::string_view key);

  // ----- diagnostics

  void error(SourceLoc at, std::string message);
  void warning(SourceLoc at, std::string message);
  bool has_error() const;

  // Sorted by position (stable); a node shared through an alias (or visited twice) reports once.
  void finish_diagnostics();

  // ----- YAML

  const Node* parse_yaml();

  bool expect_kind(const Node& node, NodeKind kind, std::string_view what);

  // The keys of a map, in order; non-string and duplicate keys are reported and left out.
  std::vector<Entry> entries_of(const Node& map);

  // Reports every key not in `valid`; returns the others.
  std::vector<Entry> known_entries(const std::vector<Entry>& entries,
                                   const std::vector<std::string>& valid, std::string_view where);

  std::optional<std::string> string_of(const Node& node);

  // ----- expressions

  // Where a scalar's text starts, and whether its characters sit 1:1 on one source line.
  std::pair<SourceLoc, bool> scalar_start(const Node& node) const;
  // `length` characters of a scalar's value from `offset`, as a scalar of its own at their place
  // in the source (at the scalar's start where its characters do not sit 1:1 on the line).
  Node scalar_part(const Node& node, size_t offset, size_t length) const;

  static bool is_plain_literal(std::string_view text);

  std::optional<Expr> expr_of(const Node& node, Unit unit, std::string_view what,
                              std::span<const ExprName> names, bool any_unit = false);

  // A constant expression (no names in scope) that is at least `min`.
  // The world or a mesh size: a positive integer, or an expression over the parameters (after
  // any -D), so that `-D pp=8` changes the world.
  std::optional<int64_t> size_of_params(const Node& node, std::string_view name);
  // An integer or an expression over the parameters (and `world`, when with_world), evaluated.
  std::optional<int64_t> value_of_params(const Node& node, std::string_view what, bool with_world);
  std::optional<int64_t> constant_of(const Node& node, Unit unit, std::string_view what,
                                     std::string_view name, int64_t min);

  // For a constant `expr`: reports (at `node`) a value below `min`.
  bool check_minimum(const Expr& expr, const Node& node, std::string_view name, int64_t min);

  // ----- top level

  const Entry* top(std::string_view name) const;

  void load_top_level(const Node& root);

  // Exactly one of `program`, `threads` and `ranks`: the first in the file is loaded.
  void choose_program();

  void load_name(const Entry& entry);

  void load_description(const Entry& entry);

  void load_source(const Entry& entry);

  void load_expect(const Entry& entry);

  static std::string invalid_value_message(std::string_view value, std::string_view key,
                                           const std::vector<std::string>& valid);

  std::string world_limit_hint() const;

  void load_world(const Entry& entry);

  // ----- mesh

  void load_mesh(const Entry& entry);

  // `world` from the mesh (or checked against it), then groups[0] = world and the mesh groups.
  void finish_world();

  // One group per dimension: a communicator for each combination of the other coordinates.
  void define_mesh_groups();

  // ----- names: parameters, groups, variables

  // Reports a name that is not an identifier, or (for names used in expressions) is a reserved
  // word; `what` is e.g. "parameter".
  bool check_name(const Node& node, std::string_view what, bool in_expressions = true);

  void load_params(const Entry& entry);

  int32_t add_slot(std::string name, std::string kind);

  int32_t find_slot(std::string_view name) const;

  // Applies the -D overrides and puts rank, world, the parameters and the mesh variables in scope.
  void bind_params();

  void apply_overrides();  // every -D, once the parameters are read
  void apply_override(const ParamOverride& override_);

  const MeshDim* mesh_dim_named(std::string_view name) const;

  void load_groups(const Entry& entry);

  std::vector<int32_t> load_group_ranks(std::string_view name, const Node& list);

  std::string world_ranks() const;

  // Reports a rank outside [0, world); with an unknown world only negative ranks.
  bool check_in_world(int64_t rank, const Node& at);

  // A constant peer or root: in the world and a member of `group`.
  void check_member(const Expr& rank, const Node& at, uint32_t group);

  // The index of the group a node names; reports unknown names.
  std::optional<uint32_t> group_of(const Node& value);

  // ----- new_group: every communicator a program creates, found before any statement is loaded
  // (a later op may name it wherever it sits)

  void create_new_groups();

  // `owner`: the key of a recorded program, or null for the rank template.
  void find_new_groups(const Node& node, const Node* owner, int32_t depth);

  void declare_new_group(const Node& key, const Node& value, const Node* owner);

  // ----- launch (docs/scenario-language.md, "Launch")

  // `launch:` defaults (backend, init, world_size) and `processes:`, a list of entries
  // {rank, world_size, backend, init}; `rank` may be a range "A-B" (one process per rank).
  // Ranks outside a process's own world size, duplicates and disagreeing world sizes are what
  // the engine models (docs/semantics.md, "Initialisation"), not static errors.
  void load_launch(const Entry& entry);

  void add_process(int32_t rank, int64_t world_size, const std::string& backend, const std::string& init,
                   SourceLoc loc);

  std::optional<std::string> launch_backend(const Node& node);

  std::optional<std::string> launch_init(const Node& node);

  std::optional<int64_t> launch_world_size(const Node& node);

  // An integer rank, or a range "A-B" (inclusive).
  std::optional<std::pair<int64_t, int64_t>> launch_ranks(const Node& node);

  // ----- link

  void load_link(const Entry& entry);

  void load_link_setting(const Entry& setting, Link& link);

  // "100GB/s", "12.5 GiB/s", "400Gbps": bytes per second.
  std::optional<double> bandwidth_of(const Node& node);

  // ----- semantics

  void load_semantics(const Entry& entry);

  // The index of the node's value among `choices`.
  std::optional<size_t> choice_of(const Node& node, std::string_view key,
                                  const std::vector<std::string>& choices);

  // ----- define

  void load_defines(const Entry& entry);

  void declare_define_params(const Node& list, Define& def);

  // ----- programs

  void load_program(const Entry& entry);

  void load_threads(const Entry& entry);

  // Recorded `ranks:`: a flat list of operations per rank set.
  void load_ranks(const Entry& entry);

  // "0", "1-3", "4,6", "0-3, 8": inclusive ranges of ranks in the world.
  std::vector<std::pair<int32_t, int32_t>> rank_set_of(const Node& key);

  // ----- statements

  // Into a nested body (std::vector<Stmt>) or a thread's (StmtList).
  template <typename Body>
  void load_block(const Node& list, Body& out, int32_t depth);

  bool load_statement(const Node& item, int32_t depth, Stmt& stmt);

  void report_unknown_statement(const Entry& entry);

  // A statement by its head key; `companions` are the item's other keys.
  bool load_headed(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                   Stmt& stmt);

  void report_stray_key(const Entry& head, const Entry& extra);

  // The companion keys of a block statement, by name; unknown ones are reported.
  std::map<std::string, const Entry*> block_keys(const Entry& head,
                                                 const std::vector<Entry>& companions,
                                                 std::vector<std::string> valid);

  bool load_repeat(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt);

  bool declare_loop_variable(const Node& node, Stmt& stmt);

  std::string describe_slot(int32_t slot) const;

  bool load_if(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt);

  bool load_choose(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt);

  bool load_call(const Entry& head, const std::vector<Entry>& companions, Stmt& stmt);

  bool load_nccl_group(const Entry& head, const std::vector<Entry>& companions, int32_t depth,
                  Stmt& stmt);

  // ----- operations

  bool load_op(const OpInfo& spec, const Entry& head, Stmt& stmt);

  bool load_duration(const OpInfo& spec, const Entry& head, Stmt& stmt);

  bool load_duration_value(const Node& value, Stmt& stmt);

  // The argument nodes of an op: from a map, or the group of the short form `op: GROUP`.
  bool collect_args(const OpInfo& spec, const Entry& head,
                    std::array<const Node*, FIELD_COUNT>& args);

  // Whether the key at map.items[i] is a string seen first there; reports it otherwise.
  bool accept_key(const Node& map, size_t i);

  std::optional<Field> find_arg(const OpInfo& spec, const Entry& entry);

  static std::vector<std::string> valid_args(const OpInfo& spec);

  bool load_arg(Field arg, const Node& value, Stmt& stmt);
  // all_to_all_single's split sizes: a list of sizes, one per member of the op's group.
  bool load_splits(const Node& value, const Stmt& stmt, std::vector<Expr>& out);

  bool load_dtype(const Node& value, Stmt& stmt);

  bool load_peer(const Node& value, Stmt& stmt);

  // ----- handles: every `wait: H` needs an `async: H` in its program (or a define)

  void check_handles();

  // ----- warnings

  void warn_unused();

  static void mark_used(std::span<const Stmt> body, std::vector<bool>& used);

  SourceText source_;
  std::string_view text_;
  std::string path_;
  std::span<const ParamOverride> overrides_;
  LoadLimits limits_;
  std::vector<Diagnostic> diagnostics_;
  Scenario scenario_;
  Tree tree_;
  std::vector<Entry> top_;             // the known top-level keys
  SourceLoc root_loc_;
  std::string_view program_key_;       // "program", "threads" or "ranks"
  SourceLoc world_loc_;
  const Node* world_node_ = nullptr;
  bool mesh_given_ = false;
  std::vector<bool> params_in_sizes_;         // by parameter: the world or a mesh size uses it
  std::set<std::string> mesh_size_params_;    // parameters a mesh dimension of their name sizes
  int32_t mesh_world_ = 0;             // the product of the mesh sizes; 0 when invalid
  std::vector<std::string> slot_kinds_;  // per slot: "the parameter", ...
  std::vector<ExprName> base_scope_;   // rank, world, params, mesh variables
  std::vector<ExprName> scope_;        // names in scope while loading a body
  std::vector<bool> group_used_;       // by group index
  std::vector<bool> define_called_;    // by define index
  std::map<const Node*, int32_t> new_group_of_;       // a new_group's value -> group, -1: invalid
  std::map<size_t, const Node*> new_group_owner_;     // group -> the recorded program creating it
  bool recorded_ = false;              // loading `ranks:`
  bool in_nccl_group_ = false;
  int32_t owner_ = 0;                  // the program being loaded; -1: a define
  std::vector<HandleUse> asyncs_;
  std::vector<HandleUse> waits_;
  std::array<std::unordered_map<std::string_view, int64_t>, 3> literal_cache_;  // by Unit
};

}  // namespace lockstep::sim::yaml
