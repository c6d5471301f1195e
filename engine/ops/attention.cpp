// Scaled dot-product attention as one op, and its gradient. For each batch element (every dim
// before the last two) with q [T, D], k [S, D], v [S, E]:
//   p   = softmax over s of q k^T + bias (with `causal`, over s <= t only: the rest weigh 0),
//   out = (p * m) v, m = keep ? scale : 0 from a dropout keep mask [T, S] (else m = 1).
// After q, k, v (and the gradient's dout) come, each optional and in this order, the keep mask
// (bool [..., T, S]) and the score bias (f32 [..., T or 1, S], each batch dim its own or 1:
// a padding mask as 0 / -1e9, broadcast over heads and queries, is a row per sequence).
// The kernels take a head's rows of p in blocks, use them and drop them: the [T, S]
// probabilities never reach memory (in a small transformer they were several passes of 17 MB a
// step), and the gradient recomputes them from q and k. The arithmetic is f32 for f32 and bf16
// operands; a bf16 result is rounded once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/convert.h"
#include "kernels/exp_f32.h"
#include "kernels/register_tile.h"
#include "ops/kernel_util.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

namespace rt = register_tile;

// Query rows per block: a block's scores (kRows x S floats) stay in the core's caches.
constexpr int64_t kRows = 64;

struct AttentionDims {
  int64_t heads = 1, t = 0, s = 0, d = 0, e = 0;
  int64_t grad_size() const { return t * d + s * d + s * e; }  // attention_grad's row: dq, dk, dv
};

AttentionDims dims_of(const Shape& q, const Shape& k, const Shape& v) {
  AttentionDims r;
  const size_t rank = q.size();
  for (size_t i = 0; i + 2 < rank; ++i) r.heads *= q[i];
  r.t = q[rank - 2], r.d = q[rank - 1], r.s = k[rank - 2], r.e = v[rank - 1];
  return r;
}

AttentionDims dims_of(const Graph& g, const Node& n) {
  return dims_of(g.at(n.in[0]).shape, g.at(n.in[1]).shape, g.at(n.in[2]).shape);
}

