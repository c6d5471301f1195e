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
//
// A pass that only drops nodes or maps them to earlier ones (its output never gets ahead of its
// input: output node k is written once source nodes 0..k have been read) may rewrite its graph
// in place (Rewriter(g, Rewriter::in_place)): no second graph is allocated, written and freed.
// Such a pass reads source nodes only from the one it is at onwards.
#pragma once
#include "ir/graph.h"

namespace tpu {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src);
  explicit Rewriter(Graph& src);  // also allows take() and moving keep_prefix()
  struct InPlace {};
  static constexpr InPlace in_place{};
  Rewriter(Graph& src, InPlace);

  Graph& out() { return in_place_ ? *in_place_ : out_; }
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
  // Emits a new node in place of `old` (its operands mapped, its type set).
  NodeId replace(NodeId old, Node n);
  void at_location_of(NodeId old);           // new nodes carry old's location

  Graph finish();

 private:
  NodeId emit(Node n);
  NodeId take_in_place(NodeId old);
  void map_operands(Node& n) const;

  const Graph& src_;
  Graph* movable_ = nullptr;
  Graph* in_place_ = nullptr;         // the graph being rewritten in place, or null
  NodeId written_ = 0;                // in place: nodes [0, written_) are output
  std::vector<NodeId> source_params_;  // in place: the parameters before the rewrite
  Graph out_;
  std::vector<NodeId> map_;
  Node scratch_{};
};

}  // namespace tpu
