// Copies a graph node by node into a new one, so a pass can drop, replace or re-emit nodes
// while ids stay dense and in topological order. Locations and parameter order carry over.
//
//   Rewriter rw(g);
//   for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n)
//     if (!replace_it(n)) rw.copy(n);            // or rw.set(n, some_new_node)
//   Graph result = rw.finish();
#pragma once
#include "ir/graph.h"

namespace tpu {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src);

  Graph& out() { return out_; }
  const Graph& src() const { return src_; }
  NodeId map(NodeId old) const { return map_[size_t(old)]; }
  bool mapped(NodeId old) const { return map_[size_t(old)] >= 0; }
  std::vector<NodeId> mapped_inputs(NodeId old) const;

  NodeId copy(NodeId old);                   // re-emits `old` on mapped inputs
  void set(NodeId old, NodeId replacement);  // `old` now means `replacement` in out()
  void at_location_of(NodeId old);           // new nodes carry old's location

  Graph finish();

 private:
  const Graph& src_;
  Graph out_;
  std::vector<NodeId> map_;
};

}  // namespace tpu
