#include "ir/graph.h"

#include <cstring>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/op_table.h"

namespace tpu {

int32_t Graph::intern_location(const std::string& where) {
  auto [it, inserted] = location_ids.try_emplace(where, int32_t(locations.size()));
  if (inserted) locations.push_back(where);
  return it->second;
}

std::string Graph::location_of(NodeId id) const {
  int32_t loc = at(id).loc;
  return loc >= 0 ? locations[size_t(loc)] : std::string();
}

NodeId Graph::add(Op op, Operands in, Attrs attrs, Shape shape) {
  Node n{op, DType::f32, shape_is_attribute(op) ? std::move(shape) : Shape{}, std::move(in), std::move(attrs),
         current_loc};
  // Shape rules read their operands by position: the count comes first.
  if (std::string e = operand_count_problem(op, n.in.size()); !e.empty()) throw Error(e);
  for (NodeId i : n.in)
    if (i < 0 || size_t(i) >= nodes.size()) throw Error(std::string(op_name(op)) + ": bad operand id");
  std::string problem = op_info(op).shape(*this, n);
  if (!problem.empty()) throw Error(problem);
  if (problem = shape_problem(n.shape); !problem.empty()) throw Error(std::string(op_name(op)) + ": result " + problem);
  nodes.push_back(std::move(n));
  return NodeId(nodes.size() - 1);
}

NodeId Graph::parameter(DType t, Shape s) {
  Attrs a;
  a.to = t;
  a.axis = int64_t(params.size());
  NodeId id = add(Op::parameter, {}, std::move(a), std::move(s));
  params.push_back(id);
  return id;
}

NodeId Graph::constant(Tensor value) {
  Attrs a;
  a.set_literal(std::make_shared<const Tensor>(std::move(value)));
  return add(Op::constant, {}, std::move(a));
}

NodeId Graph::scalar(DType t, double v) {
  Tensor s(t, {});
  s.set(0, v);
  ScalarMemo* memo = memo_.memo.get();
  if (!memo) return constant(std::move(s));
  double stored = s.get(0);  // the value as the dtype holds it: 0.1 in bf16 and its rounding meet
  uint64_t bits;
  std::memcpy(&bits, &stored, sizeof bits);
  auto [it, fresh] = memo->scalars.try_emplace({t, bits}, -1);
  if (fresh) it->second = constant(std::move(s));
  return it->second;
}

void Graph::share_scalars(bool on) { memo_.memo = on ? std::make_unique<ScalarMemo>() : nullptr; }

NodeId Graph::full(DType t, const Shape& s, double v) {
  NodeId c = scalar(t, v);
  return s.empty() ? c : broadcast(c, s, {});
}

// Through i32 where |x| < 2^23 (the round trip truncates toward zero, so 1 less below negative
// fractions); larger magnitudes, inf and NaN are integral (or NaN) already.
NodeId Graph::floor(NodeId x) {
  const DType t = at(x).dtype;
  const Shape s = at(x).shape;  // a copy: adding nodes may move the node table
  NodeId xi = convert(convert(x, DType::i32), t);
  NodeId fix = select(compare(Cmp::lt, x, xi), full(t, s, 1), full(t, s, 0));
  NodeId small = compare(Cmp::lt, unary(Op::abs, x), full(t, s, 8388608.0));
  return select(small, binary(Op::sub, xi, fix), x);
}

NodeId Graph::iota(DType t, Shape s, int64_t axis) {
  Attrs a;
  a.to = t;
  a.axis = axis;
  return add(Op::iota, {}, std::move(a), std::move(s));
}

NodeId Graph::unary(Op op, NodeId x) { return add(op, {x}); }
NodeId Graph::binary(Op op, NodeId a, NodeId b) { return add(op, {a, b}); }

NodeId Graph::compare(Cmp c, NodeId a, NodeId b) {
  Attrs at;
  at.axis = int64_t(c);
  return add(Op::compare, {a, b}, std::move(at));
}

NodeId Graph::select(NodeId pred, NodeId a, NodeId b) { return add(Op::select, {pred, a, b}); }

NodeId Graph::convert(NodeId x, DType to) {
  if (at(x).dtype == to) return x;
  Attrs a;
  a.to = to;
  return add(Op::convert, {x}, std::move(a));
}

NodeId Graph::broadcast(NodeId x, Shape s, Dims dims) {
  if (at(x).shape == s) return x;
  ScalarMemo* memo = memo_.memo.get();
  const bool shared = memo && at(x).shape.empty();
  if (shared)
    if (auto it = memo->broadcasts.find({x, s, dims}); it != memo->broadcasts.end()) return it->second;
  Attrs a;
  a.set_dims(dims);
  NodeId id = add(Op::broadcast, {x}, std::move(a), s);
  if (shared) memo->broadcasts.emplace(std::tuple{x, std::move(s), std::move(dims)}, id);
  return id;
}

NodeId Graph::reshape(NodeId x, Shape s) {
  if (at(x).shape == s) return x;
  return add(Op::reshape, {x}, {}, std::move(s));
}

NodeId Graph::stop_gradient(NodeId x) { return add(Op::stop_gradient, {x}); }

NodeId Graph::transpose(NodeId x, Dims perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == int64_t(i);
  if (identity && perm.size() == at(x).shape.size()) return x;
  Attrs a;
  a.set_dims(std::move(perm));
  return add(Op::transpose, {x}, std::move(a));
}

NodeId Graph::slice(NodeId x, Dims start, Dims limit) {
  Attrs a;
  a.set_dims(std::move(start));
  a.set_dims2(std::move(limit));
  return add(Op::slice, {x}, std::move(a));
}

NodeId Graph::pad(NodeId x, Dims lo, Dims hi, double value) {
  Attrs a;
  a.set_dims(std::move(lo));
  a.set_dims2(std::move(hi));
  a.set_value(value);
  return add(Op::pad, {x}, std::move(a));
}

NodeId Graph::concat(std::vector<NodeId> xs, int64_t axis) {
  if (xs.size() == 1) return xs[0];
  Attrs a;
  a.axis = axis;
  return add(Op::concat, std::move(xs), std::move(a));
}

NodeId Graph::gather(NodeId x, NodeId idx) { return add(Op::gather, {x, idx}); }

NodeId Graph::scatter_add(NodeId base, NodeId idx, NodeId upd) {
  return add(Op::scatter_add, {base, idx, upd});
}

NodeId Graph::dot(NodeId a, NodeId b, bool ta, bool tb, std::optional<DType> to) {
  Attrs attrs;
  attrs.transpose_lhs = ta;
  attrs.transpose_rhs = tb;
  attrs.to = to.value_or(at(a).dtype);
  return add(Op::dot, {a, b}, std::move(attrs));
}

NodeId Graph::reduce(NodeId x, Dims axes, ReduceKind k) {
  if (axes.empty()) return x;
  Attrs a;
  a.set_dims(std::move(axes));
  a.axis = int64_t(k);
  return add(Op::reduce, {x}, std::move(a));
}

NodeId Graph::argmax(NodeId x, int64_t axis) {
  Attrs a;
  a.axis = axis;
  return add(Op::argmax, {x}, std::move(a));
}

NodeId Graph::conv(NodeId x, NodeId w, Window2D win, int64_t groups, bool w_transposed) {
  const Shape& ws = at(w).shape;
  if (ws.size() == 4) win.size = {ws[0], ws[1]};
  Attrs a;
  a.set_window(win);
  a.axis = groups;
  a.transpose_rhs = w_transposed;
  return add(Op::conv, {x, w}, std::move(a));
}

NodeId Graph::conv_filter_grad(NodeId x, NodeId dy, Window2D win, int64_t groups) {
  Attrs a;
  a.set_window(win);
  a.axis = groups;
  return add(Op::conv_filter_grad, {x, dy}, std::move(a));
}

NodeId Graph::reduce_window(NodeId x, WindowKind k, Window2D win) {
  Attrs a;
  a.set_window(win);
  a.axis = int64_t(k);
  return add(Op::reduce_window, {x}, std::move(a));
}

NodeId Graph::select_and_scatter(NodeId x, NodeId dy, Window2D win) {
  Attrs a;
  a.set_window(win);
  return add(Op::select_and_scatter, {x, dy}, std::move(a));
}

NodeId Graph::rng(NodeId key, RngKind k, Shape s) {
  Attrs a;
  a.axis = int64_t(k);
  return add(Op::rng, {key}, std::move(a), std::move(s));
}

NodeId Graph::rng_fold(NodeId key, NodeId data) {
  Attrs a;
  a.axis = int64_t(RngKind::fold);
  return add(Op::rng, {key, data}, std::move(a));
}

NodeId Graph::rng_bernoulli(NodeId key, NodeId p, Shape s) {
  Attrs a;
  a.axis = int64_t(RngKind::bernoulli);
  return add(Op::rng, {key, p}, std::move(a), std::move(s));
}

NodeId Graph::attention(NodeId q, NodeId k, NodeId v, std::optional<NodeId> keep, double keep_scale, bool causal,
                        std::optional<NodeId> bias) {
  Attrs a;
  a.axis = causal ? 1 : 0;
  Operands in = {q, k, v};
  if (keep) a.set_value(keep_scale), in.push_back(*keep);
  if (bias) in.push_back(*bias);
  return add(Op::attention, std::move(in), std::move(a));
}

NodeId Graph::all_reduce(NodeId x, bool mean) {
  Attrs a;
  a.axis = mean ? 1 : 0;
  return add(Op::all_reduce, {x}, std::move(a));
}

NodeId Graph::broadcast_to(NodeId x, const Shape& s) {
  const Shape& xs = at(x).shape;
  if (xs == s) return x;
  if (xs.size() > s.size()) throw Error("cannot broadcast " + shape_str(xs) + " to " + shape_str(s));
  // Drop size-1 dims that must stretch, then broadcast the rest into the trailing positions.
  size_t offset = s.size() - xs.size();
  Shape kept;
  Dims dims;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == s[offset + i]) {
      kept.push_back(xs[i]);
      dims.push_back(int64_t(offset + i));
    } else if (xs[i] != 1) {
      throw Error("cannot broadcast " + shape_str(xs) + " to " + shape_str(s));
    }
  }
  return broadcast(reshape(x, kept), s, dims);
}

