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

}  // namespace

PassResult constant_folding(const Graph& g) {
  Rewriter rw(g);
  bool changed = false;
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& node = g.at(n);
    // A broadcast of a constant is already as folded as it gets (and is what folding emits).
    bool foldable = node.op != Op::parameter && node.op != Op::constant && node.op != Op::broadcast &&
                    node.op != Op::all_reduce &&  // its value depends on the replicas
                    !node.in.empty() && num_elements(node.shape) <= kFoldUpTo;
    for (NodeId i : node.in) foldable = foldable && rw.out().at(rw.map(i)).op == Op::constant;
    if (!foldable) {
      rw.copy(n);
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
