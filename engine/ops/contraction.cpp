// Contraction and reduction rows: dot (batched matmul), reduce (sum/max/min), argmax.
#include <Eigen/Core>
#include <algorithm>
#include <limits>

#include "ops/kernel_util.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

// ---- dot: [B..., M, K] x [B..., K, N] -> [B..., M, N], last two dims transposed by ta/tb ----
struct DotDims {
  int64_t batch, m, k, n;
};

DotDims dot_dims(const Shape& a, const Shape& b, bool ta, bool tb) {
  size_t r = a.size();
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) batch *= a[i];
  int64_t m = ta ? a[r - 1] : a[r - 2], k = ta ? a[r - 2] : a[r - 1];
  int64_t n = tb ? b[r - 2] : b[r - 1];
  return {batch, m, k, n};
}

std::string shape_dot(const Graph& g, Node& n) {
  const Node& a = g.at(n.in.at(0));
  const Node& b = g.at(n.in.at(1));
  const size_t r = a.shape.size();
  bool ok = r >= 2 && b.shape.size() == r && a.dtype == b.dtype && is_float(a.dtype) &&
            std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin());
  if (ok) {
    int64_t kb = n.attrs.flag_b ? b.shape[r - 1] : b.shape[r - 2];
    ok = dot_dims(a.shape, b.shape, n.attrs.flag_a, n.attrs.flag_b).k == kb;
  }
  if (!ok)
    return "dot needs [...,M,K] x [...,K,N] floating-point operands with equal batch dims, got " +
           operands_str(g, n) + (n.attrs.flag_a ? " (lhs transposed)" : "") + (n.attrs.flag_b ? " (rhs transposed)" : "");
  DotDims d = dot_dims(a.shape, b.shape, n.attrs.flag_a, n.attrs.flag_b);
  n.dtype = a.dtype;
  n.shape.assign(a.shape.begin(), a.shape.end() - 2);
  n.shape.push_back(d.m);
  n.shape.push_back(d.n);
  return "";
}

void ref_dot(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  const bool ta = node.attrs.flag_a, tb = node.attrs.flag_b;
  DotDims d = dot_dims(in[0]->shape(), in[1]->shape(), ta, tb);
  const float* A = in[0]->data<float>();
  const float* B = in[1]->data<float>();
  float* C = out.data<float>();
  for (int64_t p = 0; p < d.batch; ++p) {
    const float* a = A + p * d.m * d.k;
    const float* b = B + p * d.k * d.n;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < d.k; ++k)
          s += double(ta ? a[k * d.m + i] : a[i * d.k + k]) * double(tb ? b[j * d.k + k] : b[k * d.n + j]);
        C[(p * d.m + i) * d.n + j] = float(s);
      }
  }
}

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;
using Mat = Eigen::Map<RowMajor>;

// Output columns are cut into fixed-width panels so the arithmetic of each element is the
// same whatever the number of threads.
constexpr int64_t kPanel = 128;

template <class LA, class LB>
void gemm_panels(const LA& a, const LB& b, Mat c) {
  const int64_t n = c.cols(), panels = (n + kPanel - 1) / kPanel;
  parallel_for(panels, [&](int64_t p) {
    int64_t j0 = p * kPanel, w = std::min(kPanel, n - j0);
    c.middleCols(j0, w).noalias() = a * b.middleCols(j0, w);
  });
}

void fast_dot(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  if (out.dtype() != DType::f32) return ref_dot(node, in, out);
  const bool ta = node.attrs.flag_a, tb = node.attrs.flag_b;
  DotDims d = dot_dims(in[0]->shape(), in[1]->shape(), ta, tb);
  for (int64_t p = 0; p < d.batch; ++p) {
    ConstMat a(in[0]->data<float>() + p * d.m * d.k, ta ? d.k : d.m, ta ? d.m : d.k);
    ConstMat b(in[1]->data<float>() + p * d.k * d.n, tb ? d.n : d.k, tb ? d.k : d.n);
    Mat c(out.data<float>() + p * d.m * d.n, d.m, d.n);
    if (!ta && !tb) gemm_panels(a, b, c);
    else if (ta && !tb) gemm_panels(a.transpose(), b, c);
    else if (!ta && tb) gemm_panels(a, b.transpose(), c);
    else gemm_panels(a.transpose(), b.transpose(), c);
  }
}

// C = op(A) op(B): dA and dB are dots of the output gradient with the other operand.
void grad_dot(GradContext& c) {
  auto& g = c.g;
  const bool ta = c.n().attrs.flag_a, tb = c.n().attrs.flag_b;
  NodeId a = c.in(0), b = c.in(1), gy = c.out_grad;
  if (c.needs(0)) c.give(0, ta ? g.dot(b, gy, tb, true) : g.dot(gy, b, false, !tb));
  if (c.needs(1)) c.give(1, tb ? g.dot(gy, a, true, ta) : g.dot(a, gy, !ta, false));
}

Cost cost_dot(const Graph& g, const Node& n) {
  const Node& a = g.at(n.in[0]);
  DotDims d = dot_dims(a.shape, g.at(n.in[1]).shape, n.attrs.flag_a, n.attrs.flag_b);
  Cost c = movement_cost(g, n);
  c.flops = 2.0 * double(d.batch * d.m * d.n * d.k);
  return c;
}

