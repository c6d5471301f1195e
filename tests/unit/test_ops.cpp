// Table-driven op tests: for every op of ir/ops.def, the fast kernel (when there is one)
// against the reference kernel, and the gradient against central finite differences.
#include <doctest.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "autodiff/gradients.h"
#include "core/error.h"
#include "kernels/erf_f32.h"
#include "kernels/tanh_f32.h"
#include "kernels/exp_f32.h"
#include "kernels/gemm.h"
#include "kernels/gemm_packed.h"
#include "kernels/onednn_matmul.h"
#include "kernels/onednn.h"
#include "kernels/onednn_conv.h"
#include "ops/conv.h"
#include "ops/f32_compute.h"
#include "ops/fusion_program.h"
#include "ops/op_table.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "small_image_convs.h"
#include "thread_count_runs.h"

using namespace tpu;

namespace {

// spread: distinct values at least 2/n apart (no near-ties for max), in random order.
// near_256: integers 253..259, some not bf16 values (9 significant bits).
enum class Fill { signed_unit, positive, index3, small_int, spread, near_256 };

struct Input {
  DType dtype;
  Shape shape;
  Fill fill = Fill::signed_unit;
};

struct OpCase {
  const char* name;
  std::vector<Input> inputs;
  std::function<NodeId(Graph&, const std::vector<NodeId>&)> build;
  bool differentiable = true;  // false: no gradient check (fusion runs after autodiff; large cases)
};

// The packed-GEMM choice for a scope, back to automatic at its end (a failed REQUIRE included).
struct PackedGemmFor {
  explicit PackedGemmFor(PackedGemm p) { set_packed_gemm(p); }
  ~PackedGemmFor() { set_packed_gemm(PackedGemm::automatic); }
  PackedGemmFor(const PackedGemmFor&) = delete;
  PackedGemmFor& operator=(const PackedGemmFor&) = delete;
};

// A conv / reduce_window window: stride, padding, dilations and (reduce_window) size.
Window2D window(std::array<int64_t, 2> stride, std::array<int64_t, 2> lo, std::array<int64_t, 2> hi,
                std::array<int64_t, 2> size = {1, 1}, std::array<int64_t, 2> lhs = {1, 1}, std::array<int64_t, 2> rhs = {1, 1}) {
  Window2D w;
  w.stride = stride, w.pad_lo = lo, w.pad_hi = hi, w.size = size, w.lhs_dilation = lhs, w.rhs_dilation = rhs;
  return w;
}

// tanh(x * broadcast(b)) + 0.5 as one fusion node, b along x's last dim.
NodeId fused_chain(Graph& g, const std::vector<NodeId>& x) {
  const Shape shape = g.at(x[0]).shape;
  auto body = std::make_shared<Graph>();
  NodeId px = body->parameter(DType::f32, shape);
  NodeId pb = body->parameter(DType::f32, {shape.back()});
  NodeId t = body->unary(Op::tanh, body->binary(Op::mul, px, body->broadcast(pb, shape, {int64_t(shape.size()) - 1})));
  body->outputs = {body->binary(Op::add, t, body->full(DType::f32, shape, 0.5))};
  Attrs a;
  a.set_body(body);
  return g.add(Op::fusion, {x[0], x[1]}, a);
}

// where(keep, tanh(x), y) as one fusion node (keep a bool tensor).
NodeId fused_select(Graph& g, const std::vector<NodeId>& x) {
  const Shape shape = g.at(x[0]).shape;
  auto body = std::make_shared<Graph>();
  NodeId px = body->parameter(DType::f32, shape);
  NodeId py = body->parameter(DType::f32, shape);
  NodeId keep = body->parameter(DType::boolean, shape);
  body->outputs = {body->select(keep, body->unary(Op::tanh, px), py)};
  Attrs a;
  a.set_body(body);
  return g.add(Op::fusion, {x[0], x[1], x[2]}, a);
}

// x * x + tanh(x) as a fusion whose body takes x twice (two parameters, one operand).
NodeId fused_operand_twice(Graph& g, const std::vector<NodeId>& x) {
  const Shape shape = g.at(x[0]).shape;
  auto body = std::make_shared<Graph>();
  NodeId p0 = body->parameter(DType::f32, shape);
  NodeId p1 = body->parameter(DType::f32, shape);
  body->outputs = {body->binary(Op::add, body->binary(Op::mul, p0, p1), body->unary(Op::tanh, p1))};
  Attrs a;
  a.set_body(body);
  return g.add(Op::fusion, {x[0], x[0]}, a);
}

// sum/max/min over `dims` of sqrt(|x * broadcast(b)|) + 0.5, b along x's last dim, as one
// reduce_fusion node (every op of the body has a fusion program form).
NodeId reduced_chain(Graph& g, const std::vector<NodeId>& x, std::vector<int64_t> dims, ReduceKind kind) {
  const Shape shape = g.at(x[0]).shape;
  auto body = std::make_shared<Graph>();
  NodeId px = body->parameter(DType::f32, shape);
  NodeId pb = body->parameter(DType::f32, {shape.back()});
  NodeId xb = body->binary(Op::mul, px, body->broadcast(pb, shape, {int64_t(shape.size()) - 1}));
  NodeId t = body->unary(Op::sqrt, body->unary(Op::abs, xb));
  body->outputs = {body->binary(Op::add, t, body->full(DType::f32, shape, 0.5))};
  Attrs a;
  a.set_body(body);
  a.set_dims(Dims(dims));
  a.axis = int64_t(kind);
  return g.add(Op::reduce_fusion, {x[0], x[1]}, a);
}

Tensor random_tensor(const Input& in, std::mt19937& rng) {
  Tensor t(in.dtype, in.shape);
  std::uniform_real_distribution<double> unit(-1, 1), pos(0.5, 2.0);
  std::vector<int64_t> order(size_t(t.size()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < t.size(); ++i) {
    switch (in.fill) {
      case Fill::signed_unit: t.set(i, unit(rng)); break;
      case Fill::positive: t.set(i, pos(rng)); break;
      case Fill::index3: t.set(i, double(rng() % 3)); break;
      case Fill::small_int: t.set(i, double(int(rng() % 7) - 3)); break;
      case Fill::near_256: t.set(i, double(int(rng() % 7) + 253)); break;
      case Fill::spread: t.set(i, -1 + 2.0 * double(order[size_t(i)]) / double(t.size())); break;
    }
  }
  return t;
}

const std::vector<OpCase>& cases() {
  using V = const std::vector<NodeId>&;
  const DType f = DType::f32, i = DType::i32;
  static const std::vector<OpCase> all = {
      {"neg", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::neg, x[0]); }},
      {"neg_i32", {{i, {5}, Fill::small_int}}, [](Graph& g, V x) { return g.unary(Op::neg, x[0]); }},
      {"exp", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::exp, x[0]); }},
      {"log", {{f, {3, 4}, Fill::positive}}, [](Graph& g, V x) { return g.unary(Op::log, x[0]); }},
      {"sqrt", {{f, {3, 4}, Fill::positive}}, [](Graph& g, V x) { return g.unary(Op::sqrt, x[0]); }},
      {"rsqrt", {{f, {3, 4}, Fill::positive}}, [](Graph& g, V x) { return g.unary(Op::rsqrt, x[0]); }},
      {"tanh", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::tanh, x[0]); }},
      {"sigmoid", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::sigmoid, x[0]); }},
      {"abs", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::abs, x[0]); }},
      {"erf", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::erf, x[0]); }},
      {"add", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::add, x[0], x[1]); }},
      {"sub", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::sub, x[0], x[1]); }},
      {"mul", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::mul, x[0], x[1]); }},
      {"div", {{f, {2, 3}}, {f, {2, 3}, Fill::positive}}, [](Graph& g, V x) { return g.binary(Op::div, x[0], x[1]); }},
      {"div_i32", {{i, {6}, Fill::small_int}, {i, {6}, Fill::small_int}}, [](Graph& g, V x) { return g.binary(Op::div, x[0], x[1]); }},
      {"max", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::max, x[0], x[1]); }},
      {"min", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::min, x[0], x[1]); }},
      {"pow", {{f, {2, 3}, Fill::positive}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::pow, x[0], x[1]); }},
      {"mod", {{f, {2, 3}}, {f, {2, 3}, Fill::positive}}, [](Graph& g, V x) { return g.binary(Op::mod, x[0], x[1]); }},
      {"mod_negative_divisor", {{f, {2, 3}}, {f, {2, 3}, Fill::positive}},
       [](Graph& g, V x) { return g.binary(Op::mod, x[0], g.unary(Op::neg, x[1])); }},
      {"compare", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.compare(Cmp::lt, x[0], x[1]); }},
      {"select", {{f, {2, 3}}, {f, {2, 3}}, {f, {2, 3}}},
       [](Graph& g, V x) { return g.select(g.compare(Cmp::gt, x[0], g.full(DType::f32, {2, 3}, 0)), x[1], x[2]); }},
      {"convert", {{f, {2, 3}}}, [](Graph& g, V x) { return g.convert(g.convert(x[0], DType::i32), DType::f32); }},
      {"convert_f32", {{i, {4}, Fill::small_int}}, [](Graph& g, V x) { return g.convert(x[0], DType::f32); }},
      {"broadcast", {{f, {3}}}, [](Graph& g, V x) { return g.broadcast(x[0], {2, 3, 4}, {1}); }},
      {"reshape", {{f, {2, 6}}}, [](Graph& g, V x) { return g.reshape(x[0], {3, 4}); }},
      // Its gradient is none, by design: no finite-difference check.
      {"stop_gradient", {{f, {2, 3}}}, [](Graph& g, V x) { return g.stop_gradient(x[0]); }, false},
      {"transpose", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.transpose(x[0], {2, 0, 1}); }},
      {"transpose_last_two", {{f, {2, 40, 33}}}, [](Graph& g, V x) { return g.transpose(x[0], {0, 2, 1}); }},
      // Narrow and tall: the kernel splits the rows too (a partial part and a partial tile).
      {"transpose_narrow", {{f, {203, 20}}}, [](Graph& g, V x) { return g.transpose(x[0], {1, 0}); }, false},
      // The last dim kept (attention's head split): tasks over several leading dims, and over
      // one leading dim that alone gives enough of them.
      {"transpose_heads", {{f, {3, 5, 4, 6}}}, [](Graph& g, V x) { return g.transpose(x[0], {0, 2, 1, 3}); }},
      {"transpose_keep_last", {{f, {70, 3, 4}}}, [](Graph& g, V x) { return g.transpose(x[0], {1, 0, 2}); }, false},
      {"slice", {{f, {4, 5}}}, [](Graph& g, V x) { return g.slice(x[0], {1, 2}, {3, 5}); }},
      {"pad", {{f, {2, 3}}}, [](Graph& g, V x) { return g.pad(x[0], {1, 0}, {2, 1}, 0.5); }},
      // An image batch's spatial pad (ResNet50's input): rows placed by many tasks, and the last
      // dim padded too.
      {"pad_images", {{f, {3, 5, 6, 4}}}, [](Graph& g, V x) { return g.pad(x[0], {0, 1, 2, 0}, {0, 1, 1, 0}, 0); }, false},
      {"pad_last", {{f, {70, 3}}}, [](Graph& g, V x) { return g.pad(x[0], {1, 2}, {0, 1}, -1); }, false},
      {"concat", {{f, {2, 3}}, {f, {2, 2}}}, [](Graph& g, V x) { return g.concat({x[0], x[1]}, 1); }},
      {"gather", {{f, {3, 4}}, {i, {5}, Fill::index3}}, [](Graph& g, V x) { return g.gather(x[0], x[1]); }},
      // Over 64 KiB: the rows copied in pieces across the pool, a piece ending inside a row.
      {"gather_rows", {{f, {3, 130, 70}}, {i, {7}, Fill::index3}}, [](Graph& g, V x) { return g.gather(x[0], x[1]); }, false},
      // A pad's gradient: the middle of an image, and a cut of the last dim; rows across the pool.
      {"slice_images", {{f, {4, 9, 8, 5}}}, [](Graph& g, V x) { return g.slice(x[0], {1, 1, 0, 0}, {4, 8, 7, 5}); }, false},
      {"slice_last", {{f, {70, 6}}}, [](Graph& g, V x) { return g.slice(x[0], {3, 1}, {69, 4}); }, false},
      {"concat_images", {{f, {3, 4, 5, 2}}, {f, {3, 4, 5, 3}}, {f, {3, 4, 5, 1}}},
       [](Graph& g, V x) { return g.concat({x[0], x[1], x[2]}, 3); }, false},
      {"scatter_add", {{f, {3, 2}}, {i, {4}, Fill::index3}, {f, {4, 2}}},
       [](Graph& g, V x) { return g.scatter_add(x[0], x[1], x[2]); }},
      {"dot", {{f, {3, 4}}, {f, {4, 5}}}, [](Graph& g, V x) { return g.dot(x[0], x[1]); }},
      {"dot_ta", {{f, {4, 3}}, {f, {4, 5}}}, [](Graph& g, V x) { return g.dot(x[0], x[1], true, false); }},
      {"dot_tb", {{f, {3, 4}}, {f, {5, 4}}}, [](Graph& g, V x) { return g.dot(x[0], x[1], false, true); }},
      {"dot_tab", {{f, {2, 4, 3}}, {f, {2, 5, 4}}}, [](Graph& g, V x) { return g.dot(x[0], x[1], true, true); }},
      {"dot_wide", {{f, {7, 33}}, {f, {33, 300}}}, [](Graph& g, V x) { return g.dot(x[0], x[1]); }},
      {"reduce_sum", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.reduce(x[0], {0, 2}, ReduceKind::sum); }},
      {"reduce_max", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.reduce(x[0], {1}, ReduceKind::max); }},
      {"reduce_min", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.reduce(x[0], {2}, ReduceKind::min); }},
      {"argmax", {{f, {3, 5}}}, [](Graph& g, V x) { return g.argmax(x[0], 1); }},
      {"conv", {{f, {2, 5, 6, 3}}, {f, {3, 2, 3, 4}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 0}, {1, 1})); }},
      {"conv_strided_dilated", {{f, {2, 7, 6, 2}}, {f, {3, 2, 2, 3}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({2, 1}, {1, 0}, {0, 1}, {}, {1, 1}, {1, 2})); }},
      {"conv_lhs_dilated", {{f, {1, 4, 3, 2}}, {f, {2, 3, 2, 2}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 2}, {2, 1}, {-1, 1}, {}, {2, 1})); }},
      {"conv_wide", {{f, {1, 4, 4, 6}}, {f, {2, 3, 6, 5}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {0, 1})); }},
      {"conv_pointwise", {{f, {2, 3, 4, 5}}, {f, {1, 1, 5, 6}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {0, 0}, {0, 0})); }},
      {"conv_blocks", {{f, {2, 30, 30, 8}}, {f, {3, 3, 8, 5}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1})); }, false},
      {"conv_direct_blocks", {{f, {3, 40, 40, 1}}, {f, {3, 3, 1, 20}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1})); }, false},
      {"conv_filter_grad_direct_chunks", {{f, {2, 24, 24, 1}}, {f, {2, 24, 24, 20}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}, {3, 3})); }, false},
      // Feature groups: grouped, depthwise (groups = channels, a multiplier of 2), dilated, and an
      // input-dilated one (the transposed conv and strided input gradients: one conv per group).
      {"conv_grouped", {{f, {2, 5, 6, 4}}, {f, {3, 2, 2, 6}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 0}, {1, 1}), 2); }},
      {"conv_depthwise", {{f, {2, 6, 5, 3}}, {f, {3, 3, 1, 6}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({2, 1}, {1, 1}, {1, 1}), 3); }},
      {"conv_depthwise_dilated", {{f, {1, 7, 7, 4}}, {f, {3, 3, 1, 4}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {2, 2}, {2, 2}, {}, {1, 1}, {2, 2}), 4); }},
      {"conv_grouped_lhs_dilated", {{f, {1, 4, 3, 4}}, {f, {2, 3, 2, 4}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 2}, {}, {2, 2}), 2); }},
      {"conv_depthwise_lhs_dilated", {{f, {2, 4, 3, 3}}, {f, {3, 3, 1, 3}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {2, 1}, {1, 2}, {}, {2, 2}), 3); }},
      {"conv_grouped_wide_lhs_dilated", {{f, {1, 4, 3, 10}}, {f, {2, 2, 5, 4}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 0}, {1, 1}, {}, {2, 2}), 2); }},
      {"conv_depthwise_lhs_dilated_large", {{f, {4, 20, 20, 32}}, {f, {3, 3, 1, 32}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {2, 2}, {}, {2, 2}), 32); }, false},
      // A filter entering transposed ([Kh,Kw,O,C], the input gradient's channel swap read in
      // place): oneDNN's primitive, a 1x1 window, the patch product of small images and an input
      // dilation (both take an HWIO copy), and its gradients.
      {"conv_filter_oi", {{f, {2, 5, 6, 3}}, {f, {3, 2, 4, 3}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 0}, {1, 1}), 1, true); }},
      {"conv_filter_oi_pointwise", {{f, {2, 3, 4, 5}}, {f, {1, 1, 6, 5}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {0, 0}, {0, 0}), 1, true); }},
      {"conv_filter_oi_wide", {{f, {2, 6, 6, 24}}, {f, {3, 3, 16, 24}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}), 1, true); }, false},
      {"conv_filter_oi_patches", {{f, {2, 2, 2, 40}}, {f, {3, 3, 8, 40}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}), 1, true); }, false},
      {"conv_filter_oi_lhs_dilated", {{f, {1, 4, 3, 2}}, {f, {2, 3, 2, 2}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 2}, {2, 1}, {-1, 1}, {}, {2, 1}), 1, true); }},
      // Input gradients of strided convs (conv_input_grad), which oneDNN takes as the strided
      // conv's input gradient: odd and even sizes (the last row read by no window), 1x1 and
      // 3x3, depthwise and grouped.
      {"conv_input_grad_strided", {{f, {2, 4, 4, 8}}, {f, {3, 3, 6, 8}}},
       [](Graph& g, V x) { return conv_input_grad(g, x[0], x[1], window({2, 2}, {1, 1}, {1, 1}, {3, 3}), {2, 8, 8, 6}, 1); }},
      {"conv_input_grad_strided_odd", {{f, {2, 5, 4, 8}}, {f, {3, 3, 6, 8}}},
       [](Graph& g, V x) { return conv_input_grad(g, x[0], x[1], window({2, 2}, {1, 1}, {1, 1}, {3, 3}), {2, 9, 7, 6}, 1); }},
      {"conv_input_grad_pointwise_strided", {{f, {2, 4, 4, 16}}, {f, {1, 1, 8, 16}}},
       [](Graph& g, V x) { return conv_input_grad(g, x[0], x[1], window({2, 2}, {0, 0}, {0, 0}), {2, 8, 8, 8}, 1); }},
      // 1x1 windows over a dilated input (the input gradients of strided 1x1 convs, and one
      // with uneven dilations and padding, a negative side cropping): where products run on
      // the packed GEMM, the product of every input position placed where it goes; the last
      // one's 3 images take 2 rounds of its products, of 2 images and of 1.
      {"conv_input_grad_pointwise_strided_odd", {{f, {2, 4, 3, 16}}, {f, {1, 1, 8, 16}}},
       [](Graph& g, V x) { return conv_input_grad(g, x[0], x[1], window({2, 2}, {0, 0}, {0, 0}), {2, 7, 6, 8}, 1); }},
      {"conv_lhs_dilated_pointwise", {{f, {2, 3, 4, 8}}, {f, {1, 1, 8, 5}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, -1}, {0, 2}, {1, 1}, {2, 3})); }},
      {"conv_lhs_dilated_pointwise_rounds", {{f, {3, 8, 8, 2}}, {f, {1, 1, 2, 6000}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {0, 0}, {1, 1}, {1, 1}, {2, 2})); }, false},
      {"conv_input_grad_depthwise_strided", {{f, {2, 5, 5, 8}}, {f, {3, 3, 1, 8}}},
       [](Graph& g, V x) { return conv_input_grad(g, x[0], x[1], window({2, 2}, {0, 0}, {1, 1}, {3, 3}), {2, 10, 10, 8}, 8); }},
      {"conv_input_grad_grouped_strided", {{f, {1, 5, 5, 6}}, {f, {3, 3, 2, 6}}},
       [](Graph& g, V x) { return conv_input_grad(g, x[0], x[1], window({2, 2}, {1, 1}, {1, 1}, {3, 3}), {1, 9, 9, 4}, 2); }},
      {"conv_filter_grad_grouped", {{f, {2, 5, 4, 4}}, {f, {2, 5, 4, 6}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 0}, {1, 1}, {3, 2}), 2); }},
      {"conv_filter_grad_depthwise_strided", {{f, {2, 7, 6, 3}}, {f, {2, 4, 3, 3}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({2, 2}, {1, 1}, {1, 1}, {3, 3}), 3); }},
      {"conv_depthwise_large", {{f, {5, 20, 20, 32}}, {f, {3, 3, 1, 32}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}), 32); }, false},
      {"conv_filter_grad_depthwise_large", {{f, {5, 20, 20, 32}}, {f, {5, 10, 10, 32}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({2, 2}, {0, 0}, {1, 1}, {3, 3}), 32); }, false},
      // Small images with more than a few channels (ResNet50's last stages), plain, strided
      // and with a dilated filter: where products run on the packed GEMM, one product of the
      // whole batch's patches (ops/conv.cpp).
      {"conv_small_image", {{f, {6, 5, 4, 12}}, {f, {3, 3, 12, 20}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1})); }},
      {"conv_small_image_strided_dilated", {{f, {3, 7, 8, 9}}, {f, {3, 2, 9, 7}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({2, 1}, {1, 0}, {2, 1}, {1, 1}, {1, 1}, {1, 2})); }},
      {"conv_filter_grad_small_image", {{f, {6, 5, 4, 12}}, {f, {6, 5, 4, 20}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}, {3, 3})); }},
      {"conv_filter_grad_pointwise_small_image", {{f, {6, 2, 3, 40}}, {f, {6, 2, 3, 24}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {0, 0}, {0, 0})); }},
      {"conv_filter_grad_small_image_strided", {{f, {4, 7, 6, 10}}, {f, {4, 4, 3, 9}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({2, 2}, {1, 1}, {1, 1}, {3, 3})); }},
      // MobileNetV2's last blocks: a 3x3 window over a 2x2 image, many channels (a pass oneDNN
      // runs as a GEMM per channel on AVX2, which ops/conv.cpp's direct loop replaces).
      {"conv_filter_grad_depthwise_small_image", {{f, {70, 2, 2, 40}}, {f, {70, 2, 2, 40}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}, {3, 3}), 40); }, false},
      // EfficientNetB0's 5x5 depthwise windows, plain and strided: the direct loop, not oneDNN.
      {"conv_filter_grad_depthwise_5x5", {{f, {4, 8, 8, 24}}, {f, {4, 8, 8, 24}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {2, 2}, {2, 2}, {5, 5}), 24); }, false},
      {"conv_filter_grad_depthwise_5x5_strided", {{f, {3, 9, 9, 16}}, {f, {3, 4, 4, 16}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({2, 2}, {1, 1}, {1, 1}, {5, 5}), 16); }},
      {"conv_filter_grad", {{f, {2, 5, 4, 3}}, {f, {2, 5, 4, 2}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 0}, {1, 1}, {3, 2})); }},
      {"conv_filter_grad_strided", {{f, {2, 7, 6, 2}}, {f, {2, 3, 5, 3}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({2, 1}, {1, 0}, {0, 1}, {3, 2}, {1, 1}, {1, 2})); }},
      {"conv_filter_grad_chunks", {{f, {4, 20, 20, 6}}, {f, {4, 20, 20, 5}}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}, {3, 3})); }, false},
      // Batches of several chunks and a shorter last one for the oneDNN kernels (5 + 4 images).
      // The filter gradient sums 3600 products per element: integers keep every sum exact, so
      // any summation order gives the reference's values; near_256 keeps it on the f32 kernels.
      {"conv_batch_chunks", {{f, {9, 20, 20, 8}}, {f, {3, 3, 8, 16}}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1})); }, false},
      // Operands that are exactly bf16 values take the bf16 conv where bf16 products run on
      // oneDNN's bf16 primitives (test_bf16.cpp tries every way); small integers keep the sums
      // exact. Over 2^16 input elements: checked in several tasks.
      {"conv_bf16_exact_operands", {{f, {16, 24, 24, 8}, Fill::small_int}, {f, {3, 3, 8, 16}, Fill::small_int}},
       [](Graph& g, V x) { return g.conv(x[0], x[1], window({1, 1}, {1, 1}, {1, 1})); }, false},
      {"conv_filter_grad_batch_chunks", {{f, {9, 20, 20, 8}, Fill::near_256}, {f, {9, 20, 20, 16}, Fill::small_int}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}, {3, 3})); }, false},
      {"conv_filter_grad_bf16_exact_operands", {{f, {12, 20, 20, 8}, Fill::small_int}, {f, {12, 20, 20, 16}, Fill::small_int}},
       [](Graph& g, V x) { return g.conv_filter_grad(x[0], x[1], window({1, 1}, {1, 1}, {1, 1}, {3, 3})); }, false},
      {"reduce_window_sum", {{f, {2, 5, 4, 3}}},
       [](Graph& g, V x) { return g.reduce_window(x[0], WindowKind::sum, window({2, 1}, {0, 1}, {1, 1}, {2, 3})); }},
      {"reduce_window_sum_dilated", {{f, {1, 4, 4, 2}}},
       [](Graph& g, V x) { return g.reduce_window(x[0], WindowKind::sum, window({1, 1}, {1, 0}, {1, 2}, {2, 2}, {2, 2}, {1, 2})); }},
      {"reduce_window_max", {{f, {2, 5, 5, 3}, Fill::spread}},
       [](Graph& g, V x) { return g.reduce_window(x[0], WindowKind::max, window({2, 2}, {1, 1}, {1, 1}, {3, 3})); }},
      {"reduce_window_max_valid", {{f, {1, 4, 6, 2}, Fill::spread}},
       [](Graph& g, V x) { return g.reduce_window(x[0], WindowKind::max, window({2, 2}, {0, 0}, {0, 0}, {2, 2})); }},
      {"reduce_window_argmax", {{f, {2, 5, 5, 3}}},
       [](Graph& g, V x) { return g.reduce_window(x[0], WindowKind::argmax, window({2, 2}, {1, 1}, {1, 1}, {3, 3})); }},
      {"select_and_scatter", {{f, {2, 5, 5, 3}, Fill::spread}, {f, {2, 3, 3, 3}}},
       [](Graph& g, V x) { return g.select_and_scatter(x[0], x[1], window({2, 2}, {1, 1}, {1, 1}, {3, 3})); }},
      {"select_and_scatter_valid", {{f, {1, 4, 6, 2}, Fill::spread}, {f, {1, 2, 3, 2}}},
       [](Graph& g, V x) { return g.select_and_scatter(x[0], x[1], window({2, 2}, {0, 0}, {0, 0}, {2, 2})); }},
      // Disjoint windows that leave the last row and column unread.
      {"select_and_scatter_uncovered", {{f, {1, 5, 5, 2}, Fill::spread}, {f, {1, 2, 2, 2}}},
       [](Graph& g, V x) { return g.select_and_scatter(x[0], x[1], window({2, 2}, {0, 0}, {0, 0}, {2, 2})); }},
      // Ties everywhere: the first maximum takes the gradient (no finite differences at ties).
      {"select_and_scatter_ties", {{f, {2, 4, 4, 3}, Fill::small_int}, {f, {2, 2, 2, 3}}},
       [](Graph& g, V x) { return g.select_and_scatter(x[0], x[1], window({2, 2}, {0, 0}, {0, 0}, {2, 2})); }, false},
      {"rng_uniform", {{i, {2}, Fill::small_int}}, [](Graph& g, V x) { return g.rng(x[0], RngKind::uniform, {3, 50}); }, false},
      {"rng_normal", {{i, {2}, Fill::small_int}}, [](Graph& g, V x) { return g.rng(x[0], RngKind::normal, {40}); }, false},
      {"rng_truncated", {{i, {2}, Fill::small_int}},
       [](Graph& g, V x) { return g.rng(x[0], RngKind::truncated_normal, {40}); }, false},
      {"rng_bits", {{i, {2}, Fill::small_int}}, [](Graph& g, V x) { return g.rng(x[0], RngKind::bits, {20000}); }, false},
      {"rng_bernoulli", {{i, {2}, Fill::small_int}, {f, {}, Fill::positive}},
       [](Graph& g, V x) { return g.rng_bernoulli(x[0], x[1], {20000}); }, false},
      {"rng_fold", {{i, {2}, Fill::small_int}, {i, {3}, Fill::small_int}},
       [](Graph& g, V x) { return g.rng_fold(x[0], x[1]); }, false},
      // Attention: heads over two batch dims; a causal one with a dropout keep mask; rows past
      // one block of the kernel (64), large for the gradient check; its gradient op directly.
      {"attention", {{f, {2, 3, 5, 4}}, {f, {2, 3, 6, 4}}, {f, {2, 3, 6, 3}}},
       [](Graph& g, V x) { return g.attention(x[0], x[1], x[2]); }},
      {"attention_causal_keep",
       {{f, {2, 5, 4}}, {f, {2, 5, 4}}, {f, {2, 5, 3}}, {DType::boolean, {2, 5, 5}, Fill::small_int}},
       [](Graph& g, V x) { return g.attention(x[0], x[1], x[2], x[3], 1.25, true); }},
      {"attention_long_rows", {{f, {2, 130, 8}}, {f, {2, 70, 8}}, {f, {2, 70, 5}}},
       [](Graph& g, V x) { return g.attention(x[0], x[1], x[2], std::nullopt, 1, true); }, false},
      {"attention_grad",
       {{f, {2, 70, 8}}, {f, {2, 33, 8}}, {f, {2, 33, 5}}, {f, {2, 70, 5}}, {DType::boolean, {2, 70, 33}, Fill::small_int}},
       [](Graph& g, V x) {
         Attrs a;
         a.axis = 1;
         a.set_value(1.5);
         return g.add(Op::attention_grad, {x[0], x[1], x[2], x[3], x[4]}, a);
       }, false},
      {"attention_bf16", {{DType::bf16, {3, 70, 8}}, {DType::bf16, {3, 20, 8}}, {DType::bf16, {3, 20, 4}}},
       [](Graph& g, V x) { return g.attention(x[0], x[1], x[2]); }, false},
      {"attention_grad_bf16",
       {{DType::bf16, {2, 9, 8}}, {DType::bf16, {2, 20, 8}}, {DType::bf16, {2, 20, 4}}, {DType::bf16, {2, 9, 4}}},
       [](Graph& g, V x) { return g.add(Op::attention_grad, {x[0], x[1], x[2], x[3]}); }, false},
      // A score bias: a padding mask [2, 1, 1, S] as 0 / -1e9 (from a bool operand, so the
      // gradient check differentiates q, k, v through it; a sequence whose keys are all masked
      // weighs them evenly); a bias row per query [1, 3, T, S] over two blocks, with a keep
      // mask and causal; the gradient op with both.
      {"attention_bias", {{f, {2, 3, 5, 4}}, {f, {2, 3, 6, 4}}, {f, {2, 3, 6, 3}}, {DType::boolean, {2, 1, 1, 6}, Fill::small_int}},
       [](Graph& g, V x) {
         const Shape s = {2, 1, 1, 6};
         NodeId bias = g.select(x[3], g.full(DType::f32, s, 0), g.full(DType::f32, s, -1e9));
         return g.attention(x[0], x[1], x[2], std::nullopt, 1, false, bias);
       }},
      {"attention_bias_rows_keep_causal",
       {{f, {2, 3, 70, 8}}, {f, {2, 3, 33, 8}}, {f, {2, 3, 33, 5}}, {DType::boolean, {2, 3, 70, 33}, Fill::small_int},
        {f, {1, 3, 70, 33}}},
       [](Graph& g, V x) { return g.attention(x[0], x[1], x[2], x[3], 1.5, true, x[4]); }, false},
      {"attention_grad_bias",
       {{f, {2, 70, 8}}, {f, {2, 33, 8}}, {f, {2, 33, 5}}, {f, {2, 70, 5}}, {DType::boolean, {2, 70, 33}, Fill::small_int},
        {f, {2, 1, 33}}},
       [](Graph& g, V x) {
         Attrs a;
         a.set_value(1.5);
         return g.add(Op::attention_grad, {x[0], x[1], x[2], x[3], x[4], x[5]}, a);
       }, false},
      {"attention_grad_bias_bf16",
       {{DType::bf16, {2, 9, 8}}, {DType::bf16, {2, 20, 8}}, {DType::bf16, {2, 20, 4}}, {DType::bf16, {2, 9, 4}}, {f, {1, 9, 20}}},
       [](Graph& g, V x) { return g.add(Op::attention_grad, {x[0], x[1], x[2], x[3], x[4]}); }, false},
      // No keys: every query weighs nothing, the result is zeros.
      {"attention_no_keys", {{f, {2, 3, 4}}, {f, {2, 0, 4}}, {f, {2, 0, 5}}},
       [](Graph& g, V x) { return g.attention(x[0], x[1], x[2], std::nullopt, 1, true); }, false},
      {"fusion", {{f, {5, 3000}}, {f, {3000}}}, fused_chain, false},
      // Small ones for the gradient check: a fusion's gradient differentiates its body.
      {"fusion_small", {{f, {3, 4}}, {f, {4}}}, fused_chain},
      {"fusion_operand_twice", {{f, {2, 3}}}, fused_operand_twice},
      {"reduce_fusion_small_rows", {{f, {3, 5}}, {f, {5}}},
       [](Graph& g, V x) { return reduced_chain(g, x, {1}, ReduceKind::sum); }},
      {"reduce_fusion_small_columns", {{f, {4, 3}}, {f, {3}}},
       [](Graph& g, V x) { return reduced_chain(g, x, {0}, ReduceKind::sum); }},
      {"reduce_fusion_small_max", {{f, {2, 3, 4}, Fill::positive}, {f, {4}, Fill::positive}},
       [](Graph& g, V x) { return reduced_chain(g, x, {0, 1}, ReduceKind::max); }},
      // A body with a bool parameter (an optimizer's `where`): its gradient is none.
      {"fusion_select", {{f, {3, 4}}, {f, {3, 4}}, {DType::boolean, {3, 4}, Fill::small_int}}, fused_select},
      // Rows (the last dims), columns in three tiles of rows, two leading dims by max, and dims
      // that are not consecutive (the body's result stored, then reduced).
      {"reduce_fusion_rows", {{f, {5, 3000}}, {f, {3000}}},
       [](Graph& g, V x) { return reduced_chain(g, x, {1}, ReduceKind::sum); }, false},
      {"reduce_fusion_columns", {{f, {700, 96}}, {f, {96}}},
       [](Graph& g, V x) { return reduced_chain(g, x, {0}, ReduceKind::sum); }, false},
      {"reduce_fusion_max", {{f, {3, 40, 500}}, {f, {500}}},
       [](Graph& g, V x) { return reduced_chain(g, x, {0, 1}, ReduceKind::max); }, false},
      {"reduce_fusion_apart", {{f, {4, 6, 50}}, {f, {50}}},
       [](Graph& g, V x) { return reduced_chain(g, x, {0, 2}, ReduceKind::min); }, false},
      {"all_reduce", {{f, {3, 4}}}, [](Graph& g, V x) { return g.add(Op::all_reduce, {x[0]}); }},
      {"iota", {{f, {2, 3}}},
       [](Graph& g, V x) { return g.binary(Op::mul, x[0], g.convert(g.iota(DType::i32, {2, 3}, 1), DType::f32)); }},
      // bf16: the casts and dots mixed precision uses (no finite differences: a step of 1e-3
      // is below bf16's resolution; "bf16 dot gradients" checks them against f32), and
      // elementwise ops on bf16 operands, which run on the reference kernels.
      {"convert_f32_bf16_f32", {{f, {3, 700}}},
       [](Graph& g, V x) { return g.convert(g.convert(x[0], DType::bf16), DType::f32); }, false},
      {"convert_bf16_i32", {{DType::bf16, {2, 5}, Fill::small_int}},
       [](Graph& g, V x) { return g.convert(x[0], DType::i32); }, false},
      {"convert_i32_bf16", {{i, {6}, Fill::small_int}}, [](Graph& g, V x) { return g.convert(x[0], DType::bf16); }, false},
      {"dot_bf16", {{DType::bf16, {3, 4}}, {DType::bf16, {4, 5}}},
       [](Graph& g, V x) { return g.dot(x[0], x[1], false, false, DType::f32); }, false},
      {"dot_bf16_tab", {{DType::bf16, {2, 4, 3}}, {DType::bf16, {2, 5, 4}}},
       [](Graph& g, V x) { return g.dot(x[0], x[1], true, true, DType::f32); }, false},
      {"dot_bf16_ta_wide", {{DType::bf16, {33, 7}}, {DType::bf16, {33, 300}}},
       [](Graph& g, V x) { return g.dot(x[0], x[1], true, false, DType::f32); }, false},
      {"dot_bf16_tb_batch", {{DType::bf16, {3, 9, 20}}, {DType::bf16, {3, 130, 20}}},
       [](Graph& g, V x) { return g.dot(x[0], x[1], false, true, DType::f32); }, false},
      {"dot_bf16_result_bf16", {{DType::bf16, {6, 40}}, {DType::bf16, {40, 9}}},
       [](Graph& g, V x) { return g.dot(x[0], x[1]); }, false},
      {"add_bf16", {{DType::bf16, {2, 3}}, {DType::bf16, {2, 3}}},
       [](Graph& g, V x) { return g.binary(Op::add, x[0], x[1]); }, false},
      {"div_bf16", {{DType::bf16, {2, 3}}, {DType::bf16, {2, 3}, Fill::positive}},
       [](Graph& g, V x) { return g.binary(Op::div, x[0], x[1]); }, false},
      {"exp_bf16", {{DType::bf16, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::exp, x[0]); }, false},
      {"max_bf16", {{DType::bf16, {2, 3}}, {DType::bf16, {2, 3}}},
       [](Graph& g, V x) { return g.binary(Op::max, x[0], x[1]); }, false},
      {"select_bf16", {{DType::bf16, {2, 3}}, {DType::bf16, {2, 3}}},
       [](Graph& g, V x) { return g.select(g.compare(Cmp::gt, x[0], x[1]), x[0], x[1]); }, false},
      {"reduce_sum_bf16", {{DType::bf16, {2, 3, 4}}},
       [](Graph& g, V x) { return g.reduce(x[0], {0, 2}, ReduceKind::sum); }, false},
      {"transpose_bf16", {{DType::bf16, {2, 3, 4}}}, [](Graph& g, V x) { return g.transpose(x[0], {2, 0, 1}); }, false},
      {"transpose_bf16_last_two", {{DType::bf16, {40, 33}}}, [](Graph& g, V x) { return g.transpose(x[0], {1, 0}); }, false},
      {"transpose_bf16_heads", {{DType::bf16, {2, 5, 3, 8}}}, [](Graph& g, V x) { return g.transpose(x[0], {0, 2, 1, 3}); }, false},
      {"broadcast_bf16", {{DType::bf16, {3}}}, [](Graph& g, V x) { return g.broadcast(x[0], {2, 3, 4}, {1}); }, false},
  };
  return all;
}

