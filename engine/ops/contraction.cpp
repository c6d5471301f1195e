// Contraction and reduction rows: dot (batched matmul; f32, or bf16 operands with an f32 or
// bf16 result), reduce (sum/max/min), argmax.
#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>
#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "ops/collective.h"
#include "ops/kernel_util.h"
#include "ops/reduce.h"
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

// The result type is attrs.to: the operands' type, or f32 for bf16 operands (bf16 products
// summed in f32, the MXU's contract).
std::string shape_dot(const Graph& g, Node& n) {
  const Node& a = g.at(n.in.at(0));
  const Node& b = g.at(n.in.at(1));
  const size_t r = a.shape.size();
  bool ok = r >= 2 && b.shape.size() == r && a.dtype == b.dtype && is_float(a.dtype) &&
            std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin());
  if (ok) {
    int64_t kb = n.attrs.transpose_rhs ? b.shape[r - 1] : b.shape[r - 2];
    ok = dot_dims(a.shape, b.shape, n.attrs.transpose_lhs, n.attrs.transpose_rhs).k == kb;
  }
  if (!ok)
    return "dot needs [...,M,K] x [...,K,N] floating-point operands with equal batch dims, got " +
           operands_str(g, n) + (n.attrs.transpose_lhs ? " (lhs transposed)" : "") + (n.attrs.transpose_rhs ? " (rhs transposed)" : "");
  if (n.attrs.to != a.dtype && !(a.dtype == DType::bf16 && n.attrs.to == DType::f32))
    return "dot of " + operands_str(g, n) + " cannot produce " + std::string(name_of(n.attrs.to)) +
           " (the result is the operands' type, or f32 for bf16 operands)";
  DotDims d = dot_dims(a.shape, b.shape, n.attrs.transpose_lhs, n.attrs.transpose_rhs);
  n.dtype = n.attrs.to;
  n.shape.assign(a.shape.begin(), a.shape.end() - 2);
  n.shape.push_back(d.m);
  n.shape.push_back(d.n);
  return "";
}

// Element i of a float tensor, widened to float (bf16 holds the upper half of an f32).
float float_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::bf16 ? bf16_to_f32(t.data<uint16_t>()[i]) : t.data<float>()[i];
}

// Products and sums in double, rounded once to the result type: for bf16 operands the same
// math as the fast kernels' exact f32 products summed in f32, without their rounding.
void ref_dot(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  const bool ta = node.attrs.transpose_lhs, tb = node.attrs.transpose_rhs;
  DotDims d = dot_dims(in[0]->shape(), in[1]->shape(), ta, tb);
  const Tensor& A = *in[0];
  const Tensor& B = *in[1];
  for (int64_t p = 0; p < d.batch; ++p) {
    const int64_t a0 = p * d.m * d.k, b0 = p * d.k * d.n;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < d.k; ++k)
          s += double(float_at(A, a0 + (ta ? k * d.m + i : i * d.k + k))) *
               double(float_at(B, b0 + (tb ? j * d.k + k : k * d.n + j)));
        out.set((p * d.m + i) * d.n + j, s);
      }
  }
}

// A float scratch buffer per thread, reused from call to call (bf16 results are computed in
// f32 and rounded once).
float* f32_scratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (int64_t(buf.size()) < n) buf.resize(size_t(n));
  return buf.data();
}

void fast_dot(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  DotDims d = dot_dims(in[0]->shape(), in[1]->shape(), node.attrs.transpose_lhs, node.attrs.transpose_rhs);
  const GemmShape s{d.batch, d.m, d.k, d.n, node.attrs.transpose_lhs, node.attrs.transpose_rhs};
  if (in[0]->dtype() == DType::f32) return gemm_f32(s, in[0]->data<float>(), in[1]->data<float>(), out.data<float>());
  float* c = out.dtype() == DType::f32 ? out.data<float>() : f32_scratch(out.size());
  gemm_bf16(s, in[0]->data<uint16_t>(), in[1]->data<uint16_t>(), c);
  if (out.dtype() == DType::bf16) round_to_bf16(c, out.data<uint16_t>(), out.size());
}

// C = op(A) op(B): dA and dB are dots of the output gradient with the other operand. With
// bf16 operands and an f32 result the incoming gradient is f32: it is rounded to bf16 for
// the two products (which again sum in f32), and each operand gets a gradient of its own
// type.
void grad_dot(GradContext& c) {
  auto& g = c.g;
  const bool ta = c.n().attrs.transpose_lhs, tb = c.n().attrs.transpose_rhs;
  NodeId a = c.in(0), b = c.in(1);
  const DType t = g.at(a).dtype, acc = c.n().dtype;
  NodeId gy = g.at(c.out_grad).dtype == t ? c.out_grad : g.convert(c.out_grad, t);
  auto product = [&](NodeId x, NodeId y, bool tx, bool ty) { return g.convert(g.dot(x, y, tx, ty, acc), t); };
  if (c.needs(0)) c.give(0, ta ? product(b, gy, tb, true) : product(gy, b, false, !tb));
  if (c.needs(1)) c.give(1, tb ? product(gy, a, true, ta) : product(a, gy, !ta, false));
}

