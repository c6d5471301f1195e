// Reverse-mode autodiff on the graph: appends the backward nodes to the same graph, so every
// pass optimises them like any other node.
#pragma once
#include <span>

#include "ir/graph.h"

namespace tpu {

// d(y)/d(xs) for a scalar floating-point y (or with `seed`, a cotangent of y's type).
// Returns one node per x, with x's type; x that y does not depend on get zeros.
std::vector<NodeId> gradients(Graph& g, NodeId y, std::span<const NodeId> xs, NodeId seed = -1);

}  // namespace tpu