struct Built {
  Graph g;
  std::vector<Tensor> args;
  NodeId out;
};

Built build_case(const OpCase& c, uint32_t seed) {
  Built b;
  std::mt19937 rng(seed);
  std::vector<NodeId> params;
  for (const Input& in : c.inputs) {
    params.push_back(b.g.parameter(in.dtype, in.shape));
    b.args.push_back(random_tensor(in, rng));
  }
  b.out = c.build(b.g, params);
  return b;
}

void check_close(const Tensor& a, const Tensor& b, double tol, const char* what) {
  REQUIRE(a.same_type(b));
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.get(i), y = b.get(i);
    INFO(what << " element " << i << ": " << x << " vs " << y);
    CHECK(std::fabs(x - y) <= tol * (1 + std::fabs(y)));
  }
}

// loss(args) = sum(out * weights); returns its value in double.
double loss_of(const Executable& exe, const std::vector<Tensor>& args) {
  Tensor r = exe.run(args)[0];
  return r.get(0);
}

}  // namespace

TEST_CASE("every op has a row and a test case") {
  std::set<Op> seen;
  for (const OpCase& c : cases()) {
    Built b = build_case(c, 1);
    for (const Node& n : b.g.nodes) seen.insert(n.op);
  }
  for (int op = 0; op < kNumOps; ++op) {
    INFO("op " << op_name(Op(op)) << " has no test case");
    CHECK(seen.count(Op(op)) == 1);
    CHECK(op_info(Op(op)).op == Op(op));
  }
}