Cost cost_dot(const Graph& g, const Node& n) {
  const Node& a = g.at(n.in[0]);
  DotDims d = dot_dims(a.shape, g.at(n.in[1]).shape, n.attrs.transpose_lhs, n.attrs.transpose_rhs);
  Cost c = movement_cost(g, n);
  c.flops = 2.0 * double(d.batch * d.m * d.n * d.k);
  return c;
}

// ---- reduce over a sorted axis list ----
std::string shape_reduce(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  if (!valid_axes(n.attrs.dims(), x.shape.size()) || n.attrs.axis < 0 || n.attrs.axis > 2)
    return "reduce: bad axes " + shape_str(n.attrs.dims()) + " for " + type_of(g, n.in[0]);
  if (x.dtype == DType::boolean) return "reduce is not defined on bool; cast to i32 first";
  n.dtype = x.dtype;
  const Dims& axes = n.attrs.dims();
  for (size_t i = 0; i < x.shape.size(); ++i)
    if (std::find(axes.begin(), axes.end(), int64_t(i)) == axes.end()) n.shape.push_back(x.shape[i]);
  return "";
}

// Maps each operand element to its output element: strides of the output placed on the
// kept dims, zero on the reduced ones.
std::vector<int64_t> reduce_strides(const Shape& in, std::span<const int64_t> axes) {
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
void for_each_mapped(const Shape& shape, std::span<const int64_t> out_strides, F f) {
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

// The value a reduce of `kind` starts from.
double reduce_init(ReduceKind kind) {
  const double inf = std::numeric_limits<double>::infinity();
  return kind == ReduceKind::sum ? 0.0 : kind == ReduceKind::max ? -inf : inf;
}

// Calls f.template operator()<K>(init): the kernel instantiated for the reduce's kind K, with
// its starting value.
template <class F>
void for_kind(ReduceKind kind, F&& f) {
  switch (kind) {
    case ReduceKind::sum: return f.template operator()<ReduceKind::sum>(reduce_init(kind));
    case ReduceKind::max: return f.template operator()<ReduceKind::max>(reduce_init(kind));
    case ReduceKind::min: return f.template operator()<ReduceKind::min>(reduce_init(kind));
  }
}

// An integer sum wraps (two's complement) as integer + does, and as numpy's and JAX's do: it
// accumulates modulo 2^64 and keeps the low bits, where a double accumulator would saturate.
void ref_integer_sum(const Node& n, const Tensor& x, Tensor& out) {
  std::vector<uint64_t> acc(size_t(out.size()), 0);
  auto st = reduce_strides(x.shape(), n.attrs.dims());
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      const T* a = x.data<T>();
      for_each_mapped(x.shape(), st, [&](int64_t i, int64_t o) { acc[size_t(o)] += uint64_t(int64_t(a[i])); });
      T* r = out.data<T>();
      for (int64_t i = 0; i < out.size(); ++i) r[i] = T(acc[size_t(i)]);
    }
  });
}

void ref_reduce(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const ReduceKind kind = n.reduce_kind();
  if (kind == ReduceKind::sum && !is_float(x.dtype())) return ref_integer_sum(n, x, out);
  std::vector<double> acc(size_t(out.size()), reduce_init(kind));
  auto st = reduce_strides(x.shape(), n.attrs.dims());
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

// f32 reductions over one run of consecutive axes, viewed as [outer, len, inner]. Each result
// element is accumulated in double over the reduced axis in ascending order, exactly as the
// reference does (so the results are the same bits; a row's max or min compares in f32 and is
// stored as the double would be, the same bits too), by one thread; except over the leading
// axes of the whole operand with rows of at most kTiledColumns (outer 1: a BatchNorm's sums
// over [N*H*W, C], a bias gradient's over the batch), taken in tiles of rows whose column sums
// in double are then added in tile order, as reduce_fusion's are (the same bits): every thread
// streams whole tiles (a block of columns per thread read rows in pieces, at half the memory's
// rate), and the tiles follow from the shape alone.
struct Runs {
  int64_t outer = 1, len = 1, inner = 1;
};
constexpr int64_t kTileElements = int64_t(1) << 15;  // 128 KiB of f32: a tile stays in cache
// A plain reduce takes tiles of rows up to this many columns: tiles of 16 rows or more, whose
// sums in double take at most an eighth of the operand's bytes.
constexpr int64_t kTiledColumns = kTileElements / 16;

bool consecutive_runs(const Shape& shape, std::span<const int64_t> dims, Runs& r) {
  if (dims.empty()) return false;
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) return false;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    int64_t& part = d < dims.front() ? r.outer : d <= dims.back() ? r.len : r.inner;
    part *= shape[size_t(d)];
  }
  return true;
}

