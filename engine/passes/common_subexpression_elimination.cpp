// CSE: a node equal to an earlier one (same op, operands and attributes; small constants
// compared by value: ir/node_equality.h) is replaced by it.
#include <bit>

#include "ir/node_equality.h"
#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

namespace {

// Nodes of the output graph by hash, in one flat table with linear probing (at most 3/4
// full): a deep graph's lookups touch a few adjacent slots instead of a heap node per entry.
// Each lookup's first probe is a cache miss once the table outgrows the cache, so it is kept
// small: 8-byte slots, fuller rather than sparser.
class Seen {
 public:
  explicit Seen(size_t capacity) : slots_(std::bit_ceil(capacity + capacity / 3 + 2)) {}

  // The node of `out` equal to `probe` (whose hash is h), or -1.
  NodeId find(const Graph& out, const Node& probe, size_t h) const {
    for (size_t i = start(h); slots_[i].id >= 0; i = (i + 1) & mask())
      if (slots_[i].tag == tag_of(h) && same_node(out.at(slots_[i].id), probe)) return slots_[i].id;
    return -1;
  }

  void add(size_t h, NodeId id) {
    size_t i = start(h);
    while (slots_[i].id >= 0) i = (i + 1) & mask();
    slots_[i] = {tag_of(h), id};
  }

 private:
  // Half a hash per slot (the full comparison decides anyway).
  struct Slot {
    uint32_t tag = 0;
    NodeId id = -1;
  };
  static uint32_t tag_of(size_t h) { return uint32_t(h >> 32) ^ uint32_t(h); }
  size_t mask() const { return slots_.size() - 1; }
  size_t start(size_t h) const { return ((h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull >> 20) & mask(); }

  std::vector<Slot> slots_;
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
    seen.add(h, first);
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
      seen.add(h, rw.take(n));
    }
  }
  return {rw.finish(), changed};
}

}  // namespace tpu
