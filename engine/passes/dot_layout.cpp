// Dot layout: a product of few rows with a transposed parameter, dot(a, w, tb) where `a` has
// at most kFewRows rows (a replica's share of a batch: the input gradient of a Dense layer),
// becomes dot(a, transpose(w)). The GEMM kernels run such a product well below their rate
// with w transposed (bench/gemm.cpp compares the layouts), and the transpose is one pass over
// w per step; under replication w is the same on every replica, so
// the transpose runs once and every replica reads it. The rule looks at the graph alone (not
// at the replica count), so N workers x 1 core and 1 process x N cores still run the same
// kernels on the same shapes.
#include "core/error.h"
#include "ops/op_table.h"
#include "passes/pass.h"

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

// transpose(w) with the last two dims swapped: its shape rule reads w at `w` in g (not moved
// yet), the node itself reads `reads` (where w moves to).
Node transposed(const Graph& g, NodeId w, NodeId reads, int32_t loc) {
  Dims perm(g.at(w).shape.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  Attrs a;
  a.set_dims(std::move(perm));
  Node t{Op::transpose, DType::f32, {}, {w}, std::move(a), loc};
  if (std::string problem = op_info(Op::transpose).shape(g, t); !problem.empty()) throw Error(problem);
  t.in[0] = reads;
  return t;
}

}  // namespace

// The graph grows in place: one node more per rewritten dot, and each node after the first
// moves up by the transposes before it (walking from the end, each node moves once). Rebuilding
// the graph took fresh memory for all of it, where a deep model's compile spent most of the
// pass (10000 layers: 66 MB of new pages, 120 of the pass's 160 ms).
PassResult dot_layout(Graph g) {
  const NodeId count = NodeId(g.nodes.size());
  std::vector<NodeId> moved_to(static_cast<size_t>(count));  // decided before any node moves
  NodeId first = -1, hits = 0;
  for (NodeId n = 0; n < count; ++n) {
    if (reads_weight_transposed(g, g.at(n))) {
      if (first < 0) first = n;
      ++hits;
    }
    moved_to[size_t(n)] = n + hits;
  }
  if (hits == 0) return {std::move(g), false};
  for (NodeId k = 0; k < hits; ++k) g.nodes.emplace_back();
  for (NodeId n = count - 1; n >= first; --n) {
    Node node = std::move(g.nodes[size_t(n)]);
    const NodeId to = moved_to[size_t(n)];
    const bool hit = to - (n > 0 ? moved_to[size_t(n) - 1] : -1) == 2;  // a transpose goes before it
    if (hit) g.nodes[size_t(to) - 1] = transposed(g, node.in[1], moved_to[size_t(node.in[1])], node.loc);
    for (NodeId& i : node.in) i = moved_to[size_t(i)];
    if (hit) node.in[1] = to - 1, node.attrs.transpose_rhs = false;
    g.nodes[size_t(to)] = std::move(node);
  }
  for (NodeId& p : g.params) p = moved_to[size_t(p)];
  for (NodeId& o : g.outputs) o = moved_to[size_t(o)];
  return {std::move(g), true};
}

}  // namespace tpu
