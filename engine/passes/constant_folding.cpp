// Constant folding: a node whose operands are all constants becomes a constant, computed by
// the kernel the executor would have run (so results stay bitwise the same). Large results
// stay unfolded: a broadcast of a scalar is cheaper to compute than to store. So a constant of
// equal elements that only elementwise ops read becomes one (they fuse it): a tensor a trace
// closes over (Keras's PositionEmbedding adds its rows to zeros of the input's shape, which
// GPT-2's graph held as a 4 MB literal, read each step). Read by a dot or returned, it would be
// written out each step where the literal is simply there.
#include <cstring>

#include "passes/pass.h"
#include "passes/rewriter.h"
#include "ops/op_table.h"

namespace tpu {

namespace {

constexpr int64_t kFoldUpTo = 4096;  // elements

// A constant whose elements are all equal stays a broadcast scalar: small graphs, and the
// fusion pass can absorb it.
bool is_splat(const Tensor& value) {
  bool splat = value.rank() > 0;
  for (int64_t i = 1; splat && i < value.size(); ++i)
    splat = std::memcmp(value.raw() + i * int64_t(size_of(value.dtype())), value.raw(), size_of(value.dtype())) == 0;
  return splat;
}

NodeId emit_constant(Graph& g, Tensor value) {
  if (!is_splat(value)) return g.constant(std::move(value));
  Tensor one(value.dtype(), {});
  std::memcpy(one.raw(), value.raw(), size_of(value.dtype()));
  return g.broadcast(g.constant(std::move(one)), value.shape(), {});
}

// Per node: whether only elementwise ops and broadcasts read it (the graph does not return it).
std::vector<bool> read_elementwise(const Graph& g) {
  std::vector<bool> only(g.nodes.size(), true);
  for (NodeId o : g.outputs) only[size_t(o)] = false;
  for (const Node& n : g.nodes)
    if (!op_info(n.op).elementwise() && n.op != Op::broadcast)
      for (NodeId i : n.in) only[size_t(i)] = false;
  return only;
}

// A constant of more than one element, all equal, read elementwise: a broadcast scalar.
bool is_splat_constant(const Node& node, bool read_elementwise) {
  return node.op == Op::constant && read_elementwise && node.attrs.literal()->size() > 1 &&
         is_splat(*node.attrs.literal());
}

// A broadcast scalar constant (what a constant of equal elements becomes) small enough to fold.
bool is_small_splat(const Graph& g, const Node& n) {
  return n.op == Op::broadcast && g.at(n.in[0]).op == Op::constant && g.at(n.in[0]).shape.empty() &&
         num_elements(n.shape) <= kFoldUpTo;
}

// Whether `node` can be computed now; `out` holds its operands (through `map`): constants, or
// broadcast scalar ones (so (2 + 2) + [1, 2] folds as [1, 2] + 2 + 2 does).
template <class Map>
bool foldable(const Node& node, const Graph& out, Map map) {
  bool ok = op_info(node.op).foldable() && !node.in.empty() && num_elements(node.shape) <= kFoldUpTo;
  for (NodeId i : node.in) ok = ok && (out.at(map(i)).op == Op::constant || is_small_splat(out, out.at(map(i))));
  return ok;
}

// The value of foldable `node`, computed by its kernel from its operands' literals in `out`.
template <class Map>
Tensor fold(const Node& node, const Graph& out, Map map) {
  std::vector<Tensor> splats;  // broadcast scalars written out
  splats.reserve(node.in.size());
  std::vector<const Tensor*> inputs;
  for (NodeId i : node.in) {
    const Node& operand = out.at(map(i));
    if (operand.op == Op::constant) {
      inputs.push_back(operand.attrs.literal().get());
      continue;
    }
    const std::vector<const Tensor*> scalar = {out.at(operand.in[0]).attrs.literal().get()};
    Tensor& full = splats.emplace_back(operand.dtype, operand.shape);
    kernel_for(Op::broadcast)(operand, scalar, full);
    inputs.push_back(&full);
  }
  Tensor value(node.dtype, node.shape);
  kernel_for(node.op)(node, inputs, value);
  return value;
}

// Folds in place, node by node, while each result is one constant node (what emit_constant
// makes of a value that is no splat): node ids do not move, so nothing is copied. Returns the
// first node that would fold into two (a broadcast scalar), or the end.
NodeId fold_in_place(Graph& g, NodeId n, const std::vector<bool>& elementwise_readers, bool& changed) {
  auto same = [](NodeId i) { return i; };
  for (; n < NodeId(g.nodes.size()); ++n) {
    Node& node = g.nodes[size_t(n)];
    if (is_splat_constant(node, elementwise_readers[size_t(n)])) return n;
    if (!foldable(node, g, same)) continue;
    Tensor value = fold(node, g, same);
    if (is_splat(value)) return n;
    Attrs a;
    a.set_literal(std::make_shared<const Tensor>(std::move(value)));
    node = Node{Op::constant, node.dtype, node.shape, {}, std::move(a), node.loc};
    changed = true;
  }
  return n;
}

}  // namespace

PassResult constant_folding(Graph g) {
  bool changed = false;
  const std::vector<bool> elementwise_readers = read_elementwise(g);
  const NodeId first = fold_in_place(g, 0, elementwise_readers, changed);
  if (first == NodeId(g.nodes.size())) return {std::move(g), changed};
  // From here a fold may add a node: rewrite into a new graph.
  Rewriter rw(g);
  rw.keep_prefix(first);
  auto mapped = [&](NodeId i) { return rw.map(i); };
  for (NodeId n = first; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    const bool splat_constant = is_splat_constant(node, elementwise_readers[size_t(n)]);
    if (!splat_constant && !foldable(node, rw.out(), mapped)) {
      rw.take(n);
      continue;
    }
    Tensor value = splat_constant ? *node.attrs.literal() : fold(node, rw.out(), mapped);
    rw.at_location_of(n);
    rw.set(n, emit_constant(rw.out(), std::move(value)));
    changed = true;
  }
  return {rw.finish(), changed};
}

}  // namespace tpu
