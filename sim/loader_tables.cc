// The loader's tables: lookups by name.
#include "sim/loader_tables.h"

#include <algorithm>
#include <unordered_map>

namespace lockstep::sim::yaml {

bool takes_arg(const OpInfo& op, std::string_view name) {
  for (size_t f = 0; f < FIELD_COUNT; ++f) {
    if ((yaml_fields(op) & field_bit(static_cast<Field>(f))) != 0 && FIELD_NAMES[f].yaml == name) return true;
  }
  return false;
}

bool is_block_statement(std::string_view name) {
  return std::find(BLOCK_STATEMENTS.begin(), BLOCK_STATEMENTS.end(), name) !=
         BLOCK_STATEMENTS.end();
}

bool is_statement_name(std::string_view name) {
  return find_op(name) != nullptr || is_block_statement(name);
}

}  // namespace lockstep::sim::yaml