void check_fast_against_reference(const OpCase& c) {
  Built b = build_case(c, 7);
  b.g.outputs = {b.out};
  CompileOptions reference;
  reference.reference_kernels = true;
  reference.optimize = false;
  CompileOptions fast_unoptimized;
  fast_unoptimized.optimize = false;
  Executable ref = Executable::compile(b.g, reference);
  Executable fast = Executable::compile(b.g, fast_unoptimized);
  Tensor out = fast.run(b.args)[0];
  const double tol = out.dtype() == DType::bf16 ? 1.0 / 128 : 1e-5;  // one bf16 rounding apart
  check_close(out, ref.run(b.args)[0], tol, c.name);
}

TEST_CASE("fast kernels agree with the reference kernels") {
  for (const OpCase& c : cases())
    SUBCASE(c.name) { check_fast_against_reference(c); }
}

TEST_CASE("convs on the packed GEMM (small images, 1x1 windows over dilated inputs) agree with the reference") {
  const PackedGemmFor packed(PackedGemm::always);  // as on CPUs where oneDNN runs below AVX-512
  for (const OpCase& c : cases()) {
    const std::string_view name(c.name);
    if (name.find("small_image") != name.npos || name.find("pointwise_strided") != name.npos ||
        name.find("lhs_dilated_pointwise") != name.npos)
      SUBCASE(c.name) { check_fast_against_reference(c); }
  }
}

TEST_CASE("without oneDNN the conv kernels still agree with the reference") {
  set_onednn_conv_enabled(false);
  for (const OpCase& c : cases())
    if (std::string_view(c.name).starts_with("conv_") || c.name == std::string_view("conv"))
      SUBCASE(c.name) { check_fast_against_reference(c); }
  set_onednn_conv_enabled(true);
}

TEST_CASE("gradients agree with central finite differences") {
  for (const OpCase& c : cases()) {
    Built probe = build_case(c, 3);
    if (!is_float(probe.g.at(probe.out).dtype) || !c.differentiable) continue;
    SUBCASE(c.name) {
      Built b = build_case(c, 11);
      Graph& g = b.g;
      std::mt19937 rng(5);
      Tensor w = random_tensor({DType::f32, g.at(b.out).shape}, rng);
      NodeId weighted = g.binary(Op::mul, b.out, g.constant(w));
      std::vector<int64_t> all(g.at(weighted).shape.size());
      for (size_t k = 0; k < all.size(); ++k) all[k] = int64_t(k);
      NodeId loss = g.reduce(weighted, all, ReduceKind::sum);
      std::vector<NodeId> float_params;
      for (NodeId p : g.params)
        if (is_float(g.at(p).dtype)) float_params.push_back(p);
      std::vector<NodeId> grads = gradients(g, loss, float_params);
      Graph loss_graph = g;
      loss_graph.outputs = {loss};
      g.outputs = grads;
      CompileOptions reference;
      reference.reference_kernels = true;
      Executable loss_exe = Executable::compile(loss_graph, reference);
      Executable grad_exe = Executable::compile(g);
      std::vector<Tensor> analytic = grad_exe.run(b.args);
      size_t gi = 0;
      for (size_t p = 0; p < b.args.size(); ++p) {
        if (!is_float(b.args[p].dtype())) continue;
        const Tensor& an = analytic[gi++];
        for (int64_t e = 0; e < b.args[p].size(); ++e) {
          const double eps = 1e-3, x0 = b.args[p].get(e);
          std::vector<Tensor> plus = b.args, minus = b.args;
          plus[p] = Tensor(b.args[p].dtype(), b.args[p].shape());
          minus[p] = Tensor(b.args[p].dtype(), b.args[p].shape());
          std::memcpy(plus[p].raw(), b.args[p].raw(), b.args[p].bytes());
          std::memcpy(minus[p].raw(), b.args[p].raw(), b.args[p].bytes());
          plus[p].set(e, x0 + eps);
          minus[p].set(e, x0 - eps);
          double numeric = (loss_of(loss_exe, plus) - loss_of(loss_exe, minus)) / (2 * eps);
          INFO(c.name << " input " << p << " element " << e << ": analytic " << an.get(e) << " numeric " << numeric);
          CHECK(std::fabs(an.get(e) - numeric) <= 2e-2 * (1 + std::fabs(numeric)));
        }
      }
    }
  }
}

// Finite differences do not apply at ties (max is not differentiable there): tied extremes
// share the gradient equally, as in JAX; a single extreme takes all of it.
TEST_CASE("max and min reductions split the gradient equally among tied extremes") {
  struct Tie {
    ReduceKind kind;
    Shape shape;
    Dims axes;
    std::vector<float> x, grad;
  };
  for (const Tie& c : {Tie{ReduceKind::max, {4}, {0}, {2, 2, 2, 2}, {0.25f, 0.25f, 0.25f, 0.25f}},
                       Tie{ReduceKind::max, {2, 3}, {1}, {1, 3, 3, 5, 2, 5}, {0, 0.5f, 0.5f, 0.5f, 0, 0.5f}},
                       Tie{ReduceKind::min, {2, 3}, {0, 1}, {1, 3, 1, 5, 1, 4}, {1 / 3.f, 0, 1 / 3.f, 0, 1 / 3.f, 0}},
                       Tie{ReduceKind::max, {2, 2}, {0}, {1, 4, 3, 2}, {0, 1, 1, 0}}}) {
    Graph g;
    NodeId x = g.parameter(DType::f32, c.shape);
    NodeId y = g.reduce(x, c.axes, c.kind);
    Dims all(g.at(y).shape.size());
    std::iota(all.begin(), all.end(), 0);
    g.outputs = gradients(g, g.reduce(y, all, ReduceKind::sum), std::vector<NodeId>{x});
    Tensor in(DType::f32, c.shape);
    for (size_t i = 0; i < c.x.size(); ++i) in.set(int64_t(i), c.x[i]);
    const std::vector<Tensor> args = {in};
    Tensor grad = Executable::compile(g).run(args)[0];
    for (size_t i = 0; i < c.grad.size(); ++i) CHECK(grad.get(int64_t(i)) == doctest::Approx(c.grad[i]));
  }
}

TEST_CASE("dot results do not depend on the thread count") {
  Graph g;
  NodeId a = g.parameter(DType::f32, {64, 300});
  NodeId b = g.parameter(DType::f32, {300, 700});
  g.outputs = {g.dot(a, b)};
  std::mt19937 rng(2);
  std::vector<Tensor> args = {random_tensor({DType::f32, {64, 300}}, rng), random_tensor({DType::f32, {300, 700}}, rng)};
  Executable exe = Executable::compile(g);
  run_on_1_and_2_threads(exe, args);
}

