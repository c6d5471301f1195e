// Structural checks on a graph: SSA order, every node's type against its shape rule,
// parameters and outputs in range. Returns the first problem or "".
#include "ir/graph.h"
#include "ops/op_table.h"

namespace tpu {

std::string verify_graph(const Graph& g) {
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    for (NodeId i : n.in)
      if (i < 0 || size_t(i) >= id) return "%" + std::to_string(id) + " uses %" + std::to_string(i) + " before it is defined";
    if (std::string e = operand_count_problem(n.op, n.in.size()); !e.empty()) return "%" + std::to_string(id) + ": " + e;
    Node check{n.op, DType::f32, shape_is_attribute(n.op) ? n.shape : Shape{}, n.in, n.attrs, n.loc};
    std::string e = op_info(n.op).shape(g, check);
    if (!e.empty()) return "%" + std::to_string(id) + ": " + e;
    if (check.dtype != n.dtype || check.shape != n.shape)
      return "%" + std::to_string(id) + " is typed " + type_str(n.dtype, n.shape) + " but its rule gives " +
             type_str(check.dtype, check.shape);
    if (n.loc >= int32_t(g.locations.size())) return "%" + std::to_string(id) + " has a bad location";
  }
  for (size_t i = 0; i < g.params.size(); ++i) {
    NodeId p = g.params[i];
    if (p < 0 || size_t(p) >= g.nodes.size() || g.nodes[size_t(p)].op != Op::parameter)
      return "parameter list entry " + std::to_string(i) + " is not a parameter node";
  }
  for (NodeId o : g.outputs)
    if (o < 0 || size_t(o) >= g.nodes.size()) return "output %" + std::to_string(o) + " does not exist";
  return "";
}

}  // namespace tpu
