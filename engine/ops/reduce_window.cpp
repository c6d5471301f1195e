// The pooling rows. reduce_window: sum, max or argmax over each Window2D window of the H,W
// dims of an NHWC tensor; padding and dilation holes are never candidates (they add 0 to a
// sum and never win a max); argmax gives the flat index into the input of the first maximum.
// select_and_scatter: the max gradient, each window's output gradient added at its maximum.
#include <algorithm>
#include <cmath>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#define TPU_POOL_VECTORS 1
#endif

#include "ops/f32_compute.h"
#include "ops/kernel_util.h"
#include "ops/reduce_window.h"
#include "ops/window_rule.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

WindowKind kind_of(const Node& n) { return n.window_kind(); }

// A window position o along dim i that reads no input element at all.
int64_t empty_window(const Window2D& w, int i, int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    bool any = false;
    for (int64_t k = 0; k < w.size[i] && !any; ++k) any = w.source(i, o, k, in) >= 0;
    if (!any) return o;
  }
  return -1;
}

// Checks x[N,H,W,C] against the window; "" and the output's spatial size, or a problem.
std::string check_pool(const Graph& g, const Node& n, bool needs_maximum, std::array<int64_t, 2>& out) {
  const Node& x = g.at(n.in.at(0));
  if (x.shape.size() != 4 || x.dtype == DType::boolean)
    return std::string(op_name(n.op)) + " needs a numeric [N,H,W,C] operand, got " + type_of(g, n.in[0]);
  if (std::string e = check_window(g, n, x, out); !e.empty()) return e;
  const Window2D w = n.window();
  for (int i = 0; needs_maximum && i < 2; ++i) {
    int64_t o = empty_window(w, i, x.shape[size_t(1 + i)], out[size_t(i)]);
    if (o >= 0)
      return std::string(op_name(n.op)) + ": window " + std::to_string(o) + " of spatial dim " +
             std::to_string(i + 1) + " covers only padding, so it has no maximum";
  }
  return "";
}

std::string shape_reduce_window(const Graph& g, Node& n) {
  if (n.attrs.axis < 0 || n.attrs.axis > 2) return "reduce_window: bad kind " + std::to_string(n.attrs.axis);
  std::array<int64_t, 2> out;
  if (std::string e = check_pool(g, n, kind_of(n) != WindowKind::sum, out); !e.empty()) return e;
  const Node& x = g.at(n.in[0]);
  n.dtype = kind_of(n) == WindowKind::argmax ? DType::i32 : x.dtype;
  n.shape = {x.shape[0], out[0], out[1], x.shape[3]};
  return "";
}

std::string shape_select_and_scatter(const Graph& g, Node& n) {
  std::array<int64_t, 2> out;
  if (std::string e = check_pool(g, n, true, out); !e.empty()) return e;
  const Node& x = g.at(n.in[0]);
  const Node& dy = g.at(n.in.at(1));
  if (!is_float(x.dtype) || dy.dtype != x.dtype || dy.shape != Shape{x.shape[0], out[0], out[1], x.shape[3]})
    return "select_and_scatter needs a floating-point x[N,H,W,C] and a gradient [N,Ho,Wo,C] of the window's output, got " +
           operands_str(g, n);
  n.dtype = x.dtype;
  n.shape = x.shape;
  return "";
}

// Calls visit(flat input index) for every input element of window (b, oh, ow), channel 0.
template <class F>
void for_window(const Window2D& w, const Shape& xs, int64_t b, int64_t oh, int64_t ow, F visit) {
  for (int64_t i = 0; i < w.size[0]; ++i) {
    const int64_t ih = w.source(0, oh, i, xs[1]);
    if (ih < 0) continue;
    for (int64_t j = 0; j < w.size[1]; ++j) {
      const int64_t iw = w.source(1, ow, j, xs[2]);
      if (iw >= 0) visit(((b * xs[1] + ih) * xs[2] + iw) * xs[3]);
    }
  }
}