TEST_CASE("gemm_f32_sum has the bits of gemm_f32 on each part added in part order") {
  for (PackedGemm way : {PackedGemm::always, PackedGemm::never}) {
    const PackedGemmFor chosen(way);  // the packed kernel, and oneDNN's or Eigen's tiles
    std::mt19937 rng(3);
    auto fill = [&](std::vector<float>& v, size_t n) {
      std::uniform_real_distribution<float> u(-1, 1);
      v.resize(n);
      for (float& x : v) x = u(rng);
    };
    // Weight-gradient shapes (lhs transposed, small k), one with a narrow last panel, batched
    // ones, both transposes; a narrowing layer's (computed transposed) and a batch of small
    // products (in groups of elements), which gemm_f32 computes whole.
    for (GemmShape s : {GemmShape{1, 784, 32, 512, true, false}, GemmShape{1, 64, 16, 300, true, false},
                        GemmShape{2, 37, 20, 50, true, false}, GemmShape{1, 9, 0, 5, true, false},
                        GemmShape{3, 40, 24, 130, false, true}, GemmShape{2, 33, 17, 10, true, true},
                        GemmShape{1, 8, 512, 512, false, false}, GemmShape{1, 200, 700, 130, false, false},
                        GemmShape{1, 1024, 1100, 200, true, false}, GemmShape{20, 40, 30, 50, false, true}}) {
      CAPTURE(s.m);
      CAPTURE(s.n);
      const size_t parts = 5, a_len = size_t(s.batch * s.m * s.k), b_len = size_t(s.batch * s.k * s.n);
      const size_t c_len = size_t(s.batch * s.m * s.n);
      std::vector<std::vector<float>> a(parts), b(parts);
      std::vector<const float*> pa, pb;
      for (size_t r = 0; r < parts; ++r) {
        fill(a[r], a_len);
        fill(b[r], b_len);
        pa.push_back(a[r].data());
        pb.push_back(b[r].data());
      }
      std::vector<float> expected(c_len), product(c_len), got(c_len);
      gemm_f32(s, pa[0], pb[0], expected.data());
      for (size_t r = 1; r < parts; ++r) {
        gemm_f32(s, pa[r], pb[r], product.data());
        for (size_t i = 0; i < c_len; ++i) expected[i] = expected[i] + product[i];
      }
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        gemm_f32_sum(s, pa, pb, got.data());
        CHECK(std::memcmp(got.data(), expected.data(), c_len * sizeof(float)) == 0);
      }
      set_num_threads(0);
    }
  }
}

namespace {

// Every 7th row of c = a x b (shape s) within f32 rounding of the exact sums.
void check_within_f32_rounding(const GemmShape& s, const std::vector<float>& a, const std::vector<float>& b,
                               const std::vector<float>& c) {
  for (int64_t p = 0; p < s.batch; ++p)
    for (int64_t i = 0; i < s.m; i += 7)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t q = 0; q < s.k; ++q) {
          const float x = a[size_t(p * s.m * s.k + (s.ta ? q * s.m + i : i * s.k + q))];
          const float y = b[size_t(p * s.k * s.n + (s.tb ? j * s.k + q : q * s.n + j))];
          sum += double(x) * double(y);
          mag += std::abs(double(x) * double(y));
        }
        const double got = c[size_t((p * s.m + i) * s.n + j)];
        REQUIRE(std::abs(got - sum) <= double(s.k + 2) * 0x1p-23 * mag + 1e-30);
      }
}

using Gemm = void (*)(const GemmShape&, const float*, const float*, float*);

struct GemmOperands {
  std::vector<float> a, b;
};

// Operands of s drawn from [-1, 1).
GemmOperands random_operands(const GemmShape& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  GemmOperands o{std::vector<float>(size_t(s.batch * s.k * s.m)), std::vector<float>(size_t(s.batch * s.k * s.n))};
  for (float& x : o.a) x = u(rng);
  for (float& x : o.b) x = u(rng);
  return o;
}

// gemm_f32 on oneDNN's matmul (Eigen where oneDNN has no implementation or is not in the build).
void gemm_f32_onednn_or_eigen(const GemmShape& s, const float* a, const float* b, float* c) {
  if (!gemm_f32_onednn(s, a, b, c)) gemm_f32_eigen(s, a, b, c);
}

// `gemm` of s on 1 and on 2 threads: the same bits, within f32 rounding of the exact sums.
void check_on_1_and_2_threads(Gemm gemm, const GemmShape& s, const GemmOperands& o) {
  std::vector<float> one(size_t(s.batch * s.m * s.n)), two(one.size());
  set_num_threads(1);
  gemm(s, o.a.data(), o.b.data(), one.data());
  set_num_threads(2);
  gemm(s, o.a.data(), o.b.data(), two.data());
  set_num_threads(0);
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  check_within_f32_rounding(s, o.a, o.b, one);
}

}  // namespace

// Products whose output is a single column panel but large enough to split into row blocks
// (the last one shorter), plain, with either operand transposed, batched, and one of fewer rows
// than a block (a pointwise conv's filter gradient: a long inner dimension); each way gemm_f32
// computes: within f32 rounding of the exact sums, and the same bits on 1 and 2 threads.
TEST_CASE("f32 GEMM split into row blocks: within f32 rounding of the exact sums, at any thread count") {
  std::mt19937 rng(5);
  const Gemm ways[] = {gemm_f32_packed, gemm_f32_onednn_or_eigen, gemm_f32_eigen};
  for (GemmShape s : {GemmShape{1, 200, 700, 130, false, false}, GemmShape{1, 1000, 96, 100, true, false},
                      GemmShape{2, 150, 300, 200, false, true}, GemmShape{1, 32, 20000, 16, true, false}}) {
    CAPTURE(s.m);
    const GemmOperands o = random_operands(s, rng);
    for (Gemm gemm : ways) check_on_1_and_2_threads(gemm, s, o);
  }
}

// Products of several column panels (the last one narrower), B plain, A plain or transposed,
// batched, on oneDNN (an inner dimension past the small-k kernel's): within f32 rounding of the
// exact sums, the same bits on 1 and 2 threads.
TEST_CASE("f32 GEMM on oneDNN over several column panels: within f32 rounding of the exact sums") {
  std::mt19937 rng(6);
  for (GemmShape s : {GemmShape{1, 256, 300, 600, false, false}, GemmShape{2, 100, 96, 520, true, false}}) {
    CAPTURE(s.m);
    check_on_1_and_2_threads(gemm_f32_onednn_or_eigen, s, random_operands(s, rng));
  }
}

// Batches of products too small to split (attention's) go to oneDNN in groups of whole elements
// per call: an uneven last group, each operand transposed; within f32 rounding of the exact
// sums, the same bits on 1 and 2 threads.
TEST_CASE("f32 GEMM in groups of small batch elements: within f32 rounding of the exact sums") {
  std::mt19937 rng(8);
  for (GemmShape s : {GemmShape{70, 40, 30, 50, false, false}, GemmShape{21, 40, 30, 50, true, false},
                      GemmShape{19, 33, 24, 45, false, true}, GemmShape{12, 20, 16, 24, true, true}}) {
    CAPTURE(s.batch);
    check_on_1_and_2_threads(gemm_f32_onednn_or_eigen, s, random_operands(s, rng));
  }
}

// A transposed left operand with many more rows than columns (a narrowing layer's weight
// gradient) is computed as C^T = B^T A and transposed back: batched, within f32 rounding of the
// exact sums, the same bits on 1 and 2 threads.
TEST_CASE("f32 GEMM of a narrowing weight gradient, computed transposed: within f32 rounding") {
  std::mt19937 rng(9);
  for (GemmShape s : {GemmShape{1, 300, 700, 100, true, false}, GemmShape{2, 260, 600, 130, true, false}}) {
    CAPTURE(s.batch);
    check_on_1_and_2_threads(gemm_f32, s, random_operands(s, rng));
  }
}

// The packed kernel (kernels/gemm_packed.h) on every way its operands are cut: rows and
// columns past whole register tiles, several blocks of rows and of the inner dimension (one
// with a remainder of the 8-wide turn of A's rows), several column panels, each operand
// transposed, batched; within f32 rounding of the exact sums, the same bits on 1 and 2 threads;
// gemm_f32 computes them so where it uses the kernel, and an empty inner dimension gives zeros.
TEST_CASE("f32 GEMM in the packed kernel: within f32 rounding of the exact sums, at any thread count") {
  std::mt19937 rng(7);
  for (GemmShape s : {GemmShape{1, 13, 530, 37, false, false}, GemmShape{2, 150, 300, 270, true, false},
                      GemmShape{1, 300, 70, 40, false, true}, GemmShape{1, 9, 9, 9, true, true},
                      GemmShape{3, 6, 16, 16, false, false}, GemmShape{1, 289, 1030, 530, false, false}}) {
    CAPTURE(s.m);
    CAPTURE(s.k);
    const GemmOperands o = random_operands(s, rng);
    check_on_1_and_2_threads(gemm_f32_packed, s, o);
    std::vector<float> direct(size_t(s.batch * s.m * s.n)), through(direct.size());
    gemm_f32_packed(s, o.a.data(), o.b.data(), direct.data());
    const PackedGemmFor packed(PackedGemm::always);
    gemm_f32(s, o.a.data(), o.b.data(), through.data());
    CHECK(std::memcmp(direct.data(), through.data(), direct.size() * sizeof(float)) == 0);
  }
  const GemmShape empty{2, 7, 0, 20, false, false};
  std::vector<float> c(size_t(empty.batch * empty.m * empty.n), std::nanf(""));
  gemm_f32_packed(empty, nullptr, nullptr, c.data());
  CHECK(std::all_of(c.begin(), c.end(), [](float x) { return x == 0.0f; }));
}

TEST_CASE("f32 GEMM with a short inner dimension: within f32 rounding of the exact sums") {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1, 1);
  // The small-k kernel's shapes (lhs transposed), full and edge tiles, batched.
  for (GemmShape s : {GemmShape{1, 784, 32, 512, true, false}, GemmShape{3, 13, 64, 61, true, false},
                      GemmShape{1, 5, 1, 49, true, false}}) {
    std::vector<float> a(size_t(s.batch * s.k * s.m)), b(size_t(s.batch * s.k * s.n)), c(size_t(s.batch * s.m * s.n));
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    gemm_f32(s, a.data(), b.data(), c.data());
    for (int64_t p = 0; p < s.batch; ++p)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = 0, mag = 0;
          for (int64_t q = 0; q < s.k; ++q) {
            const double x = double(a[size_t((p * s.k + q) * s.m + i)]) * double(b[size_t((p * s.k + q) * s.n + j)]);
            sum += x;
            mag += std::abs(x);
          }
          const double got = c[size_t((p * s.m + i) * s.n + j)];
          REQUIRE(std::abs(got - sum) <= double(s.k + 2) * 0x1p-23 * mag + 1e-30);
        }
  }
}

TEST_CASE("shape rules return errors that name the operands") {
  Graph g;
  NodeId a = g.parameter(DType::f32, {2, 3});
  NodeId b = g.parameter(DType::f32, {4, 5});
  CHECK_THROWS_WITH_AS(g.dot(a, b), doctest::Contains("f32[2,3], f32[4,5]"), Error);
  CHECK_THROWS_WITH_AS(g.binary(Op::add, a, b), doctest::Contains("f32[2,3], f32[4,5]"), Error);
  CHECK_THROWS_WITH_AS(g.reshape(a, {7}), doctest::Contains("cannot reshape f32[2,3]"), Error);
  CHECK_THROWS_AS(g.unary(Op::exp, g.parameter(DType::i32, {2})), Error);
}

TEST_CASE("gather reports an index out of range instead of reading outside the tensor") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {3, 2});
  NodeId idx = g.parameter(DType::i32, {1});
  g.outputs = {g.gather(x, idx)};
  Tensor bad(DType::i32, {1});
  bad.set(0, 3);
  Executable exe = Executable::compile(g);
  CHECK_THROWS_WITH_AS(exe.run(std::vector<Tensor>{Tensor(DType::f32, {3, 2}), bad}), doctest::Contains("index 3 out of range"), Error);
}

TEST_CASE("conv and pooling results do not depend on the thread count") {
  // 20 images: the oneDNN kernels cut them into chunks of 14 and 6. Small integers are bf16
  // values: the forward conv takes the bf16 kernel where the CPU has one. The 6x5 images with
  // 12 channels run as one product of their patches where products run on the packed kernel,
  // and so do the input gradient of the strided 1x1 conv (a product placed where it goes) and
  // the filter gradient of the pointwise one.
  struct Sizes {
    Shape x, w;
    PackedGemm way;
    Window2D conv;
  };
  const Window2D same = window({1, 1}, {1, 1}, {1, 1}), strided = window({2, 2}, {0, 0}, {0, 0}),
                 pointwise = window({1, 1}, {0, 0}, {0, 0});
  for (const Sizes& sz : {Sizes{{20, 12, 12, 8}, {3, 3, 8, 16}, PackedGemm::automatic, same},
                          Sizes{{20, 6, 5, 12}, {3, 3, 12, 16}, PackedGemm::always, same},
                          Sizes{{20, 12, 12, 16}, {1, 1, 16, 24}, PackedGemm::always, strided},
                          Sizes{{20, 6, 5, 12}, {1, 1, 12, 16}, PackedGemm::always, pointwise}}) {
    for (Fill fill : {Fill::signed_unit, Fill::small_int}) {
      const PackedGemmFor chosen(sz.way);
      Graph g;
      NodeId x = g.parameter(DType::f32, sz.x);
      NodeId w = g.parameter(DType::f32, sz.w);
      NodeId y = g.conv(x, w, sz.conv);
      NodeId p = g.reduce_window(y, WindowKind::max, window({2, 2}, {0, 0}, {0, 0}, {2, 2}));
      NodeId loss = g.reduce(g.binary(Op::mul, p, p), {0, 1, 2, 3}, ReduceKind::sum);
      std::vector<NodeId> params = {x, w};
      g.outputs = gradients(g, loss, params);
      g.outputs.push_back(p);
      std::mt19937 rng(4);
      std::vector<Tensor> args = {random_tensor({DType::f32, sz.x, fill}, rng), random_tensor({DType::f32, sz.w, fill}, rng)};
      Executable exe = Executable::compile(g);
      run_on_1_and_2_threads(exe, args);
    }
  }
  // A depthwise filter gradient over a 2x2 image (its partial sums over fixed chunks of rows),
  // on oneDNN's kernels or the direct loop, and on the direct loop.
  Graph g;
  NodeId x = g.parameter(DType::f32, {70, 2, 2, 40});
  NodeId dy = g.parameter(DType::f32, {70, 2, 2, 40});
  g.outputs = {g.conv_filter_grad(x, dy, window({1, 1}, {1, 1}, {1, 1}, {3, 3}), 40)};
  std::mt19937 rng(5);
  std::vector<Tensor> args = {random_tensor({DType::f32, {70, 2, 2, 40}, Fill::signed_unit}, rng),
                              random_tensor({DType::f32, {70, 2, 2, 40}, Fill::signed_unit}, rng)};
  Executable exe = Executable::compile(g);
  run_on_1_and_2_threads(exe, args);
  set_onednn_conv_enabled(false);
  run_on_1_and_2_threads(exe, args);
  set_onednn_conv_enabled(true);
}

// f32 convs over small images (small_image_convs.h) run as products of patch matrices
// (ops/conv.cpp) on the packed GEMM (CPUs below AVX-512) and on oneDNN's matmul (from AVX-512
// on, other thresholds): close to the reference kernels, and the same bits on 1 and 2 threads.
TEST_CASE("f32 convs over small images match the reference and do not depend on the thread count") {
  std::vector<Shape> shapes;
  const Graph g = small_image_convs(shapes);
  REQUIRE(verify_graph(g).empty());
  std::mt19937 rng(12);
  std::vector<Tensor> args;
  for (const Shape& s : shapes) args.push_back(random_tensor({DType::f32, s, Fill::signed_unit}, rng));
  CompileOptions reference;
  reference.reference_kernels = true;
  const std::vector<Tensor> want = Executable::compile(g, reference).run(args);
  for (PackedGemm way : {PackedGemm::always, PackedGemm::never}) {
    const PackedGemmFor chosen(way);
    Executable exe = Executable::compile(g);
    exe.run(args);  // makes the primitives
    const std::vector<Tensor> got = run_on_1_and_2_threads(exe, args);
    const std::string products = way == PackedGemm::always ? "packed GEMM" : "oneDNN's matmul";
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i << " on " << products);
      int64_t far = 0;  // elements off by more than f32 sums in another order
      for (int64_t e = 0; e < got[i].size(); ++e) {
        const float a = got[i].data<float>()[e], b = want[i].data<float>()[e];
        far += std::abs(a - b) > 1e-4f * (1 + std::abs(b));
      }
      CHECK(far == 0);
    }
  }
}

