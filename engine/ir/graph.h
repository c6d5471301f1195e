// The static-graph IR: a flat SSA list of typed nodes. Nodes are appended in topological
// order; a NodeId is an index into Graph::nodes. Builders run the op's shape rule and throw
// tpu::Error with the rule's message when the operands do not fit, or when the result's shape
// breaks the rule of core/shape.h (which keeps every size computation clear of overflow).
//
//   Graph g;
//   NodeId x = g.parameter(DType::f32, {8, 784});
//   NodeId w = g.parameter(DType::f32, {784, 10});
//   NodeId y = g.dot(x, w);                       // f32[8,10]
//   g.outputs = {g.reduce(y, {0, 1}, ReduceKind::sum)};
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/stable_vector.h"
#include "ir/op.h"
#include "ir/window.h"

namespace tpu {

using NodeId = int32_t;
// A node's operands: most ops take one to three, kept inside the node.
using Operands = SmallVec<NodeId, 4>;

struct Node {
  Op op;
  DType dtype = DType::f32;
  Shape shape;
  Operands in;
  // loc may live in the tail padding of attrs: a smaller node for the same fields.
  [[no_unique_address]] Attrs attrs;
  int32_t loc = -1;  // index into Graph::locations ("script.lua:12"), -1 = none

  // The attributes by what they mean for this node's op (shape rules check the kinds' range).
  Cmp direction() const { return Cmp(attrs.axis); }                 // compare
  ReduceKind reduce_kind() const { return ReduceKind(attrs.axis); }  // reduce
  WindowKind window_kind() const { return WindowKind(attrs.axis); }  // reduce_window
  RngKind rng_kind() const { return RngKind(attrs.axis); }           // rng
  bool mean() const { return attrs.axis == 1; }                      // all_reduce: divided by the replicas
  int64_t axis() const { return attrs.axis; }                        // concat, argmax, iota
  int64_t param_index() const { return attrs.axis; }                 // parameter
  Window2D window() const { return window_of(attrs); }               // conv, reduce_window, ...
  int64_t groups() const { return attrs.axis; }                      // conv, conv_filter_grad: feature groups
  const Shape& broadcast_shape() const { return shape; }             // broadcast (an attribute)
  const Dims& slice_start() const { return attrs.dims(); }           // slice
  const Dims& slice_limit() const { return attrs.dims2(); }
  const Dims& pad_lo() const { return attrs.dims(); }                // pad
  const Dims& pad_hi() const { return attrs.dims2(); }
};

class Graph {
 public:
  // Stable, so references to nodes stay valid while builders append (rules hold them).
  StableVector<Node> nodes;
  std::vector<NodeId> params;   // parameter nodes in argument order
  std::vector<NodeId> outputs;  // results in order
  std::vector<std::string> locations;
  std::unordered_map<std::string, int32_t> location_ids;  // index into locations
  std::string name = "main";
  int32_t current_loc = -1;     // stamped on every node added

  const Node& at(NodeId id) const { return nodes[size_t(id)]; }
  int32_t intern_location(const std::string& where);
  std::string location_of(NodeId id) const;

  // Generic append: runs the shape rule, throws tpu::Error on mismatch. `shape` is the result's
  // shape for the ops that take it as an attribute (shape_is_attribute); other ops' rules make
  // their own.
  NodeId add(Op op, Operands in, Attrs attrs = {}, Shape shape = {});

