#include "ir/node_equality.h"

#include <cstring>
#include <functional>

namespace tpu {

namespace {

constexpr int64_t kCompareConstantsUpTo = 64;  // elements; larger constants compare by identity

bool small_literal(const Attrs& a) { return a.literal() && a.literal()->size() <= kCompareConstantsUpTo; }

bool same_literal(const Attrs& a, const Attrs& b) {
  if (a.literal() == b.literal()) return true;
  if (!small_literal(a) || !small_literal(b) || !a.literal()->same_type(*b.literal())) return false;
  return std::memcmp(a.literal()->raw(), b.literal()->raw(), a.literal()->bytes()) == 0;
}

}  // namespace

bool same_node(const Node& a, const Node& b) { return a.in == b.in && same_node_but_operands(a, b); }

bool same_node_but_operands(const Node& a, const Node& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.shape != b.shape) return false;
  const Attrs &x = a.attrs, &y = b.attrs;
  return x.dims() == y.dims() && x.dims2() == y.dims2() && x.axis == y.axis &&
         x.transpose_lhs == y.transpose_lhs && x.transpose_rhs == y.transpose_rhs && x.value() == y.value() &&
         x.to == y.to && x.body() == y.body() && same_literal(x, y) &&
         (x.window() && y.window() ? *x.window() == *y.window() : x.window() == y.window());
}

size_t hash_node(const Node& n) { return hash_node(n, n.in); }

size_t hash_node(const Node& n, std::span<const NodeId> in) {
  size_t h = hash_mix(size_t(n.op), size_t(n.dtype));
  for (NodeId i : in) h = hash_mix(h, size_t(i));
  for (int64_t d : n.attrs.dims()) h = hash_mix(h, size_t(d));
  if (shape_is_attribute(n.op))  // two reshapes of one operand differ by their shape alone
    for (int64_t d : n.shape) h = hash_mix(h, size_t(d));
  for (int64_t d : n.attrs.dims2()) h = hash_mix(h, size_t(d));
  h = hash_mix(h, size_t(n.attrs.axis));
  if (const Window2D* w = n.attrs.window())
    for (const auto& v : {w->size, w->stride, w->lhs_dilation, w->rhs_dilation, w->pad_lo, w->pad_hi})
      h = hash_mix(hash_mix(h, size_t(v[0])), size_t(v[1]));
  if (small_literal(n.attrs))
    for (int64_t i = 0; i < n.attrs.literal()->size(); ++i)
      h = hash_mix(h, std::hash<double>()(n.attrs.literal()->get(i)));
  return h;
}

}  // namespace tpu