// A first layer's convs (up to 4 input channels, at most 32 taps, 16-64 output channels) and
// their filter gradients on the few-taps kernels (ops/conv.cpp): windows whole and cut by the
// padding, strided, dilated, 4 columns at a time and the rest one by one; the gradient's taps
// in one group of register sums or several (27 taps to 16 channels, 25 to 64), over chunks of
// images. Small integers sum exactly in any order, so those match the reference's bits; random
// values to f32 rounding.
TEST_CASE("few-taps convs and filter gradients match the reference and do not depend on the thread count") {
  struct Case {
    Shape x, w;
    Window2D win;
  };
  const Window2D same3 = window({1, 1}, {1, 1}, {1, 1}, {3, 3}), strided = window({2, 2}, {1, 0}, {1, 2}, {3, 3}),
                 dilated = window({1, 1}, {2, 2}, {2, 2}, {2, 2}, {1, 1}, {2, 2}), valid5 = window({1, 1}, {0, 0}, {0, 0}, {5, 5});
  for (const Case& c : {Case{{5, 9, 11, 1}, {3, 3, 1, 32}, same3}, Case{{4, 10, 9, 3}, {3, 3, 3, 16}, strided},
                        Case{{3, 8, 13, 2}, {2, 2, 2, 48}, dilated}, Case{{3, 9, 12, 1}, {5, 5, 1, 64}, valid5},
                        Case{{2, 6, 7, 4}, {2, 2, 4, 16}, same3}}) {
    INFO("x " << shape_str(c.x) << " w " << shape_str(c.w));
    Window2D win = c.win;
    win.size = {c.w[0], c.w[1]};
    for (Fill fill : {Fill::small_int, Fill::signed_unit}) {
      Graph g;
      const NodeId x = g.parameter(DType::f32, c.x), w = g.parameter(DType::f32, c.w);
      const NodeId y = g.conv(x, w, win);
      const Shape ys = g.at(y).shape;
      g.outputs = {y, g.conv_filter_grad(x, g.parameter(DType::f32, ys), win)};
      std::mt19937 rng(7);
      const std::vector<Tensor> args = {random_tensor({DType::f32, c.x, fill}, rng), random_tensor({DType::f32, c.w, fill}, rng),
                                        random_tensor({DType::f32, ys, fill}, rng)};
      CompileOptions reference;
      reference.reference_kernels = true;
      const std::vector<Tensor> want = Executable::compile(g, reference).run(args);
      Executable exe = Executable::compile(g);
      const std::vector<Tensor> got = run_on_1_and_2_threads(exe, args);
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("output " << i << " (1: the filter gradient)");
        int64_t off = 0;  // the filter gradient sums up to 495 products: a looser bound
        const float tolerance = i == 0 ? 1e-5f : 1e-4f;
        for (int64_t e = 0; e < got[i].size(); ++e) {
          const float a = got[i].data<float>()[e], b = want[i].data<float>()[e];
          off += fill == Fill::small_int ? a != b : std::abs(a - b) > tolerance * (1 + std::abs(b));
        }
        CHECK(off == 0);
      }
    }
  }
}

// No images: the few-taps filter gradient is zeros, as the reference's.
TEST_CASE("a few-taps filter gradient over an empty batch is zeros") {
  Graph g;
  Window2D same = window({1, 1}, {1, 1}, {1, 1}, {3, 3});
  const NodeId x = g.parameter(DType::f32, {0, 9, 11, 1}), dy = g.parameter(DType::f32, {0, 9, 11, 32});
  g.outputs = {g.conv_filter_grad(x, dy, same)};
  const std::vector<Tensor> args{Tensor(DType::f32, {0, 9, 11, 1}), Tensor(DType::f32, {0, 9, 11, 32})};
  const Tensor dw = Executable::compile(g).run(args)[0];
  REQUIRE(dw.shape() == Shape{3, 3, 1, 32});
  for (int64_t e = 0; e < dw.size(); ++e) CHECK(dw.get(e) == 0.0);
}

TEST_CASE("2x2 max pools that tile the image: the fast kernels give the reference's bits, NaNs and ties included") {
  // Each row's windows in one loop (ops/reduce_window.cpp's tiling path): 32 channels (two
  // AVX-512 vectors, four AVX2 ones), 8 and 24 (AVX2 vectors only); 3 channels and a 5x5
  // image, which leaves a row and a column out, take the general path.
  for (const Shape& s : {Shape{2, 6, 8, 32}, Shape{1, 4, 6, 8}, Shape{2, 4, 4, 24}, Shape{3, 4, 4, 3}, Shape{1, 5, 5, 4}}) {
    Graph g;
    NodeId x = g.parameter(DType::f32, s);
    const Window2D pool = window({2, 2}, {0, 0}, {0, 0}, {2, 2});
    NodeId y = g.reduce_window(x, WindowKind::max, pool);
    NodeId dy = g.parameter(DType::f32, g.at(y).shape);
    NodeId dx = g.select_and_scatter(x, dy, pool);
    std::mt19937 rng(11);
    Tensor tx(DType::f32, s), tdy(DType::f32, g.at(y).shape);
    for (int64_t i = 0; i < tx.size(); ++i)  // small integers (ties), some NaNs and -0
      tx.data<float>()[i] = rng() % 13 == 0 ? std::nanf("") : rng() % 11 == 0 ? -0.0f : float(int(rng() % 5) - 2);
    for (int64_t i = 0; i < tdy.size(); ++i) tdy.data<float>()[i] = float(i % 7) - 3.5f;
    for (NodeId id : {y, dx}) {
      const Node& n = g.at(id);
      std::vector<const Tensor*> args = {&tx};
      if (id == dx) args.push_back(&tdy);
      Tensor fast(DType::f32, n.shape), ref(DType::f32, n.shape);
      kernel_for(n.op)(n, args, fast);
      op_info(n.op).reference(n, args, ref);
      CHECK(std::memcmp(fast.raw(), ref.raw(), size_t(fast.size()) * 4) == 0);
    }
  }
}

// Along every axis, of every dtype, with empty and one-element dims: the reference's bits (a
// sparse cross-entropy's one-hot iota is [batch, length, vocabulary] along the last).
TEST_CASE("iota's kernel gives the reference's values") {
  const std::vector<Shape> shapes = {{7}, {3, 5}, {4, 1, 6}, {2, 0, 3}, {64, 33, 129}};
  for (DType dtype : {DType::i32, DType::f32, DType::bf16, DType::u8})
    for (const Shape& s : shapes)
      for (int64_t axis = 0; axis < int64_t(s.size()); ++axis) {
        Graph g;
        const Node& n = g.at(g.iota(dtype, s, axis));
        Tensor fast(dtype, s), ref(dtype, s);
        std::memset(fast.raw(), 0xA5, fast.bytes());
        kernel_for(Op::iota)(n, {}, fast);
        op_info(Op::iota).reference(n, {}, ref);
        CAPTURE(s.size());
        CAPTURE(axis);
        CHECK(std::memcmp(fast.raw(), ref.raw(), fast.bytes()) == 0);
      }
}

// A scalar's broadcast, small and across several of the kernel's blocks, of each dtype; a -0
// and a NaN's bits kept; a broadcast of a vector as the reference makes it.
TEST_CASE("broadcast's kernel gives the reference's bits") {
  for (DType dtype : {DType::f32, DType::bf16, DType::i32, DType::u8})
    for (const Shape& to : {Shape{5}, Shape{3, 4}, Shape{300, 1001}}) {
      for (double v : {-0.0, 2.5, double(std::nanf(""))}) {
        if (v != v && !is_float(dtype)) continue;  // no NaN in an integer
        Graph g;
        const Node& n = g.at(g.broadcast(g.scalar(dtype, v), to, {}));
        Tensor x(dtype, {});
        x.set(0, v);
        const std::vector<const Tensor*> args = {&x};
        Tensor fast(dtype, to), ref(dtype, to);
        std::memset(fast.raw(), 0xA5, fast.bytes());
        kernel_for(Op::broadcast)(n, args, fast);
        op_info(Op::broadcast).reference(n, args, ref);
        CHECK(std::memcmp(fast.raw(), ref.raw(), fast.bytes()) == 0);
      }
      Graph g;
      const NodeId row = g.parameter(dtype, {to.back()});
      const Node& n = g.at(g.broadcast(row, to, {int64_t(to.size()) - 1}));
      Tensor x(dtype, {to.back()});
      for (int64_t i = 0; i < x.size(); ++i) x.set(i, double(i % 7));
      const std::vector<const Tensor*> args = {&x};
      Tensor fast(dtype, to), ref(dtype, to);
      kernel_for(Op::broadcast)(n, args, fast);
      op_info(Op::broadcast).reference(n, args, ref);
      CHECK(std::memcmp(fast.raw(), ref.raw(), fast.bytes()) == 0);
    }
}

TEST_CASE("a uniform draw in vector code gives the reference's bits") {
  // Counts past one of the pool's chunks (16384 elements) and not a multiple of the four
  // elements a vector takes; keys with the high bits of either word set.
  const int32_t keys[][2] = {{0, 1}, {-7, 123456789}, {2147483647, -1}};
  const int64_t counts[] = {3, 4097, 40003};
  for (const auto& k : keys)
    for (int64_t count : counts) {
      Graph g;
      const NodeId key = g.parameter(DType::i32, {2});
      const NodeId draw = g.rng(key, RngKind::uniform, {count});
      Tensor key_value(DType::i32, {2});
      key_value.data<int32_t>()[0] = k[0];
      key_value.data<int32_t>()[1] = k[1];
      const Node& n = g.at(draw);
      std::vector<const Tensor*> args = {&key_value};
      Tensor fast(DType::f32, n.shape), ref(DType::f32, n.shape);
      kernel_for(n.op)(n, args, fast);
      op_info(n.op).reference(n, args, ref);
      CAPTURE(count);
      CHECK(std::memcmp(fast.raw(), ref.raw(), size_t(count) * 4) == 0);
    }
}

TEST_CASE("a filter gradient over chunks of the batch agrees with the reference, f32 and bf16") {
  // 16 images of 12x12: four chunks of four (kernels/onednn_conv.cpp sums their gradients in
  // chunk order); 20 images: chunks of 5; 128 images of 14x14: 16 chunks of 8.
  struct Case {
    int64_t n, side, ci, co;
  };
  for (Case c : {Case{16, 12, 16, 32}, Case{20, 12, 16, 32}, Case{128, 14, 4, 8}}) {
    for (DType t : {DType::f32, DType::bf16}) {
      Graph g;
      const int64_t n = c.n, h = c.side;
      NodeId x = g.parameter(t, {n, h, h, c.ci}), dy = g.parameter(t, {n, h, h, c.co});
      NodeId df = g.conv_filter_grad(x, dy, window({1, 1}, {1, 1}, {1, 1}, {3, 3}));
      std::mt19937 rng(8);
      std::vector<Tensor> args = {random_tensor({t, {n, h, h, c.ci}, Fill::small_int}, rng),
                                  random_tensor({t, {n, h, h, c.co}, Fill::small_int}, rng)};
      std::vector<const Tensor*> in = {&args[0], &args[1]};
      const Node& node = g.at(df);
      Tensor fast(node.dtype, node.shape), ref(node.dtype, node.shape);
      kernel_for(node.op)(node, in, fast);
      op_info(node.op).reference(node, in, ref);
      check_close(fast, ref, 1e-6, "conv_filter_grad");  // small integers: exact sums
    }
  }
}

TEST_CASE("conv chunks: about 2048 positions each, at least four, a count 2 and 4 threads share evenly") {
  CHECK(conv_chunk_images(128, 14 * 14) == 8);   // 16 chunks, not 13 of 10
  CHECK(conv_chunk_images(128, 28 * 28) == 2);   // 64 chunks
  CHECK(conv_chunk_images(64, 8 * 8) == 16);     // at least four chunks
  CHECK(conv_chunk_images(16, 12 * 12) == 4);
  CHECK(conv_chunk_images(20, 12 * 12) == 5);
  CHECK(conv_chunk_images(1, 4) == 1);
  CHECK(conv_chunk_images(0, 4) == 1);
  for (int64_t n = 1; n <= 300; ++n)
    for (int64_t positions : {1, 4, 49, 196, 784, 4096}) {
      const int64_t size = conv_chunk_images(n, positions);
      CHECK(size >= 1);
      CHECK(size <= std::max<int64_t>(1, (n + 3) / 4));
      CHECK(size * positions <= std::max<int64_t>(2048, positions));
    }
}

TEST_CASE("large f32 <-> bf16 converts run in pieces across threads with the reference's bits") {
  const Shape s{3, 100003};  // several pieces and a short last one
  std::mt19937 rng(12);
  Tensor x(DType::f32, s);
  const float special[] = {0.0f, -0.0f, std::nanf(""), INFINITY, -INFINITY, 1e-40f, 3.0e38f};
  for (int64_t i = 0; i < x.size(); ++i)
    x.data<float>()[i] = rng() % 13 == 0 ? special[rng() % 7] : std::ldexp(float(rng() % 100000) - 50000, int(rng() % 40) - 20);
  Graph g;
  NodeId p = g.parameter(DType::f32, s);
  NodeId narrow = g.convert(p, DType::bf16), wide = g.convert(narrow, DType::f32);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor nb(DType::bf16, s), nr(DType::bf16, s), wb(DType::f32, s), wr(DType::f32, s);
    std::vector<const Tensor*> in = {&x};
    kernel_for(Op::convert)(g.at(narrow), in, nb);
    op_info(Op::convert).reference(g.at(narrow), in, nr);
    CHECK(std::memcmp(nb.raw(), nr.raw(), nb.bytes()) == 0);
    in = {&nb};
    kernel_for(Op::convert)(g.at(wide), in, wb);
    op_info(Op::convert).reference(g.at(wide), in, wr);
    CHECK(std::memcmp(wb.raw(), wr.raw(), wb.bytes()) == 0);
  }
  set_num_threads(0);
}

TEST_CASE("rng draws depend only on the key and are well distributed") {
  auto draw = [](RngKind kind, int32_t k0, int32_t k1, int64_t n) {
    Graph g;
    NodeId key = g.parameter(DType::i32, {2});
    g.outputs = {g.rng(key, kind, {n})};
    Tensor k(DType::i32, {2});
    k.data<int32_t>()[0] = k0;
    k.data<int32_t>()[1] = k1;
    return Executable::compile(g).run(std::vector<Tensor>{k})[0];
  };
  auto moments = [](const Tensor& t) {
    double s = 0, s2 = 0, lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < t.size(); ++i) {
      double v = t.get(i);
      s += v, s2 += v * v, lo = std::min(lo, v), hi = std::max(hi, v);
    }
    double mean = s / double(t.size());
    return std::array<double, 4>{mean, s2 / double(t.size()) - mean * mean, lo, hi};
  };
  Tensor u = draw(RngKind::uniform, 1, 2, 100000);
  auto mu = moments(u);
  CHECK(std::fabs(mu[0] - 0.5) < 0.01);
  CHECK(std::fabs(mu[1] - 1.0 / 12) < 0.005);
  CHECK((mu[2] >= 0 && mu[3] < 1));
  Tensor again = draw(RngKind::uniform, 1, 2, 100000);
  CHECK(std::memcmp(u.raw(), again.raw(), u.bytes()) == 0);
  Tensor other = draw(RngKind::uniform, 1, 3, 100000);
  CHECK(std::memcmp(u.raw(), other.raw(), u.bytes()) != 0);
  set_num_threads(1);
  Tensor single = draw(RngKind::normal, 5, 6, 50000);
  set_num_threads(0);
  Tensor normal = draw(RngKind::normal, 5, 6, 50000);
  CHECK(std::memcmp(single.raw(), normal.raw(), normal.bytes()) == 0);
  auto mn = moments(normal);
  CHECK(std::fabs(mn[0]) < 0.02);
  CHECK(std::fabs(mn[1] - 1) < 0.03);
  auto mt = moments(draw(RngKind::truncated_normal, 5, 6, 50000));
  CHECK((mt[2] >= -2 && mt[3] <= 2));
  CHECK(std::fabs(mt[1] - 0.774) < 0.03);  // variance of a standard normal truncated to [-2, 2]
}