// NaN wins a maximum, and the first of equal values wins.
template <class T>
bool beats(T v, T best, bool have) {
  return !have || v > best || (v != v && best == best);
}

void ref_reduce_window(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const Shape& xs = x.shape();
  const Window2D w = n.window();
  const WindowKind kind = kind_of(n);
  dispatch(x.dtype(), [&]<class T>() {
    const T* a = x.data<T>();
    for (int64_t b = 0, o = 0; b < xs[0]; ++b)
      for (int64_t oh = 0; oh < n.shape[1]; ++oh)
        for (int64_t ow = 0; ow < n.shape[2]; ++ow)
          for (int64_t ch = 0; ch < xs[3]; ++ch, ++o) {
            double sum = 0;
            T best{};
            int64_t at = -1;
            for_window(w, xs, b, oh, ow, [&](int64_t base) {
              const T v = a[base + ch];
              sum += double(v);
              if (beats(v, best, at >= 0)) best = v, at = base + ch;
            });
            if (kind == WindowKind::sum) out.set(o, sum);
            else if (kind == WindowKind::max) out.set(o, double(best));
            else out.data<int32_t>()[o] = int32_t(at);
          }
  });
}

void ref_select_and_scatter(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const Shape& xs = x.shape();
  const Window2D w = n.window();
  std::vector<double> acc(size_t(out.size()), 0.0);
  dispatch(x.dtype(), [&]<class T>() {
    const T* a = x.data<T>();
    const T* dy = in[1]->data<T>();
    for (int64_t b = 0, o = 0; b < xs[0]; ++b)
      for (int64_t oh = 0; oh < in[1]->shape()[1]; ++oh)
        for (int64_t ow = 0; ow < in[1]->shape()[2]; ++ow)
          for (int64_t ch = 0; ch < xs[3]; ++ch, ++o) {
            T best{};
            int64_t at = -1;
            for_window(w, xs, b, oh, ow, [&](int64_t base) {
              if (beats(a[base + ch], best, at >= 0)) best = a[base + ch], at = base + ch;
            });
            acc[size_t(at)] += double(dy[o]);
          }
  });
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, acc[size_t(i)]);
}

// Per output row (column), the input row (column) that each window offset reads, -1 for
// padding or a dilation hole: the window arithmetic done once per op, not once per window.
struct PoolGeom {
  int64_t h, w, ch, ho, wo, kh, kw;
  std::vector<int64_t> src_h, src_w;  // [ho * kh], [wo * kw]
  bool disjoint;  // no two windows share an input element
  bool covers;    // and together they read every input element
};

PoolGeom pool_geom(const Window2D& win, const Shape& xs, int64_t ho, int64_t wo) {
  PoolGeom p{xs[1], xs[2], xs[3], ho, wo, win.size[0], win.size[1], {}, {}, true, true};
  for (int i = 0; i < 2; ++i) {
    const int64_t in = xs[size_t(1 + i)], out = i == 0 ? ho : wo, size = win.size[size_t(i)];
    std::vector<int64_t>& src = i == 0 ? p.src_h : p.src_w;
    std::vector<int> reads(size_t(in), 0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < size; ++k) {
        src.push_back(win.source(i, o, k, in));
        if (src.back() >= 0) ++reads[size_t(src.back())];
      }
    for (int r : reads) p.disjoint = p.disjoint && r <= 1, p.covers = p.covers && r == 1;
  }
  p.covers = p.covers && p.disjoint;
  return p;
}

// Calls visit(flat input index, channel 0) for every input element of window (b, oh, ow).
template <class F>
void for_window(const PoolGeom& p, int64_t b, int64_t oh, int64_t ow, F visit) {
  const int64_t* rows = p.src_h.data() + oh * p.kh;
  const int64_t* cols = p.src_w.data() + ow * p.kw;
  for (int64_t i = 0; i < p.kh; ++i) {
    if (rows[i] < 0) continue;
    for (int64_t j = 0; j < p.kw; ++j)
      if (cols[j] >= 0) visit(((b * p.h + rows[i]) * p.w + cols[j]) * p.ch);
  }
}

