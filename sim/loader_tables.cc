// The loader's tables: lookups by name.
#include "sim/loader_tables.h"

#include <algorithm>
#include <unordered_map>

namespace lockstep::sim::yaml {

std::string_view arg_name(Arg arg) {
  for (const ArgName& entry : ARG_NAMES) {
    if (entry.arg == arg) return entry.name;
  }
  return "?";
}

const std::vector<OpSpec>& op_specs() {
  using enum Arg;
  static const std::vector<Arg> plain = {GROUP, DTYPE, SIZE, TAG, STREAM, ASYNC};
  static const std::vector<Arg> rooted = {GROUP, DTYPE, SIZE, ROOT, TAG, STREAM, ASYNC};
  static const std::vector<OpSpec> specs = {
      {"allreduce", OpKind::ALLREDUCE, OpForm::ARGS, plain, {SIZE}},
      {"allgather", OpKind::ALLGATHER, OpForm::ARGS, plain, {SIZE}},
      {"reduce_scatter", OpKind::REDUCE_SCATTER, OpForm::ARGS, plain, {SIZE}},
      {"all_to_all", OpKind::ALL_TO_ALL, OpForm::ARGS, plain, {SIZE}},
      {"broadcast", OpKind::BROADCAST, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"reduce", OpKind::REDUCE, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"gather", OpKind::GATHER, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"scatter", OpKind::SCATTER, OpForm::ARGS, rooted, {SIZE, ROOT}},
      {"barrier", OpKind::BARRIER, OpForm::ARGS, {GROUP, DTYPE, TAG, STREAM, ASYNC}, {}},
      {"send", OpKind::SEND, OpForm::ARGS, {GROUP, DTYPE, SIZE, TO, TAG, STREAM, ASYNC}, {TO, SIZE}},
      {"recv", OpKind::RECV, OpForm::ARGS, {GROUP, DTYPE, SIZE, FROM, TAG, STREAM, ASYNC},
       {FROM, SIZE}},
      {"compute", OpKind::COMPUTE, OpForm::COMPUTE, {DURATION, STREAM}, {DURATION}},
      {"sleep", OpKind::SLEEP, OpForm::DURATION, {}, {}},
      {"wait", OpKind::WAIT, OpForm::HANDLE, {}, {}},
      {"sync", OpKind::SYNC, OpForm::SYNC, {}, {}},
      {"new_group", OpKind::NEW_GROUP, OpForm::NEW_GROUP, {}, {}},
      {"exit", OpKind::EXIT, OpForm::BARE, {}, {}},
      {"crash", OpKind::CRASH, OpForm::BARE, {}, {}},
  };
  return specs;
}

const OpSpec* find_op(std::string_view name) {
  static const std::unordered_map<std::string_view, const OpSpec*> by_name = [] {
    std::unordered_map<std::string_view, const OpSpec*> specs;
    for (const OpSpec& spec : op_specs()) specs.emplace(spec.name, &spec);
    return specs;
  }();
  const auto found = by_name.find(name);
  return found == by_name.end() ? nullptr : found->second;
}

bool takes_arg(const OpSpec& spec, std::string_view name) {
  return std::any_of(spec.args.begin(), spec.args.end(),
                     [&](Arg arg) { return arg_name(arg) == name; });
}

bool is_block_statement(std::string_view name) {
  return std::find(BLOCK_STATEMENTS.begin(), BLOCK_STATEMENTS.end(), name) !=
         BLOCK_STATEMENTS.end();
}

bool is_statement_name(std::string_view name) {
  return find_op(name) != nullptr || is_block_statement(name);
}

}  // namespace lockstep::sim::yaml