// ---- reduce over a sorted axis list ----
std::string shape_reduce(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  if (!valid_axes(n.attrs.dims, x.shape.size()) || n.attrs.axis < 0 || n.attrs.axis > 2)
    return "reduce: bad axes " + shape_str(n.attrs.dims) + " for " + type_of(g, n.in[0]);
  if (x.dtype == DType::boolean) return "reduce is not defined on bool; cast to i32 first";
  n.dtype = x.dtype;
  for (size_t i = 0; i < x.shape.size(); ++i)
    if (std::find(n.attrs.dims.begin(), n.attrs.dims.end(), int64_t(i)) == n.attrs.dims.end())
      n.shape.push_back(x.shape[i]);
  return "";
}

// Maps each operand element to its output element: strides of the output placed on the
// kept dims, zero on the reduced ones.
std::vector<int64_t> reduce_strides(const Shape& in, const std::vector<int64_t>& axes) {
  Shape kept;
  for (size_t i = 0; i < in.size(); ++i)
    if (std::find(axes.begin(), axes.end(), int64_t(i)) == axes.end()) kept.push_back(in[i]);
  auto ks = strides_of(kept);
  std::vector<int64_t> st(in.size(), 0);
  for (size_t i = 0, j = 0; i < in.size(); ++i)
    if (std::find(axes.begin(), axes.end(), int64_t(i)) == axes.end()) st[i] = ks[j++];
  return st;
}

template <class F>
void for_each_mapped(const Shape& shape, const std::vector<int64_t>& out_strides, F f) {
  const int64_t total = num_elements(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t o = 0;
  for (int64_t i = 0; i < total; ++i) {
    f(i, o);
    for (size_t d = shape.size(); d-- > 0;) {
      o += out_strides[d];
      if (++idx[d] < shape[d]) break;
      o -= out_strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

void ref_reduce(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const ReduceKind kind = ReduceKind(n.attrs.axis);
  const double init = kind == ReduceKind::sum   ? 0.0
                      : kind == ReduceKind::max ? -std::numeric_limits<double>::infinity()
                                                : std::numeric_limits<double>::infinity();
  std::vector<double> acc(size_t(out.size()), init);
  auto st = reduce_strides(x.shape(), n.attrs.dims);
  dispatch(x.dtype(), [&]<class T>() {
    const T* a = x.data<T>();
    for_each_mapped(x.shape(), st, [&](int64_t i, int64_t o) {
      double v = double(a[i]);
      double& r = acc[size_t(o)];
      if (kind == ReduceKind::sum) r += v;
      else if (kind == ReduceKind::max) r = (v > r || v != v) ? v : r;
      else r = (v < r || v != v) ? v : r;
    });
  });
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, acc[size_t(i)]);
}

void grad_reduce(GradContext& c) {
  auto& g = c.g;
  const Node& x = g.at(c.in(0));
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < int64_t(x.shape.size()); ++i)
    if (std::find(c.n().attrs.dims.begin(), c.n().attrs.dims.end(), i) == c.n().attrs.dims.end()) kept.push_back(i);
  NodeId spread = g.broadcast(c.out_grad, x.shape, kept);
  if (ReduceKind(c.n().attrs.axis) == ReduceKind::sum) return c.give(0, spread);
  NodeId hit = g.compare(Cmp::eq, c.in(0), g.broadcast(c.node, x.shape, kept));
  c.give(0, g.select(hit, spread, g.full(x.dtype, x.shape, 0)));
}

// ---- argmax along one axis (first maximum wins) ----
std::string shape_argmax(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  if (n.attrs.axis < 0 || n.attrs.axis >= int64_t(x.shape.size()))
    return "argmax: axis out of range for " + type_of(g, n.in[0]);
  n.dtype = DType::i32;
  n.shape = x.shape;
  n.shape.erase(n.shape.begin() + n.attrs.axis);
  return "";
}

void ref_argmax(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const size_t axis = size_t(n.attrs.axis);
  const int64_t len = x.shape()[axis], inner = strides_of(x.shape())[axis];
  const int64_t outer = len ? x.size() / (len * inner) : 0;
  int32_t* o = out.data<int32_t>();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b) {
      int64_t best = 0;
      double best_v = x.get(a * len * inner + b);
      for (int64_t k = 1; k < len; ++k) {
        double v = x.get((a * len + k) * inner + b);
        if (v > best_v) best_v = v, best = k;
      }
      o[a * inner + b] = int32_t(best);
    }
}

Cost cost_reduce(const Graph& g, const Node& n) {
  Cost c = movement_cost(g, n);
  c.flops = double(num_elements(g.at(n.in[0]).shape));
  return c;
}

}  // namespace

extern const OpInfo dot_row = {Op::dot, shape_dot, ref_dot, fast_dot, grad_dot, cost_dot};
extern const OpInfo reduce_row = {Op::reduce, shape_reduce, ref_reduce, nullptr, grad_reduce, cost_reduce};
extern const OpInfo argmax_row = {Op::argmax, shape_argmax, ref_argmax, nullptr, nullptr, cost_reduce};

}  // namespace tpu