template <ReduceKind K>
inline double combine(double r, double v) {
  if constexpr (K == ReduceKind::sum) return r + v;
  else if constexpr (K == ReduceKind::max) return (v > r || v != v) ? v : r;
  else return (v < r || v != v) ? v : r;
}

// Columns [i0, i0 + w) of one outer slice.
template <ReduceKind K>
void reduce_block(const float* x, float* out, const Runs& r, int64_t i0, int64_t w, double init) {
  double acc[256];
  for (int64_t i = 0; i < w; ++i) acc[i] = init;
  for (int64_t k = 0; k < r.len; ++k) {
    const float* row = x + k * r.inner + i0;
    for (int64_t i = 0; i < w; ++i) acc[i] = combine<K>(acc[i], double(row[i]));
  }
  for (int64_t i = 0; i < w; ++i) out[i0 + i] = float(acc[i]);
}

// Reductions over the last axis ([outer, len], inner 1): eight rows at a time, one double
// accumulator each (a max or min: an f32 lane each), so eight chains of dependent additions run
// side by side instead of one.
#ifdef __AVX__
// Eight rows' sums from element k0 on, in blocks of 8 elements: the block is transposed in
// registers so that each step adds one element of all eight rows at once. Returns the first
// element not taken. (A max or min takes the f32 overload below.)
template <ReduceKind K>
int64_t eight_rows_blocks(const float* x, int64_t len, double (&acc)[8]) {
  static_assert(K == ReduceKind::sum);
  __m256d lo = _mm256_loadu_pd(acc), hi = _mm256_loadu_pd(acc + 4);
  int64_t k = 0;
  for (; k + 8 <= len; k += 8) {
    __m256 r[8];
    for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(x + l * len + k);
    simd::transpose8x8(r);
    for (int j = 0; j < 8; ++j) {
      lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(r[j])));
      hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(r[j], 1)));
    }
  }
  _mm256_storeu_pd(acc, lo);
  _mm256_storeu_pd(acc + 4, hi);
  return k;
}
#endif

// A maximum or minimum is one of its values: compared in f32 it is the element combine<K>
// picks in double, at half the work (8 rows in one register, no conversions). Compares flush
// subnormal operands as the widening did (DAZ), but a blend keeps the element's own bits, so each
// result goes through double and back (as_widened) to be stored as the double path stored it: a
// subnormal as a zero of its sign, a signalling NaN quietened.
inline float as_widened(float v) {
#ifdef __SSE2__
  // Intrinsics: float(double(v)) may be folded away, as the compiler models neither DAZ nor
  // signalling NaNs.
  const __m128d wide = _mm_cvtss_sd(_mm_setzero_pd(), _mm_set_ss(v));
  return _mm_cvtss_f32(_mm_cvtsd_ss(_mm_setzero_ps(), wide));
#else
  return float(double(v));
#endif
}

template <ReduceKind K>
inline float combine_f32(float r, float v) {
  if constexpr (K == ReduceKind::max) return (v > r || v != v) ? v : r;
  else return (v < r || v != v) ? v : r;
}

