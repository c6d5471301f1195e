// CSE: a node equal to an earlier one (same op, operands and attributes; small constants
// compared by value: ir/node_equality.h) is replaced by it.
#include <algorithm>

#include "ir/node_equality.h"
#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

namespace {

// Half a hash (the full comparison decides anyway).
uint32_t tag_of(size_t h) { return uint32_t(h >> 32) ^ uint32_t(h); }

// Nodes by hash, in one flat table with linear probing (at most 3/4 full), grown as needed
// (each slot keeps its full hash for that): a few adjacent slots per lookup.
class HashedNodes {
 public:
  NodeId find(const Graph& out, const Node& probe, size_t h) const {
    if (slots_.empty()) return -1;
    for (size_t i = start(h); slots_[i].id >= 0; i = (i + 1) & mask())
      if (slots_[i].tag == tag_of(h) && same_node(out.at(slots_[i].id), probe)) return slots_[i].id;
    return -1;
  }

  void add(size_t h, NodeId id) {
    if (4 * (count_ + 1) > 3 * slots_.size()) grow();
    put({tag_of(h), id}, h);
    ++count_;
  }

 private:
  struct Slot {
    uint32_t tag = 0;
    NodeId id = -1;
    size_t hash = 0;
  };
  size_t mask() const { return slots_.size() - 1; }
  static size_t spread(size_t h) { return (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull >> 20; }
  size_t start(size_t h) const { return spread(h) & mask(); }
  void put(Slot s, size_t h) {
    s.hash = h;
    size_t i = start(h);
    while (slots_[i].id >= 0) i = (i + 1) & mask();
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old(std::max<size_t>(64, 2 * slots_.size()));
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.id >= 0) put(s, s.hash);
  }

  std::vector<Slot> slots_;
  size_t count_ = 0;
};

// The nodes of the output graph, found by their newest operand: a node equal to another has
// the same operands, so it is among the earlier nodes that share that one. Operands are mostly
// recent nodes, so a deep graph's lookups stay near the node being visited (a hash table over
// the whole graph made each of them a cache miss once it outgrew the cache). Constants and
// broadcasts of scalars do not count as the newest operand when another is there: read all
// over the graph (an optimizer's betas and fit's is-the-loss-finite flag, once per weight),
// they would chain a fifth of a deep model's nodes into the hash table. Nodes without
// operands, and the readers of an operand that already has kMaxChain of them, go to a hash
// table.
class Seen {
 public:
  explicit Seen(size_t capacity)
      : head_(capacity, -1), next_(capacity, -1), tag_(capacity), chain_(capacity), shared_(capacity) {}

  // The node of `out` equal to `probe` (whose hash is h), or -1.
  NodeId find(const Graph& out, const Node& probe, size_t h) const {
    const NodeId key = key_of(probe);
    if (key >= 0)
      for (NodeId o = head_[size_t(key)]; o >= 0; o = next_[size_t(o)])
        if (tag_[size_t(o)] == tag_of(h) && same_node(out.at(o), probe)) return o;
    return key < 0 || chain_[size_t(key)] == kMaxChain ? hashed_.find(out, probe, h) : -1;
  }

  void add(const Node& node, size_t h, NodeId id) {
    shared_[size_t(id)] = node.op == Op::constant || (node.op == Op::broadcast && node.attrs.dims().empty());
    const NodeId key = key_of(node);
    if (key < 0 || chain_[size_t(key)] == kMaxChain) return hashed_.add(h, id);
    ++chain_[size_t(key)];
    next_[size_t(id)] = head_[size_t(key)];
    head_[size_t(key)] = id;
    tag_[size_t(id)] = tag_of(h);
  }

 private:
  static constexpr uint8_t kMaxChain = 16;  // a chain walk compares tags: a short one is cheap
  NodeId key_of(const Node& n) const {
    NodeId key = -1, shared = -1;
    for (NodeId o : n.in) {
      NodeId& k = shared_[size_t(o)] ? shared : key;
      k = std::max(k, o);
    }
    return key >= 0 ? key : shared;
  }

  std::vector<NodeId> head_;   // per node: the latest node whose newest operand it is
  std::vector<NodeId> next_;   // per node: the previous node with the same newest operand
  std::vector<uint32_t> tag_;  // per node in a chain: its hash's tag
  std::vector<uint8_t> chain_; // per node: how many nodes are chained to it (up to kMaxChain)
  std::vector<uint8_t> shared_; // per node: a constant or a scalar's broadcast
  HashedNodes hashed_;
};

}  // namespace

PassResult common_subexpression_elimination(Graph g) {
  Seen seen(g.nodes.size());
  // Until the first duplicate the output is the input: hash the nodes as they are.
  NodeId first = 0;
  for (; first < NodeId(g.nodes.size()); ++first) {
    const Node& node = g.at(first);
    if (node.op == Op::parameter) continue;
    size_t h = hash_node(node);
    if (seen.find(g, node, h) >= 0) break;
    seen.add(node, h, first);
  }
  if (first == NodeId(g.nodes.size())) return {std::move(g), false};
  Rewriter rw(g, Rewriter::in_place);  // nodes only drop out or map to earlier ones
  rw.keep_prefix(first);
  bool changed = false;
  for (NodeId n = first; n < NodeId(g.nodes.size()); ++n) {
    if (g.at(n).op == Op::parameter) {
      rw.take(n);
      continue;
    }
    const Node& probe = rw.mapped_node(n);
    size_t h = hash_node(probe);
    NodeId found = seen.find(rw.out(), probe, h);
    if (found >= 0) {
      rw.set(n, found);
      changed = true;
    } else {
      const NodeId kept = rw.take(n);
      seen.add(rw.out().at(kept), h, kept);
    }
  }
  return {rw.finish(), changed};
}

}  // namespace tpu
