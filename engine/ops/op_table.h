// The op table: one row per op of ir/ops.def with its shape rule, kernels, gradient and cost.
#pragma once
#include <span>
#include <string>

#include "ir/graph.h"

namespace tpu {

// Fills n.dtype and n.shape from the operands; returns "" or a message for the user.
using ShapeRule = std::string (*)(const Graph& g, Node& n);
// Computes `out` (already allocated with n's type) from the inputs.
using Kernel = void (*)(const Node& n, std::span<const Tensor* const> in, Tensor& out);

// What a gradient rule sees: the graph being extended, the node, the gradient flowing into
// its output, and a way to hand a gradient contribution to input i.
struct GradContext {
  Graph& g;
  NodeId node;
  NodeId out_grad;
  std::vector<NodeId> input_grads;  // -1 = none yet; the driver sums contributions
  std::vector<bool> wanted;          // input i lies on a path to a differentiated value
  const Node& n() const { return g.at(node); }
  bool needs(size_t i) const { return wanted.at(i); }
  NodeId in(size_t i) const { return g.at(node).in[i]; }
  void give(size_t i, NodeId grad);  // ignored unless needs(i)
};
using GradRule = void (*)(GradContext& c);

struct Cost {
  double flops = 0;
  double bytes = 0;  // bytes read and written
};
using CostRule = Cost (*)(const Graph& g, const Node& n);

struct OpInfo {
  Op op;
  ShapeRule shape;
  Kernel reference;  // plain loops, obviously right
  Kernel fast;       // optional (nullptr): Eigen / vectorised; tested against `reference`
  GradRule grad;     // nullptr: the op has no gradient (integer/bool results, leaves)
  CostRule cost;
};

const OpInfo& op_info(Op op);
// The kernel the executor runs for `op`: the fast one when there is one.
Kernel kernel_for(Op op);

}  // namespace tpu
