// CSE: a node equal to an earlier one (same op, operands and attributes; small constants
// compared by value) is replaced by it.
#include <cstring>
#include <unordered_map>

#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

namespace {

constexpr int64_t kCompareConstantsUpTo = 64;  // elements; larger constants compare by identity

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

bool small_literal(const Attrs& a) { return a.literal && a.literal->size() <= kCompareConstantsUpTo; }

size_t hash_node(const Node& n) {
  size_t h = mix(size_t(n.op), size_t(n.dtype));
  for (NodeId i : n.in) h = mix(h, size_t(i));
  for (int64_t d : n.attrs.dims) h = mix(h, size_t(d));
  for (int64_t d : n.attrs.dims2) h = mix(h, size_t(d));
  h = mix(h, size_t(n.attrs.axis));
  if (small_literal(n.attrs))
    for (int64_t i = 0; i < n.attrs.literal->size(); ++i) h = mix(h, std::hash<double>()(n.attrs.literal->get(i)));
  return h;
}

bool same_literal(const Attrs& a, const Attrs& b) {
  if (a.literal == b.literal) return true;
  if (!small_literal(a) || !small_literal(b) || !a.literal->same_type(*b.literal)) return false;
  return std::memcmp(a.literal->raw(), b.literal->raw(), a.literal->bytes()) == 0;
}

bool same_node(const Node& a, const Node& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.shape != b.shape || a.in != b.in) return false;
  const Attrs &x = a.attrs, &y = b.attrs;
  return x.dims == y.dims && x.dims2 == y.dims2 && x.axis == y.axis && x.flag_a == y.flag_a &&
         x.flag_b == y.flag_b && x.value == y.value && x.to == y.to && x.body == y.body && same_literal(x, y);
}

}  // namespace

PassResult common_subexpression_elimination(const Graph& g) {
  Rewriter rw(g);
  std::unordered_multimap<size_t, NodeId> seen;  // hash -> node in rw.out()
  bool changed = false;
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    if (g.at(n).op == Op::parameter) {
      rw.copy(n);
      continue;
    }
    Node probe = g.at(n);
    probe.in = rw.mapped_inputs(n);
    size_t h = hash_node(probe);
    NodeId found = -1;
    for (auto [it, end] = seen.equal_range(h); it != end && found < 0; ++it)
      if (same_node(rw.out().at(it->second), probe)) found = it->second;
    if (found >= 0) {
      rw.set(n, found);
      changed = true;
    } else {
      seen.emplace(h, rw.copy(n));
    }
  }
  return {rw.finish(), changed};
}

}  // namespace tpu
