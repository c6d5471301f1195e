// Op enum (generated from ops.def) and the attributes an op node may carry.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tpu {

class Graph;

// Operand-count bound in ops.def for ops that take any number of operands (concat, fusion).
constexpr int kAnyCount = -1;

enum class Op : uint8_t {
#define OP(name, ...) name,
#include "ir/ops.def"
#undef OP
};

constexpr int kNumOps = 0
#define OP(name, ...) +1
#include "ir/ops.def"
#undef OP
    ;

std::string_view op_name(Op op);
bool parse_op(std::string_view s, Op& out);
// "" when `given` operands suit `op` (ops.def), otherwise the problem, e.g.
// "reshape takes 1 operand, given 0".
std::string operand_count_problem(Op op, size_t given);
// The ops whose result shape is an attribute (parameter, iota, reshape, rng, broadcast): the
// node's own shape, given to Graph::add, and checked by the shape rule rather than made by it.
constexpr bool shape_is_attribute(Op op) {
  return op == Op::parameter || op == Op::iota || op == Op::reshape || op == Op::rng || op == Op::broadcast;
}

enum class Cmp : uint8_t { lt, le, gt, ge, eq, ne };
enum class ReduceKind : uint8_t { sum, max, min };

// The spatial window of conv and reduce_window over dims 1 and 2 (H, W) of NHWC tensors,
// one entry per spatial dim: window size, stride, lhs (input) dilation, rhs (window)
// dilation, and padding before and after the dilated input (negative padding crops).
// Window element k of output position o reads padded-dilated position o*stride +
// k*rhs_dilation - pad_lo, which is input element p/lhs_dilation when p % lhs_dilation == 0.
struct Window2D {
  std::array<int64_t, 2> size{1, 1}, stride{1, 1}, lhs_dilation{1, 1}, rhs_dilation{1, 1};
  std::array<int64_t, 2> pad_lo{0, 0}, pad_hi{0, 0};
  // Output extent along spatial dim i (0 = h, 1 = w) for an input extent `in`; < 1: no fit.
  int64_t output_size(int i, int64_t in) const;
  // Input element read by window element k at output position o along dim i, or -1 (padding).
  int64_t source(int i, int64_t o, int64_t k, int64_t in) const;
  bool operator==(const Window2D&) const = default;
};

// The attributes only a few ops carry: out of line, shared by the copies of a node (graph
// nodes are many, and most carry none of these).
struct RareAttrs {
  Dims dims;                               // axes / permutation / broadcast dims / slice start / pad low
  Dims dims2;                              // slice: limit; pad: high padding
  std::shared_ptr<const Window2D> window;  // the windowed ops (out of line: most rare ones have none)
  double value = 0;                        // pad value
  std::shared_ptr<const Tensor> literal;   // constant payload
  std::shared_ptr<const Graph> body;       // fusion: the fused elementwise computation
};

// Attributes, interpreted per op (documented on each op's builder in ir/graph.h); read them
// through Node's typed accessors (ir/graph.h), which say what each field means for an op.
struct Attrs {
  // concat, argmax, iota: an axis; parameter: its index; compare: a Cmp; reduce: a
  // ReduceKind; reduce_window: a WindowKind; rng: an RngKind; all_reduce: 1 for the mean;
  // conv, conv_filter_grad: the feature group count (1: one group).
  int64_t axis = 0;

  const Dims& dims() const;  // see RareAttrs
  const Dims& dims2() const;
  double value() const { return rare_ ? rare_->value : 0; }
  const std::shared_ptr<const Tensor>& literal() const;
  const std::shared_ptr<const Graph>& body() const;
  const Window2D* window() const { return rare_ ? rare_->window.get() : nullptr; }
  void set_dims(Dims d) {
    if (!d.empty() || rare_) own_rare().dims = std::move(d);
  }
  void set_dims2(Dims d) { own_rare().dims2 = std::move(d); }
  void set_window(const Window2D& w) { own_rare().window = std::make_shared<const Window2D>(w); }
  void set_value(double v) { own_rare().value = v; }
  void set_literal(std::shared_ptr<const Tensor> t) { own_rare().literal = std::move(t); }
  void set_body(std::shared_ptr<const Graph> b) { own_rare().body = std::move(b); }
  bool has_rare() const { return bool(rare_); }  // holds any of the above (heap memory)
  bool operator==(const Attrs& o) const;

 private:
  RareAttrs& own_rare();  // copy on write: other nodes may share rare_
  std::shared_ptr<RareAttrs> rare_;

 public:
  // The one-byte fields last, packed together (graph nodes are many: padding adds up).
  bool transpose_lhs = false;  // dot: the lhs enters transposed
  bool transpose_rhs = false;  // dot: the rhs enters transposed; conv: the filter, stored [Kh,Kw,O,C]
  DType to = DType::f32;       // convert target
};

}  // namespace tpu
