// The op table's lookups by name.
#include "sim/ops.h"

namespace lockstep::sim {

const OpInfo* find_op_named(std::string_view name) {
  for (const OpInfo& op : OPS) {
    if (op.name == name && op.kind != OpKind::INIT) return &op;
  }
  return nullptr;
}

const OpInfo* find_torch_op(std::string_view name) {
  if (name.empty()) return nullptr;
  for (const OpInfo& op : OPS) {
    for (std::string_view torch : op.torch) {
      if (torch == name) return &op;
    }
  }
  return nullptr;
}

const OpInfo* find_nccl_op(std::string_view name) {
  if (name.empty()) return nullptr;
  for (const OpInfo& op : OPS) {
    if (op.nccl[0] == name || op.nccl[1] == name) return &op;
  }
  return nullptr;
}

}  // namespace lockstep::sim
