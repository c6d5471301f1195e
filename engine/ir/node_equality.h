// When two nodes of a graph compute the same value: the same op, type, operands and attributes
// (small constants compared by value, larger ones and fusion bodies by identity). CSE merges
// such nodes; the fusion pass shares identical bodies.
#pragma once
#include <cstddef>
#include <span>

#include "ir/graph.h"

namespace tpu {

bool same_node(const Node& a, const Node& b);
// same_node but for the operands: `a` stands for a node whose operands are other ids.
bool same_node_but_operands(const Node& a, const Node& b);
// Equal for nodes same_node calls equal (operand ids included; the shape left to same_node).
size_t hash_node(const Node& n);
// hash_node of node n were its operands `in`.
size_t hash_node(const Node& n, std::span<const NodeId> in);
// Mixes v into the hash h.
inline size_t hash_mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

}  // namespace tpu