// Each channel's first maximum over window (b, oh, ow): value in best[c] and, unless `at`
// is null, flat input index in at[c]. Branch-free, so the channel loops vectorise.
void window_max(const PoolGeom& p, const float* a, int64_t b, int64_t oh, int64_t ow, float* best, int32_t* at) {
  const int64_t ch = p.ch;
  bool first = true;
  for_window(p, b, oh, ow, [&](int64_t base) {
    const float* v = a + base;
    if (first) {
      std::copy_n(v, ch, best);
      for (int64_t c = 0; at && c < ch; ++c) at[c] = int32_t(base + c);
    } else if (!at) {
      for (int64_t c = 0; c < ch; ++c) best[c] = beats(v[c], best[c], true) ? v[c] : best[c];
    } else {
      for (int64_t c = 0; c < ch; ++c) {
        const bool take = beats(v[c], best[c], true);
        best[c] = take ? v[c] : best[c];
        at[c] = take ? int32_t(base + c) : at[c];
      }
    }
    first = false;
  });
}

#ifdef TPU_POOL_VECTORS
// The lanes of a vector of channels and the few operations the 2x2 pool needs on them: 16
// lanes and mask registers with AVX-512, else 8 lanes with AVX2, a mask a vector of lanes all
// ones or all zeros.
namespace lanes {
#ifdef __AVX512F__
constexpr int64_t kCount = 16;
using Vec = __m512;
using Mask = __mmask16;
Vec load(const float* p) { return _mm512_loadu_ps(p); }
void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
template <int Predicate>
Mask compare(Vec a, Vec b) { return _mm512_cmp_ps_mask(a, b, Predicate); }
Mask either(Mask a, Mask b) { return a | b; }
Mask both(Mask a, Mask b) { return a & b; }
Mask but_not(Mask a, Mask b) { return a & Mask(~b); }
Mask none() { return 0; }
Vec select(Mask m, Vec if_false, Vec if_true) { return _mm512_mask_blend_ps(m, if_false, if_true); }
Vec zero_unless(Mask m, Vec v) { return _mm512_maskz_mov_ps(m, v); }
#else
constexpr int64_t kCount = 8;
using Vec = __m256;
using Mask = __m256;
Vec load(const float* p) { return _mm256_loadu_ps(p); }
void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
template <int Predicate>
Mask compare(Vec a, Vec b) { return _mm256_cmp_ps(a, b, Predicate); }
Mask either(Mask a, Mask b) { return _mm256_or_ps(a, b); }
Mask both(Mask a, Mask b) { return _mm256_and_ps(a, b); }
Mask but_not(Mask a, Mask b) { return _mm256_andnot_ps(b, a); }
Mask none() { return _mm256_setzero_ps(); }
Vec select(Mask m, Vec if_false, Vec if_true) { return _mm256_blendv_ps(if_false, if_true, m); }
Vec zero_unless(Mask m, Vec v) { return _mm256_and_ps(m, v); }  // +0.0f elsewhere
#endif
}  // namespace lanes
#endif

// 2x2 windows at stride 2 that tile the image (the usual max pool), a vector of channels at a
// time (16 with AVX-512, 8 with AVX2): an output row's windows read two input rows side by
// side, each window's channels a few vectors, with none of the general path's per-window
// set-up (which took most of its time: a window's 32 channels are two vectors). Bitwise the
// general path's results: comparisons and selections of the values as they are.
bool tiles_2x2(const Window2D& w, const Shape& xs, int64_t ho, int64_t wo) {
#ifdef TPU_POOL_VECTORS
  Window2D pool;
  pool.size = pool.stride = {2, 2};
  return w == pool && xs[1] == 2 * ho && xs[2] == 2 * wo && xs[3] % lanes::kCount == 0;
#else
  (void)w, (void)xs, (void)ho, (void)wo;
  return false;
#endif
}

