// How the replicated executor combines the replicas' values of an all_reduce, always in
// replica order (ops/collective.cpp, and ops/contraction.cpp for products).
#pragma once
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "ir/graph.h"

namespace tpu {

// out = parts[0] + parts[1] + ..., element by element, added in that order.
void combine_replicas(std::span<const Tensor* const> parts, Tensor& out);
// out /= count (a mean over replicas, after the sum).
void divide_by_count(Tensor& out, int64_t count);

// Whether sum_dots can compute the all_reduce of this dot node: f32 operands and result.
bool summable_dot(const Graph& g, const Node& dot);
// out = dot(lhs[0], rhs[0]) + dot(lhs[1], rhs[1]) + ..., the same bits as the dot kernel on
// every replica followed by combine_replicas, without every replica's product in memory
// (a weight gradient is summed while it is produced instead of in a pass of its own).
void sum_dots(const Node& dot, std::span<const Tensor* const> lhs, std::span<const Tensor* const> rhs, Tensor& out);

}  // namespace tpu