Shape batch_dims(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// Where the optional operands are, from `first` on (npos: absent): a bool one is the keep
// mask, the one after it (or a first that is not bool) the bias.
struct OptionalOperands {
  static constexpr size_t npos = size_t(-1);
  size_t keep = npos, bias = npos;
};
template <class IsBool>
OptionalOperands optional_operands(size_t first, size_t count, IsBool is_bool) {
  OptionalOperands r;
  if (first < count && is_bool(first)) r.keep = first++;
  if (first < count) r.bias = first;
  return r;
}
size_t first_optional(Op op) { return op == Op::attention ? 3 : 4; }
OptionalOperands optional_operands(const Graph& g, const Node& n) {
  return optional_operands(first_optional(n.op), n.in.size(),
                           [&](size_t i) { return g.at(n.in[i]).dtype == DType::boolean; });
}
OptionalOperands optional_operands(const Node& n, std::span<const Tensor* const> in) {
  return optional_operands(first_optional(n.op), in.size(), [&](size_t i) { return in[i]->dtype() == DType::boolean; });
}

Shape with_tail(Shape s, std::initializer_list<int64_t> tail) {
  for (int64_t x : tail) s.push_back(x);
  return s;
}

// "" when operand `i` has the type `want`, else the problem.
std::string expect(const Graph& g, const Node& n, size_t i, const char* what, DType dtype, const Shape& shape) {
  const Node& x = g.at(n.in[i]);
  if (x.dtype == dtype && x.shape == shape) return "";
  return std::string(op_name(n.op)) + ": " + what + " must be " + type_str(dtype, shape) + ", got " +
         type_of(g, n.in[i]) + " (operands " + operands_str(g, n) + ")";
}

// "" when the bias (operand i) is f32 [..., T or 1, S] over q's batch dims (each its own or 1).
std::string check_bias(const Graph& g, const Node& n, size_t i) {
  const Shape &q = g.at(n.in[0]).shape, &k = g.at(n.in[1]).shape, &b = g.at(n.in[i]).shape;
  const size_t rank = q.size();
  bool fits = g.at(n.in[i]).dtype == DType::f32 && b.size() == rank && b[rank - 1] == k[rank - 2];
  for (size_t d = 0; fits && d + 1 < rank; ++d) fits = b[d] == 1 || b[d] == q[d];
  if (fits) return "";
  return std::string(op_name(n.op)) + ": the score bias must be f32 [..., T or 1, S] with q's batch dims (each " +
         "its own or 1), got " + type_of(g, n.in[i]) + " (operands " + operands_str(g, n) + ")";
}

// Checks q, k, v, the keep mask and the bias; "" or the problem.
std::string check_qkv(const Graph& g, const Node& n) {
  const Node &q = g.at(n.in[0]), &k = g.at(n.in[1]), &v = g.at(n.in[2]);
  const std::string op(op_name(n.op));
  if (q.shape.size() < 2) return op + ": q must be [..., T, D], got " + type_of(g, n.in[0]);
  if (q.dtype != DType::f32 && q.dtype != DType::bf16) return op + ": q must be f32 or bf16, got " + type_of(g, n.in[0]);
  const Shape batch = batch_dims(q.shape);
  const int64_t d = q.shape.back();
  if (k.shape.size() != q.shape.size()) return op + ": k must be [..., S, D] as q is, got " + operands_str(g, n);
  const int64_t s = k.shape[k.shape.size() - 2];
  if (std::string p = expect(g, n, 1, "k", q.dtype, with_tail(batch, {s, d})); !p.empty()) return p;
  if (v.shape.size() != q.shape.size()) return op + ": v must be [..., S, E] as q is, got " + operands_str(g, n);
  if (std::string p = expect(g, n, 2, "v", q.dtype, with_tail(batch, {s, v.shape.back()})); !p.empty()) return p;
  const OptionalOperands opt = optional_operands(g, n);  // the op's arity allows no more
  if (opt.keep != OptionalOperands::npos)
    if (std::string p = expect(g, n, opt.keep, "the keep mask", DType::boolean,
                               with_tail(batch, {q.shape[q.shape.size() - 2], s}));
        !p.empty())
      return p;
  return opt.bias != OptionalOperands::npos ? check_bias(g, n, opt.bias) : "";
}

std::string shape_attention(const Graph& g, Node& n) {
  if (std::string p = check_qkv(g, n); !p.empty()) return p;
  const Node &q = g.at(n.in[0]), &v = g.at(n.in[2]);
  n.dtype = q.dtype;
  n.shape = with_tail(batch_dims(q.shape), {q.shape[q.shape.size() - 2], v.shape.back()});
  return "";
}

std::string shape_attention_grad(const Graph& g, Node& n) {
  if (std::string p = check_qkv(g, n); !p.empty()) return p;
  const Node& q = g.at(n.in[0]);
  const AttentionDims dm = dims_of(g, n);
  if (std::string p = expect(g, n, 3, "the output gradient", q.dtype, with_tail(batch_dims(q.shape), {dm.t, dm.e}));
      !p.empty())
    return p;
  n.dtype = q.dtype;
  n.shape = with_tail(batch_dims(q.shape), {dm.grad_size()});
  return "";
}

// A matrix operand read in place: element (i, p) at data[i * row + p * col] (a transposed one
// swaps the strides).
struct Strided {
  const float* data;
  int64_t row, col;
  float at(int64_t i, int64_t p) const { return data[i * row + p * col]; }
};

// C [m, n] (+)= A [m, kk] B [kk, n], B and C row-major. Each element's sum runs over p in order,
// from 0 or from C; the fast form keeps kTileRows x kVecs vectors of C in registers while it
// runs, the reference is plain loops.
template <int kTileRows, int kVecs>
void product_tile(int64_t i0, int64_t j0, int64_t kk, int64_t n, Strided a, const float* b, float* c, bool accumulate) {
  rt::Vec acc[kTileRows][kVecs];
  for (int r = 0; r < kTileRows; ++r)
    for (int v = 0; v < kVecs; ++v)
      acc[r][v] = accumulate ? rt::load(c + (i0 + r) * n + j0 + v * rt::kLanes) : rt::Vec{};
  for (int64_t p = 0; p < kk; ++p) {
    rt::Vec bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = rt::load(b + p * n + j0 + v * rt::kLanes);
    for (int r = 0; r < kTileRows; ++r) {
      const float x = a.at(i0 + r, p);
      for (int v = 0; v < kVecs; ++v) acc[r][v] += x * bv[v];
    }
  }
  for (int r = 0; r < kTileRows; ++r)
    for (int v = 0; v < kVecs; ++v) rt::store(c + (i0 + r) * n + j0 + v * rt::kLanes, acc[r][v]);
}

template <int kVecs>
void product_columns(int64_t m, int64_t j0, int64_t kk, int64_t n, Strided a, const float* b, float* c, bool accumulate) {
  constexpr int kTileRows = 8;
  int64_t i = 0;
  for (; i + kTileRows <= m; i += kTileRows) product_tile<kTileRows, kVecs>(i, j0, kk, n, a, b, c, accumulate);
  for (; i < m; ++i) product_tile<1, kVecs>(i, j0, kk, n, a, b, c, accumulate);
}

void plain_product(int64_t m, int64_t j0, int64_t n, int64_t kk, Strided a, const float* b, float* c, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = j0; j < n; ++j) {
      float sum = accumulate ? c[i * n + j] : 0.0f;
      for (int64_t p = 0; p < kk; ++p) sum += a.at(i, p) * b[p * n + j];
      c[i * n + j] = sum;
    }
}

