// The YAML tree the scenario loader walks, built from yaml-cpp's events: every node keeps its
// position, and duplicate keys stay visible. Private to sim/ (the only place yaml-cpp is seen).
#pragma once

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/mark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/diagnostic.h"

namespace lockstep::sim::yaml {

// yaml-cpp's marks are 0-based: 1-based here (no position for a null mark).
SourceLoc to_loc(const YAML::Mark& mark);

// yaml-cpp's messages start with a capital now and then; ours never do.
std::string lower_first(std::string message);

enum class NodeKind : uint8_t { NUL, SCALAR, LIST, MAP };

struct Node {
  NodeKind kind = NodeKind::NUL;
  SourceLoc loc;
  size_t pos = 0;                  // byte offset in the text
  std::string_view value;                 // SCALAR: in the text or the tree's string store
  std::span<const Node* const> items;     // LIST: the items; MAP: key, value, key, value, ...
                                          // (in order, duplicates kept); in the tree's arena
};

std::string type_name(const Node& node);

// Owns the nodes (stable addresses), their lists of children and the scalar values that are not
// slices of the text. Nodes and lists are handed out front to back from blocks that double in
// size, up to 64 MiB: a recorded schedule's tree has millions of nodes, and allocating them a
// few at a time (a std::deque's 512-byte blocks) was a fifth of loading its YAML's user time.
// (Huge pages for the blocks halved the system time too, but on a virtual machine that hands
// free memory back to its host one run in a few then spent a second backing them:
// docs/trace-format.md.)
class Tree {
 public:
  // Moves stack[from..] into the tree (the stack is cut back to `from`).
  std::span<const Node* const> children(std::vector<const Node*>& stack, size_t from) {
    const size_t count = stack.size() - from;
    if (count == 0) return {};
    auto** out = static_cast<const Node**>(allocate(count * sizeof(const Node*), alignof(const Node*)));
    std::copy(stack.begin() + static_cast<std::ptrdiff_t>(from), stack.end(), out);
    stack.resize(from);
    return {out, count};
  }

  Node* make(NodeKind kind, SourceLoc loc, size_t pos) {
    Node* node = new (allocate(sizeof(Node), alignof(Node))) Node;
    node->kind = kind;
    node->loc = loc;
    node->pos = pos;
    return node;
  }
  std::string_view store(std::string value) { return strings_.emplace_back(std::move(value)); }

 private:
  static_assert(std::is_trivially_destructible_v<Node>, "nodes are dropped with their blocks");
  static constexpr size_t FIRST_BLOCK = size_t{64} << 10;
  static constexpr size_t LARGEST_BLOCK = size_t{64} << 20;

  void* allocate(size_t bytes, size_t align) {
    size_t skip = (align - reinterpret_cast<uintptr_t>(next_) % align) % align;
    if (next_ == nullptr || skip + bytes > free_) {
      new_block(bytes + align);
      skip = (align - reinterpret_cast<uintptr_t>(next_) % align) % align;
    }
    char* out = next_ + skip;
    next_ = out + bytes;
    free_ -= skip + bytes;
    return out;
  }

  void new_block(size_t at_least) {
    const size_t size = std::max(at_least, std::clamp(2 * last_block_, FIRST_BLOCK, LARGEST_BLOCK));
    last_block_ = size;
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    next_ = blocks_.back().get();
    free_ = size;
  }

  std::deque<std::string> strings_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  size_t free_ = 0;
  size_t last_block_ = 0;
};

struct YamlProblem {
  SourceLoc loc;
  std::string message;
};

// Turns yaml-cpp's events into Nodes. Anchors are registered when their node is complete, so an
// alias can never make a cycle; aliases share the anchored node, and `weight` bounds how large
// the tree is with every alias expanded (the "billion laughs").
class TreeBuilder : public YAML::EventHandler {
 public:
  struct Document {
    SourceLoc loc;
    const Node* root = nullptr;
  };

  TreeBuilder(Tree& tree, uint64_t max_weight) : tree_(tree), max_weight_(max_weight) {}

  std::vector<Document> documents;
  std::vector<YamlProblem> problems;

  void OnDocumentStart(const YAML::Mark& mark) override;
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override;

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override;

  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                const std::string& value) override;

  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override;
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override;
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    Node* node;
    YAML::anchor_t anchor;
    size_t first;        // its children: stack_[first..]
    const Node* key;     // a map's key waiting for its value
    uint64_t weight = 1;  // nodes below, aliases expanded
  };

  struct Anchored {
    const Node* node;
    uint64_t weight;
  };

  static size_t position(const YAML::Mark& mark) { return static_cast<size_t>(std::max(mark.pos, 0)); }

  void open(NodeKind kind, const YAML::Mark& mark, YAML::anchor_t anchor);

  void close();

  void finish(const Node* node, YAML::anchor_t anchor, uint64_t weight = 1);

  void add(const Node* node, uint64_t node_weight = 1);

  Tree& tree_;
  uint64_t max_weight_;
  bool too_heavy_ = false;
  std::vector<Open> open_;
  std::vector<const Node*> stack_;  // children of the open nodes
  std::map<YAML::anchor_t, Anchored> anchors_;
};

}  // namespace lockstep::sim::yaml