NodeId Graph::sum_to(NodeId x, const Shape& s) {
  const Shape& xs = at(x).shape;
  if (xs == s) return x;
  size_t offset = xs.size() - s.size();
  Dims axes;
  for (size_t i = 0; i < xs.size(); ++i)
    if (i < offset || s[i - offset] != xs[i]) axes.push_back(int64_t(i));
  return reshape(reduce(x, axes, ReduceKind::sum), s);
}

std::vector<NodeId> Graph::inline_call(const Graph& sub, std::span<const NodeId> args) {
  if (args.size() != sub.params.size())
    throw Error("'" + sub.name + "' takes " + std::to_string(sub.params.size()) + " arguments, given " +
                std::to_string(args.size()));
  std::vector<NodeId> copy(sub.nodes.size(), -1);
  for (size_t i = 0; i < args.size(); ++i) {
    const Node &p = sub.at(sub.params[i]), &x = at(args[i]);
    if (p.dtype != x.dtype || p.shape != x.shape)
      throw Error("'" + sub.name + "' argument " + std::to_string(i + 1) + " is " + type_str(x.dtype, x.shape) +
                  ", it takes " + type_str(p.dtype, p.shape));
    copy[size_t(sub.params[i])] = args[i];
  }
  struct Restore {  // current_loc as it was, also when a shape rule throws
    int32_t& loc;
    const int32_t was;
    ~Restore() { loc = was; }
  } restore{current_loc, current_loc};
  for (NodeId k = 0; k < NodeId(sub.nodes.size()); ++k) {
    const Node& n = sub.at(k);
    if (n.op == Op::parameter) continue;
    Operands in;
    for (NodeId i : n.in) in.push_back(copy[size_t(i)]);
    current_loc = n.loc >= 0 ? intern_location(sub.locations[size_t(n.loc)]) : restore.was;
    copy[size_t(k)] = add(n.op, std::move(in), n.attrs, n.shape);
  }
  std::vector<NodeId> out;
  for (NodeId o : sub.outputs) out.push_back(copy[size_t(o)]);
  return out;
}

}  // namespace tpu