#ifdef TPU_POOL_VECTORS
// The rows of output row (b, oh) of a tiling 2x2 pool: the two input rows it reads, then the
// output (or output gradient) row.
struct PoolRows {
  int64_t r0, r1, o;
};
PoolRows pool_rows(const Shape& xs, int64_t ho, int64_t b, int64_t oh) {
  const int64_t row = xs[2] * xs[3];
  return {(b * xs[1] + 2 * oh) * row, (b * xs[1] + 2 * oh + 1) * row, (b * ho + oh) * (row / 2)};
}

// beats(v, best, true) lane by lane: v > best, or v is a NaN and best is not.
lanes::Mask beats(lanes::Vec v, lanes::Vec best) {
  using namespace lanes;
  return either(compare<_CMP_GT_OS>(v, best), both(compare<_CMP_UNORD_Q>(v, v), compare<_CMP_ORD_Q>(best, best)));
}

// Equal to the maximum: the same value, or both NaN.
lanes::Mask is_max(lanes::Vec v, lanes::Vec best) {
  using namespace lanes;
  return either(compare<_CMP_EQ_OQ>(v, best), both(compare<_CMP_UNORD_Q>(v, v), compare<_CMP_UNORD_Q>(best, best)));
}

// The window's four vectors (window order) and their first maximum.
struct WindowLanes {
  lanes::Vec v[4], best;
};
WindowLanes window_lanes(const float* x0, const float* x1, int64_t ch) {
  WindowLanes w{{lanes::load(x0), lanes::load(x0 + ch), lanes::load(x1), lanes::load(x1 + ch)}, {}};
  w.best = w.v[0];
  for (int k = 1; k < 4; ++k) w.best = lanes::select(beats(w.v[k], w.best), w.best, w.v[k]);
  return w;
}

// Calls f(i0, i1, o) for each vector of channels of image b's windows: the offsets of the
// window's top-left vector in its two input rows, and of its output.
template <class F>
void for_each_vector_2x2(const Shape& xs, int64_t ho, int64_t b, F f) {
  const int64_t wo = xs[2] / 2, ch = xs[3];
  for (int64_t oh = 0; oh < ho; ++oh) {
    const PoolRows r = pool_rows(xs, ho, b, oh);
    for (int64_t ow = 0; ow < wo; ++ow)
      for (int64_t c = 0; c < ch; c += lanes::kCount) f(r.r0 + 2 * ow * ch + c, r.r1 + 2 * ow * ch + c, r.o + ow * ch + c);
  }
}

void max_pool_2x2(const float* a, float* y, const Shape& xs, int64_t ho, int64_t b) {
  const int64_t ch = xs[3];
  for_each_vector_2x2(xs, ho, b, [&](int64_t i0, int64_t i1, int64_t o) {
    lanes::store(y + o, window_lanes(a + i0, a + i1, ch).best);
  });
}

// Each window's gradient to its first maximum, 0 to the other three elements.
void max_pool_2x2_grad(const float* a, const float* dy, float* dx, const Shape& xs, int64_t ho, int64_t b) {
  const int64_t ch = xs[3];
  for_each_vector_2x2(xs, ho, b, [&](int64_t i0, int64_t i1, int64_t o) {
    const WindowLanes w = window_lanes(a + i0, a + i1, ch);
    const lanes::Vec g = lanes::load(dy + o);
    float* d[4] = {dx + i0, dx + i0 + ch, dx + i1, dx + i1 + ch};
    lanes::Mask taken = lanes::none();
    for (int k = 0; k < 4; ++k) {
      const lanes::Mask hit = lanes::but_not(is_max(w.v[k], w.best), taken);
      lanes::store(d[k], lanes::zero_unless(hit, g));
      taken = lanes::either(taken, hit);
    }
  });
}
#else
void max_pool_2x2(const float*, float*, const Shape&, int64_t, int64_t) {}
void max_pool_2x2_grad(const float*, const float*, float*, const Shape&, int64_t, int64_t) {}
#endif

