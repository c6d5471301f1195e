// Copies a graph node by node into a new one, so a pass can drop, replace or re-emit nodes
// while ids stay dense and in topological order. Locations and parameter order carry over.
//
//   Rewriter rw(g);
//   for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
//     if (!replace_it(n)) rw.copy(n);            // or rw.set(n, some_new_node)
//   Graph result = rw.finish();
//
// A pass that owns its input (passes take the graph by value) may `take` nodes instead: they
// are moved, not copied, so a deep graph is rewritten without allocating its nodes again.
#pragma once
#include "ir/graph.h"

namespace tpu {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src);
  explicit Rewriter(Graph& src);  // also allows take() and moving keep_prefix()

  Graph& out() { return out_; }
  const Graph& src() const { return src_; }
  NodeId map(NodeId old) const { return map_[size_t(old)]; }
  bool mapped(NodeId old) const { return map_[size_t(old)] >= 0; }
  Operands mapped_inputs(NodeId old) const;
  // `old` with its operands mapped, in a scratch node reused from call to call (no allocation
  // once warm); valid until the next call.
  const Node& mapped_node(NodeId old);

  NodeId copy(NodeId old);                   // re-emits `old` on mapped inputs
  // Like copy, but moves the node out of the source: the pass must not read src() node `old`
  // again (operands are read from out()).
  NodeId take(NodeId old);
  // Nodes [0, end) unchanged (they map to themselves), moved when the source is movable: a
  // pass that found nothing to do before `end` skips the per-node work there.
  void keep_prefix(NodeId end);
  void set(NodeId old, NodeId replacement);  // `old` now means `replacement` in out()
  void at_location_of(NodeId old);           // new nodes carry old's location

  Graph finish();

 private:
  NodeId emit(Node n);

  const Graph& src_;
  Graph* movable_ = nullptr;
  Graph out_;
  std::vector<NodeId> map_;
  Node scratch_{};
};

}  // namespace tpu
