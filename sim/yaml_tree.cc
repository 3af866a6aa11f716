// The YAML tree: its helpers, and TreeBuilder, which builds it from yaml-cpp's events.
#include "sim/yaml_tree.h"

#include <cctype>

namespace lockstep::sim::yaml {

SourceLoc to_loc(const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return {};
  return {static_cast<uint32_t>(mark.line) + 1, static_cast<uint32_t>(mark.column) + 1};
}

std::string lower_first(std::string message) {
  if (!message.empty()) {
    message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
  }
  return message;
}

std::string type_name(const Node& node) {
  switch (node.kind) {
    case NodeKind::NUL: return "null";
    case NodeKind::SCALAR: return "a scalar";
    case NodeKind::LIST: return "a list";
    case NodeKind::MAP: return "a map";
  }
  return "?";
}

void TreeBuilder::OnDocumentStart(const YAML::Mark& mark) {
  documents.push_back({to_loc(mark), nullptr});
  open_.clear();
  stack_.clear();
}

void TreeBuilder::OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) {
  Node* node = tree_.make(NodeKind::NUL, to_loc(mark), position(mark));
  // An empty value's mark is wherever the next token starts: point at its key instead.
  if (!open_.empty() && open_.back().key != nullptr) {
    node->loc = open_.back().key->loc;
    node->pos = open_.back().key->pos;
  }
  finish(node, anchor);
}

void TreeBuilder::OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) {
  const auto found = anchors_.find(anchor);
  if (found != anchors_.end()) {
    add(found->second.node, found->second.weight);
    return;
  }
  problems.push_back({to_loc(mark), "an alias may not refer to a node that contains it"});
  add(tree_.make(NodeKind::NUL, to_loc(mark), position(mark)));
}

void TreeBuilder::OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
              const std::string& value) {
  Node* node = tree_.make(NodeKind::SCALAR, to_loc(mark), position(mark));
  node->value = tree_.store(value);
  finish(node, anchor);
}

void TreeBuilder::OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                     YAML::EmitterStyle::value /*style*/) {
  open(NodeKind::LIST, mark, anchor);
}

void TreeBuilder::OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                YAML::EmitterStyle::value /*style*/) {
  open(NodeKind::MAP, mark, anchor);
}

void TreeBuilder::open(NodeKind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
  open_.push_back({tree_.make(kind, to_loc(mark), position(mark)), anchor, stack_.size(), nullptr, 1});
}

void TreeBuilder::close() {
  if (open_.empty()) return;
  const Open done = open_.back();
  open_.pop_back();
  done.node->items = tree_.children(stack_, done.first);
  finish(done.node, done.anchor, done.weight);
}

void TreeBuilder::finish(const Node* node, YAML::anchor_t anchor, uint64_t weight) {
  if (anchor != YAML::NullAnchor) anchors_[anchor] = {node, weight};
  add(node, weight);
}

void TreeBuilder::add(const Node* node, uint64_t node_weight) {
  if (open_.empty()) {
    if (!documents.empty()) documents.back().root = node;
    return;
  }
  Open& parent = open_.back();
  stack_.push_back(node);
  if (parent.node->kind == NodeKind::MAP) parent.key = parent.key == nullptr ? node : nullptr;
  const uint64_t weight = parent.weight + node_weight;
  parent.weight = weight < parent.weight ? UINT64_MAX : weight;
  if (parent.weight > max_weight_ && !too_heavy_) {
    too_heavy_ = true;
    problems.push_back({node->loc, "aliases expand the document beyond the limit of " +
                                       std::to_string(max_weight_) + " nodes"});
  }
}

}  // namespace lockstep::sim::yaml