// Images [b0, b1) of an f32 reduce_window; each window's channels are a vector.
void reduce_window_f32_images(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t b0, int64_t b1) {
  const WindowKind kind = kind_of(n);
  const float* a = in[0]->data<float>();
  if (kind == WindowKind::max && tiles_2x2(n.window(), in[0]->shape(), n.shape[1], n.shape[2])) {
    for (int64_t b = b0; b < b1; ++b) max_pool_2x2(a, out.data<float>(), in[0]->shape(), n.shape[1], b);
    return;
  }
  const PoolGeom p = pool_geom(n.window(), in[0]->shape(), n.shape[1], n.shape[2]);
  std::vector<float> best(static_cast<size_t>(p.ch));
  for (int64_t b = b0; b < b1; ++b) {
    for (int64_t oh = 0; oh < p.ho; ++oh)
      for (int64_t ow = 0; ow < p.wo; ++ow) {
        const int64_t o = ((b * p.ho + oh) * p.wo + ow) * p.ch;
        if (kind == WindowKind::max) {
          window_max(p, a, b, oh, ow, out.data<float>() + o, nullptr);
        } else if (kind == WindowKind::argmax) {
          window_max(p, a, b, oh, ow, best.data(), out.data<int32_t>() + o);
        } else {
          float* acc = out.data<float>() + o;
          std::fill_n(acc, p.ch, 0.0f);
          for_window(p, b, oh, ow, [&](int64_t base) {
            for (int64_t c = 0; c < p.ch; ++c) acc[c] += a[base + c];
          });
        }
      }
  }
}

// f32 (and bf16 through f32): one task per image.
void fast_reduce_window_f32(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  parallel_for(in[0]->shape()[0], [&](int64_t b) { reduce_window_f32_images(n, in, out, b, b + 1); });
}

// Windows that share no input element: each element a window reads gets the window's output
// gradient where it is the channel's first maximum and 0 elsewhere, written once (the first
// element equal to the maximum is the one the maximum came from, NaN included).
// The channel loop of one window element: restrict and bitwise logic let it vectorise.
void scatter_element(int64_t ch, const float* __restrict v, const float* __restrict best, const float* __restrict g,
                     float* __restrict taken, float* __restrict d) {
  for (int64_t c = 0; c < ch; ++c) {
    const bool hit = (taken[c] == 0.0f) & ((v[c] == best[c]) | ((v[c] != v[c]) & (best[c] != best[c])));
    d[c] = hit ? g[c] : 0.0f;
    taken[c] = hit ? 1.0f : taken[c];
  }
}

void scatter_disjoint(const PoolGeom& p, const float* a, const float* dy, float* dx, int64_t b) {
  std::vector<float> best(static_cast<size_t>(p.ch)), taken(static_cast<size_t>(p.ch));
  if (!p.covers) std::fill_n(dx + b * p.h * p.w * p.ch, p.h * p.w * p.ch, 0.0f);
  for (int64_t oh = 0; oh < p.ho; ++oh)
    for (int64_t ow = 0; ow < p.wo; ++ow) {
      window_max(p, a, b, oh, ow, best.data(), nullptr);
      const float* g = dy + ((b * p.ho + oh) * p.wo + ow) * p.ch;
      std::fill(taken.begin(), taken.end(), 0.0f);
      for_window(p, b, oh, ow,
                 [&](int64_t base) { scatter_element(p.ch, a + base, best.data(), g, taken.data(), dx + base); });
    }
}

// Overlapping windows: zero the image's gradient, then add each window's output gradient at
// its maximum, in window order.
void scatter_overlapping(const PoolGeom& p, const float* a, const float* dy, float* dx, int64_t b) {
  std::vector<float> best(static_cast<size_t>(p.ch));
  std::vector<int32_t> at(static_cast<size_t>(p.ch));
  std::fill_n(dx + b * p.h * p.w * p.ch, p.h * p.w * p.ch, 0.0f);
  for (int64_t oh = 0; oh < p.ho; ++oh)
    for (int64_t ow = 0; ow < p.wo; ++ow) {
      window_max(p, a, b, oh, ow, best.data(), at.data());
      const float* g = dy + ((b * p.ho + oh) * p.wo + ow) * p.ch;
      for (int64_t c = 0; c < p.ch; ++c) dx[at[size_t(c)]] += g[c];
    }
}