// A bernoulli draw is the uniform draw of the same key compared with p, element for element:
// the fast kernel (in vectors, over the pool's chunks) and the reference, on 1 and 2 threads,
// for counts that end inside a vector and past a chunk, keys with high bits set, p at 0, 1 and
// between. Its operands are checked.
TEST_CASE("rng bernoulli is the uniform draw below p, bit for bit") {
  const int32_t keys[][2] = {{0, 1}, {-7, 123456789}};
  for (const auto& k : keys)
    for (int64_t count : {int64_t(5), int64_t(40003)})
      for (float p : {0.0f, 1.0f, 0.1f, 0.9f, 1.0f / 3}) {
        Graph g;
        const NodeId key = g.parameter(DType::i32, {2}), prob = g.parameter(DType::f32, {});
        g.outputs = {g.rng_bernoulli(key, prob, {count}),
                     g.compare(Cmp::lt, g.rng(key, RngKind::uniform, {count}), g.broadcast(prob, {count}, {}))};
        Tensor key_value(DType::i32, {2}), p_value(DType::f32, {});
        key_value.data<int32_t>()[0] = k[0];
        key_value.data<int32_t>()[1] = k[1];
        p_value.data<float>()[0] = p;
        CompileOptions fast, reference;
        fast.optimize = reference.optimize = false;
        reference.reference_kernels = true;
        CAPTURE(count);
        CAPTURE(p);
        const std::vector<Tensor> want = Executable::compile(g, reference).run(std::vector<Tensor>{key_value, p_value});
        CHECK(want[0].dtype() == DType::boolean);
        CHECK(std::memcmp(want[0].raw(), want[1].raw(), size_t(count)) == 0);
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          const Tensor got = Executable::compile(g, fast).run(std::vector<Tensor>{key_value, p_value})[0];
          CHECK(std::memcmp(got.raw(), want[0].raw(), size_t(count)) == 0);
        }
        set_num_threads(0);
      }
  Graph g;
  const NodeId key = g.parameter(DType::i32, {2});
  CHECK_THROWS_WITH_AS(g.rng_bernoulli(key, g.parameter(DType::f32, {3}), {4}),
                       doctest::Contains("rng bernoulli needs a key i32[2] and a probability f32[]"), Error);
  CHECK_THROWS_WITH_AS(g.rng_bernoulli(key, g.parameter(DType::i32, {}), {4}),
                       doctest::Contains("rng bernoulli needs a key i32[2] and a probability f32[]"), Error);
}

TEST_CASE("rng fold derives distinct keys") {
  Graph g;
  NodeId key = g.parameter(DType::i32, {2});
  NodeId data = g.parameter(DType::i32, {4});
  g.outputs = {g.rng_fold(key, data)};
  Tensor k(DType::i32, {2}), d(DType::i32, {4});
  for (int i = 0; i < 4; ++i) d.data<int32_t>()[i] = i % 3;  // 0 1 2 0
  Tensor r = Executable::compile(g).run(std::vector<Tensor>{k, d})[0];
  REQUIRE(r.shape() == Shape{4, 2});
  const int32_t* v = r.data<int32_t>();
  CHECK((v[0] == v[6] && v[1] == v[7]));
  CHECK((v[0] != v[2] || v[1] != v[3]));
  CHECK((v[2] != v[4] || v[3] != v[5]));
}

TEST_CASE("conv and reduce_window shape rules name the operands") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {1, 5, 5, 3});
  NodeId w = g.parameter(DType::f32, {3, 3, 1, 2});
  CHECK_THROWS_WITH_AS(g.conv(x, w, {}), doctest::Contains("f32[1,5,5,3], f32[3,3,1,2]"), Error);
  NodeId big = g.parameter(DType::f32, {7, 7, 3, 2});
  CHECK_THROWS_WITH_AS(g.conv(x, big, {}), doctest::Contains("does not fit"), Error);
  CHECK_THROWS_WITH_AS(g.reduce_window(g.parameter(DType::f32, {5, 5}), WindowKind::sum, {}),
                       doctest::Contains("f32[5,5]"), Error);
  CHECK_THROWS_WITH_AS(g.reduce_window(x, WindowKind::max, window({1, 1}, {2, 0}, {0, 0}, {2, 2})),
                       doctest::Contains("covers only padding"), Error);
  CHECK_THROWS_WITH_AS(g.rng(x, RngKind::uniform, {2}), doctest::Contains("key i32[2]"), Error);
}

TEST_CASE("conv shape rules check the feature groups") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {1, 5, 5, 6});
  CHECK(g.at(g.conv(x, g.parameter(DType::f32, {3, 3, 1, 12}), {}, 6)).shape == Shape{1, 3, 3, 12});
  CHECK_THROWS_WITH_AS(g.conv(x, g.parameter(DType::f32, {3, 3, 1, 8}), {}, 4),
                       doctest::Contains("conv: 6 input channels do not split into 4 groups"), Error);
  CHECK_THROWS_WITH_AS(g.conv(x, g.parameter(DType::f32, {3, 3, 2, 4}), {}, 3),
                       doctest::Contains("conv: 4 output channels do not split into 3 groups"), Error);
  CHECK_THROWS_WITH_AS(g.conv(x, g.parameter(DType::f32, {3, 3, 3, 6}), {}, 3),
                       doctest::Contains("the filter expects 9 (3 per group, 3 groups), got f32[1,5,5,6], f32[3,3,3,6]"), Error);
  CHECK_THROWS_WITH_AS(g.conv(x, g.parameter(DType::f32, {3, 3, 6, 4}), {}, 0),
                       doctest::Contains("groups must be between 1 and the 6 input channels, got 0"), Error);
  NodeId dy = g.parameter(DType::f32, {1, 3, 3, 4});
  CHECK(g.at(g.conv_filter_grad(x, dy, window({1, 1}, {0, 0}, {0, 0}, {3, 3}), 2)).shape == Shape{3, 3, 3, 4});
  CHECK_THROWS_WITH_AS(g.conv_filter_grad(x, dy, window({1, 1}, {0, 0}, {0, 0}, {3, 3}), 3),
                       doctest::Contains("conv_filter_grad: 4 output channels do not split into 3 groups"), Error);
}

TEST_CASE("bf16 conv and pooling compute in f32 and round once") {
  std::mt19937 rng(8);
  Tensor x32 = random_tensor({DType::f32, {2, 6, 6, 8}}, rng), w32 = random_tensor({DType::f32, {3, 3, 8, 4}}, rng);
  auto to_bf16 = [](const Tensor& t) {
    Tensor r(DType::bf16, t.shape());
    for (int64_t i = 0; i < t.size(); ++i) r.set(i, t.get(i));
    return r;
  };
  Tensor x16 = to_bf16(x32), w16 = to_bf16(w32);
  auto run = [](DType t, const std::vector<Tensor>& args) {
    Graph g;
    NodeId x = g.parameter(t, {2, 6, 6, 8});
    NodeId w = g.parameter(t, {3, 3, 8, 4});
    NodeId y = g.conv(x, w, window({1, 1}, {1, 1}, {1, 1}));
    g.outputs = {y, g.reduce_window(y, WindowKind::max, window({2, 2}, {0, 0}, {0, 0}, {2, 2}))};
    return Executable::compile(g).run(args);
  };
  // The f32 computation on the bf16 values, rounded to bf16, is what bf16 must give.
  std::vector<Tensor> exact_in = {Tensor(DType::f32, {2, 6, 6, 8}), Tensor(DType::f32, {3, 3, 8, 4})};
  for (int64_t i = 0; i < x16.size(); ++i) exact_in[0].set(i, x16.get(i));
  for (int64_t i = 0; i < w16.size(); ++i) exact_in[1].set(i, w16.get(i));
  std::vector<Tensor> expect = run(DType::f32, exact_in);
  std::vector<Tensor> got = run(DType::bf16, {x16, w16});
  for (size_t k = 0; k < got.size(); ++k) {
    REQUIRE(got[k].dtype() == DType::bf16);
    for (int64_t i = 0; i < got[k].size(); ++i) CHECK(got[k].get(i) == to_bf16(expect[k]).get(i));
  }
}

// Operands of several conversion blocks (f32_compute.h widens and rounds them in blocks across
// the pool), with a short last block: the max pool's gradient of bf16 operands is the f32 one on
// their values, rounded once, on 1 and 2 threads.
TEST_CASE("bf16 max pool gradient over several conversion blocks: the f32 result rounded, at any thread count") {
  std::mt19937 rng(9);
  const Shape xs = {3, 62, 62, 12}, ys = {3, 31, 31, 12};
  auto bf16_values = [&](const Shape& shape) {
    Tensor r(DType::bf16, shape);
    Tensor f = random_tensor({DType::f32, shape}, rng);
    for (int64_t i = 0; i < r.size(); ++i) r.set(i, f.get(i));
    return r;
  };
  const Tensor x16 = bf16_values(xs), dy16 = bf16_values(ys);
  REQUIRE(x16.size() > 2 * kConvertBlock);
  REQUIRE(x16.size() % kConvertBlock != 0);
  auto run = [&](DType t, const std::vector<Tensor>& args) {
    Graph g;
    NodeId x = g.parameter(t, xs), dy = g.parameter(t, ys);
    g.outputs = {g.select_and_scatter(x, dy, window({2, 2}, {0, 0}, {0, 0}, {2, 2}))};
    return Executable::compile(g).run(args)[0];
  };
  auto widened_copy = [](const Tensor& t) {
    Tensor r(DType::f32, t.shape());
    for (int64_t i = 0; i < t.size(); ++i) r.set(i, t.get(i));
    return r;
  };
  const Tensor expect = run(DType::f32, {widened_copy(x16), widened_copy(dy16)});
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const Tensor got = run(DType::bf16, {x16, dy16});
    REQUIRE(got.dtype() == DType::bf16);
    int64_t wrong = 0;
    for (int64_t i = 0; i < got.size(); ++i) wrong += got.get(i) != double(bf16_to_f32(f32_to_bf16(float(expect.get(i)))));
    CHECK(wrong == 0);
  }
  set_num_threads(0);
}

// Sums over the leading axes of a whole operand with rows of at most 2048 go in tiles of rows,
// added in tile order: within rounding of the reference's sum, the same bits at any thread
// count. The rest take the reference's order: its bits.
TEST_CASE("f32 reduce over consecutive axes: the reference's bits, or its sums within rounding, at any thread count") {
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {{{64, 128}, {0}},      {{64, 128}, {1}},    {{8, 32, 64}, {1}},
                                   {{8, 32, 64}, {0, 1}}, {{8, 32, 64}, {1, 2}}, {{3, 4, 50, 700}, {1, 2}},
                                   {{5000, 3}, {0}},      {{2, 9000}, {1}},    {{37, 200}, {1}},
                                   {{2000, 4, 3}, {1}},   {{64, 8, 8, 256}, {0, 1, 2}}, {{300, 4, 200}, {0, 1}},
                                   {{9000, 40}, {0}},     {{3, 40000}, {0}},   {{40, 3000}, {0}}};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2, 2);
  for (const Case& c : cases)
    for (ReduceKind kind : {ReduceKind::sum, ReduceKind::max, ReduceKind::min}) {
      Graph g;
      g.outputs = {g.reduce(g.parameter(DType::f32, c.shape), c.dims, kind)};
      Tensor x(DType::f32, c.shape);
      for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = u(rng);
      x.data<float>()[x.size() / 3] = std::nanf("");  // NaN wins max and min, as in the reference
      CompileOptions ref;
      ref.reference_kernels = true;
      Tensor want = Executable::compile(g, ref).run(std::vector<Tensor>{x})[0];
      int64_t columns = 1;
      for (size_t d = size_t(c.dims.back()) + 1; d < c.shape.size(); ++d) columns *= c.shape[d];
      const bool tiled = c.dims.front() == 0 && columns > 1 && columns <= 2048 && kind == ReduceKind::sum;
      std::optional<Tensor> first;
      for (int threads : {1, 2, 3}) {  // the column blocks follow the thread count
        set_num_threads(threads);
        Tensor got = Executable::compile(g).run(std::vector<Tensor>{x})[0];
        INFO(shape_str(c.shape) << " kind " << int(kind) << " threads " << threads);
        if (tiled) {  // NaN where the reference has it (the column with the NaN), else close
          for (int64_t i = 0; i < want.size(); ++i) {
            const float a = got.data<float>()[i], b = want.data<float>()[i];
            const bool close = (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-6 * (1 + std::fabs(b));
            CHECK(close);
          }
        } else {
          CHECK(std::memcmp(got.raw(), want.raw(), want.bytes()) == 0);
        }
        if (first) CHECK(std::memcmp(got.raw(), first->raw(), got.bytes()) == 0);
        else first = got;
      }
      set_num_threads(0);
    }
}

// Column sums held in registers of four doubles (blocks of 32 and 4 columns, then a scalar
// tail): the reference's additions in its order, so over one tile of rows its very bits.
TEST_CASE("f32 column sums in vector blocks: the reference's bits within a tile") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3, 3);
  for (int64_t columns : {14, 15, 31, 32, 33, 39, 67, 100}) {
    const Shape shape{300, columns};  // over 4096 elements (the fast kernel), one tile of rows
    Graph g;
    g.outputs = {g.reduce(g.parameter(DType::f32, shape), {0}, ReduceKind::sum)};
    Tensor x(DType::f32, shape);
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = u(rng) * float(1 + i % 11);
    CompileOptions ref;
    ref.reference_kernels = true;
    const Tensor want = Executable::compile(g, ref).run(std::vector<Tensor>{x})[0];
    const Tensor got = Executable::compile(g).run(std::vector<Tensor>{x})[0];
    INFO("columns " << columns);
    CHECK(std::memcmp(got.raw(), want.raw(), want.bytes()) == 0);
  }
}

TEST_CASE("reduce_fusion reduces its body's result tile by tile: the same bits at any thread count") {
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
    ReduceKind kind;
    bool reference_bits;  // rows: each row's sum as the unfused reduce takes it
  };
  const std::vector<Case> cases = {{{5, 3000}, {1}, ReduceKind::sum, true},
                                   {{64, 8, 8, 96}, {0, 1, 2}, ReduceKind::sum, false},
                                   {{3, 700, 40}, {1}, ReduceKind::sum, false},
                                   {{3, 40, 500}, {0, 1}, ReduceKind::max, true},
                                   {{4, 300, 100}, {0, 1}, ReduceKind::min, true},
                                   // more rows than a tile holds (a BatchNorm's N*H*W): tiles of rows
                                   {{9, 70, 70, 8}, {0, 1, 2}, ReduceKind::sum, false},
                                   {{2, 200, 100, 4}, {0, 1, 2}, ReduceKind::max, true}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    Graph g;
    std::vector<NodeId> x = {g.parameter(DType::f32, c.shape), g.parameter(DType::f32, {c.shape.back()})};
    g.outputs = {reduced_chain(g, x, c.dims, c.kind)};
    REQUIRE(fusion_program(g.at(g.outputs[0])) != nullptr);  // the tiled path, not the stored one
    std::vector<Tensor> args = {random_tensor({DType::f32, c.shape}, rng), random_tensor({DType::f32, {c.shape.back()}}, rng)};
    CompileOptions ref;
    ref.reference_kernels = true;
    const Tensor want = Executable::compile(g, ref).run(args)[0];
    std::vector<Tensor> got;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      got.push_back(Executable::compile(g).run(args)[0]);
    }
    set_num_threads(0);
    INFO(shape_str(c.shape));
    for (const Tensor& t : got) CHECK(std::memcmp(t.raw(), got[0].raw(), t.bytes()) == 0);
    check_close(got[0], want, 1e-6, "reduce_fusion");
    if (c.reference_bits) CHECK(std::memcmp(got[0].raw(), want.raw(), want.bytes()) == 0);
  }
}