struct Product {
  bool fast;
  void operator()(int64_t m, int64_t n, int64_t kk, Strided a, const float* b, float* c, bool accumulate) const {
    int64_t j = 0;
    if (fast) {
      for (; j + 2 * rt::kLanes <= n; j += 2 * rt::kLanes) product_columns<2>(m, j, kk, n, a, b, c, accumulate);
      for (; j + rt::kLanes <= n; j += rt::kLanes) product_columns<1>(m, j, kk, n, a, b, c, accumulate);
    }
    plain_product(m, j, n, kk, a, b, c, accumulate);
  }
};

// dst [cols, rows] = src [rows, cols] transposed.
void transpose_into(const float* src, int64_t rows, int64_t cols, std::vector<float>& dst) {
  dst.resize(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[size_t(j * rows + i)] = src[i * cols + j];
}

// A vector's lanes combined by `f` as a tree of halves (a few steps, not kLanes in a chain: a
// 128-score row has eight vectors), in one fixed order.
template <class F>
float combine_lanes(rt::Vec v, F f) {
  float lanes[rt::kLanes];
  rt::store(lanes, v);
  for (int width = rt::kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] = f(lanes[l], lanes[l + width]);
  return lanes[0];
}

float larger(float a, float b) { return a > b ? a : b; }
float plus(float a, float b) { return a + b; }

// Rows r0.. of p in place over their scores (`rows` rows of s): the softmax of each row t over
// its allowed columns (s <= t when causal), the others 0. Max and sum run lane by lane, the
// lanes combined in one fixed order; the division is a multiplication by the sum's inverse;
// e^x is the exp kernel's exp_f32.
// The reference's softmax: in order, one element at a time, dividing by the sum.
void plain_softmax_rows(float* scores, int64_t rows, int64_t s, int64_t r0, bool causal) {
  for (int64_t i = 0; i < rows; ++i) {
    float* x = scores + i * s;
    const int64_t allowed = causal ? std::min(s, r0 + i + 1) : s;
    float m = -std::numeric_limits<float>::infinity(), total = 0;
    for (int64_t j = 0; j < allowed; ++j) m = std::max(m, x[j]);
    for (int64_t j = 0; j < allowed; ++j) total += (x[j] = std::exp(x[j] - m));
    for (int64_t j = 0; j < allowed; ++j) x[j] /= total;
    std::fill(x + allowed, x + s, 0.0f);
  }
}

void softmax_rows(float* scores, int64_t rows, int64_t s, int64_t r0, bool causal) {
  constexpr int64_t L = rt::kLanes;
  for (int64_t i = 0; i < rows; ++i) {
    float* x = scores + i * s;
    const int64_t allowed = causal ? std::min(s, r0 + i + 1) : s;
    if (allowed == 0) continue;  // no keys (s = 0): nothing to weigh
    const int64_t whole = allowed / L * L;
    float m = x[0];
    if (whole) {
      rt::Vec top = rt::load(x);
      for (int64_t j = L; j < whole; j += L) {
        const rt::Vec v = rt::load(x + j);
        top = top > v ? top : v;
      }
      m = combine_lanes(top, larger);
    }
    for (int64_t j = whole; j < allowed; ++j) m = m > x[j] ? m : x[j];
    for (int64_t j = 0; j < allowed; ++j) x[j] = exp_f32(x[j] - m);
    rt::Vec sums{};
    for (int64_t j = 0; j < whole; j += L) sums += rt::load(x + j);
    float total = combine_lanes(sums, plus);
    for (int64_t j = whole; j < allowed; ++j) total += x[j];
    const float inverse = 1.0f / total;
    for (int64_t j = 0; j < allowed; ++j) x[j] *= inverse;
    std::fill(x + allowed, x + s, 0.0f);
  }
}

// The scores' gradient from the probabilities' one, in place: g = p (g - sum_s p g), the sum
// lane by lane (the lanes combined in one fixed order).
void plain_score_gradient(const float* p, float* g, int64_t s) {
  float dot = 0;
  for (int64_t j = 0; j < s; ++j) dot += p[j] * g[j];
  for (int64_t j = 0; j < s; ++j) g[j] = p[j] * (g[j] - dot);
}

void score_gradient(const float* p, float* g, int64_t s) {
  constexpr int64_t L = rt::kLanes;
  const int64_t whole = s / L * L;
  rt::Vec lanes{};
  for (int64_t j = 0; j < whole; j += L) lanes += rt::load(p + j) * rt::load(g + j);
  float dot = combine_lanes(lanes, plus);
  for (int64_t j = whole; j < s; ++j) dot += p[j] * g[j];
  for (int64_t j = 0; j < s; ++j) g[j] = p[j] * (g[j] - dot);
}

// A head's rows of the score bias: row t at data + t * row_stride (0: one row for every query).
struct BiasRows {
  const float* data = nullptr;
  int64_t row_stride = 0;
};

// Scores of rows r0.. (`rows` rows of s) plus the bias's rows (none: unchanged).
void add_bias(float* scores, int64_t rows, int64_t s, BiasRows bias, int64_t r0) {
  if (!bias.data) return;
  for (int64_t i = 0; i < rows; ++i) {
    const float* b = bias.data + (r0 + i) * bias.row_stride;
    float* x = scores + i * s;
    for (int64_t j = 0; j < s; ++j) x[j] += b[j];
  }
}

// x *= m elementwise: m = keep ? scale : 0 (no mask: m = 1).
void apply_keep(float* x, const uint8_t* keep, int64_t count, float scale) {
  if (!keep) return;
  for (int64_t i = 0; i < count; ++i) x[i] = keep[i] ? x[i] * scale : 0.0f;
}

// One head's operands as f32: the tensor's own floats, or bf16 widened into `buf`.
const float* as_f32(const Tensor& t, int64_t offset, int64_t count, std::vector<float>& buf) {
  if (t.dtype() == DType::f32) return t.data<float>() + offset;
  buf.resize(size_t(count));
  widen_bf16(t.data<uint16_t>() + offset, buf.data(), count);
  return buf.data();
}

// f32 results into `out` from element offset on: copied, or rounded to bf16.
void store(const float* src, Tensor& out, int64_t offset, int64_t count) {
  if (out.dtype() == DType::f32) return (void)std::copy(src, src + count, out.data<float>() + offset);
  round_to_bf16(src, out.data<uint16_t>() + offset, count);
}

// A head's working memory: its operands widened (bf16), the block's rows, its results.
struct Scratch {
  std::vector<float> q, k, v, dout, kt, vt, p, pm, dp, out;
};

struct Head {
  const Node& node;
  std::span<const Tensor* const> in;
  AttentionDims dm;
  Product product;
  OptionalOperands opt = optional_operands(node, in);

  bool causal() const { return node.attrs.axis != 0; }
  // The fast kernel's vector softmax, or the reference's plain one.
  void softmax(float* scores, int64_t rows, int64_t s, int64_t r0) const {
    (product.fast ? softmax_rows : plain_softmax_rows)(scores, rows, s, r0, causal());
  }
  float scale() const { return float(node.attrs.value()); }
  const uint8_t* keep(int64_t h) const {
    return opt.keep != OptionalOperands::npos ? in[opt.keep]->data<uint8_t>() + h * dm.t * dm.s : nullptr;
  }
  // Head h's bias rows: its index over q's batch dims, each dim of size 1 in the bias read at 0.
  BiasRows bias(int64_t h) const {
    if (opt.bias == OptionalOperands::npos) return {};
    const Shape &q = in[0]->shape(), &b = in[opt.bias]->shape();
    const size_t rank = q.size();
    int64_t offset = 0, stride = b[rank - 1] * b[rank - 2];
    for (size_t d = rank - 2; d-- > 0;) {
      const int64_t index = h % q[d];
      h /= q[d];
      if (b[d] != 1) offset += index * stride;
      stride *= b[d];
    }
    return {in[opt.bias]->data<float>() + offset, b[rank - 2] == 1 ? 0 : b[rank - 1]};
  }

  void forward(int64_t h, Tensor& out, Scratch& w) const {
    const float* q = as_f32(*in[0], h * dm.t * dm.d, dm.t * dm.d, w.q);
    const float* k = as_f32(*in[1], h * dm.s * dm.d, dm.s * dm.d, w.k);
    const float* v = as_f32(*in[2], h * dm.s * dm.e, dm.s * dm.e, w.v);
    const uint8_t* keep = this->keep(h);
    const BiasRows bias = this->bias(h);
    transpose_into(k, dm.s, dm.d, w.kt);
    w.p.resize(size_t(kRows * dm.s));
    w.out.resize(size_t(dm.t * dm.e));
    for (int64_t r0 = 0; r0 < dm.t; r0 += kRows) {
      const int64_t rows = std::min(kRows, dm.t - r0);
      product(rows, dm.s, dm.d, {q + r0 * dm.d, dm.d, 1}, w.kt.data(), w.p.data(), false);  // q k^T
      add_bias(w.p.data(), rows, dm.s, bias, r0);
      softmax(w.p.data(), rows, dm.s, r0);
      apply_keep(w.p.data(), keep ? keep + r0 * dm.s : nullptr, rows * dm.s, scale());
      product(rows, dm.e, dm.s, {w.p.data(), dm.s, 1}, v, w.out.data() + r0 * dm.e, false);  // (p m) v
    }
    store(w.out.data(), out, h * dm.t * dm.e, dm.t * dm.e);
  }

  // dq, dk, dv of head h into its row of `out` (dq [T, D], then dk [S, D], then dv [S, E]).
  void backward(int64_t h, Tensor& out, Scratch& w) const {
    const float* q = as_f32(*in[0], h * dm.t * dm.d, dm.t * dm.d, w.q);
    const float* k = as_f32(*in[1], h * dm.s * dm.d, dm.s * dm.d, w.k);
    const float* v = as_f32(*in[2], h * dm.s * dm.e, dm.s * dm.e, w.v);
    const float* dout = as_f32(*in[3], h * dm.t * dm.e, dm.t * dm.e, w.dout);
    const uint8_t* keep = this->keep(h);
    const BiasRows bias = this->bias(h);
    transpose_into(k, dm.s, dm.d, w.kt);
    transpose_into(v, dm.s, dm.e, w.vt);
    for (auto* b : {&w.p, &w.pm, &w.dp}) b->resize(size_t(kRows * dm.s));
    w.out.resize(size_t(dm.grad_size()));
    float *dq = w.out.data(), *dk = dq + dm.t * dm.d, *dv = dk + dm.s * dm.d;
    std::fill(dk, dv + dm.s * dm.e, 0.0f);
    for (int64_t r0 = 0; r0 < dm.t; r0 += kRows) {
      const int64_t rows = std::min(kRows, dm.t - r0), n = rows * dm.s;
      const float *qb = q + r0 * dm.d, *gb = dout + r0 * dm.e;
      const uint8_t* kb = keep ? keep + r0 * dm.s : nullptr;
      float *p = w.p.data(), *pm = w.pm.data(), *dp = w.dp.data();
      product(rows, dm.s, dm.d, {qb, dm.d, 1}, w.kt.data(), p, false);  // q k^T
      add_bias(p, rows, dm.s, bias, r0);
      softmax(p, rows, dm.s, r0);
      std::copy(p, p + n, pm);
      apply_keep(pm, kb, n, scale());
      product(dm.s, dm.e, rows, {pm, 1, dm.s}, gb, dv, true);            // dv += (p m)^T dout
      product(rows, dm.s, dm.e, {gb, dm.e, 1}, w.vt.data(), dp, false);  // d(p m) = dout v^T
      apply_keep(dp, kb, n, scale());                                     // dp = d(p m) m
      for (int64_t i = 0; i < rows; ++i)
        (product.fast ? score_gradient : plain_score_gradient)(p + i * dm.s, dp + i * dm.s, dm.s);
      product(rows, dm.d, dm.s, {dp, dm.s, 1}, k, dq + r0 * dm.d, false);  // dq = ds k
      product(dm.s, dm.d, rows, {dp, 1, dm.s}, qb, dk, true);               // dk += ds^T q
    }
    store(w.out.data(), out, h * dm.grad_size(), dm.grad_size());
  }
};

// Every head in turn (the reference), or the heads across the pool (each on one thread, in
// one fixed order: the same bits at any thread count).
template <bool kForward>
void run_heads(const Node& n, std::span<const Tensor* const> in, Tensor& out, bool fast) {
  const Head head{n, in, dims_of(in[0]->shape(), in[1]->shape(), in[2]->shape()), Product{fast}};
  auto one = [&](int64_t h) {
    thread_local Scratch scratch;  // per worker: a head's buffers, reused from head to head
    kForward ? head.forward(h, out, scratch) : head.backward(h, out, scratch);
  };
  if (!fast) {
    for (int64_t h = 0; h < head.dm.heads; ++h) one(h);
    return;
  }
  parallel_for(head.dm.heads, one);
}

void ref_attention(const Node& n, std::span<const Tensor* const> in, Tensor& out) { run_heads<true>(n, in, out, false); }
void fast_attention(const Node& n, std::span<const Tensor* const> in, Tensor& out) { run_heads<true>(n, in, out, true); }
void ref_attention_grad(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  run_heads<false>(n, in, out, false);
}
void fast_attention_grad(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  run_heads<false>(n, in, out, true);
}

// One attention_grad node computes the three gradients, packed per head; slices take them out.
void grad_attention(GradContext& c) {
  Graph& g = c.g;
  const Attrs attrs = c.n().attrs;
  const Operands in = c.n().in;
  const DType t = g.at(in[0]).dtype;
  const Shape shapes[3] = {g.at(in[0]).shape, g.at(in[1]).shape, g.at(in[2]).shape};
  const NodeId dout = g.at(c.out_grad).dtype == t ? c.out_grad : g.convert(c.out_grad, t);
  const OptionalOperands opt = optional_operands(g, c.n());
  if (opt.bias != OptionalOperands::npos && c.needs(opt.bias))
    throw Error(
        "attention: the gradient of the score bias is not computed (a padding or causal mask has none); "
        "make the bias a constant, or construct nn.MultiHeadAttention with flash_attention = false");
  Operands operands = {in[0], in[1], in[2], dout};
  for (size_t i = 3; i < in.size(); ++i) operands.push_back(in[i]);
  const NodeId packed = g.add(Op::attention_grad, operands, attrs);
  const Shape batch = batch_dims(shapes[0]);
  Dims start(batch.size() + 1, 0), limit = with_tail(batch, {0});
  for (size_t i = 0; i < 3; ++i) {
    const int64_t size = shapes[i][batch.size()] * shapes[i][batch.size() + 1];
    limit.back() = start.back() + size;
    if (c.needs(i)) c.give(i, g.reshape(g.slice(packed, start, limit), shapes[i]));
    start.back() = limit.back();
  }
}

// The gradient's own gradient (a gradient of a gradient through attention) is not built: an
// error says so, where a missing rule would make it zero without a word.
void grad_attention_grad(GradContext&) {
  throw Error(
      "attention: a second-order gradient (the gradient of a gradient) through the fused attention of "
      "nn.MultiHeadAttention is not supported; construct the layer with flash_attention = false (or call "
      "tpu.nn.disable_flash_attention() before the model runs) to take the unfused path, which "
      "differentiates twice");
}

// Per score: the forward's products q k^T and p v and its softmax (max, subtract, exp, sum,
// divide), and the bias's add; the gradient recomputes those and adds four products and about as many elementwise
// steps.
Cost cost_attention(const Graph& g, const Node& n) {
  const AttentionDims dm = dims_of(g, n);
  Cost c = movement_cost(g, n);
  const bool biased = optional_operands(g, n).bias != OptionalOperands::npos;
  const double per_score =
      (n.op == Op::attention ? 2.0 * double(dm.d + dm.e) + 5 : 2.0 * double(3 * dm.d + 2 * dm.e) + 10) + biased;
  c.flops = double(dm.heads * dm.t * dm.s) * per_score;
  return c;
}

}  // namespace

extern const OpInfo attention_row = {Op::attention, shape_attention, ref_attention, fast_attention, grad_attention,
                                     cost_attention};
extern const OpInfo attention_grad_row = {Op::attention_grad, shape_attention_grad, ref_attention_grad,
                                          fast_attention_grad, grad_attention_grad, cost_attention};

}  // namespace tpu