void scatter_image(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t b) {
  const PoolGeom p = pool_geom(n.window(), in[0]->shape(), in[1]->shape()[1], in[1]->shape()[2]);
  const float* a = in[0]->data<float>();
  const float* dy = in[1]->data<float>();
  if (tiles_2x2(n.window(), in[0]->shape(), p.ho, p.wo)) max_pool_2x2_grad(a, dy, out.data<float>(), in[0]->shape(), p.ho, b);
  else if (p.disjoint) scatter_disjoint(p, a, dy, out.data<float>(), b);
  else scatter_overlapping(p, a, dy, out.data<float>(), b);
}

// One task per image.
void fast_select_and_scatter_f32(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  parallel_for(in[0]->shape()[0], [&](int64_t b) { scatter_image(n, in, out, b); });
}

}  // namespace

void reduce_window_images(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t b0, int64_t b1) {
  reduce_window_f32_images(n, in, out, b0, b1);
}

void select_and_scatter_image(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t b) {
  scatter_image(n, in, out, b);
}

// max_pool_2x2_grad loads each window's four vectors before it stores any.
bool scatter_may_write_over_input(const Graph& g, const Node& n) {
  return n.op == Op::select_and_scatter && tiles_2x2(n.window(), g.at(n.in[0]).shape, n.shape[1] / 2, n.shape[2] / 2);
}

namespace {

void fast_reduce_window(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (in[0]->dtype() == DType::f32 || in[0]->dtype() == DType::bf16) return in_f32<fast_reduce_window_f32>(n, in, out);
  ref_reduce_window(n, in, out);
}

// sum: the output gradient summed back over the transposed window. max: each window's
// gradient goes to its first maximum.
void grad_reduce_window(GradContext& c) {
  Graph& g = c.g;
  const Window2D w = c.n().window();
  const Shape xs = g.at(c.in(0)).shape, ys = c.n().shape;
  if (kind_of(c.n()) == WindowKind::sum) {
    Window2D t = input_grad_window(w, {xs[1], xs[2]}, {ys[1], ys[2]});
    return c.give(0, g.reduce_window(c.out_grad, WindowKind::sum, t));
  }
  c.give(0, g.select_and_scatter(c.in(0), c.out_grad, w));
}

// Linear in dy: each window takes the gradient at its maximum. None for x (the choice of
// maximum is piecewise constant).
void grad_select_and_scatter(GradContext& c) {
  Graph& g = c.g;
  NodeId at = g.reduce_window(c.in(0), WindowKind::argmax, c.n().window());
  c.give(1, g.gather(g.reshape(c.out_grad, {num_elements(c.n().shape)}), at));
}

// One operation per window element of every output (of reduce_window; of dy for the scatter).
Cost cost_reduce_window(const Graph& g, const Node& n) {
  const Window2D w = n.window();
  Cost c = movement_cost(g, n);
  const Shape& ys = n.op == Op::reduce_window ? n.shape : g.at(n.in[1]).shape;
  c.flops = double(num_elements(ys)) * double(w.size[0] * w.size[1]);
  return c;
}

}  // namespace

extern const OpInfo reduce_window_row = {Op::reduce_window, shape_reduce_window, ref_reduce_window, fast_reduce_window,
                                         grad_reduce_window, cost_reduce_window};
extern const OpInfo select_and_scatter_row = {Op::select_and_scatter, shape_select_and_scatter,
                                              ref_select_and_scatter, in_f32<fast_select_and_scatter_f32>,
                                              grad_select_and_scatter, cost_reduce_window};

}  // namespace tpu