#ifdef __AVX__
template <ReduceKind K>
__m256 combine8(__m256 r, __m256 v) {  // combine_f32<K> on eight lanes
  const __m256 better = _mm256_cmp_ps(v, r, K == ReduceKind::max ? _CMP_GT_OQ : _CMP_LT_OQ);
  return _mm256_blendv_ps(r, v, _mm256_or_ps(better, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}

// The same for a maximum or minimum, in f32.
template <ReduceKind K>
int64_t eight_rows_blocks(const float* x, int64_t len, float (&acc)[8]) {
  __m256 a = _mm256_loadu_ps(acc);
  int64_t k = 0;
  for (; k + 8 <= len; k += 8) {
    __m256 r[8];
    for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(x + l * len + k);
    simd::transpose8x8(r);
    for (int j = 0; j < 8; ++j) a = combine8<K>(a, r[j]);
  }
  _mm256_storeu_ps(acc, a);
  return k;
}
#endif

// Rows eight at a time (blocks(first row, len, acc) takes their vector part and returns the
// first element it did not take), then the rest one by one: acc = step(acc, value) in ascending order
// from init, each row's result stored as done(acc).
template <class Acc, class Blocks, class Step, class Done>
void rows_by_eight(const float* x, float* out, int64_t rows, int64_t len, Acc init, Blocks blocks, Step step, Done done) {
  int64_t o = 0;
  for (; o + 8 <= rows; o += 8) {
    Acc acc[8];
    std::fill_n(acc, 8, init);
    int64_t k = blocks(x + o * len, len, acc);
    for (; k < len; ++k)
      for (int64_t l = 0; l < 8; ++l) acc[l] = step(acc[l], x[(o + l) * len + k]);
    for (int64_t l = 0; l < 8; ++l) out[o + l] = done(acc[l]);
  }
  for (; o < rows; ++o) {
    Acc acc = init;
    for (int64_t k = 0; k < len; ++k) acc = step(acc, x[o * len + k]);
    out[o] = done(acc);
  }
}

#ifdef __AVX__
// A row's max or min lane by lane: eight lanes each combine their elements, then the lanes
// combine. Where the result is a nonzero number it has the bits of the element the ordered loop
// picks, as only elements of its value have them: true then. A NaN (which one, the order
// decides) or a result that compares equal to zero (either zero, or a subnormal under DAZ) may
// differ from the ordered loop's: false, and the caller takes the row in order.
template <ReduceKind K>
bool row_in_lanes(const float* x, int64_t len, float init, float& result) {
  __m256 a = _mm256_set1_ps(init), b = a;  // two chains of compares side by side
  int64_t k = 0;
  for (; k + 16 <= len; k += 16) {
    a = combine8<K>(a, _mm256_loadu_ps(x + k));
    b = combine8<K>(b, _mm256_loadu_ps(x + k + 8));
  }
  a = combine8<K>(a, b);
  if (k + 8 <= len) a = combine8<K>(a, _mm256_loadu_ps(x + k)), k += 8;
  a = combine8<K>(a, _mm256_permute2f128_ps(a, a, 1));  // a NaN in any lane stays a NaN
  a = combine8<K>(a, _mm256_permute_ps(a, 0b01001110));
  a = combine8<K>(a, _mm256_permute_ps(a, 0b10110001));
  float r = _mm256_cvtss_f32(a);
  for (; k < len; ++k) r = combine_f32<K>(r, x[k]);
  result = r;
  return r == r && r != 0.0f;
}
#endif

// A sum in double; a max or min in f32 (combine_f32): rows of 16 elements or more lane by lane
// (row_in_lanes: no transposes, and the attention scores' max is bound by memory then), and a
// block of eight rows that has a row it cannot take so, in order.
template <ReduceKind K>
void reduce_rows(const float* x, float* out, int64_t rows, int64_t len, double init) {
  auto blocks = [](const float* at, int64_t n, auto& acc) -> int64_t {  // acc: double[8] or float[8]
#ifdef __AVX__
    return eight_rows_blocks<K>(at, n, acc);
#else
    return (void)at, (void)n, (void)acc, 0;
#endif
  };
  if constexpr (K == ReduceKind::sum) {
    rows_by_eight(x, out, rows, len, init, blocks, [](double r, float v) { return combine<K>(r, double(v)); },
                  [](double r) { return float(r); });
  } else {
    for (int64_t o = 0; o < rows; o += 8) {
      const int64_t n = std::min<int64_t>(8, rows - o);
      bool taken = false;
#ifdef __AVX__
      taken = len >= 16;
      for (int64_t l = 0; l < n && taken; ++l) taken = row_in_lanes<K>(x + (o + l) * len, len, float(init), out[o + l]);
#endif
      if (!taken) rows_by_eight(x + o * len, out + o, n, len, float(init), blocks, combine_f32<K>, as_widened);
    }
  }
}

#ifdef __AVX__
// Sums of columns [i0, i0 + 4J) over n rows, held in J registers of four doubles from the first
// row to the last: the same additions in the same order as the scalar loop, without storing and
// reloading each column's sum at every row.
template <int J>
void sum_column_block(const float* x, int64_t n, int64_t inner, int64_t i0, double* acc, double init) {
  __m256d a[J];
  for (__m256d& v : a) v = _mm256_set1_pd(init);
  for (int64_t k = 0; k < n; ++k) {
    const float* row = x + k * inner + i0;
    for (int j = 0; j < J; ++j) a[j] = _mm256_add_pd(a[j], _mm256_cvtps_pd(_mm_loadu_ps(row + 4 * j)));
  }
  for (int j = 0; j < J; ++j) _mm256_storeu_pd(acc + i0 + 4 * j, a[j]);
}
#endif

// One tile's column values (n rows of `inner`) into acc, in double, row after row.
template <ReduceKind K>
void accumulate_columns(const float* x, int64_t n, int64_t inner, double* acc, double init) {
  int64_t i0 = 0;
#ifdef __AVX__
  if constexpr (K == ReduceKind::sum) {
    for (; i0 + 32 <= inner; i0 += 32) sum_column_block<8>(x, n, inner, i0, acc, init);
    for (; i0 + 4 <= inner; i0 += 4) sum_column_block<1>(x, n, inner, i0, acc, init);
  }
#endif
  std::fill(acc + i0, acc + inner, init);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = i0; i < inner; ++i) acc[i] = combine<K>(acc[i], double(x[k * inner + i]));
}

// Rows of `width` elements per tile: as many as fit kTileElements, in a multiple that makes the
// tile a whole number of 256-element chunks where one fits (96 columns: 336 rows, not 341), so a
// fusion that makes the tile (ops/fusion.h run_with_reductions) starts each at a chunk.
int64_t tile_rows_of(int64_t width) {
  const int64_t rows = std::max<int64_t>(1, kTileElements / width), step = kFusionChunk / std::gcd(width, kFusionChunk);
  return rows >= step ? rows / step * step : rows;
}

int64_t column_tile_rows(const Runs& r) { return tile_rows_of(r.inner); }

// Each column's values of the `tiles` tiles of each slice (partial), combined in tile order into
// out, blocks of columns across the pool.
template <ReduceKind K>
void combine_column_tiles(const Runs& r, int64_t tiles, const double* partial, float* out, double init) {
  constexpr int64_t kColumns = 256;
  const int64_t blocks = (r.inner + kColumns - 1) / kColumns;
  parallel_for(r.outer * blocks, [&](int64_t t) {
    const int64_t o = t / blocks, i0 = (t % blocks) * kColumns;
    for (int64_t i = i0; i < std::min(r.inner, i0 + kColumns); ++i) {
      double a = init;
      for (int64_t k = 0; k < tiles; ++k) a = combine<K>(a, partial[size_t((o * tiles + k) * r.inner + i)]);
      out[o * r.inner + i] = float(a);
    }
  });
}

// Over leading dims: each slice's rows in tiles of about kTileElements, a tile's column sums in
// double, then the tiles' in tile order. tile(first, end) gives elements [first, end) of the
// operand, read in place or made into a scratch tile (reduce_fusion).
template <ReduceKind K, class Tile>
void reduce_columns(const Runs& r, const Tile& tile, float* out, double init) {
  const int64_t tile_rows = column_tile_rows(r);
  const int64_t tiles = (r.len + tile_rows - 1) / tile_rows;
  auto partial = std::make_unique_for_overwrite<double[]>(size_t(r.outer * tiles * r.inner));
  parallel_for(r.outer * tiles, [&](int64_t t) {
    const int64_t o = t / tiles, k0 = (t % tiles) * tile_rows, n = std::min(tile_rows, r.len - k0);
    const int64_t first = (o * r.len + k0) * r.inner;
    accumulate_columns<K>(tile(first, first + n * r.inner), n, r.inner, partial.get() + t * r.inner, init);
  });
  combine_column_tiles<K>(r, tiles, partial.get(), out, init);
}

template <ReduceKind K>
void reduce_runs(const float* x, float* out, const Runs& r, double init) {
  constexpr int64_t kBlock = 256, kMinWidth = 64, kTaskElements = int64_t(1) << 16;
  const int64_t slice = std::max<int64_t>(1, r.len * r.inner);
  if (r.inner == 1) {
    const int64_t rows_per_task = std::max<int64_t>(8, kTaskElements / slice / 8 * 8);
    parallel_for((r.outer + rows_per_task - 1) / rows_per_task, [&](int64_t t) {
      const int64_t o0 = t * rows_per_task;
      reduce_rows<K>(x + o0 * r.len, out + o0, std::min(rows_per_task, r.outer - o0), r.len, init);
    });
    return;
  }
  if (r.outer == 1 && r.inner <= kTiledColumns)
    return reduce_columns<K>(r, [&](int64_t first, int64_t) { return x + first; }, out, init);
  // Several slices, or rows wider than a tile: columns in blocks of 64 to 256, as many as the
  // pool has threads; a narrow slice's task takes several. A column's sum is the same whichever
  // block takes it, so the blocks may follow the thread count.
  const int64_t share = (r.inner + num_threads() - 1) / num_threads();
  const int64_t width = std::clamp<int64_t>((share + 15) / 16 * 16, kMinWidth, kBlock);
  const int64_t blocks = (r.inner + width - 1) / width;
  const int64_t per_task = std::max<int64_t>(1, kTaskElements / slice);
  const int64_t groups = (r.outer + per_task - 1) / per_task;
  parallel_for(groups * blocks, [&](int64_t t) {
    const int64_t g = t / blocks, i0 = (t % blocks) * width;
    for (int64_t o = g * per_task; o < std::min(r.outer, (g + 1) * per_task); ++o)
      reduce_block<K>(x + o * r.len * r.inner, out + o * r.inner, r, i0, std::min(width, r.inner - i0), init);
  });
}

// ---- reduce of an operand made tile by tile (ops/reduce.h) ----

// Elements [begin, end) of the operand, made from the aligned element at or before begin into
// this thread's scratch; returns where element begin is.
const float* produce_tile(const TileProducer& produce, int64_t align, int64_t begin, int64_t end) {
  thread_local std::vector<float> scratch;
  const int64_t from = begin / align * align;
  if (scratch.size() < size_t(end - from)) scratch.resize(size_t(end - from));
  produce(from, end, scratch.data());
  return scratch.data() + (begin - from);
}

// Over the last dims (inner 1): whole rows per task, reduced as reduce_rows reduces them.
int64_t row_tile_rows(const Runs& r) { return tile_rows_of(r.len); }

template <ReduceKind K>
void reduce_produced_rows(const Runs& r, int64_t align, const TileProducer& produce, float* out, double init) {
  const int64_t rows_per_task = row_tile_rows(r);
  parallel_for((r.outer + rows_per_task - 1) / rows_per_task, [&](int64_t t) {
    const int64_t o0 = t * rows_per_task, n = std::min(rows_per_task, r.outer - o0);
    reduce_rows<K>(produce_tile(produce, align, o0 * r.len, (o0 + n) * r.len), out + o0, n, r.len, init);
  });
}

// Rows longer than a tile (a full reduction of a large operand, an outer product summed):
// each row in tiles of kTileElements, a tile's value in double, then the row's tiles in tile
// order. Tiles depend on the shape alone: the same bits at any thread count.
template <ReduceKind K>
void reduce_produced_long_rows(const Runs& r, int64_t align, const TileProducer& produce, float* out, double init) {
  const int64_t tiles = (r.len + kTileElements - 1) / kTileElements;
  auto partial = std::make_unique_for_overwrite<double[]>(size_t(r.outer * tiles));
  parallel_for(r.outer * tiles, [&](int64_t t) {
    const int64_t first = (t / tiles) * r.len + (t % tiles) * kTileElements;
    const int64_t n = std::min(kTileElements, r.len - (t % tiles) * kTileElements);
    const float* x = produce_tile(produce, align, first, first + n);
    double a = init;
    for (int64_t k = 0; k < n; ++k) a = combine<K>(a, double(x[k]));
    partial[size_t(t)] = a;
  });
  for (int64_t o = 0; o < r.outer; ++o) {
    double a = init;
    for (int64_t k = 0; k < tiles; ++k) a = combine<K>(a, partial[size_t(o * tiles + k)]);
    out[o] = float(a);
  }
}

template <ReduceKind K>
void reduce_produced_runs(const Runs& r, int64_t align, const TileProducer& produce, float* out, double init) {
  if (r.inner == 1 && r.len > kTileElements) return reduce_produced_long_rows<K>(r, align, produce, out, init);
  if (r.inner == 1) return reduce_produced_rows<K>(r, align, produce, out, init);
  auto tile = [&](int64_t first, int64_t end) { return produce_tile(produce, align, first, end); };
  reduce_columns<K>(r, tile, out, init);
}

void fast_reduce(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  Runs r;
  if (x.dtype() != DType::f32 || !consecutive_runs(x.shape(), n.attrs.dims(), r) || x.size() < 4096)
    return ref_reduce(n, in, out);
  for_kind(n.reduce_kind(),
           [&]<ReduceKind K>(double init) { reduce_runs<K>(x.data<float>(), out.data<float>(), r, init); });
}

void grad_reduce(GradContext& c) {
  auto& g = c.g;
  const Node& x = g.at(c.in(0));
  std::vector<int64_t> kept;
  const Dims axes = c.n().attrs.dims();
  for (int64_t i = 0; i < int64_t(x.shape.size()); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back(i);
  NodeId spread = g.broadcast(c.out_grad, x.shape, kept);
  if (c.n().reduce_kind() == ReduceKind::sum) return c.give(0, spread);
  // Tied extremes share the gradient equally (as JAX does): each gets out_grad / ties.
  const DType t = x.dtype;
  const Shape shape = x.shape;  // a copy: adding nodes may move the node table
  NodeId hit = g.compare(Cmp::eq, c.in(0), g.broadcast(c.node, shape, kept));
  NodeId ties = g.reduce(g.convert(hit, t), axes, ReduceKind::sum);
  NodeId share = g.binary(Op::div, spread, g.broadcast(ties, shape, kept));
  c.give(0, g.select(hit, share, g.full(t, shape, 0)));
}

// ---- argmax along one axis (first maximum wins; a NaN is the maximum, as numpy and JAX) ----
std::string shape_argmax(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  if (n.attrs.axis < 0 || n.attrs.axis >= int64_t(x.shape.size()))
    return "argmax: axis out of range for " + type_of(g, n.in[0]);
  if (x.shape[size_t(n.attrs.axis)] == 0) return "argmax: axis " + std::to_string(n.attrs.axis) + " of " + type_of(g, n.in[0]) + " is empty: it has no maximum";
  n.dtype = DType::i32;
  n.shape = x.shape;
  n.shape.erase(n.shape.begin() + n.attrs.axis);
  return "";
}

void ref_argmax(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const size_t axis = size_t(n.attrs.axis);
  const int64_t len = x.shape()[axis], inner = strides_of(x.shape())[axis];
  if (x.size() == 0) return;  // the result is empty too (the axis itself is never empty)
  const int64_t outer = x.size() / (len * inner);
  int32_t* o = out.data<int32_t>();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b) {
      int64_t best = 0;
      double best_v = x.get(a * len * inner + b);
      for (int64_t k = 1; k < len; ++k) {
        double v = x.get((a * len + k) * inner + b);
        if (v > best_v || (v != v && best_v == best_v)) best_v = v, best = k;  // the first NaN wins, as in max
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

bool reduce_produced(const Shape& shape, std::span<const int64_t> dims, ReduceKind kind, int64_t align,
                     const TileProducer& produce, float* out) {
  Runs r;
  // A tile holds whole rows or a part of one long row (over the last dims), or at least one row
  // of columns (over leading dims: any number of rows, a BatchNorm's N*H*W included, goes in
  // tiles of rows). An empty operand has no tiles: the plain reduce fills the result with the
  // starting values.
  if (num_elements(shape) == 0 || !consecutive_runs(shape, dims, r) || r.inner > kTileElements)
    return false;
  for_kind(kind, [&]<ReduceKind K>(double init) { reduce_produced_runs<K>(r, align, produce, out, init); });
  return true;
}

namespace {
// The forms reduce_together takes (each tile's rows as reduce_produced and the plain reduce take
// them): whole rows over the last dims, a row at most a tile long; or rows of one slice's columns
// over leading dims, at most kTiledColumns wide.
bool tiled_form(const Shape& shape, std::span<const int64_t> dims, Runs& r) {
  if (num_elements(shape) == 0 || !consecutive_runs(shape, dims, r)) return false;
  return (r.inner == 1 && r.len <= kTileElements) || (r.outer == 1 && r.inner > 1 && r.inner <= kTiledColumns);
}

// Reductions of a tiled form taken tile by tile, in any order of tiles: each tile's part of
// every reduction (reduce), then, over columns, the tiles' sums in tile order (finish).
class TiledReductions {
 public:
  TiledReductions(const Shape& shape, std::span<const int64_t> dims, std::span<const TiledReduce> reduces, int64_t align)
      : reduces_(reduces), align_(align) {
    if (!tiled_form(shape, dims, r_))
      throw Error("reduce_together: reductions over " + shape_str(Shape(dims.begin(), dims.end())) + " of " +
                  shape_str(shape) + " are not of a tiled form");
    rows_ = r_.inner == 1;
    tile_rows_ = rows_ ? row_tile_rows(r_) : column_tile_rows(r_);
    all_rows_ = rows_ ? r_.outer : r_.len;
    width_ = rows_ ? r_.len : r_.inner;
    tiles_ = (all_rows_ + tile_rows_ - 1) / tile_rows_;
    if (!rows_)
      for (size_t m = 0; m < reduces.size(); ++m) partial_.push_back(std::make_unique_for_overwrite<double[]>(size_t(tiles_ * r_.inner)));
  }
  int64_t tiles() const { return tiles_; }
  int64_t tile_elements() const { return tile_rows_ * width_; }  // the last tile's may be fewer
  int64_t first(int64_t t) const { return t * tile_rows_ * width_; }  // the tile's elements
  int64_t end(int64_t t) const { return std::min(all_rows_, (t + 1) * tile_rows_) * width_; }

  void reduce(int64_t t) {
    const int64_t k0 = t * tile_rows_, n = std::min(tile_rows_, all_rows_ - k0);
    for (size_t m = 0; m < reduces_.size(); ++m) {
      const TiledReduce& red = reduces_[m];
      const float* x = red.operand ? red.operand + first(t) : produce_tile(red.produce, align_, first(t), end(t));
      for_kind(red.kind, [&]<ReduceKind K>(double init) {
        if (rows_) reduce_rows<K>(x, red.out + k0, n, r_.len, init);
        else accumulate_columns<K>(x, n, r_.inner, partial_[m].get() + t * r_.inner, init);
      });
    }
  }

  void finish() {
    for (size_t m = 0; m < partial_.size(); ++m)
      for_kind(reduces_[m].kind, [&]<ReduceKind K>(double init) {
        combine_column_tiles<K>(r_, tiles_, partial_[m].get(), reduces_[m].out, init);
      });
  }

 private:
  std::span<const TiledReduce> reduces_;
  int64_t align_;
  Runs r_;
  bool rows_ = false;
  int64_t tile_rows_ = 0, all_rows_ = 0, width_ = 0, tiles_ = 0;
  std::vector<std::unique_ptr<double[]>> partial_;  // over columns: each reduction's tiles
};
}  // namespace

int64_t reduce_tile(const Shape& shape, std::span<const int64_t> dims) {
  Runs r;
  if (!tiled_form(shape, dims, r)) return 0;
  return r.inner == 1 ? row_tile_rows(r) * r.len : column_tile_rows(r) * r.inner;
}

void reduce_together(const Shape& shape, std::span<const int64_t> dims, std::span<const TiledReduce> reduces,
                     int64_t align, const std::function<void(int64_t, int64_t)>& before) {
  TiledReductions tiled(shape, dims, reduces, align);
  parallel_for(tiled.tiles(), [&](int64_t t) {
    if (before) before(tiled.first(t), tiled.end(t));
    tiled.reduce(t);
  });
  tiled.finish();
}

void reduce_as_made(const Shape& shape, std::span<const int64_t> dims, std::span<const TiledReduce> reduces,
                    int64_t align, int64_t chunk, const std::function<void(int64_t, int64_t)>& make) {
  TiledReductions tiled(shape, dims, reduces, align);
  const int64_t images = shape.at(0), per_image = num_elements(shape) / images;
  const int64_t tile = tiled.tile_elements();
  // Each tile waits on the images it overlaps; the task that makes the last of them reduces it.
  std::vector<std::atomic<int32_t>> waiting(size_t(tiled.tiles()));
  for (int64_t t = 0; t < tiled.tiles(); ++t)
    waiting[size_t(t)].store(int32_t((tiled.end(t) - 1) / per_image - tiled.first(t) / per_image + 1));
  // By default a few chunks per thread: most tiles are then made and reduced by one thread, in
  // its cache. The bits do not depend on the chunks: each tile is reduced whole.
  if (chunk <= 0) chunk = (images + 4 * num_threads() - 1) / (4 * num_threads());
  parallel_for((images + chunk - 1) / chunk, [&](int64_t c) {
    const int64_t b0 = c * chunk, b1 = std::min(images, b0 + chunk);
    make(b0, b1);
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t t = b * per_image / tile; t <= ((b + 1) * per_image - 1) / tile; ++t)
        if (waiting[size_t(t)].fetch_sub(1, std::memory_order_acq_rel) == 1) tiled.reduce(t);
  });
  tiled.finish();
}

bool summable_dot(const Graph& g, const Node& dot) {
  return dot.op == Op::dot && dot.dtype == DType::f32 && g.at(dot.in[0]).dtype == DType::f32;
}

// The same GEMM shape fast_dot uses, so every part's product has fast_dot's bits.
void sum_dots(const Node& dot, std::span<const Tensor* const> lhs, std::span<const Tensor* const> rhs, Tensor& out) {
  DotDims d = dot_dims(lhs[0]->shape(), rhs[0]->shape(), dot.attrs.transpose_lhs, dot.attrs.transpose_rhs);
  const GemmShape s{d.batch, d.m, d.k, d.n, dot.attrs.transpose_lhs, dot.attrs.transpose_rhs};
  thread_local std::vector<const float*> a, b;  // reused: no allocation per step
  a.clear();
  b.clear();
  for (const Tensor* t : lhs) a.push_back(t->data<float>());
  for (const Tensor* t : rhs) b.push_back(t->data<float>());
  gemm_f32_sum(s, a, b, out.data<float>());
}

extern const OpInfo dot_row = {Op::dot, shape_dot, ref_dot, fast_dot, grad_dot, cost_dot};
extern const OpInfo reduce_row = {Op::reduce, shape_reduce, ref_reduce, fast_reduce, grad_reduce, cost_reduce};
extern const OpInfo argmax_row = {Op::argmax, shape_argmax, ref_argmax, nullptr, nullptr, cost_reduce};

}  // namespace tpu
