// Dot layout: a product of few rows with a transposed parameter, dot(a, w, tb) where `a` has
// at most kFewRows rows (a replica's share of a batch: the input gradient of a Dense layer),
// becomes dot(a, transpose(w)). The GEMM kernels run such a product well below their rate
// with w transposed (bench/gemm.cpp compares the layouts), and the transpose is one pass over
// w per step; under replication w is the same on every replica, so
// the transpose runs once and every replica reads it. The rule looks at the graph alone (not
// at the replica count), so N workers x 1 core and 1 process x N cores still run the same
// kernels on the same shapes.
#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

namespace {

constexpr int64_t kFewRows = 64;

bool reads_weight_transposed(const Graph& g, const Node& n) {
  if (n.op != Op::dot || !n.attrs.transpose_rhs || n.dtype != DType::f32) return false;
  const Node& a = g.at(n.in[0]);
  const size_t r = a.shape.size();
  const int64_t rows = n.attrs.transpose_lhs ? a.shape[r - 1] : a.shape[r - 2];
  return rows <= kFewRows && g.at(n.in[1]).op == Op::parameter && g.at(n.in[1]).dtype == DType::f32;
}

// dot(a, w, tb) -> dot(a, transpose(w)) on the output graph's operands.
NodeId untransposed(Graph& g, const Node& n) {
  const NodeId a = n.in[0], w = n.in[1];
  const bool ta = n.attrs.transpose_lhs;
  std::vector<int64_t> perm(g.at(w).shape.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return g.dot(a, g.transpose(w, perm), ta, false);
}

}  // namespace

PassResult dot_layout(Graph g) {
  std::vector<bool> hit(g.nodes.size(), false);  // decided before take() moves nodes out
  NodeId first = -1;
  for (NodeId n = NodeId(g.nodes.size()); n-- > 0;)
    if (reads_weight_transposed(g, g.at(n))) hit[size_t(n)] = true, first = n;
  if (first < 0) return {std::move(g), false};
  Rewriter rw(g);
  rw.keep_prefix(first);
  for (NodeId n = first; n < NodeId(g.nodes.size()); ++n) {
    if (!hit[size_t(n)]) {
      rw.take(n);
      continue;
    }
    rw.at_location_of(n);
    const Node m = rw.mapped_node(n);
    rw.set(n, untransposed(rw.out(), m));
  }
  return {rw.finish(), true};
}

}  // namespace tpu