  // Builders (thin wrappers over add).
  NodeId parameter(DType t, Shape s);
  NodeId constant(Tensor value);
  NodeId scalar(DType t, double v);                           // rank-0 constant
  NodeId full(DType t, const Shape& s, double v);             // broadcast scalar constant
  NodeId iota(DType t, Shape s, int64_t axis);                // values 0..n-1 along axis
  NodeId unary(Op op, NodeId x);
  NodeId binary(Op op, NodeId a, NodeId b);                   // same shapes and dtypes
  NodeId compare(Cmp c, NodeId a, NodeId b);                  // -> bool
  NodeId select(NodeId pred, NodeId a, NodeId b);
  NodeId convert(NodeId x, DType to);
  // floor of a float tensor, from converts, compares and selects (there is no floor op); a
  // constant for autodiff where |x| < 2^23 (larger values, inf and NaN pass through).
  NodeId floor(NodeId x);
  NodeId broadcast(NodeId x, Shape s, Dims dims);  // x dim i -> out dim dims[i]
  NodeId reshape(NodeId x, Shape s);
  NodeId transpose(NodeId x, Dims perm);     // out dim i = in dim perm[i]
  NodeId slice(NodeId x, Dims start, Dims limit);
  NodeId pad(NodeId x, Dims lo, Dims hi, double value);
  NodeId concat(std::vector<NodeId> xs, int64_t axis);
  NodeId gather(NodeId x, NodeId idx);                        // x[idx] along axis 0
  NodeId scatter_add(NodeId base, NodeId idx, NodeId upd);    // base with upd added at rows idx
  // [..., M, K] x [..., K, N] -> [..., M, N]; ta/tb transpose the last two dims of a/b.
  // The result has the operands' type unless `to` says f32 for bf16 operands (attrs.to).
  NodeId dot(NodeId a, NodeId b, bool ta = false, bool tb = false, std::optional<DType> to = std::nullopt);
  NodeId reduce(NodeId x, Dims axes, ReduceKind k);
  NodeId argmax(NodeId x, int64_t axis);                      // -> i32, axis removed
  // 2-D convolution of x[N,H,W,Ci] (NHWC) with w[Kh,Kw,Ci,Co] (HWIO) -> [N,Ho,Wo,Co];
  // win.size is taken from w. With `groups` G (XLA's feature_group_count) the C input and O
  // output channels split into G consecutive groups, group g's outputs reading only group g's
  // inputs: w is [Kh,Kw,C/G,O] (depthwise: G = C, w [Kh,Kw,1,C*multiplier]).
  // With `w_transposed` (one group) w is stored [Kh,Kw,O,C]: the conv reads transpose(w) through
  // the flag (tb in the text), as a dot reads its rhs.
  NodeId conv(NodeId x, NodeId w, Window2D win, int64_t groups = 1, bool w_transposed = false);
  // The filter gradient of conv(x, w, win, groups) given the output gradient dy[N,Ho,Wo,Co]:
  // [Kh,Kw,Ci/groups,Co] with Kh,Kw = win.size.
  NodeId conv_filter_grad(NodeId x, NodeId dy, Window2D win, int64_t groups = 1);
  // Each window over H,W of x[N,H,W,C] reduced (padding and holes are left out: sum 0, max
  // never picks them) -> [N,Ho,Wo,C]; argmax gives the flat index (i32) into x of the
  // window's first maximum.
  NodeId reduce_window(NodeId x, WindowKind k, Window2D win);
  // The gradient of the window maxima: dy[N,Ho,Wo,C] of each window added at its first
  // maximum in x[N,H,W,C] -> x's type.
  NodeId select_and_scatter(NodeId x, NodeId dy, Window2D win);
  // Counter-based random numbers: element i is a hash of (key, i), key an i32[2].
  NodeId rng(NodeId key, RngKind k, Shape s);
  NodeId rng_fold(NodeId key, NodeId data);                   // -> i32[data..., 2], new keys
  NodeId rng_bernoulli(NodeId key, NodeId p, Shape s);        // -> bool[s]: uniform < p (f32[])
  // softmax(q k^T) v over the last two dims of q [..., T, D], k [..., S, D], v [..., S, E] ->
  // [..., T, E], without the [..., T, S] probabilities in memory. With `causal` row t weighs
  // only s <= t; with a `keep` mask (bool [..., T, S]) the probabilities are multiplied by
  // keep ? keep_scale : 0 before the product with v (dropout); a `bias` (f32 [..., T or 1, S],
  // each batch dim q's or 1) is added to the scores before the softmax (a padding mask: 0 or
  // -1e9). q, k, v: f32 or bf16, one type.
  NodeId attention(NodeId q, NodeId k, NodeId v, std::optional<NodeId> keep = std::nullopt, double keep_scale = 1,
                   bool causal = false, std::optional<NodeId> bias = std::nullopt);
  // The sum (or with `mean` the mean) of x over the replicas of a replicated step.
  NodeId all_reduce(NodeId x, bool mean);
  // x itself, as a constant to autodiff (JAX's lax.stop_gradient).
  NodeId stop_gradient(NodeId x);

  // Conveniences used by autodiff and the tracer.
  NodeId broadcast_to(NodeId x, const Shape& s);              // trailing dims align, size-1 dims stretch
  NodeId sum_to(NodeId x, const Shape& s);                    // inverse of broadcast_to
  // A copy of `sub`'s nodes appended to this graph, its parameters bound to `args` (which
  // must have their types); returns the nodes of sub's outputs. Each copy carries its
  // original's location, or the current one. (Applying an optimized template to each
  // parameter of a model; the gradient of a fusion node, made by differentiating its body.)
  std::vector<NodeId> inline_call(const Graph& sub, std::span<const NodeId> args);

  // While on, scalar() makes one node per dtype and value and broadcast() one per scalar,
  // shape and dims: a trace repeats its Lua numbers (an optimizer's betas once per parameter)
  // and its scalars' broadcasts (Adam's step size, fit's is-the-loss-finite flag: once per
  // parameter), and a graph half made of copies costs every pass until CSE. The tracer turns
  // it on; passes leave it off, so a node they rewrite in place cannot leave a stale entry.
  void share_scalars(bool on);

 private:
  struct ScalarMemo {
    std::map<std::pair<DType, uint64_t>, NodeId> scalars;         // (dtype, value bits)
    std::map<std::tuple<NodeId, Shape, Dims>, NodeId> broadcasts;  // of scalars
  };
  // Moves with the graph but is not copied: a copy's new nodes are not this graph's.
  struct MemoSlot {
    std::unique_ptr<ScalarMemo> memo;
    MemoSlot() = default;
    MemoSlot(const MemoSlot&) {}
    MemoSlot& operator=(const MemoSlot&) { memo.reset(); return *this; }
    MemoSlot(MemoSlot&&) noexcept = default;
    MemoSlot& operator=(MemoSlot&&) noexcept = default;
  };
  MemoSlot memo_;
};

// Text form, one node a line: "%3 = add f32[8,10] %1, %2  # mlp.lua:12".
std::string print_graph(const Graph& g);
// Parses print_graph output back (throws tpu::Error naming the line on bad input).
Graph parse_graph(const std::string& text);
// Checks SSA order, operand types against the shape rules, outputs; returns "" or the problem.
std::string verify_graph(const Graph& g);

}  // namespace tpu