// log(1 + (x * broadcast(b))^2) reduced over `dims`, b along x's last dim: a body without a
// fusion program (log has no fused form), made in blocks.
NodeId reduced_log(Graph& g, const std::vector<NodeId>& x, std::vector<int64_t> dims, ReduceKind kind) {
  const Shape shape = g.at(x[0]).shape;
  auto body = std::make_shared<Graph>();
  NodeId px = body->parameter(DType::f32, shape);
  NodeId pb = body->parameter(DType::f32, {shape.back()});
  NodeId y = body->binary(Op::mul, px, body->broadcast(pb, shape, {int64_t(shape.size()) - 1}));
  body->outputs = {body->unary(Op::log, body->binary(Op::add, body->full(DType::f32, shape, 1), body->binary(Op::mul, y, y)))};
  Attrs a;
  a.set_body(body);
  a.set_dims(Dims(dims));
  a.axis = int64_t(kind);
  return g.add(Op::reduce_fusion, {x[0], x[1]}, a);
}

TEST_CASE("reduce_fusion never stores its operand, with or without a program; the same bits at any thread count") {
  // A full reduction (a summed outer product), long rows and short ones: the body's result is
  // made a tile at a time; a row longer than a tile has each tile's value in double, the
  // tiles combined in order.
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{300, 400}, {0, 1}}, {{2, 50000}, {1}}, {{3, 90, 1000}, {1, 2}}, {{500, 301}, {1}}, {{700, 96}, {0}}};
  std::mt19937 rng(7);
  for (const auto& [shape, dims] : cases)
    for (auto [kind, make] : {std::pair{ReduceKind::sum, &reduced_chain}, std::pair{ReduceKind::max, &reduced_chain},
                              std::pair{ReduceKind::sum, &reduced_log}}) {
      Graph g;
      std::vector<NodeId> x = {g.parameter(DType::f32, shape), g.parameter(DType::f32, {shape.back()})};
      g.outputs = {make(g, x, dims, kind)};
      REQUIRE((fusion_program(g.at(g.outputs[0])) == nullptr) == (make == &reduced_log));
      std::vector<Tensor> args = {random_tensor({DType::f32, shape}, rng), random_tensor({DType::f32, {shape.back()}}, rng)};
      CompileOptions ref;
      ref.reference_kernels = true;
      const Tensor want = Executable::compile(g, ref).run(args)[0];
      std::vector<Tensor> got;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        const Executable exe = Executable::compile(g);
        const int64_t before = tensor_memory().allocated;
        got.push_back(exe.run(args)[0]);
        INFO(shape_str(shape));
        CHECK(tensor_memory().allocated - before < int64_t(args[0].bytes()) / 4);
      }
      set_num_threads(0);
      INFO(shape_str(shape));
      for (const Tensor& t : got) CHECK(std::memcmp(t.raw(), got[0].raw(), t.bytes()) == 0);
      check_close(got[0], want, 1e-5, "reduce_fusion");
    }
}

TEST_CASE("the startup row check finds a row whose traits and fused form disagree") {
  for (int op = 0; op < kNumOps; ++op) CHECK(row_problem(op_info(Op(op))).empty());
  OpInfo row = op_info(Op::add);
  row.traits = 0;
  CHECK(row_problem(row) == "a fused form needs the elementwise trait");
  row = op_info(Op::neg);
  row.fused = op_info(Op::add).fused;
  CHECK(row_problem(row) == "the binary form on an op not of two operands");
  row.fused = {FusedForm::Kind::unary, nullptr, nullptr};
  CHECK(row_problem(row) == "the unary form needs its chunk loop, and only it");
  row = op_info(Op::dot);
  row.traits = kCheap;
  CHECK(row_problem(row) == "the cheap trait is for elementwise ops");
  row = op_info(Op::mul);
  row.traits |= kAcrossReplicas;
  CHECK(row_problem(row) == "an elementwise op folds like any other");
}

// erf(x) = 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x, by Simpson's rule in double.
double erf_by_integral(double x) {
  const int steps = 2000;
  const double h = x / steps;
  double sum = 1 + std::exp(-x * x);
  for (int i = 1; i < steps; ++i) sum += (i % 2 ? 4 : 2) * std::exp(-(i * h) * (i * h));
  return sum * h / 3 * 2 / std::sqrt(3.14159265358979323846);
}

namespace {
// exp_f32 called on one value at a time, out of any vectorised loop.
[[gnu::noinline]] float exp_alone(float x) { return exp_f32(x); }

// Distance in ulps of float `got` from the exact `want`, counted at want's float exponent
// (subnormals: in steps of the smallest one).
double ulps(float got, double want) {
  const double step = std::ldexp(1.0, std::max(std::ilogb(float(want)), -126) - 23);
  return std::fabs(double(got) - want) / step;
}

// The unary op's kernel (unoptimized: the op alone, no fusion) on the floats xs.
std::vector<float> run_unary(Op op, const std::vector<float>& xs) {
  Graph g;
  g.outputs = {g.unary(op, g.parameter(DType::f32, {int64_t(xs.size())}))};
  Tensor x(DType::f32, {int64_t(xs.size())});
  std::copy(xs.begin(), xs.end(), x.data<float>());
  CompileOptions plain;
  plain.optimize = false;
  const Tensor e = Executable::compile(g, plain).run(std::vector<Tensor>{x})[0];
  return std::vector<float>(e.data<float>(), e.data<float>() + e.size());
}
}  // namespace

// The exp and sigmoid kernels' element function (kernels/exp_f32.h): within 2 ulps of e^x over
// the floats whose e^x is finite (a subnormal result may be flushed to 0: the engine's threads
// flush them); 0, infinity and NaN where e^x is; and each lane of the vectorised kernel has the
// bits of the function called on its own.
TEST_CASE("exp_f32: within 2 ulps of e^x, the same bits vectorised as alone") {
  std::vector<float> xs;
  for (double x = -104; x <= 88.72; x += 0.00731) xs.push_back(float(x));
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.7228f, 88.73f, 89.0f, 1e4f, -87.3f, -103.9f, -104.5f, -1e4f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), std::nanf("")})
    xs.push_back(x);
  const std::vector<float> e = run_unary(Op::exp, xs);
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float got = e[i];
    INFO("x = " << xs[i] << ", got " << got);
    CHECK(std::memcmp(&got, &(const float&)exp_alone(xs[i]), sizeof got) == 0);
    const double want = std::exp(double(xs[i]));
    if (std::isnan(xs[i])) CHECK(std::isnan(got));
    else if (want > std::numeric_limits<float>::max()) CHECK(got == std::numeric_limits<float>::infinity());
    else if (want < std::ldexp(1.0, -150)) CHECK(got == 0);
    else if (want < std::numeric_limits<float>::min()) CHECK((got == 0 || ulps(got, want) <= 2));  // flushed, or not
    else if (ulps(got, want) > worst) worst = ulps(got, want), worst_x = xs[i];
  }
  INFO("worst at x = " << worst_x);
  CHECK(worst <= 2);
  CHECK(sigmoid_f32(0) == 0.5f);
  CHECK(sigmoid_f32(-std::numeric_limits<float>::infinity()) == 0);
  CHECK(sigmoid_f32(std::numeric_limits<float>::infinity()) == 1);
  CHECK(std::isnan(sigmoid_f32(std::nanf(""))));
}

namespace {
[[gnu::noinline]] float erf_alone(float x) { return erf_f32(x); }
[[gnu::noinline]] float tanh_alone(float x) { return tanh_f32(x); }

struct Worst {
  double ulps = 0;
  float at = 0;
};
// The kernel of `op`, an odd function, on xs: each element has the bits of its element function
// called alone, a NaN gives a NaN and +-0 itself; elsewhere its worst distance from `exact`.
Worst check_odd_kernel(Op op, const std::vector<float>& xs, float (*alone)(float), double (*exact)(double)) {
  const std::vector<float> got = run_unary(op, xs);
  Worst w;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float y = got[i], x = xs[i];
    INFO("x = " << x << ", got " << y);
    CHECK(std::memcmp(&y, &(const float&)alone(x), sizeof y) == 0);
    if (std::isnan(x)) CHECK(std::isnan(y));
    else if (x == 0) CHECK((y == 0 && std::signbit(y) == std::signbit(x)));
    else if (ulps(y, exact(double(x))) > w.ulps) w = {ulps(y, exact(double(x))), x};
  }
  return w;
}
void expect_one_fusion_with_same_bits(const Graph& g, const std::vector<Tensor>& args);  // below
}  // namespace

// The erf kernel's element function (kernels/erf_f32.h): within 1.5 ulps of erf over [-6, 6]
// (both of its parts and where they meet at 1, the saturation at 4), -0, NaN and the
// infinities as erf has them; each lane of the vectorised kernel has the bits of the function
// called on its own; a fused GELU (x/2 (1 + erf(x / sqrt 2))) has the unfused kernels' bits.
TEST_CASE("erf_f32: within 1.5 ulps of erf, the same bits vectorised as alone and fused") {
  std::vector<float> xs;
  for (double x = -6; x <= 6; x += 0.000731) xs.push_back(float(x));
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-4f, 0.99999994f, 1.0f, 1.00000012f, -1.0f, 3.99999976f, 4.0f, -4.0f,
                  1e30f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), std::nanf("")})
    xs.push_back(x);
  const Worst w = check_odd_kernel(Op::erf, xs, erf_alone, [](double x) { return std::erf(x); });
  INFO("worst at x = " << w.at);
  CHECK(w.ulps <= 1.5);
  CHECK(erf_f32(std::numeric_limits<float>::infinity()) == 1);
  CHECK(erf_f32(-std::numeric_limits<float>::infinity()) == -1);

  Graph gelu;
  NodeId v = gelu.parameter(DType::f32, {3000});
  auto scalar = [&](double c) { return gelu.full(DType::f32, {3000}, c); };
  NodeId inner = gelu.unary(Op::erf, gelu.binary(Op::mul, v, scalar(0.7071067811865476)));
  gelu.outputs = {gelu.binary(Op::mul, gelu.binary(Op::mul, v, scalar(0.5)), gelu.binary(Op::add, inner, scalar(1)))};
  Tensor in(DType::f32, {3000});
  for (int64_t i = 0; i < 3000; ++i) in.set(i, (double(i) - 1500) / 250);
  expect_one_fusion_with_same_bits(gelu, {in});
}

// The tanh kernel's element function (kernels/tanh_f32.h): within 1.5 ulps of tanh over [-10, 10]
// (both of its parts and where they meet at 1), +-0, NaN, the infinities and the saturation as
// tanh has them (1 from 9.011; e^2|x| stops at e^19); each lane of the vectorised kernel has the
// bits of the function called on its own; a fused tanh GELU (GPT-2's) has the unfused kernels' bits.
TEST_CASE("tanh_f32: within 1.5 ulps of tanh, the same bits vectorised as alone and fused") {
  std::vector<float> xs;
  for (double x = -10; x <= 10; x += 0.000731) xs.push_back(float(x));
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, 1e-4f, 0.99999994f, 1.0f, 1.00000012f, -1.0f, 9.01f, 9.02f,
                  9.5f, 9.6f, 44.3f, 44.5f, -50.0f, 1e30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::nanf("")})
    xs.push_back(x);
  const Worst w = check_odd_kernel(Op::tanh, xs, tanh_alone, [](double x) { return std::tanh(x); });
  INFO("worst at x = " << w.at);
  CHECK(w.ulps <= 1.5);
  CHECK(tanh_f32(std::numeric_limits<float>::infinity()) == 1);
  CHECK(tanh_f32(-std::numeric_limits<float>::infinity()) == -1);

  Graph gelu;  // x/2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  NodeId v = gelu.parameter(DType::f32, {3000});
  auto scalar = [&](double c) { return gelu.full(DType::f32, {3000}, c); };
  NodeId cube = gelu.binary(Op::mul, gelu.binary(Op::mul, v, v), v);
  NodeId inner = gelu.binary(Op::mul, gelu.binary(Op::add, v, gelu.binary(Op::mul, cube, scalar(0.044715))), scalar(0.7978845608));
  gelu.outputs = {gelu.binary(Op::mul, gelu.binary(Op::mul, v, scalar(0.5)),
                              gelu.binary(Op::add, gelu.unary(Op::tanh, inner), scalar(1)))};
  Tensor in(DType::f32, {3000});
  for (int64_t i = 0; i < 3000; ++i) in.set(i, (double(i) - 1500) / 250);
  expect_one_fusion_with_same_bits(gelu, {in});
}

TEST_CASE("erf: its kernels agree with the integral that defines it") {
  Tensor x(DType::f32, {9});
  const double values[] = {-3, -1.5, -0.5, -1e-3, 0, 0.25, 0.7071067811865476, 2, 4};
  for (int64_t i = 0; i < 9; ++i) x.set(i, values[i]);
  Graph g;
  g.outputs = {g.unary(Op::erf, g.parameter(DType::f32, {9}))};
  for (bool reference : {true, false}) {
    CompileOptions options;
    options.reference_kernels = reference;
    Tensor y = Executable::compile(g, options).run(std::vector<Tensor>{x})[0];
    for (int64_t i = 0; i < 9; ++i) {
      INFO("erf(" << values[i] << ") = " << y.get(i));
      CHECK(std::fabs(y.get(i) - erf_by_integral(values[i])) <= 1e-6);
    }
  }
}

namespace {
// g compiles to one fusion node that the fusion program takes, with the unfused kernels' bits on
// `args`.
void expect_one_fusion_with_same_bits(const Graph& g, const std::vector<Tensor>& args) {
  Executable fused = Executable::compile(g);
  CompileOptions plain_options;
  plain_options.optimize = false;
  Executable plain = Executable::compile(g, plain_options);
  int fusions = 0;
  for (const Node& n : fused.graph().nodes) {
    if (n.op != Op::fusion) continue;
    ++fusions;
    CHECK(FusionProgram::compile(*n.attrs.body()).has_value());
  }
  CHECK(fusions == 1);
  Tensor a = fused.run(args)[0], b = plain.run(args)[0];
  CHECK(std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}
}  // namespace

TEST_CASE("erf fuses with its neighbours, and the fusion program gives the unfused kernel's bits") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {3, 100});
  NodeId half = g.full(DType::f32, {3, 100}, 0.5);
  g.outputs = {g.binary(Op::mul, g.binary(Op::mul, half, x), g.unary(Op::erf, g.binary(Op::mul, x, half)))};
  std::mt19937 rng(3);
  expect_one_fusion_with_same_bits(g, {random_tensor({DType::f32, {3, 100}}, rng)});
}

// Lua's float %, in double: fmod moved into b's sign (exact at any quotient).
double lua_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && (m < 0) != (b < 0)) m += b;
  return m;
}

