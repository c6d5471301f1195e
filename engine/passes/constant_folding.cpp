// Constant folding: a node whose operands are all constants becomes a constant, computed by
// the kernel the executor would have run (so results stay bitwise the same). Large results
// stay unfolded: a broadcast of a scalar is cheaper to compute than to store.
#include <cstring>

#include "passes/pass.h"
#include "passes/rewriter.h"
#include "ops/op_table.h"

namespace tpu {

namespace {

constexpr int64_t kFoldUpTo = 4096;  // elements

// A constant whose elements are all equal stays a broadcast scalar: small graphs, and the
// fusion pass can absorb it.
NodeId emit_constant(Graph& g, Tensor value) {
  bool splat = value.rank() > 0;
  for (int64_t i = 1; splat && i < value.size(); ++i)
    splat = std::memcmp(value.raw() + i * int64_t(size_of(value.dtype())), value.raw(), size_of(value.dtype())) == 0;
  if (!splat) return g.constant(std::move(value));
  Tensor one(value.dtype(), {});
  std::memcpy(one.raw(), value.raw(), size_of(value.dtype()));
  return g.broadcast(g.constant(std::move(one)), value.shape(), {});
}

// Whether `node` can be computed now; `out` holds its operands (through `map`).
template <class Map>
bool foldable(const Node& node, const Graph& out, Map map) {
  // A broadcast of a constant is already as folded as it gets (and is what folding emits).
  bool ok = node.op != Op::parameter && node.op != Op::constant && node.op != Op::broadcast &&
            node.op != Op::all_reduce &&  // its value depends on the replicas
            !node.in.empty() && num_elements(node.shape) <= kFoldUpTo;
  for (NodeId i : node.in) ok = ok && out.at(map(i)).op == Op::constant;
  return ok;
}

}  // namespace

PassResult constant_folding(Graph g) {
  // Up to the first foldable node the output would be the input: find it without copying.
  auto same = [](NodeId i) { return i; };
  NodeId first = 0;
  while (first < NodeId(g.nodes.size()) && !foldable(g.at(first), g, same)) ++first;
  if (first == NodeId(g.nodes.size())) return {std::move(g), false};
  Rewriter rw(g);
  rw.keep_prefix(first);
  auto mapped = [&](NodeId i) { return rw.map(i); };
  bool changed = false;
  for (NodeId n = first; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    if (!foldable(node, rw.out(), mapped)) {
      rw.take(n);
      continue;
    }
    std::vector<const Tensor*> inputs;
    for (NodeId i : rw.mapped_inputs(n)) inputs.push_back(rw.out().at(i).attrs.literal.get());
    Tensor value(node.dtype, node.shape);
    kernel_for(node.op)(node, inputs, value);
    rw.at_location_of(n);
    rw.set(n, emit_constant(rw.out(), std::move(value)));
    changed = true;
  }
  return {rw.finish(), changed};
}

}  // namespace tpu
