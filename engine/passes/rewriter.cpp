#include "passes/rewriter.h"

#include "core/error.h"

namespace tpu {

Rewriter::Rewriter(const Graph& src) : src_(src), map_(src.nodes.size(), -1) {
  out_.name = src.name;
  out_.locations = src.locations;
  out_.location_ids = src.location_ids;
}

std::vector<NodeId> Rewriter::mapped_inputs(NodeId old) const {
  std::vector<NodeId> in;
  for (NodeId i : src_.at(old).in) {
    if (map_[size_t(i)] < 0) throw Error("rewriter: %" + std::to_string(i) + " used before it was emitted");
    in.push_back(map_[size_t(i)]);
  }
  return in;
}

void Rewriter::at_location_of(NodeId old) { out_.current_loc = src_.at(old).loc; }

NodeId Rewriter::copy(NodeId old) {
  const Node& n = src_.at(old);
  at_location_of(old);
  NodeId id = out_.add(n.op, mapped_inputs(old), n.attrs);
  if (n.op == Op::parameter) out_.params.push_back(id);
  map_[size_t(old)] = id;
  return id;
}

void Rewriter::set(NodeId old, NodeId replacement) { map_[size_t(old)] = replacement; }

Graph Rewriter::finish() {
  for (NodeId p : src_.params)
    if (map_[size_t(p)] < 0) throw Error("rewriter: a parameter was dropped");
  out_.outputs.clear();
  for (NodeId o : src_.outputs) out_.outputs.push_back(map_[size_t(o)]);
  out_.current_loc = -1;
  return std::move(out_);
}

}  // namespace tpu