TEST_CASE("mod is Lua's float %, exact at large quotients, on every kernel and fused") {
  // f32 values (a float's fmod is exact, so the double reference rounds to the same float),
  // quotients up to 1e20, signs mixed, and the special cases: b = 0, infinite a or b, NaN, -0.
  const float inf = INFINITY, nan = NAN;
  const std::vector<std::pair<float, float>> pairs = {
      {5.5f, 2}, {-5.5f, 2}, {5.5f, -2}, {-5.5f, -2}, {1e20f, 3}, {-1e20f, 3}, {1e20f, -3},
      {3e9f, 7}, {16777217.0f, 0.1f}, {123456.78f, 1e-3f}, {-123456.78f, 1e-3f}, {1e-30f, 1e30f},
      {-1e-30f, 1e30f}, {7, 7}, {-7, 7}, {0, 3}, {-0.0f, 3}, {0, -3}, {5, 0}, {-5, 0}, {5, inf},
      {-5, inf}, {5, -inf}, {-5, -inf}, {0, inf}, {-0.0f, -inf}, {inf, 3}, {-inf, 3}, {nan, 3}, {3, nan}};
  const int64_t n = int64_t(pairs.size());
  Tensor a(DType::f32, {n}), b(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = pairs[size_t(i)].first, b.data<float>()[i] = pairs[size_t(i)].second;
  Graph g;
  const NodeId pa = g.parameter(DType::f32, {n});
  g.outputs = {g.binary(Op::mod, pa, g.parameter(DType::f32, {n}))};
  std::vector<Tensor> results;
  for (bool reference : {true, false}) {
    CompileOptions options;
    options.reference_kernels = reference;
    results.push_back(Executable::compile(g, options).run(std::vector<Tensor>{a, b})[0]);
  }
  for (int64_t i = 0; i < n; ++i) {
    const float x = a.data<float>()[i], y = b.data<float>()[i];
    const float want = float(lua_mod(x, y)), got = results[0].data<float>()[i];
    INFO(x << " % " << y << " = " << got << ", Lua's " << want);
    if (want != want) CHECK(got != got);
    else CHECK((got == want && std::signbit(got) == std::signbit(want)));
    CHECK(std::memcmp(&got, results[1].data<float>() + i, 4) == 0);
  }
  // The old a - floor(a/b)*b lost these: 1e20 % 3 is 2 (1e20f is 100000002004087734272).
  CHECK(results[1].data<float>()[4] == float(lua_mod(1e20f, 3)));

  // Fused with its neighbours: the fusion program's bits are the unfused kernel's.
  Graph h;
  NodeId x = h.parameter(DType::f32, {3, 100});
  NodeId y = h.parameter(DType::f32, {3, 100});
  NodeId three = h.full(DType::f32, {3, 100}, 3);
  h.outputs = {h.binary(Op::add, h.binary(Op::mod, h.binary(Op::mul, x, three), y), x)};
  std::mt19937 rng(5);
  expect_one_fusion_with_same_bits(h, {random_tensor({DType::f32, {3, 100}}, rng), random_tensor({DType::f32, {3, 100}}, rng)});
}

// The input gradient of a strided conv runs on oneDNN's input-gradient primitive (checked),
// not on the patch kernels that multiply the dilation's zeros: where products do not take the
// packed kernel (where they do, a 1x1 window's is a product placed where it goes).
TEST_CASE("a strided conv's input gradient takes a checked oneDNN primitive") {
  if (!onednn_available()) return;
  const PackedGemmFor onednn_products(PackedGemm::never);
  const size_t created = onednn_primitives_created(), rejected = onednn_primitives_rejected();
  Graph g;
  NodeId dy = g.parameter(DType::f32, {3, 7, 7, 24}), w = g.parameter(DType::f32, {1, 1, 40, 24});
  g.outputs = {conv_input_grad(g, dy, w, window({2, 2}, {0, 0}, {0, 0}), {3, 14, 14, 40}, 1)};
  CompileOptions fast, reference;
  reference.reference_kernels = true;
  std::mt19937 rng(5);
  const std::vector<Tensor> args = {random_tensor({DType::f32, {3, 7, 7, 24}}, rng),
                                    random_tensor({DType::f32, {1, 1, 40, 24}}, rng)};
  Tensor out = Executable::compile(g, fast).run(args)[0];
  check_close(out, Executable::compile(g, reference).run(args)[0], 1e-5, "input gradient");
  CHECK(onednn_primitives_created() > created);
  CHECK(onednn_primitives_rejected() == rejected);
}

// Depthwise (groups = channels) and grouped convs must run on oneDNN's primitives, whose
// self-check against sums in double they pass, not on the per-group fallback.
TEST_CASE("depthwise and grouped convs take checked oneDNN primitives") {
  if (!onednn_available()) return;
  const size_t rejected = onednn_primitives_rejected();
  for (int64_t groups : {16, 4}) {
    ConvShape s{.n = 3, .h = 12, .w = 12, .ci = 16, .kh = 3, .kw = 3, .co = 32, .ho = 6, .wo = 6,
                .stride = {2, 2}, .pad_lo = {1, 1}, .pad_hi = {0, 0}, .dilation = {1, 1}, .groups = groups};
    std::vector<float> x(size_t(s.n * s.h * s.w * s.ci), 0.5f), f(size_t(9 * s.ci / groups * s.co), 0.25f);
    std::vector<float> y(size_t(s.n * s.ho * s.wo * s.co)), df(f.size());
    CHECK(onednn_conv(s, x.data(), f.data(), y.data()));
    CHECK(onednn_conv_filter_grad(s, x.data(), y.data(), df.data()));
  }
  CHECK(onednn_primitives_rejected() == rejected);
}

namespace {
// The fast kernel's max or min over the rows of x [rows, len] has the reference's bits.
void check_row_reduce_bits(const Tensor& x, ReduceKind kind) {
  const int64_t rows = x.shape()[0], len = x.shape()[1];
  Graph g;
  g.outputs = {g.reduce(g.parameter(DType::f32, {rows, len}), {1}, kind)};
  CompileOptions fast, reference;
  fast.optimize = reference.optimize = false;
  reference.reference_kernels = true;
  const Tensor got = Executable::compile(g, fast).run(std::vector<Tensor>{x})[0];
  const Tensor want = Executable::compile(g, reference).run(std::vector<Tensor>{x})[0];
  INFO(rows << " rows of " << len << (kind == ReduceKind::max ? ", max" : ", min"));
  CHECK(std::memcmp(got.raw(), want.raw(), size_t(rows) * 4) == 0);
}
}  // namespace

// A row's maximum or minimum (the last axis) is one of its values: the fast kernel takes it in
// f32, and gives the reference's bits, the NaN it returns (the last one of the row, a signalling
// one quietened), the sign of a zero, subnormals (flushed, as every kernel flushes them) and the
// infinities included, for rows that fill the 8-row blocks and for the rest (the fast kernel
// takes operands of 4096 elements and more).
TEST_CASE("max and min over the last axis give the reference's bits: NaNs, signed zeros, subnormals, infinities") {
  using Limits = std::numeric_limits<float>;
  const float inf = Limits::infinity(), nan = Limits::quiet_NaN(), snan = Limits::signaling_NaN();
  const float values[] = {0.0f,   -0.0f, 1.5f,   -1.5f, inf,   -inf,   nan,    -nan,
                          3.0f,   3.0f,  -7.0f,  0.0f,  -0.0f, 2.0f,   1e-40f, -1e-40f,
                          -3e-41f, Limits::denorm_min(), snan, -snan};
  std::mt19937 rng(17);
  for (int64_t len : {int64_t(1), int64_t(7), int64_t(8), int64_t(13), int64_t(128)})
    for (ReduceKind kind : {ReduceKind::max, ReduceKind::min}) {
      const int64_t rows = 4096 / len + 5;
      Tensor x(DType::f32, {rows, len});
      for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = values[rng() % std::size(values)];
      check_row_reduce_bits(x, kind);
    }
}

// Rows of 16 elements and more are taken lane by lane where the result is a nonzero number and
// in order otherwise. Rows of ordinary values (ties, zeros among them), rows whose extreme is a
// zero of either sign or a subnormal, rows with NaNs and rows with infinities, mixed within
// blocks of eight rows, at lengths that leave 8-lane and single-element tails: the reference's
// bits.
TEST_CASE("max and min of long rows, lane by lane or in order, give the reference's bits") {
  using Limits = std::numeric_limits<float>;
  const float zeros[] = {0.0f, -0.0f, 1e-40f, -1e-40f, Limits::denorm_min()};
  const float nans[] = {Limits::quiet_NaN(), -Limits::quiet_NaN(), Limits::signaling_NaN()};
  std::mt19937 rng(23);
  for (int64_t len : {int64_t(16), int64_t(24), int64_t(40), int64_t(100), int64_t(128)})
    for (ReduceKind kind : {ReduceKind::max, ReduceKind::min}) {
      const float away = kind == ReduceKind::max ? -1.0f : 1.0f;  // the side the extreme is not on
      const int64_t rows = 4096 / len + 11;
      Tensor x(DType::f32, {rows, len});
      for (int64_t r = 0; r < rows; ++r) {
        float* row = x.data<float>() + r * len;
        const uint32_t mode = rng() % 4;
        for (int64_t i = 0; i < len; ++i) row[i] = float(int(rng() % 9) - 4) * 0.75f;
        if (mode == 1)  // the extreme is zero-valued: zeros and subnormals of both signs
          for (int64_t i = 0; i < len; ++i) row[i] = rng() % 2 ? zeros[rng() % std::size(zeros)] : away * float(1 + rng() % 3);
        if (mode == 2)
          for (uint32_t n = 1 + rng() % 2; n > 0; --n) row[rng() % len] = nans[rng() % std::size(nans)];
        if (mode == 3) row[rng() % len] = rng() % 2 ? Limits::infinity() : -Limits::infinity();
      }
      check_row_reduce_bits(x, kind);
    }
}

// The unfused attention the op replaces: scores, the causal mask as -1e9 added, the bias
// added, the softmax (max, exp, sum, divide), the dropout's select, the product with v.
static NodeId unfused_attention(Graph& g, NodeId q, NodeId k, NodeId v, NodeId keep, double scale,
                                std::optional<NodeId> bias) {
  NodeId scores = g.dot(q, k, false, true);
  const Shape s = g.at(scores).shape;
  const int64_t rank = int64_t(s.size());
  NodeId row = g.iota(DType::i32, s, rank - 2), col = g.iota(DType::i32, s, rank - 1);
  NodeId masked = g.select(g.compare(Cmp::le, col, row), g.full(DType::f32, s, 0), g.full(DType::f32, s, -1e9));
  scores = g.binary(Op::add, scores, masked);
  if (bias) scores = g.binary(Op::add, scores, g.broadcast_to(*bias, s));
  Dims reduced = s;
  reduced.back() = 1;
  auto row_wise = [&](NodeId x, ReduceKind kind) { return g.broadcast_to(g.reshape(g.reduce(x, {rank - 1}, kind), reduced), s); };
  NodeId e = g.unary(Op::exp, g.binary(Op::sub, scores, row_wise(scores, ReduceKind::max)));
  NodeId p = g.binary(Op::div, e, row_wise(e, ReduceKind::sum));
  p = g.select(keep, g.binary(Op::mul, p, g.full(DType::f32, s, scale)), g.full(DType::f32, s, 0));
  return g.dot(p, v);
}

TEST_CASE("attention gives the unfused graph's values and gradients, the same bits at any thread count") {
  // More queries than keys and fewer (the causal triangle then ends inside the rows or past
  // them), rows past one block of 64; without a bias, with one row of it per sequence (a
  // padding mask) and with one per query of each head.
  for (auto [t, s] : {std::pair<int64_t, int64_t>{70, 45}, {33, 70}})
  for (const Shape& bias_shape : {Shape{}, Shape{2, 1, 1, s}, Shape{1, 3, t, s}}) {
  CAPTURE(t);
  CAPTURE(s);
  CAPTURE(bias_shape.size());
  std::mt19937 rng(3);
  std::vector<Input> inputs = {{DType::f32, {2, 3, t, 8}}, {DType::f32, {2, 3, s, 8}},
                               {DType::f32, {2, 3, s, 6}}, {DType::boolean, {2, 3, t, s}, Fill::small_int}};
  if (!bias_shape.empty()) inputs.push_back({DType::f32, bias_shape});
  std::vector<Tensor> args;
  for (const Input& in : inputs) args.push_back(random_tensor(in, rng));
  auto build = [&](bool fused) {
    Graph g;
    std::vector<NodeId> p;
    for (const Input& in : inputs) p.push_back(g.parameter(in.dtype, in.shape));
    const std::optional<NodeId> bias = p.size() > 4 ? std::optional<NodeId>(p[4]) : std::nullopt;
    NodeId out = fused ? g.attention(p[0], p[1], p[2], p[3], 1.25, true, bias)
                       : unfused_attention(g, p[0], p[1], p[2], p[3], 1.25, bias);
    Tensor w = random_tensor({DType::f32, g.at(out).shape}, rng);
    NodeId loss = g.reduce(g.binary(Op::mul, out, g.constant(w)), {0, 1, 2, 3}, ReduceKind::sum);
    const std::vector<NodeId> wrt = {p[0], p[1], p[2]};
    std::vector<NodeId> grads = gradients(g, loss, wrt);
    g.outputs = {out, grads[0], grads[1], grads[2]};
    return g;
  };
  std::mt19937 same_weights = rng;
  Executable fused = Executable::compile(build(true));
  rng = same_weights;
  Executable unfused = Executable::compile(build(false));
  const std::vector<Tensor> got = run_on_1_and_2_threads(fused, args), want = unfused.run(args);
  const char* names[] = {"output", "dq", "dk", "dv"};
  for (size_t i = 0; i < 4; ++i) check_close(got[i], want[i], 1e-5, names[i]);
  }
}

TEST_CASE("attention's score bias: its shapes are checked, its gradient is an error, not zeros") {
  Graph g;
  NodeId q = g.parameter(DType::f32, {2, 3, 5, 4}), k = g.parameter(DType::f32, {2, 3, 6, 4}),
         v = g.parameter(DType::f32, {2, 3, 6, 3});
  for (const Shape& bad : {Shape{2, 3, 5, 5}, Shape{2, 2, 1, 6}, Shape{2, 6}, Shape{2, 3, 4, 6}}) {
    CAPTURE(bad.size());
    NodeId bias = g.parameter(DType::f32, bad);
    CHECK_THROWS_WITH_AS(g.attention(q, k, v, std::nullopt, 1, false, bias),
                         doctest::Contains("the score bias must be f32 [..., T or 1, S]"), Error);
  }
  NodeId i32_bias = g.parameter(DType::i32, {2, 1, 1, 6});
  CHECK_THROWS_WITH_AS(g.attention(q, k, v, std::nullopt, 1, false, i32_bias), doctest::Contains("score bias"), Error);
  NodeId keep = g.parameter(DType::boolean, {2, 3, 5, 6});
  CHECK_THROWS_WITH_AS(g.add(Op::attention, {q, k, v, keep, keep}), doctest::Contains("score bias must be f32"), Error);
  NodeId bias = g.parameter(DType::f32, {2, 1, 1, 6});
  NodeId y = g.reduce(g.attention(q, k, v, std::nullopt, 1, false, bias), {0, 1, 2, 3}, ReduceKind::sum);
  const std::vector<NodeId> wrt_q = {q}, wrt_bias = {bias};
  CHECK_NOTHROW(gradients(g, y, wrt_q));
  CHECK_THROWS_WITH_AS(gradients(g, y, wrt_bias), doctest::Contains("the gradient of the score bias is not computed"), Error);
}

TEST_CASE("attention: no keys give zeros; a gradient of its gradient is an error, not zeros") {
  Graph g;
  NodeId q = g.parameter(DType::f32, {2, 3, 4}), k = g.parameter(DType::f32, {2, 0, 4}), v = g.parameter(DType::f32, {2, 0, 5});
  g.outputs = {g.attention(q, k, v)};
  Tensor qt(DType::f32, {2, 3, 4}), kt(DType::f32, {2, 0, 4}), vt(DType::f32, {2, 0, 5});
  for (int64_t i = 0; i < qt.size(); ++i) qt.set(i, 0.5);
  const std::vector<Tensor> args = {qt, kt, vt};
  const Tensor out = Executable::compile(g).run(args)[0];
  for (int64_t i = 0; i < out.size(); ++i) CHECK(out.get(i) == 0);

  Graph h;
  NodeId x = h.parameter(DType::f32, {1, 4, 3});
  NodeId y = h.reduce(h.attention(x, x, x), {0, 1, 2}, ReduceKind::sum);
  const std::vector<NodeId> wrt = {x};
  NodeId dx = gradients(h, y, wrt)[0];
  NodeId penalty = h.reduce(h.binary(Op::mul, dx, dx), {0, 1, 2}, ReduceKind::sum);
  CHECK_THROWS_WITH_AS(gradients(h, penalty, wrt), doctest::Contains("second-order gradient"), Error);
}
