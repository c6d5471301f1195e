// Algebraic simplification: a table of rewrite rules, each an exact identity in IEEE
// arithmetic (so x + 0 -> x, which turns -0 into +0, is deliberately absent).
#include <cmath>
#include <numeric>

#include "passes/pass.h"
#include "passes/rewriter.h"

namespace tpu {

namespace {

// The value every element of node `id` has, when it is a constant splat.
bool splat(const Graph& g, NodeId id, double& value) {
  const Node& n = g.at(id);
  if (n.op == Op::broadcast) return splat(g, n.in[0], value);
  if (n.op != Op::constant || n.attrs.literal()->size() == 0) return false;
  value = n.attrs.literal()->get(0);
  for (int64_t i = 1; i < n.attrs.literal()->size(); ++i)
    if (n.attrs.literal()->get(i) != value) return false;
  return true;
}

bool is_splat(const Graph& g, NodeId id, double v) {
  double x;
  return splat(g, id, x) && x == v;
}

// A rule sees the node in the output graph's terms (operands already rewritten) and returns
// the node to use instead, or -1.
using Rule = NodeId (*)(Graph& g, const Node& n);

NodeId times_one(Graph& g, const Node& n) {
  if (n.op != Op::mul) return -1;
  if (is_splat(g, n.in[1], 1)) return n.in[0];
  if (is_splat(g, n.in[0], 1)) return n.in[1];
  return -1;
}
NodeId over_one(Graph& g, const Node& n) {
  return n.op == Op::div && is_float(n.dtype) && is_splat(g, n.in[1], 1) ? n.in[0] : -1;
}
NodeId minus_zero(Graph& g, const Node& n) {
  double v;
  return n.op == Op::sub && splat(g, n.in[1], v) && v == 0 && !std::signbit(v) ? n.in[0] : -1;
}
NodeId double_negation(Graph& g, const Node& n) {
  return n.op == Op::neg && g.at(n.in[0]).op == Op::neg ? g.at(n.in[0]).in[0] : -1;
}
NodeId same_choice(Graph&, const Node& n) {
  return n.op == Op::select && n.in[1] == n.in[2] ? n.in[1] : -1;
}
// Gradients are taken before compiling: what stopped them is the identity now.
NodeId gradient_stopped(Graph&, const Node& n) { return n.op == Op::stop_gradient ? n.in[0] : -1; }
NodeId reshape_chain(Graph& g, const Node& n) {
  if (n.op != Op::reshape) return -1;
  NodeId x = n.in[0];
  if (g.at(x).op == Op::reshape) x = g.at(x).in[0];
  if (g.at(x).shape == n.shape) return x;
  return x == n.in[0] ? -1 : g.reshape(x, n.shape);
}
// reshape(convert(p)) -> convert(reshape(p)) for an argument p: the reshape of an argument
// costs nothing, and the convert then fuses with what reads the reshape (a data set's map
// `x:cast("f32"):reshape{...} / 255`: one pass over the bytes, not a widened copy first).
NodeId reshape_before_convert(Graph& g, const Node& n) {
  if (n.op != Op::reshape || g.at(n.in[0]).op != Op::convert) return -1;
  const Node& convert = g.at(n.in[0]);
  const NodeId p = convert.in[0];
  if (g.at(p).op != Op::parameter) return -1;
  const DType to = convert.dtype;
  return g.convert(g.reshape(p, n.shape), to);
}
NodeId transpose_chain(Graph& g, const Node& n) {
  if (n.op != Op::transpose || g.at(n.in[0]).op != Op::transpose) return -1;
  const Node& inner = g.at(n.in[0]);
  std::vector<int64_t> perm;  // out dim i = inner dim n.perm[i] = x dim inner.perm[n.perm[i]]
  for (int64_t p : n.attrs.dims()) perm.push_back(inner.attrs.dims()[size_t(p)]);
  return g.transpose(inner.in[0], perm);
}
// dot(.., transpose(y, p), ..) where p puts y's last dim second to last (attention's keys,
// [B,S,H,D] -> [B,H,D,S]) reads transpose(y, q) through the dot's transpose flag instead, q
// being p with its last two swapped: q keeps y's last dim, so it copies whole rows (or is
// nothing), where p gathered single elements. A convert between them (a bf16 product's
// operand) moves along. Not where q is nothing and y a parameter: dot_layout made that
// transpose on purpose.
NodeId transpose_into_dot(Graph& g, const Node& n) {
  if (n.op != Op::dot) return -1;
  for (size_t side = 0; side < 2; ++side) {
    const NodeId operand = n.in[side];
    const bool converted = g.at(operand).op == Op::convert;
    const NodeId t = converted ? g.at(operand).in[0] : operand;
    if (g.at(t).op != Op::transpose) continue;
    Dims q = g.at(t).attrs.dims();
    const size_t r = q.size();
    if (r < 2 || q[r - 2] != int64_t(r - 1)) continue;
    std::swap(q[r - 2], q[r - 1]);
    const NodeId y = g.at(t).in[0];
    bool identity = true;
    for (size_t i = 0; i < r; ++i) identity &= q[i] == int64_t(i);
    if (identity && g.at(y).op == Op::parameter) continue;
    const DType operand_type = g.at(operand).dtype;
    NodeId moved = g.convert(g.transpose(y, q), operand_type);
    const NodeId a = side == 0 ? moved : n.in[0], b = side == 1 ? moved : n.in[1];
    return g.dot(a, b, n.attrs.transpose_lhs != (side == 0), n.attrs.transpose_rhs != (side == 1), n.attrs.to);
  }
  return -1;
}
NodeId broadcast_chain(Graph& g, const Node& n) {
  if (n.op != Op::broadcast || g.at(n.in[0]).op != Op::broadcast) return -1;
  const Node& inner = g.at(n.in[0]);
  std::vector<int64_t> dims;  // x dim i -> inner dim inner.dims[i] -> out dim n.dims[...]
  for (int64_t d : inner.attrs.dims()) dims.push_back(n.attrs.dims()[size_t(d)]);
  return g.broadcast(inner.in[0], n.shape, dims);
}

// sum(-x) -> -sum(x): the same sums in the same order, negated once (negation is exact, and
// rounding is symmetric): the negated copy of x, as large as the activations in a BatchNorm
// gradient, is not made. Floats only: integer sums wrap as negation does, so the rewrite would
// hold there too, but they are not where the copy is large.
NodeId negation_out_of_sum(Graph& g, const Node& n) {
  if (n.op != Op::reduce || n.reduce_kind() != ReduceKind::sum || g.at(n.in[0]).op != Op::neg || !is_float(n.dtype))
    return -1;
  return g.unary(Op::neg, g.reduce(g.at(n.in[0]).in[0], n.attrs.dims(), ReduceKind::sum));
}

// conv(pad(x) with zeros around its rows and columns) -> conv(x) with the padding in its
// window (ZeroPadding2D before a convolution, as Keras's applications write "valid" strided
// convolutions): the padded copy is not made. Also for the filter gradient, which reads the
// same padded input. The products are the same; only the zeros' own products (+0 or -0) no
// longer join a sum, which changes a result only when every product in it is zero.
NodeId pad_into_conv(Graph& g, const Node& n) {
  if ((n.op != Op::conv && n.op != Op::conv_filter_grad) || g.at(n.in[0]).op != Op::pad) return -1;
  const Node& pad = g.at(n.in[0]);
  const Dims& lo = pad.pad_lo();
  const Dims& hi = pad.pad_hi();
  Window2D w = n.window();
  if (pad.attrs.value() != 0 || lo.size() != 4 || lo[0] || hi[0] || lo[3] || hi[3] || w.lhs_dilation[0] != 1 ||
      w.lhs_dilation[1] != 1)
    return -1;
  for (size_t k = 0; k < 2; ++k) w.pad_lo[k] += lo[k + 1], w.pad_hi[k] += hi[k + 1];
  const NodeId x = pad.in[0];
  return n.op == Op::conv ? g.conv(x, n.in[1], w, n.groups(), n.attrs.transpose_rhs)
                          : g.conv_filter_grad(x, n.in[1], w, n.groups());
}

// conv(x, transpose(f, {0,1,3,2})) -> conv(x, f) reading f through the filter's transpose flag
// (one group): an input gradient's filter has its channels swapped (ops/conv.cpp,
// conv_input_grad), and oneDNN's filter reorder, which every conv pays, reads the swapped
// layout in place, so the transposed copy is not made (ResNet50 copied 53 filters a step, most
// of its 94 MB of weights). A convert between them (a bf16 filter) moves along. The products
// and sums are the same.
// Not over a dilated input (a strided conv's input gradient): no primitive takes that form, so
// the conv would copy the filter back on every call (and every replica) where the graph's
// transpose is planned and made once.
NodeId channels_swapped_into_conv(Graph& g, const Node& n) {
  if (n.op != Op::conv || n.attrs.transpose_rhs || n.groups() != 1) return -1;
  const Window2D win = n.window();
  if (win.lhs_dilation[0] != 1 || win.lhs_dilation[1] != 1) return -1;
  const NodeId operand = n.in[1];
  const bool converted = g.at(operand).op == Op::convert;
  const NodeId t = converted ? g.at(operand).in[0] : operand;
  if (g.at(t).op != Op::transpose) return -1;
  const Dims& perm = g.at(t).attrs.dims();
  if (perm.size() != 4 || perm[0] != 0 || perm[1] != 1 || perm[2] != 3 || perm[3] != 2) return -1;
  const NodeId f = g.convert(g.at(t).in[0], g.at(operand).dtype);
  return g.conv(n.in[0], f, n.window(), 1, true);
}

// convert(pad(x) with +0) -> pad(convert(x)) with +0: the same values (+0 converts to +0),
// and under mixed_bfloat16 the padding then meets the conv that reads the cast input
// (conv(convert(convert(pad(x))))), which pad_into_conv folds into its window: MobileNetV2's
// padded copies before its strided convs are not made. Not for -0 padding (the new pad's +0
// would change the sign of those elements), nor when something else reads the pad too: it
// would then be made twice, before and after the convert.
NodeId pad_after_convert(Graph& g, const Node& n, bool sole_reader) {
  if (!sole_reader || n.op != Op::convert || g.at(n.in[0]).op != Op::pad) return -1;
  const Node& pad = g.at(n.in[0]);
  if (pad.attrs.value() != 0 || std::signbit(pad.attrs.value())) return -1;
  return g.pad(g.convert(pad.in[0], n.dtype), pad.pad_lo(), pad.pad_hi(), 0);
}

// select(compare(y, c), select_and_scatter(y, dy), +0) -> select_and_scatter(y, select(
// compare(m, c), dy, +0)) with m = reduce_window(y, max) over the same windows: a max pool's
// gradient through the relu before it (whose gradient compares the relu's output, the pool's
// input). The element a window selects holds the window's maximum (both kernels let a NaN
// win), so the comparison moves to the pooled side, a quarter of the elements under 2x2 pools,
// and the full-size masked copy of the scattered gradient is not made (the CNN's first layer:
// 0.9 ms a step). Every element is the same: the same gradients in the same sums where the
// comparison holds, +0 elsewhere. CSE merges m with the forward pool.
NodeId mask_before_scatter(Graph& g, const Node& n) {
  double zero = 1, c = 0;
  if (n.op != Op::select || !splat(g, n.in[2], zero) || zero != 0 || std::signbit(zero)) return -1;
  const Node& cmp = g.at(n.in[0]);
  const Node& scatter = g.at(n.in[1]);
  if (cmp.op != Op::compare || scatter.op != Op::select_and_scatter || cmp.in[0] != scatter.in[0] ||
      !splat(g, cmp.in[1], c))
    return -1;
  const NodeId y = scatter.in[0], dy = scatter.in[1];
  const Window2D win = scatter.window();
  const DType t = g.at(dy).dtype;
  const Shape pooled = g.at(dy).shape;
  const Cmp direction = cmp.direction();
  const int32_t pool_loc = scatter.loc;  // read before nodes are added (they may move the node list)
  const NodeId m = g.reduce_window(y, WindowKind::max, win);
  const NodeId masked = g.select(g.compare(direction, m, g.full(t, pooled, c)), dy, g.full(t, pooled, 0));
  g.current_loc = pool_loc;  // the scatter stays the pool's gradient in profiles and plans
  return g.select_and_scatter(y, masked, win);
}

const Rule kRules[] = {times_one,       over_one,        minus_zero,          double_negation, same_choice,
                       gradient_stopped, reshape_chain,   reshape_before_convert, transpose_chain, broadcast_chain,
                       pad_into_conv,   negation_out_of_sum,    transpose_into_dot,  channels_swapped_into_conv,
                       mask_before_scatter};

// Per node of g, whether it is the only reader of its first operand, which the graph does not
// return either (users_of counts a reader once). Only pad_after_convert asks, so the walk is
// made only when some convert reads a pad: the cleanup passes run this pass to a fixed point
// on every compile. Empty otherwise.
std::vector<bool> sole_readers(const Graph& g) {
  const NodeId count = NodeId(g.nodes.size());
  bool asked = false;
  for (NodeId n = 0; n < count && !asked; ++n)
    asked = g.at(n).op == Op::convert && g.at(g.at(n).in[0]).op == Op::pad;
  if (!asked) return {};
  const Users users = users_of(g);
  std::vector<bool> returned(size_t(count), false), alone(size_t(count), false);
  for (NodeId o : g.outputs) returned[size_t(o)] = true;
  for (NodeId n = 0; n < count; ++n) {
    const Node& node = g.at(n);
    alone[size_t(n)] = !node.in.empty() && !returned[size_t(node.in[0])] && users.of(node.in[0]).size() == 1;
  }
  return alone;
}

// Whether source node n is the only reader of its first operand (a rewritten operand stands
// for the source one).
bool reads_alone(const std::vector<bool>& alone, NodeId n) { return !alone.empty() && alone[size_t(n)]; }

// The replacement for node n of g by the first rule that applies, or -1. `sole_reader`: n is
// the only reader of its first operand.
NodeId simplify(Graph& g, const Node& n, bool sole_reader) {
  for (Rule rule : kRules)
    if (NodeId r = rule(g, n); r >= 0) return r;
  return pad_after_convert(g, n, sole_reader);
}

// The first node a rule applies to, trying the rules on g itself: until then the output would
// be the input, so nothing needs copying. Nodes a rule appended are dropped again.
NodeId first_simplifiable(Graph& g, const std::vector<bool>& alone) {
  const size_t size = g.nodes.size();
  const int32_t loc = g.current_loc;
  NodeId n = 0;
  for (; n < NodeId(size); ++n)
    if (g.at(n).op != Op::parameter && simplify(g, g.at(n), reads_alone(alone, n)) >= 0) break;
  g.nodes.truncate(size);
  g.current_loc = loc;
  return n;
}

}  // namespace

PassResult algebraic_simplification(Graph g) {
  const std::vector<bool> alone = sole_readers(g);
  const NodeId first = first_simplifiable(g, alone);
  if (first == NodeId(g.nodes.size())) return {std::move(g), false};
  Rewriter rw(g);
  rw.keep_prefix(first);
  bool changed = false;
  for (NodeId n = first; n < NodeId(g.nodes.size()); ++n) {
    if (g.at(n).op == Op::parameter) {
      rw.take(n);
      continue;
    }
    rw.at_location_of(n);
    const bool sole_reader = reads_alone(alone, n);
    NodeId replacement = simplify(rw.out(), rw.mapped_node(n), sole_reader);
    if (replacement >= 0) {
      rw.set(n, replacement);
      changed = true;
    } else {
      rw.take(n);
    }
  }
  return {rw.finish(), changed};
}

}  // namespace tpu
