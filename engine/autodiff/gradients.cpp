#include "autodiff/gradients.h"

#include "core/error.h"
#include "ops/op_table.h"

namespace tpu {

namespace {

// depends[n]: n is a floating-point value computed from some x.
std::vector<bool> depends_on(const Graph& g, NodeId y, std::span<const NodeId> xs) {
  std::vector<bool> dep(size_t(y) + 1, false);
  for (NodeId x : xs)
    if (x <= y) dep[size_t(x)] = is_float(g.at(x).dtype);
  for (NodeId n = 0; n <= y; ++n) {
    const Node& node = g.at(n);
    if (dep[size_t(n)] || !is_float(node.dtype) || !op_info(node.op).grad) continue;
    for (NodeId i : node.in) dep[size_t(n)] = dep[size_t(n)] || dep[size_t(i)];
  }
  return dep;
}

void accumulate(Graph& g, std::vector<NodeId>& grad, NodeId target, NodeId contribution) {
  NodeId& slot = grad[size_t(target)];
  slot = slot < 0 ? contribution : g.binary(Op::add, slot, contribution);
}

}  // namespace

std::vector<NodeId> gradients(Graph& g, NodeId y, std::span<const NodeId> xs, NodeId seed) {
  const Node& out = g.at(y);
  if (!is_float(out.dtype)) throw Error("cannot differentiate a " + type_str(out.dtype, out.shape) + " value");
  if (seed < 0) {
    if (!out.shape.empty())
      throw Error("grad needs a scalar value to differentiate, got " + type_str(out.dtype, out.shape) +
                  "; reduce it first (e.g. :sum() or :mean())");
    seed = g.scalar(out.dtype, 1.0);
  }
  const int32_t saved_loc = g.current_loc;
  std::vector<bool> dep = depends_on(g, y, xs);
  std::vector<NodeId> grad(size_t(y) + 1, -1);
  grad[size_t(y)] = seed;
  for (NodeId n = y; n >= 0; --n) {
    if (grad[size_t(n)] < 0 || !dep[size_t(n)]) continue;
    const OpInfo& info = op_info(g.at(n).op);
    if (!info.grad) continue;
    GradContext c{g, n, grad[size_t(n)], {}, {}};
    const size_t arity = g.at(n).in.size();
    c.input_grads.assign(arity, -1);
    for (NodeId i : g.at(n).in) c.wanted.push_back(dep[size_t(i)]);
    g.current_loc = g.at(n).loc;  // backward nodes carry the location of their forward node
    info.grad(c);
    for (size_t i = 0; i < arity; ++i)
      if (c.input_grads[i] >= 0) accumulate(g, grad, g.at(n).in[i], c.input_grads[i]);
  }
  g.current_loc = saved_loc;
  std::vector<NodeId> result;
  for (NodeId x : xs) {
    NodeId r = x <= y ? grad[size_t(x)] : -1;
    const Node& xn = g.at(x);
    result.push_back(r >= 0 ? r : g.full(xn.dtype, xn.shape, 0));
  }
  return result;
}

}  // namespace tpu
