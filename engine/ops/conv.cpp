// The conv rows: 2-D convolution of NHWC inputs with HWIO filters over a Window2D (strides,
// padding, input and filter dilation) in feature groups (XLA's feature_group_count: grouped
// and depthwise convs), and its filter gradient. Reference: direct loops.
// Fast: where products run on the packed GEMM (kernels/gemm_packed.h), convs over small images
// as one product of the whole batch's patches (their pointwise filter gradients too) and 1x1
// windows over dilated inputs as a product placed where it goes; else oneDNN's convolutions
// where the build has them and the window suits them (kernels/onednn_conv.h); else patch
// matrices (im2col) times the filter / the output gradient with Eigen, cut into tasks by the
// shapes alone. bf16 computes in f32 (f32_compute.h); operands that are exactly bf16 values
// take oneDNN's bf16 convs on CPUs with bf16 instructions, or over small images (and in
// pointwise filter gradients) bf16 patch matrices on its bf16 matmul; grouped convs take oneDNN's grouped
// and depthwise primitives, a direct loop for depthwise filter gradients oneDNN declines, or
// one ungrouped kernel per group. The input gradient is a conv again (ir/window.h).
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "kernels/gemm_packed.h"
#include "kernels/register_tile.h"
#include "kernels/onednn_conv.h"
#include "kernels/transpose.h"
#include "ops/conv.h"
#include "ops/f32_compute.h"
#include "ops/kernel_util.h"
#include "ops/window_rule.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

// Sizes of one conv and, per output row/column and window offset, the input row/column read
// (-1: padding or a dilation hole). The im2col and direct kernels take one group (groups 1).
struct ConvGeom {
  int64_t n, h, w, ci, kh, kw, co, ho, wo;
  std::vector<int64_t> src_h, src_w;  // [ho * kh], [wo * kw]
  int64_t groups = 1;
  int64_t depth() const { return kh * kw * ci; }  // patch length = filter rows
  int64_t rows() const { return n * ho * wo; }    // patches = output positions
  int64_t cg() const { return ci / groups; }      // input channels per group
  int64_t og() const { return co / groups; }      // output channels per group
};

ConvGeom conv_geom(const Window2D& win, const Shape& xs, int64_t co, int64_t groups) {
  ConvGeom c{xs[0], xs[1], xs[2], xs[3], win.size[0], win.size[1], co,
             win.output_size(0, xs[1]), win.output_size(1, xs[2]), {}, {}, groups};
  for (int64_t o = 0; o < c.ho; ++o)
    for (int64_t k = 0; k < c.kh; ++k) c.src_h.push_back(win.source(0, o, k, c.h));
  for (int64_t o = 0; o < c.wo; ++o)
    for (int64_t k = 0; k < c.kw; ++k) c.src_w.push_back(win.source(1, o, k, c.w));
  return c;
}

// "" when `groups` splits the c input and o output channels evenly, else the problem.
std::string check_groups(const Graph& g, const Node& n, int64_t c, int64_t o) {
  const std::string op(op_name(n.op));
  const int64_t k = n.groups();
  if (k < 1 || k > std::max<int64_t>(c, 1))
    return op + ": groups must be between 1 and the " + std::to_string(c) + " input channels, got " + std::to_string(k);
  if (c % k != 0)
    return op + ": " + std::to_string(c) + " input channels do not split into " + std::to_string(k) + " groups, got " +
           operands_str(g, n);
  if (o % k != 0)
    return op + ": " + std::to_string(o) + " output channels do not split into " + std::to_string(k) + " groups, got " +
           operands_str(g, n);
  return "";
}

std::string shape_conv(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  const Node& w = g.at(n.in.at(1));
  if (x.shape.size() != 4 || w.shape.size() != 4 || x.dtype != w.dtype || !is_float(x.dtype))
    return "conv needs an input [N,H,W,C] and a filter [Kh,Kw,C/groups,O] of one floating-point type, got " +
           operands_str(g, n);
  if (n.attrs.transpose_rhs && n.groups() != 1)
    return "conv: a filter entering transposed ([Kh,Kw,O,C], tb) needs one group, got " + std::to_string(n.groups());
  const int64_t filter_in = w.shape[n.attrs.transpose_rhs ? 3 : 2], filter_out = w.shape[n.attrs.transpose_rhs ? 2 : 3];
  if (std::string e = check_groups(g, n, x.shape[3], filter_out); !e.empty()) return e;
  const int64_t groups = n.groups();
  if (x.shape[3] != filter_in * groups)
    return "conv: input has " + std::to_string(x.shape[3]) + " channels but the filter expects " +
           std::to_string(filter_in * groups) +
           (groups > 1 ? " (" + std::to_string(filter_in) + " per group, " + std::to_string(groups) + " groups)" : "") +
           ", got " + operands_str(g, n);
  std::array<int64_t, 2> out;
  if (std::string e = check_window(g, n, x, out); !e.empty()) return e;
  const Window2D win = n.window();
  if (win.size[0] != w.shape[0] || win.size[1] != w.shape[1])
    return "conv: window " + shape_str({win.size[0], win.size[1]}) + " differs from the filter " + type_of(g, n.in[1]);
  n.dtype = x.dtype;
  n.shape = {x.shape[0], out[0], out[1], filter_out};
  return "";
}

std::string shape_conv_filter_grad(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  const Node& dy = g.at(n.in.at(1));
  const std::string bad = "conv_filter_grad needs an input [N,H,W,C] and an output gradient [N,Ho,Wo,O] of one "
                          "floating-point type that fit the window, got " + operands_str(g, n);
  if (x.shape.size() != 4 || dy.shape.size() != 4 || x.dtype != dy.dtype || !is_float(x.dtype) || x.shape[0] != dy.shape[0])
    return bad;
  std::array<int64_t, 2> out;
  if (std::string e = check_window(g, n, x, out); !e.empty()) return e;
  if (out[0] != dy.shape[1] || out[1] != dy.shape[2]) return bad;
  if (std::string e = check_groups(g, n, x.shape[3], dy.shape[3]); !e.empty()) return e;
  const Window2D win = n.window();
  n.dtype = x.dtype;
  n.shape = {win.size[0], win.size[1], x.shape[3] / n.groups(), dy.shape[3]};
  return "";
}

// Calls f(output position, filter tap, input position) for every product of output rows
// [r0, r0 + rows) in order (flat indices of y[N,Ho,Wo] w[Kh,Kw] x[N,H,W], channels left out).
template <class F>
void for_each_tap(const ConvGeom& c, int64_t r0, int64_t rows, F f) {
  int64_t b = r0 / (c.ho * c.wo), oh = r0 / c.wo % c.ho, ow = r0 % c.wo;
  for (int64_t o = r0; o < r0 + rows; ++o) {
    for (int64_t i = 0; i < c.kh; ++i) {
      const int64_t ih = c.src_h[size_t(oh * c.kh + i)];
      if (ih < 0) continue;
      for (int64_t j = 0; j < c.kw; ++j) {
        const int64_t iw = c.src_w[size_t(ow * c.kw + j)];
        if (iw >= 0) f(o, i * c.kw + j, (b * c.h + ih) * c.w + iw);
      }
    }
    if (++ow == c.wo) {
      ow = 0;
      if (++oh == c.ho) oh = 0, ++b;
    }
  }
}

// Output channel m reads input channels m / og * cg + k, k < cg, of its group.
void ref_conv(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  const ConvGeom c = conv_geom(node.window(), in[0]->shape(), out.shape()[3], node.groups());
  const float* x = in[0]->data<float>();
  const float* f = in[1]->data<float>();
  const int64_t cg = c.cg(), og = c.og();
  const bool oi = node.attrs.transpose_rhs;  // f is [Kh,Kw,Co,Ci]
  std::vector<double> acc(size_t(out.size()), 0.0);
  for_each_tap(c, 0, c.rows(), [&](int64_t o, int64_t tap, int64_t at) {
    for (int64_t k = 0; k < cg; ++k)
      for (int64_t m = 0; m < c.co; ++m) {
        const int64_t fi = oi ? (tap * c.co + m) * cg + k : (tap * cg + k) * c.co + m;
        acc[size_t(o * c.co + m)] += double(x[at * c.ci + m / og * cg + k]) * double(f[fi]);
      }
  });
  for (int64_t i = 0; i < out.size(); ++i) out.data<float>()[i] = float(acc[size_t(i)]);
}

void ref_conv_filter_grad(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  const ConvGeom c = conv_geom(node.window(), in[0]->shape(), out.shape()[3], node.groups());
  const float* x = in[0]->data<float>();
  const float* dy = in[1]->data<float>();
  const int64_t cg = c.cg(), og = c.og();
  std::vector<double> acc(size_t(out.size()), 0.0);
  for_each_tap(c, 0, c.rows(), [&](int64_t o, int64_t tap, int64_t at) {
    for (int64_t k = 0; k < cg; ++k)
      for (int64_t m = 0; m < c.co; ++m)
        acc[size_t((tap * cg + k) * c.co + m)] += double(x[at * c.ci + m / og * cg + k]) * double(dy[o * c.co + m]);
  });
  for (int64_t i = 0; i < out.size(); ++i) out.data<float>()[i] = float(acc[size_t(i)]);
}

// Patch rows [r0, r0 + rows): row (b, oh, ow) holds the window's inputs in filter order
// (kh, kw, ci), zeros where the window reads padding
// (elements of type T: f32, or bf16 bits).
template <class T>
void im2col(const ConvGeom& c, const T* x, int64_t r0, int64_t rows, T* col) {
  int64_t b = r0 / (c.ho * c.wo), oh = r0 / c.wo % c.ho, ow = r0 % c.wo;
  for (int64_t r = 0; r < rows; ++r) {
    const T* image = x + b * c.h * c.w * c.ci;
    for (int64_t i = 0; i < c.kh; ++i) {
      const int64_t ih = c.src_h[size_t(oh * c.kh + i)];
      for (int64_t j = 0; j < c.kw; ++j, col += c.ci) {
        const int64_t iw = c.src_w[size_t(ow * c.kw + j)];
        const T* src = ih < 0 || iw < 0 ? nullptr : image + (ih * c.w + iw) * c.ci;
        if (src) std::memcpy(col, src, size_t(c.ci) * sizeof(T));
        else std::fill_n(col, c.ci, T(0));
      }
    }
    if (++ow == c.wo) {
      ow = 0;
      if (++oh == c.ho) oh = 0, ++b;
    }
  }
}

// A window that reads the input as it is (1x1, unit strides, no padding): no patch copy.
bool is_pointwise(const Window2D& w) {
  for (int i = 0; i < 2; ++i)
    if (w.size[i] != 1 || w.stride[i] != 1 || w.lhs_dilation[i] != 1 || w.pad_lo[i] != 0 || w.pad_hi[i] != 0) return false;
  return true;
}

// Whether the window reads a dilated input (holes between its values: the input gradient of a
// strided conv, a transposed conv).
bool dilated_input(const Window2D& w) { return w.lhs_dilation[0] != 1 || w.lhs_dilation[1] != 1; }

// The patch rows [r0, r0 + rows), copied into this thread's scratch buffer unless pointwise.
const float* patches(const ConvGeom& c, bool pointwise, const float* x, int64_t r0, int64_t rows) {
  if (pointwise) return x + r0 * c.ci;
  thread_local std::vector<float> scratch;
  if (scratch.size() < size_t(rows * c.depth())) scratch.resize(size_t(rows * c.depth()));
  im2col(c, x, r0, rows, scratch.data());
  return scratch.data();
}

// Patch rows per task: about 256 KiB of patches, a multiple of 8. It depends only on the
// shapes, so the arithmetic of every output element is the same for any thread count.
int64_t rows_per_block(int64_t depth) {
  const int64_t rows = (int64_t(1) << 16) / std::max<int64_t>(depth, 1);
  return std::clamp<int64_t>(rows / 8 * 8, 8, 4096);
}

// Few input channels make thin patches that a GEMM handles badly: the direct kernels below
// take the products of each output row one input element at a time, 16 output channels at
// a time in registers.
constexpr int64_t kDirectMaxChannels = 4;
using Lanes = Eigen::Array<float, 16, 1>;

// The products of output row (b, oh, ow): x element xs[t] times filter row ws[t], t < count.
struct RowTaps {
  std::vector<int64_t> xs, ws;
  int64_t count = 0;
};

void gather_taps(const ConvGeom& c, int64_t b, int64_t oh, int64_t ow, RowTaps& t) {
  // Locals: the stores below are int64 too, so the compiler could not keep c's fields in registers.
  const int64_t kh = c.kh, kw = c.kw, ci = c.ci, co = c.co, image = b * c.h;
  const int64_t* src_h = c.src_h.data() + oh * kh;
  const int64_t* src_w = c.src_w.data() + ow * kw;
  int64_t* xs = t.xs.data();
  int64_t* ws = t.ws.data();
  int64_t count = 0;
  for (int64_t i = 0; i < kh; ++i) {
    if (src_h[i] < 0) continue;
    const int64_t line = (image + src_h[i]) * c.w;
    for (int64_t j = 0; j < kw; ++j) {
      if (src_w[j] < 0) continue;
      const int64_t at = (line + src_w[j]) * ci, row = (i * kw + j) * ci;
      for (int64_t k = 0; k < ci; ++k, ++count) {
        xs[count] = at + k;
        ws[count] = (row + k) * co;
      }
    }
  }
  t.count = count;
}

// Calls f(row, taps) for output rows [r0, r0 + rows) in order.
template <class F>
void for_each_row(const ConvGeom& c, int64_t r0, int64_t rows, F f) {
  RowTaps taps{std::vector<int64_t>(size_t(c.depth())), std::vector<int64_t>(size_t(c.depth())), 0};
  int64_t b = r0 / (c.ho * c.wo), oh = r0 / c.wo % c.ho, ow = r0 % c.wo;
  for (int64_t r = r0; r < r0 + rows; ++r) {
    gather_taps(c, b, oh, ow, taps);
    f(r, taps);
    if (++ow == c.wo) {
      ow = 0;
      if (++oh == c.ho) oh = 0, ++b;
    }
  }
}

// y[row, :] = sum over taps of x * w[filter row, :], in tap order.
void direct_conv(const ConvGeom& c, const float* x, const float* w, float* y, int64_t r0, int64_t rows) {
  const int64_t full = c.co / 16 * 16;
  for_each_row(c, r0, rows, [&](int64_t r, const RowTaps& t) {
    float* yo = y + r * c.co;
    for (int64_t m0 = 0; m0 < full; m0 += 16) {
      Lanes acc = Lanes::Zero();
      for (int64_t p = 0; p < t.count; ++p) acc += x[t.xs[size_t(p)]] * Eigen::Map<const Lanes>(w + t.ws[size_t(p)] + m0);
      Eigen::Map<Lanes>(yo + m0) = acc;
    }
    for (int64_t m = full; m < c.co; ++m) {
      float acc = 0;
      for (int64_t p = 0; p < t.count; ++p) acc += x[t.xs[size_t(p)]] * w[t.ws[size_t(p)] + m];
      yo[m] = acc;
    }
  });
}

// A first layer's conv (up to kDirectMaxChannels input channels: few taps per output
// position) to 16-64 output channels: each output position's channels are summed in registers
// at once, tap after tap. oneDNN's primitives ran the Fashion-MNIST CNN's 3x3 conv of one
// channel to 32 (batch 128) at about 20 us per chunk of two images, a tenth of the peak; with
// its bias and relu, 1.04 ms a pass, this kernel 0.86 (its result written is most of that).
constexpr int64_t kFewTapsMaxDepth = 32;

bool few_taps_apply(const Window2D& win, const ConvGeom& c) {
  return c.groups == 1 && c.ci <= kDirectMaxChannels && c.depth() <= kFewTapsMaxDepth && c.co % 16 == 0 &&
         c.co <= 64 && !dilated_input(win);
}

namespace rt = register_tile;

// P output positions, the p-th's taps at x + p * x_step: y + p * y_step [0, V vectors) = the
// sum over taps t < count of x[xoff[t]] * w[woff[t] ...], in tap order. Four positions keep
// eight sums in flight, as the FMA units' latency wants.
template <int V, int P>
void few_taps_points(const float* x, int64_t x_step, const float* w, const int64_t* xoff, const int64_t* woff,
                     int64_t count, float* y, int64_t y_step) {
  rt::Vec acc[P][V] = {};
  for (int64_t t = 0; t < count; ++t) {
    const float* wp = w + woff[t];
    rt::Vec f[V];
    for (int m = 0; m < V; ++m) f[m] = rt::load(wp + m * rt::kLanes);
    for (int p = 0; p < P; ++p) {
      const float v = x[xoff[t] + p * x_step];
      for (int m = 0; m < V; ++m) acc[p][m] += v * f[m];
    }
  }
  for (int p = 0; p < P; ++p)
    for (int m = 0; m < V; ++m) rt::store(y + p * y_step + m * rt::kLanes, acc[p][m]);
}

// Per output column, whether every column its window reads is inside the image.
std::vector<bool> whole_columns(const ConvGeom& c) {
  std::vector<bool> whole(size_t(c.wo), true);
  for (int64_t ow = 0; ow < c.wo; ++ow)
    for (int64_t j = 0; j < c.kw; ++j) whole[size_t(ow)] = whole[size_t(ow)] && c.src_w[size_t(ow * c.kw + j)] >= 0;
  return whole;
}

// y for output images [b0, b1): each position's taps (the padding left out) in tap order. A
// row's taps are listed once for the columns whose windows are whole, as offsets from the
// window's first column; the others list their own.
template <int V>
void few_taps_conv_images(const ConvGeom& c, const float* x, const float* w, float* y, int64_t b0, int64_t b1) {
  int64_t row_x[kFewTapsMaxDepth], row_w[kFewTapsMaxDepth], own_x[kFewTapsMaxDepth], own_w[kFewTapsMaxDepth];
  auto list = [&](int64_t oh, int64_t ow, bool relative, int64_t* xs, int64_t* ws) {
    int64_t n = 0;
    for (int64_t i = 0; i < c.kh; ++i)
      for (int64_t j = 0; j < c.kw; ++j) {
        const int64_t ih = c.src_h[size_t(oh * c.kh + i)], iw = c.src_w[size_t(ow * c.kw + j)];
        if (ih < 0 || iw < 0) continue;
        for (int64_t k = 0; k < c.ci; ++k, ++n) {
          xs[n] = (ih * c.w + iw - (relative ? c.src_w[size_t(ow * c.kw)] : 0)) * c.ci + k;
          ws[n] = ((i * c.kw + j) * c.ci + k) * c.co;
        }
      }
    return n;
  };
  std::vector<int64_t> whole;  // columns whose every tap is inside
  const std::vector<bool> inside = whole_columns(c);
  for (int64_t ow = 0; ow < c.wo; ++ow)
    if (inside[size_t(ow)]) whole.push_back(ow);
  auto column_step = [&](size_t ow) { return (c.src_w[(ow + 1) * size_t(c.kw)] - c.src_w[ow * size_t(c.kw)]) * c.ci; };
  auto evenly_spaced = [&](size_t ow) { return column_step(ow) == column_step(ow + 1) && column_step(ow) == column_step(ow + 2); };
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t oh = 0; oh < c.ho; ++oh) {
      const float* image = x + b * c.h * c.w * c.ci;
      float* out = y + (b * c.ho + oh) * c.wo * c.co;
      const int64_t row = whole.empty() ? 0 : list(oh, whole.front(), true, row_x, row_w);
      for (size_t k = 0, ow = 0; ow < size_t(c.wo);) {
        if (k < whole.size() && whole[k] == int64_t(ow)) {
          const float* at = image + c.src_w[ow * size_t(c.kw)] * c.ci;
          if (k + 4 <= whole.size() && whole[k + 3] == int64_t(ow + 3) && evenly_spaced(ow)) {
            few_taps_points<V, 4>(at, column_step(ow), w, row_x, row_w, row, out + ow * c.co, c.co);
            k += 4, ow += 4;
            continue;
          }
          few_taps_points<V, 1>(at, 0, w, row_x, row_w, row, out + ow * c.co, 0);
          ++k, ++ow;
          continue;
        }
        const int64_t n = list(oh, int64_t(ow), false, own_x, own_w);
        few_taps_points<V, 1>(image, 0, w, own_x, own_w, n, out + ow * c.co, 0);
        ++ow;
      }
    }
}

// The conv in chunks of conv_chunk_images images across the pool, `done` (if any) called for
// each chunk's range of y.
void few_taps_conv(const ConvGeom& c, const float* x, const float* w, float* y, const ChunkDone& done) {
  const int64_t size = conv_chunk_images(c.n, c.ho * c.wo), per_image = c.ho * c.wo * c.co;
  parallel_for((c.n + size - 1) / size, [&](int64_t t) {
    const int64_t b0 = t * size, b1 = std::min(c.n, b0 + size);
    switch (c.co / rt::kLanes) {
      case 1: few_taps_conv_images<1>(c, x, w, y, b0, b1); break;
      case 2: few_taps_conv_images<2>(c, x, w, y, b0, b1); break;
      case 3: few_taps_conv_images<3>(c, x, w, y, b0, b1); break;
      case 4: few_taps_conv_images<4>(c, x, w, y, b0, b1); break;
      case 6: few_taps_conv_images<6>(c, x, w, y, b0, b1); break;
      default: few_taps_conv_images<8>(c, x, w, y, b0, b1); break;
    }
    if (done) done(b0 * per_image, b1 * per_image);
  });
}

// The few-taps conv's filter gradient: partial sums over the conv's chunks of images, summed
// in chunk order. oneDNN's primitive took the Fashion-MNIST CNN's first layer (one channel to
// 32, 3x3) at under a third of the peak even with its output gradient in cache.
// Sums held in registers per group of taps: as many as leave room for the gradient's vectors.
constexpr int kFewTapsSums = rt::kLanes == 16 ? 24 : 12;

// Where the columns whose windows are whole lie: [begin, end), every column between whole, at
// `step` input elements apart. Empty where they are not so (the taps are then checked).
struct WholeColumns {
  int64_t begin = 0, end = 0, step = 0;
};
WholeColumns whole_column_run(const ConvGeom& c) {
  const std::vector<bool> whole = whole_columns(c);
  WholeColumns r;
  r.begin = std::find(whole.begin(), whole.end(), true) - whole.begin();
  r.end = r.begin;
  while (r.end < c.wo && whole[size_t(r.end)]) ++r.end;
  if (std::find(whole.begin() + r.end, whole.end(), true) != whole.end()) return {};
  r.step = r.end - r.begin > 1 ? (c.src_w[size_t((r.begin + 1) * c.kw)] - c.src_w[size_t(r.begin * c.kw)]) * c.ci : 0;
  return r;
}

// part rows [t0, t0 + G) (filter taps) = the sum over output images [b0, b1), position after
// position, of each tap's input times the position's gradient: G x V sums in registers. A tap
// whose input lies in the padding is left out; rows and columns whose windows are whole take
// every tap without a check.
template <int V, int G>
void few_taps_grad_taps(const ConvGeom& c, const WholeColumns& whole, const float* x, const float* dy, int64_t b0,
                        int64_t b1, int64_t t0, float* part) {
  int64_t tap_i[G], tap_j[G], tap_k[G], column[G];  // column: from the window's first input
  for (int g = 0; g < G; ++g) {
    const int64_t t = t0 + g;
    tap_i[g] = t / (c.kw * c.ci), tap_j[g] = t / c.ci % c.kw, tap_k[g] = t % c.ci;
    column[g] = whole.end > whole.begin ? (c.src_w[size_t(whole.begin * c.kw + tap_j[g])] - c.src_w[size_t(whole.begin * c.kw)]) * c.ci : 0;
  }
  rt::Vec acc[G][V] = {};
  auto add = [&](int g, float v, const rt::Vec* gv) {
    for (int m = 0; m < V; ++m) acc[g][m] += v * gv[m];
  };
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t oh = 0; oh < c.ho; ++oh) {
      const float* image = x + b * c.h * c.w * c.ci;
      const float* grad = dy + (b * c.ho + oh) * c.wo * c.co;
      int64_t row[G];  // the tap's input row and channel from the image's start, or -1
      bool whole_row = true;
      for (int g = 0; g < G; ++g) {
        const int64_t ih = c.src_h[size_t(oh * c.kh + tap_i[g])];
        row[g] = ih < 0 ? -1 : ih * c.w * c.ci + tap_k[g];
        whole_row = whole_row && ih >= 0;
      }
      const int64_t fast_begin = whole_row ? whole.begin : c.wo, fast_end = whole_row ? whole.end : c.wo;
      auto checked = [&](int64_t ow) {
        rt::Vec gv[V];
        for (int m = 0; m < V; ++m) gv[m] = rt::load(grad + ow * c.co + m * rt::kLanes);
        for (int g = 0; g < G; ++g) {
          const int64_t iw = c.src_w[size_t(ow * c.kw + tap_j[g])];
          if (row[g] >= 0 && iw >= 0) add(g, image[row[g] + iw * c.ci], gv);
        }
      };
      for (int64_t ow = 0; ow < fast_begin; ++ow) checked(ow);
      const float* at = image + (fast_begin < fast_end ? c.src_w[size_t(fast_begin * c.kw)] * c.ci : 0);
      for (int64_t ow = fast_begin; ow < fast_end; ++ow, at += whole.step) {
        rt::Vec gv[V];
        for (int m = 0; m < V; ++m) gv[m] = rt::load(grad + ow * c.co + m * rt::kLanes);
        for (int g = 0; g < G; ++g) add(g, at[row[g] + column[g]], gv);
      }
      for (int64_t ow = std::max(fast_begin, fast_end); ow < c.wo; ++ow) checked(ow);
    }
  for (int g = 0; g < G; ++g)
    for (int m = 0; m < V; ++m) rt::store(part + (t0 + g) * c.co + m * rt::kLanes, acc[g][m]);
}

// Taps [t0, t0 + count) with G = count, count at most kMax.
template <int V, int kMax>
void few_taps_grad_count(int64_t count, const ConvGeom& c, const WholeColumns& whole, const float* x, const float* dy,
                         int64_t b0, int64_t b1, int64_t t0, float* part) {
  if constexpr (kMax > 1)
    if (count < kMax) return few_taps_grad_count<V, kMax - 1>(count, c, whole, x, dy, b0, b1, t0, part);
  few_taps_grad_taps<V, kMax>(c, whole, x, dy, b0, b1, t0, part);
}

// The taps in as few groups as the registers allow, of even size.
template <int V>
void few_taps_grad_images(const ConvGeom& c, const WholeColumns& whole, const float* x, const float* dy, int64_t b0,
                          int64_t b1, float* part) {
  constexpr int kMax = std::max(1, kFewTapsSums / V);
  const int64_t groups = (c.depth() + kMax - 1) / kMax, size = (c.depth() + groups - 1) / groups;
  for (int64_t t0 = 0; t0 < c.depth(); t0 += size)
    few_taps_grad_count<V, kMax>(std::min(size, c.depth() - t0), c, whole, x, dy, b0, b1, t0, part);
}

// The partial filter gradient of chunk t of `images` output images into part [depth, co].
void few_taps_filter_grad_part(const ConvGeom& c, const WholeColumns& whole, const float* x, const float* dy,
                               int64_t images, int64_t t, float* part) {
  const int64_t b0 = t * images, b1 = std::min(c.n, b0 + images);
  switch (c.co / rt::kLanes) {
    case 1: return few_taps_grad_images<1>(c, whole, x, dy, b0, b1, part);
    case 2: return few_taps_grad_images<2>(c, whole, x, dy, b0, b1, part);
    case 3: return few_taps_grad_images<3>(c, whole, x, dy, b0, b1, part);
    case 4: return few_taps_grad_images<4>(c, whole, x, dy, b0, b1, part);
    case 6: return few_taps_grad_images<6>(c, whole, x, dy, b0, b1, part);
    default: return few_taps_grad_images<8>(c, whole, x, dy, b0, b1, part);
  }
}

// out = the sum of `count` partials of `size` elements, in their order, in slices across the pool.
void sum_in_order(const float* parts, int64_t count, int64_t size, float* out) {
  constexpr int64_t kSlice = 4096;
  parallel_for((size + kSlice - 1) / kSlice, [&](int64_t slice) {
    const int64_t e0 = slice * kSlice, e1 = std::min(size, e0 + kSlice);
    std::copy(parts + e0, parts + e1, out + e0);
    for (int64_t t = 1; t < count; ++t)
      for (int64_t e = e0; e < e1; ++e) out[e] += parts[t * size + e];
  });
}

void few_taps_filter_grad(const ConvGeom& c, const float* x, const float* dy, float* dw) {
  const int64_t images = conv_chunk_images(c.n, c.ho * c.wo), count = (c.n + images - 1) / images;
  const int64_t size = c.depth() * c.co;
  if (count == 0) return void(std::fill_n(dw, size, 0.0f));  // no images: nothing to sum
  const WholeColumns whole = whole_column_run(c);
  auto parts = std::make_unique_for_overwrite<float[]>(size_t(count * size));
  parallel_for(count, [&](int64_t t) { few_taps_filter_grad_part(c, whole, x, dy, images, t, parts.get() + t * size); });
  sum_in_order(parts.get(), count, size, dw);
}

// dw[filter row, :] = sum over rows [r0, r0 + rows) of x * dy[row, :], in row order.
void direct_filter_grad(const ConvGeom& c, const float* x, const float* dy, float* dw, int64_t r0, int64_t rows) {
  const int64_t full = c.co / 16 * 16;
  std::fill_n(dw, c.depth() * c.co, 0.0f);
  for_each_row(c, r0, rows, [&](int64_t r, const RowTaps& t) {
    const float* g = dy + r * c.co;
    for (int64_t p = 0; p < t.count; ++p) {
      const float v = x[t.xs[size_t(p)]];
      float* d = dw + t.ws[size_t(p)];
      for (int64_t m0 = 0; m0 < full; m0 += 16) Eigen::Map<Lanes>(d + m0) += v * Eigen::Map<const Lanes>(g + m0);
      for (int64_t m = full; m < c.co; ++m) d[m] += v * g[m];
    }
  });
}

// The conv as oneDNN sees it, or nothing for windows it has no form for: a dilated input
// (the input gradient of a strided conv) or negative padding (cropping).
std::optional<ConvShape> onednn_shape(const Window2D& win, const ConvGeom& c) {
  for (int i = 0; i < 2; ++i)
    if (win.lhs_dilation[i] != 1 || win.pad_lo[i] < 0 || win.pad_hi[i] < 0) return std::nullopt;
  return ConvShape{c.n,      c.h,        c.w,        c.ci,       c.kh,           c.kw, c.co, c.ho,
                   c.wo,     win.stride, win.pad_lo, win.pad_hi, win.rhs_dilation, c.groups};
}

// The upper halves of src[n] in this thread's buffer `slot` when every element is exactly a
// bf16 value, else null. The first chunk is checked before the rest (f32 data fail there at
// once, so f32 convs pay next to nothing); the rest in chunks across the pool.
const uint16_t* narrowed(const float* src, int64_t n, int slot) {
  constexpr int64_t kChunk = 1 << 16;
  thread_local std::vector<uint16_t> buffers[2];
  buffers[slot].resize(size_t(n));
  uint16_t* dst = buffers[slot].data();  // this thread's: a task on another thread has its own
  if (!narrow_exact_bf16(src, dst, std::min(n, kChunk))) return nullptr;
  std::vector<uint8_t> exact(size_t((n + kChunk - 1) / kChunk), 1);
  parallel_for(int64_t(exact.size()) - 1, [&](int64_t t) {
    const int64_t i0 = (t + 1) * kChunk;
    exact[size_t(t + 1)] = narrow_exact_bf16(src + i0, dst + i0, std::min(kChunk, n - i0));
  });
  return std::find(exact.begin(), exact.end(), 0) == exact.end() ? dst : nullptr;
}

// Below this many input channels the bf16 primitives lose to the f32 ones, which make the same
// exact products: there the few multiply-adds per element cannot pay for checking and
// narrowing the operands (a first layer on one channel, say, and its filter gradient).
constexpr int64_t kMinBf16Channels = 8;

// Operands that are all exactly bf16 values (the mixed_bfloat16 policy rounds them, and the
// gradients that flow back through its casts), where bf16 products take oneDNN's bf16
// primitives (bf16_gemm(), kernels/gemm.h): the bf16 conv makes the same exact products and
// f32 sums at up to twice the f32 rate (those instructions flush subnormal bf16 values, below
// 2^-126, to zero, as the bf16 dot does).
bool bf16_convs() { return bf16_gemm() == Bf16Gemm::onednn && onednn_native_bf16(); }

bool bf16_exact_conv(const ConvShape& s, const float* x, const float* w, float* y, const ChunkDone& done) {
  if (!bf16_convs() || s.ci / s.groups < kMinBf16Channels) return false;
  const uint16_t* wb = narrowed(w, s.kh * s.kw * s.ci / s.groups * s.co, 1);
  const uint16_t* xb = wb ? narrowed(x, s.n * s.h * s.w * s.ci, 0) : nullptr;
  return xb && onednn_conv_bf16(s, xb, wb, y, done);
}

bool bf16_exact_filter_grad(const ConvShape& s, const float* x, const float* dy, float* dw) {
  if (!bf16_convs() || s.ci / s.groups < kMinBf16Channels) return false;
  const uint16_t* dyb = narrowed(dy, s.n * s.ho * s.wo * s.co, 1);
  const uint16_t* xb = dyb ? narrowed(x, s.n * s.h * s.w * s.ci, 0) : nullptr;
  return xb && onednn_conv_filter_grad_bf16(s, xb, dyb, dw);
}

bool bf16_exact_data_grad(const ConvShape& s, const float* dy, const float* w, float* dx) {
  if (!bf16_convs() || s.co / s.groups < kMinBf16Channels) return false;
  const uint16_t* wb = narrowed(w, s.kh * s.kw * s.ci / s.groups * s.co, 1);
  const uint16_t* dyb = wb ? narrowed(dy, s.n * s.ho * s.wo * s.co, 0) : nullptr;
  return dyb && onednn_conv_data_grad_bf16(s, dyb, wb, dx);
}

// The strided conv whose input gradient the conv (win, c) is (conv_input_grad: unit strides,
// a dilated input), or nothing for a window of another form. Its rows past the last window
// (read by none) need no padding, where the input gradient's window pads them.
std::optional<ConvShape> strided_forward_of(const Window2D& win, const ConvGeom& c) {
  ConvShape s{c.n, c.ho, c.wo, c.co, c.kh, c.kw, c.ci, c.h, c.w, {}, {}, {}, win.rhs_dilation, c.groups};
  for (int i = 0; i < 2; ++i) {
    const int64_t extent = (win.size[i] - 1) * win.rhs_dilation[i], in = i == 0 ? s.h : s.w, out = i == 0 ? s.ho : s.wo;
    s.stride[i] = win.lhs_dilation[i];
    s.pad_lo[i] = extent - win.pad_lo[i];
    s.pad_hi[i] = std::max<int64_t>(0, (out - 1) * s.stride[i] + extent + 1 - in - s.pad_lo[i]);
    const int64_t span = in + s.pad_lo[i] + s.pad_hi[i] - extent - 1;
    if (win.stride[i] != 1 || s.pad_lo[i] < 0 || span < 0 || span / s.stride[i] + 1 != out) return std::nullopt;
  }
  return s;
}

// The strided conv's filter [Kh,Kw,Cg,G*Og] back from its input gradient's [Kh,Kw,Og,G*Cg]
// (conv_input_grad reverses the taps and swaps each group's channels).
std::vector<float> unflipped_filter(const ConvGeom& c, const float* w) {
  const int64_t groups = c.groups, og = c.ci / groups, cg = c.co / groups, kh = c.kh, kw = c.kw;
  std::vector<float> f(size_t(kh * kw * og * c.co));
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j)
      for (int64_t k = 0; k < cg; ++k)
        for (int64_t g = 0; g < groups; ++g)
          for (int64_t o = 0; o < og; ++o)
            f[size_t(((i * kw + j) * cg + k) * c.ci + g * og + o)] =
                w[size_t((((kh - 1 - i) * kw + (kw - 1 - j)) * og + o) * c.co + g * cg + k)];
  return f;
}

// The input gradient of a strided conv on oneDNN's input-gradient primitive, which skips the
// dilation's zeros (the patch kernels multiply them).
bool onednn_input_grad(const Window2D& win, const ConvGeom& c, const float* dy, const float* w, float* dx) {
  const std::optional<ConvShape> s = strided_forward_of(win, c);
  if (!s) return false;
  const std::vector<float> f = unflipped_filter(c, w);
  return bf16_exact_data_grad(*s, dy, f.data(), dx) || onednn_conv_data_grad(*s, dy, f.data(), dx);
}

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;
using Mat = Eigen::Map<RowMajor>;

// Columns [offset, offset + count) of the rows x cols matrix src, into dst [rows, count]; and
// back (the channels of one group).
void take_columns(const float* src, int64_t rows, int64_t cols, int64_t offset, int64_t count, float* dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(src + r * cols + offset, count, dst + r * count);
}
void put_columns(const float* src, int64_t rows, int64_t cols, int64_t offset, int64_t count, float* dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(src + r * count, count, dst + r * cols + offset);
}

// The geometry of one group of c, as an ungrouped conv.
ConvGeom one_group(const ConvGeom& c) {
  ConvGeom one = c;
  one.ci = c.cg(), one.co = c.og(), one.groups = 1;
  return one;
}

void conv_f32(const Window2D& win, const ConvGeom& c, const float* x, const float* w, float* y);
void filter_grad_f32(const Window2D& win, const ConvGeom& c, const float* x, const float* dy, float* dw);

// Grouped convs oneDNN does not take (a dilated input: the input gradient of a strided grouped
// conv, or a transposed one; or a build without oneDNN): one ungrouped conv per group on copies
// of its channels.
void conv_per_group(const Window2D& win, const ConvGeom& c, const float* x, const float* w, float* y) {
  const ConvGeom one = one_group(c);
  const int64_t pixels = c.n * c.h * c.w, taps = c.kh * c.kw * one.ci;
  std::vector<float> xg(size_t(pixels * one.ci)), wg(size_t(taps * one.co)), yg(size_t(c.rows() * one.co));
  for (int64_t g = 0; g < c.groups; ++g) {
    take_columns(x, pixels, c.ci, g * one.ci, one.ci, xg.data());
    take_columns(w, taps, c.co, g * one.co, one.co, wg.data());
    conv_f32(win, one, xg.data(), wg.data(), yg.data());
    put_columns(yg.data(), c.rows(), c.co, g * one.co, one.co, y);
  }
}

void filter_grad_per_group(const Window2D& win, const ConvGeom& c, const float* x, const float* dy, float* dw) {
  const ConvGeom one = one_group(c);
  const int64_t pixels = c.n * c.h * c.w, taps = c.kh * c.kw * one.ci;
  std::vector<float> xg(size_t(pixels * one.ci)), dyg(size_t(c.rows() * one.co)), dwg(size_t(taps * one.co));
  for (int64_t g = 0; g < c.groups; ++g) {
    take_columns(x, pixels, c.ci, g * one.ci, one.ci, xg.data());
    take_columns(dy, c.rows(), c.co, g * one.co, one.co, dyg.data());
    filter_grad_f32(win, one, xg.data(), dyg.data(), dwg.data());
    put_columns(dwg.data(), taps, c.co, g * one.co, one.co, dw);
  }
}

// Grouped convs with few input channels per group (depthwise: one) that oneDNN does not take
// (an input-dilated window: the input gradient of a strided depthwise conv, a transposed one):
// output rows [r0, r0 + rows) summed tap by tap over all channels at once, y[m] += x[first input
// channel of m's group + k] * w[tap, k, m].
void direct_grouped_conv(const ConvGeom& c, const float* x, const float* w, float* y, int64_t r0, int64_t rows) {
  const int64_t cg = c.cg(), og = c.og(), co = c.co;
  std::vector<int64_t> first(static_cast<size_t>(co));
  for (int64_t m = 0; m < co; ++m) first[size_t(m)] = m / og * cg;
  std::fill_n(y + r0 * co, rows * co, 0.0f);
  for_each_tap(c, r0, rows, [&](int64_t o, int64_t tap, int64_t at) {
    float* yo = y + o * co;
    const float* xa = x + at * c.ci;
    const float* wt = w + tap * cg * co;
    if (cg == 1 && og == 1) {  // depthwise (or groups = ci = co = 1): channel m by its own tap, vectorized
      for (int64_t m = 0; m < co; ++m) yo[m] += xa[m] * wt[m];
      return;
    }
    for (int64_t k = 0; k < cg; ++k)
      for (int64_t m = 0; m < co; ++m) yo[m] += xa[first[size_t(m)] + k] * wt[k * co + m];
  });
}

// Convs over small images run as patch matrices (im2col) times the filter, or the output
// gradient, on one matrix product: oneDNN's conv primitives over chunks of the batch (each
// chunk one single-threaded call, kernels/onednn_conv.cpp) stream and reorder the whole filter
// per chunk, which costs most where the images are small (ResNet50's late stages) and in the
// filter gradient, which writes, reorders and sums a whole filter per chunk. Two operand types
// take this way: f32 on gemm_f32, and operands that are exactly bf16 values (bf16_convs) as
// bf16 bits on gemm_bf16 (oneDNN's bf16 matmul, AMX tiles where the CPU has them; the same
// exact products summed in f32). Which convs go where is measured per type and per gemm_f32
// way below; every choice depends on shapes only, never on the thread count.

// The product of patches and filter in either operand type.
void gemm_of(const GemmShape& s, const float* a, const float* b, float* c) { gemm_f32(s, a, b, c); }
void gemm_of(const GemmShape& s, const uint16_t* a, const uint16_t* b, float* c) { gemm_bf16(s, a, b, c); }

bool one_by_one(const Window2D& win) { return win.size[0] == 1 && win.size[1] == 1; }

// A 1x1 window over a dilated input: the input gradient of a strided 1x1 conv (ResNet's
// downsampling convs). Each output position reads one input position or only holes and
// padding, so the conv is the product of every input position with the filter, each row put
// where it goes and zeros elsewhere: the products the dilation's zeros would add are never made.
bool dilated_pointwise_window(const Window2D& win) {
  for (int i = 0; i < 2; ++i)
    if (win.size[i] != 1 || win.stride[i] != 1 || win.rhs_dilation[i] != 1) return false;
  return dilated_input(win);
}

// f32 where gemm_f32 is the packed kernel (CPUs below AVX-512): oneDNN's AVX2 direct kernels
// ran ResNet50's 3x3 convs on 8x8, 4x4 and 2x2 images at 20-60 GFLOP/s and its 2x2 filter
// gradient as a GEMM at 14 (ResNet50 at 64x64: 28 -> 37-41 samples/s), its 2x2x2048 pointwise
// filter gradient at 60 (8.8 ms a pass at batch 64, the product 3.2) and its strided 1x1 input
// gradients in 27 ms (2x2x2048, the placed product 8) and 10 (4x4x1024, 7); even at 8x8. Left
// to oneDNN: 16x16 images, pointwise forward convs (no faster), strided input gradients (their
// patches are mostly holes; the 1x1 ones placed).
constexpr int64_t kPatchGemmMaxPixels = 64;

// f32 where gemm_f32 is oneDNN's AVX-512 matmul, measured on ResNet50's shapes at 64x64
// inputs, batch 64, 2 threads (ms a pass, conv primitives -> patch product, alternating runs):
// forward convs at 2x2 outputs (3x3x512: 23 -> 6; 1x1: 9 -> 2.5), not at 4x4 (3x3x256:
// 6.8 -> 7.4, 1x1 2.6 -> 3.1); filter gradients of 3x3 windows at 2x2 (3x3x512: 33 -> 6) and
// 4x4 (3x3x256: 9.5 -> 7.5), not at 8x8 (3x3x128: 6.3 -> 10); 1x1 filter gradients with at
// least as many output as input channels at any size (64 -> 256 at 16x16: 4.1 -> 3.7;
// 1024 -> 2048 strided to 2x2: 26 -> 5) and all of them at 2x2 (2048 -> 512: 12 -> 3), but not
// the narrowing ones from 4x4 on (1024 -> 256 at 4x4: 3.3 -> 4.0, 256 -> 64 at 16x16: 4.0 ->
// 4.6); strided 1x1 input gradients up to 8x8 inputs (1024 -> 2048 at 2x2: 36 -> 6.5; 512 ->
// 1024 at 4x4: 9.4 -> 4.7); ResNet50 has none on larger ones.
constexpr int64_t kF32PatchConvMaxOutputs = 4;
constexpr int64_t kF32PatchFilterGradMaxOutputs = 16;
constexpr int64_t kF32PlacedMaxInputs = 64;

bool f32_pointwise_filter_grad_applies(const ConvGeom& c) {
  return c.co >= c.ci || c.ho * c.wo <= kF32PatchConvMaxOutputs;
}

bool f32_patch_conv_applies(const Window2D& win, const ConvGeom& c) {
  if (c.groups != 1 || c.ci <= kDirectMaxChannels || dilated_input(win)) return false;
  if (packed_gemm_used()) return c.ho * c.wo <= kPatchGemmMaxPixels && !is_pointwise(win);
  return c.ho * c.wo <= kF32PatchConvMaxOutputs;
}

bool f32_patch_filter_grad_applies(const Window2D& win, const ConvGeom& c) {
  if (c.groups != 1 || dilated_input(win)) return false;
  if (packed_gemm_used())
    return c.ho * c.wo <= kPatchGemmMaxPixels && (is_pointwise(win) || c.ci > kDirectMaxChannels);
  if (c.ci <= kDirectMaxChannels) return false;
  return one_by_one(win) ? f32_pointwise_filter_grad_applies(c) : c.ho * c.wo <= kF32PatchFilterGradMaxOutputs;
}

bool f32_placed_pointwise_applies(const Window2D& win, const ConvGeom& c) {
  if (c.groups != 1 || !dilated_pointwise_window(win)) return false;
  return c.h * c.w <= (packed_gemm_used() ? kPatchGemmMaxPixels : kF32PlacedMaxInputs);
}

// bf16: oneDNN 2.6's bf16 conv primitives ran ResNet50's late stages (64x64 inputs, batch 64)
// at 25-150 GFLOP/s (3x3x512x512 filter gradient over 2x2 images: 23 ms a pass); the matmul
// runs their patches at 700-1500 GFLOP/s (1.1 ms). Where the images are larger the primitives
// win the forward conv or are even with the matmul (measured at batch 64 from 4x4 outputs on)
// and win the filter gradient of 3x3 windows from 16x16 outputs on (the patches copy each
// input 9 times); pointwise filter gradients gain at all sizes.
bool bf16_patch_gemm_applies(const ConvGeom& c) { return bf16_convs() && c.groups == 1 && c.ci >= kMinBf16Channels; }

bool bf16_patch_conv_applies(const Window2D& win, const ConvGeom& c) {
  return bf16_patch_gemm_applies(c) && !dilated_input(win) && c.ho * c.wo <= 4;
}

bool bf16_patch_filter_grad_applies(const Window2D& win, const ConvGeom& c) {
  return bf16_patch_gemm_applies(c) && !dilated_input(win) && (one_by_one(win) || c.ho * c.wo <= 64);
}

// Every patch row of the batch, in this thread's buffer, copied in fixed blocks of rows across
// the pool. The buffer (one per operand type and thread) is kept from call to call at the
// largest size asked so far, uncapped and not counted in the memory plan: rows() x depth()
// elements. At batch 64: a 3x3x512 filter gradient over 8x8 outputs keeps 4096 x 4608 (38 MB
// as bf16; 75 MB as f32 on the packed GEMM); from AVX-512 on, f32 ones reach 1024 x 2304
// (9.4 MB, 3x3x256 at 4x4), but strided 1x1 filter gradients take it at any size (ResNet50 at
// 224x224 inputs: 50176 x 256, 51 MB).
template <class T>
const T* all_patches(const ConvGeom& c, const T* x) {
  thread_local std::vector<T> buffer;
  const int64_t total = c.rows(), block = rows_per_block(c.depth());
  if (buffer.size() < size_t(total * c.depth())) buffer.resize(size_t(total * c.depth()));
  T* col = buffer.data();
  parallel_for((total + block - 1) / block, [&](int64_t t) {
    const int64_t r0 = t * block;
    im2col(c, x, r0, std::min(block, total - r0), col + r0 * c.depth());
  });
  return col;
}

template <class T>
void patch_conv(const Window2D& win, const ConvGeom& c, const T* x, const T* w, float* y) {
  gemm_of(GemmShape{1, c.rows(), c.depth(), c.co}, is_pointwise(win) ? x : all_patches(c, x), w, y);
}

// A small filter gradient (MobileNetV2's 16 -> 96 expansion over 32x32 images) is a product
// of one tile, which gemm_bf16 runs on one thread: 4.2 ms a pass. Over many output positions
// it is cut into fixed parts of kPartRows rows instead, each part's product made across the
// pool and the parts summed in order, whatever the thread count.
constexpr int64_t kPartRows = 8192;
constexpr int64_t kMaxPartedGradient = 16384;  // filter elements: each part's copy stays small

template <class T>
void parted_filter_grad(const ConvGeom& c, const T* patches, const T* dy, float* dw) {
  const int64_t rows = c.rows(), depth = c.depth(), size = depth * c.co, parts = (rows + kPartRows - 1) / kPartRows;
  auto partial = std::make_unique_for_overwrite<float[]>(size_t(parts * size));
  parallel_for(parts, [&](int64_t p) {
    const int64_t r0 = p * kPartRows, count = std::min(kPartRows, rows - r0);
    gemm_of(GemmShape{1, depth, count, c.co, true, false}, patches + r0 * depth, dy + r0 * c.co, partial.get() + p * size);
  });
  constexpr int64_t kSlice = 4096;
  parallel_for((size + kSlice - 1) / kSlice, [&](int64_t slice) {
    for (int64_t e = slice * kSlice; e < std::min(size, (slice + 1) * kSlice); ++e) {
      float sum = partial[size_t(e)];
      for (int64_t p = 1; p < parts; ++p) sum += partial[size_t(p * size + e)];
      dw[e] = sum;
    }
  });
}

template <class T>
void patch_filter_grad(const Window2D& win, const ConvGeom& c, const T* x, const T* dy, float* dw) {
  const T* patches = is_pointwise(win) ? x : all_patches(c, x);
  if (c.depth() * c.co <= kMaxPartedGradient && c.rows() >= 2 * kPartRows) return parted_filter_grad(c, patches, dy, dw);
  gemm_of(GemmShape{1, c.depth(), c.rows(), c.co, true, false}, patches, dy, dw);
}

// The products of a few images at a time (about 4 MiB of them), each row then copied where
// its output position is.
template <class T>
void placed_pointwise_conv(const ConvGeom& c, const T* x, const T* w, float* y) {
  const int64_t pixels = c.h * c.w, co = c.co, outputs = c.ho * c.wo;
  const int64_t fit = (int64_t(1) << 20) / std::max<int64_t>(pixels * co, 1);
  const int64_t images = std::min(c.n, std::max<int64_t>(fit, 1));
  auto product_rows = std::make_unique_for_overwrite<float[]>(size_t(images * pixels * co));
  for (int64_t b0 = 0; b0 < c.n; b0 += images) {
    const int64_t count = std::min(images, c.n - b0);
    gemm_of(GemmShape{1, count * pixels, c.ci, co}, x + b0 * pixels * c.ci, w, product_rows.get());
    const int64_t total = count * outputs, block = rows_per_block(co);
    float* out = y + b0 * outputs * co;
    parallel_for((total + block - 1) / block, [&](int64_t t) {
      for (int64_t o = t * block; o < std::min(total, (t + 1) * block); ++o) {
        const int64_t b = o / outputs, ih = c.src_h[size_t(o / c.wo % c.ho)], iw = c.src_w[size_t(o % c.wo)];
        if (ih < 0 || iw < 0) std::fill_n(out + o * co, co, 0.0f);
        else std::copy_n(product_rows.get() + ((b * c.h + ih) * c.w + iw) * co, co, out + o * co);
      }
    });
  }
}

// The filter (or output gradient) `a` and the input x narrowed into this thread's buffers, or
// nulls when either holds a value that is not exactly bf16.
std::pair<const uint16_t*, const uint16_t*> narrowed_pair(const float* a, int64_t na, const float* x, int64_t nx) {
  const uint16_t* ab = narrowed(a, na, 1);
  const uint16_t* xb = ab ? narrowed(x, nx, 0) : nullptr;
  return {xb ? ab : nullptr, xb};
}

// Whether patch_conv_f32 takes the conv (before oneDNN's primitives).
bool patch_conv_takes(const Window2D& win, const ConvGeom& c) {
  return (dilated_pointwise_window(win) && bf16_patch_gemm_applies(c)) || bf16_patch_conv_applies(win, c) ||
         f32_placed_pointwise_applies(win, c) || f32_patch_conv_applies(win, c);
}

// The conv on a patch product when one applies: bf16 first (exact operands), else f32.
bool patch_conv_f32(const Window2D& win, const ConvGeom& c, const float* x, const float* w, float* y) {
  const int64_t inputs = c.n * c.h * c.w * c.ci, weights = c.kh * c.kw * c.ci * c.co;
  const bool placed = dilated_pointwise_window(win);
  if ((placed && bf16_patch_gemm_applies(c)) || bf16_patch_conv_applies(win, c)) {
    const auto [wb, xb] = narrowed_pair(w, weights, x, inputs);
    if (xb) return placed ? placed_pointwise_conv(c, xb, wb, y) : patch_conv(win, c, xb, wb, y), true;
  }
  if (f32_placed_pointwise_applies(win, c)) return placed_pointwise_conv(c, x, w, y), true;
  if (f32_patch_conv_applies(win, c)) return patch_conv(win, c, x, w, y), true;
  return false;
}

bool patch_filter_grad_f32(const Window2D& win, const ConvGeom& c, const float* x, const float* dy, float* dw) {
  if (bf16_patch_filter_grad_applies(win, c)) {
    const auto [dyb, xb] = narrowed_pair(dy, c.rows() * c.co, x, c.n * c.h * c.w * c.ci);
    if (xb) return patch_filter_grad(win, c, xb, dyb, dw), true;
  }
  if (f32_patch_filter_grad_applies(win, c)) return patch_filter_grad(win, c, x, dy, dw), true;
  return false;
}

// The conv in chunks of images: by few_taps_conv or on oneDNN's forward primitives (bf16 ones
// for operands exactly bf16), with `done` (if any) called for each chunk of y; false where
// neither takes it. filter_oi: w is [Kh,Kw,Co,Ci] (conv_f32_filter_oi).
bool chunked_forward(const Window2D& win, const ConvGeom& c, const float* x, const float* w, float* y, bool filter_oi,
                     const ChunkDone& done) {
  if (!filter_oi && few_taps_apply(win, c)) return few_taps_conv(c, x, w, y, done), true;
  std::optional<ConvShape> s = onednn_shape(win, c);
  if (!s) return false;
  s->filter_oi = filter_oi;
  return bf16_exact_conv(*s, x, w, y, done) || onednn_conv(*s, x, w, y, done);
}

// y[rows, Co] = patches[rows, depth] * w[depth, Co], in fixed blocks of rows.
void conv_f32(const Window2D& win, const ConvGeom& c, const float* x, const float* w, float* y) {
  if (patch_conv_f32(win, c, x, w, y) || chunked_forward(win, c, x, w, y, false, {})) return;
  if (!onednn_shape(win, c) && onednn_input_grad(win, c, x, w, y)) return;
  if (c.groups > 1 && c.cg() > kDirectMaxChannels) return conv_per_group(win, c, x, w, y);
  if (c.groups > 1) {
    const int64_t total = c.rows(), block = rows_per_block(c.kh * c.kw * c.co);
    return parallel_for((total + block - 1) / block, [&](int64_t t) {
      direct_grouped_conv(c, x, w, y, t * block, std::min(block, total - t * block));
    });
  }
  const ConstMat filter(w, c.depth(), c.co);
  const int64_t total = c.rows(), block = rows_per_block(c.depth());
  const bool pointwise = is_pointwise(win);
  parallel_for((total + block - 1) / block, [&](int64_t t) {
    const int64_t r0 = t * block, rows = std::min(block, total - r0);
    if (c.ci <= kDirectMaxChannels) return direct_conv(c, x, w, y, r0, rows);
    const ConstMat a(patches(c, pointwise, x, r0, rows), rows, c.depth());
    Mat yb(y + r0 * c.co, rows, c.co);
    if (c.co == 1) yb.col(0).noalias() = a * filter.col(0);  // matrix-vector
    else yb.noalias() = a * filter;
  });
}

// dw = the sum of partial filter gradients over fixed chunks of output rows (at most 64, of at
// most 1024 rows unless that makes more than 64; the chunks follow from the shape alone), each
// computed by partial(r0, rows, its dw), then summed in chunk order.
template <class F>
void sum_over_row_chunks(const ConvGeom& c, int64_t size, float* dw, F partial) {
  const int64_t total = c.rows();
  const int64_t chunk = std::max(std::min<int64_t>(rows_per_block(c.depth()), 1024), (total + 63) / 64);
  const int64_t chunks = (total + chunk - 1) / chunk;
  auto parts = std::make_unique_for_overwrite<float[]>(size_t(chunks * size));
  parallel_for(chunks, [&](int64_t t) {
    const int64_t r0 = t * chunk;
    partial(r0, std::min(chunk, total - r0), parts.get() + t * size);
  });
  constexpr int64_t kSlice = 4096;
  parallel_for((size + kSlice - 1) / kSlice, [&](int64_t sl) {
    for (int64_t e = sl * kSlice; e < std::min(size, (sl + 1) * kSlice); ++e) {
      float sum = 0;
      for (int64_t t = 0; t < chunks; ++t) sum += parts[size_t(t * size + e)];
      dw[e] = sum;
    }
  });
}

// A depthwise conv's filter gradient (one input and one output channel per group):
// dw[tap, m] = sum over output rows of x[the row's input at tap, m] * dy[row, m], all channels
// at once: the passes oneDNN does not take (kernels/onednn_conv.cpp declines its GEMM per
// channel: 17 ms a pass over MobileNetV2's 2x2x960 blocks at batch 64, this loop 0.3 ms).
void depthwise_filter_grad(const ConvGeom& c, const float* x, const float* dy, float* dw) {
  const int64_t co = c.co;
  sum_over_row_chunks(c, c.kh * c.kw * co, dw, [&](int64_t r0, int64_t rows, float* part) {
    std::fill_n(part, c.kh * c.kw * co, 0.0f);
    for_each_tap(c, r0, rows, [&](int64_t o, int64_t tap, int64_t at) {
      const float* xa = x + at * co;
      const float* g = dy + o * co;
      float* d = part + tap * co;
      for (int64_t m = 0; m < co; ++m) d[m] += xa[m] * g[m];
    });
  });
}

// dw[depth, Co] = patches^T dy over fixed chunks of rows.
void filter_grad_f32(const Window2D& win, const ConvGeom& c, const float* x, const float* dy, float* dw) {
  if (patch_filter_grad_f32(win, c, x, dy, dw)) return;
  const std::optional<ConvShape> s = onednn_shape(win, c);
  // oneDNN's depthwise filter gradient over images of at most 2x2 outputs (MobileNetV2's last
  // blocks at 64x64 inputs) took 2.9 ms a pass at batch 64 on AVX-512, the loop below 0.15;
  // from 4x4 outputs on oneDNN's is 2-4 times faster for 3x3 windows, but 3-8 times slower
  // for 5x5 ones (EfficientNetB0's: 4x4x672 7.2 ms, the loop 0.8; 16x16x144 7.9 and 2.5).
  // One input and one output channel per group: depthwise convs, and also ungrouped ones with
  // one input and one output channel (groups = ci = co = 1), which the same loop computes.
  const bool depthwise = c.cg() == 1 && c.og() == 1;
  if (depthwise && (c.ho * c.wo <= 4 || c.kh * c.kw > 9)) return depthwise_filter_grad(c, x, dy, dw);
  if (few_taps_apply(win, c)) return few_taps_filter_grad(c, x, dy, dw);
  if (s && (bf16_exact_filter_grad(*s, x, dy, dw) || onednn_conv_filter_grad(*s, x, dy, dw))) return;
  if (depthwise) return depthwise_filter_grad(c, x, dy, dw);
  if (c.groups > 1) return filter_grad_per_group(win, c, x, dy, dw);
  const bool pointwise = is_pointwise(win);
  sum_over_row_chunks(c, c.depth() * c.co, dw, [&](int64_t r0, int64_t rows, float* part) {
    if (c.ci <= kDirectMaxChannels) return direct_filter_grad(c, x, dy, part, r0, rows);
    const ConstMat a(patches(c, pointwise, x, r0, rows), rows, c.depth());
    const ConstMat dyb(dy + r0 * c.co, rows, c.co);
    Mat(part, c.depth(), c.co).noalias() = a.transpose() * dyb;
  });
}

// A conv whose filter enters transposed ([Kh,Kw,Co,Ci]: an input gradient's, see
// channels_swapped_into_conv in passes/algebraic_simplification.cpp): oneDNN's primitives read
// it in place, their filter reorder taking either layout; the other kernels take an HWIO copy.
void conv_f32_filter_oi(const Window2D& win, const ConvGeom& c, const float* x, const float* w_oi, float* y) {
  if (!patch_conv_takes(win, c) && chunked_forward(win, c, x, w_oi, y, true, {})) return;
  auto hwio = std::make_unique_for_overwrite<float[]>(size_t(c.kh * c.kw * c.ci * c.co));
  transpose_last_two(w_oi, hwio.get(), c.kh * c.kw, c.co, c.ci);
  conv_f32(win, c, x, hwio.get(), y);
}

void fast_conv(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  const Window2D win = node.window();
  const ConvGeom c = conv_geom(win, in[0]->shape(), out.shape()[3], node.groups());
  const float *x = in[0]->data<float>(), *w = in[1]->data<float>();
  if (node.attrs.transpose_rhs) return conv_f32_filter_oi(win, c, x, w, out.data<float>());
  conv_f32(win, c, x, w, out.data<float>());
}

void fast_conv_filter_grad(const Node& node, std::span<const Tensor* const> in, Tensor& out) {
  const Window2D win = node.window();
  filter_grad_f32(win, conv_geom(win, in[0]->shape(), out.shape()[3], node.groups()), in[0]->data<float>(),
                  in[1]->data<float>(), out.data<float>());
}

// The filter with its two spatial dims reversed: reversing both is reversing the flattened
// taps (i * Kw + j -> (Kh-1-i) * Kw + (Kw-1-j)), one gather of whole rows [Ci, Co].
NodeId reverse_spatial(Graph& g, NodeId w) {
  const Shape ws = g.at(w).shape;
  const int64_t taps = ws[0] * ws[1];
  if (taps == 1) return w;
  Tensor idx(DType::i32, {taps});
  for (int64_t t = 0; t < taps; ++t) idx.data<int32_t>()[t] = int32_t(taps - 1 - t);
  NodeId rows = g.gather(g.reshape(w, {taps, ws[2], ws[3]}), g.constant(std::move(idx)));
  return g.reshape(rows, ws);
}

// The filter w[Kh,Kw,Cg,G*Og] as the input gradient's filter [Kh,Kw,Og,G*Cg]: each group's
// in/out channels swapped, the groups kept in order.
NodeId swap_channels(Graph& g, NodeId w, int64_t groups) {
  if (groups == 1) return g.transpose(w, {0, 1, 3, 2});
  const Shape ws = g.at(w).shape;
  const int64_t og = ws[3] / groups;
  NodeId split = g.reshape(w, {ws[0], ws[1], ws[2], groups, og});
  return g.reshape(g.transpose(split, {0, 1, 4, 3, 2}), {ws[0], ws[1], og, groups * ws[2]});
}

bool widened_from_bf16(const Graph& g, NodeId id) {
  const Node& n = g.at(id);
  return n.op == Op::convert && g.at(n.in[0]).dtype == DType::bf16;
}

// The output gradient the backward convs take. Under mixed_bfloat16 both operands arrive as
// bf16 values widened to f32 (the MXU's contract: bf16 products, f32 sums); the gradient then
// goes through the MXU the same way, rounded to bf16 as the dot's gradient rounds it, so the
// backward convs run on bf16 operands too (bf16_exact_conv) instead of f32 ones.
NodeId backward_operand(GradContext& c) {
  if (!widened_from_bf16(c.g, c.in(0)) || !widened_from_bf16(c.g, c.in(1))) return c.out_grad;
  return c.g.convert(c.g.convert(c.out_grad, DType::bf16), DType::f32);
}

void grad_conv(GradContext& c) {
  const Window2D w = c.n().window();
  const int64_t groups = c.n().groups();
  const NodeId dy = backward_operand(c);
  // A filter entering transposed is the HWIO filter transpose(f); its gradient goes back the same way.
  const bool oi = c.n().attrs.transpose_rhs;
  const NodeId filter = oi ? c.g.transpose(c.in(1), {0, 1, 3, 2}) : c.in(1);
  if (c.needs(0)) c.give(0, conv_input_grad(c.g, dy, filter, w, c.g.at(c.in(0)).shape, groups));
  if (!c.needs(1)) return;
  const NodeId df = c.g.conv_filter_grad(c.in(0), dy, w, groups);
  c.give(1, oi ? c.g.transpose(df, {0, 1, 3, 2}) : df);
}

// conv_filter_grad(x, dy) is bilinear, and <G, conv_filter_grad(x, dy)> = <dy, conv(x, G)>
// (with the same groups).
void grad_conv_filter_grad(GradContext& c) {
  const Window2D w = c.n().window();
  const int64_t groups = c.n().groups();
  if (c.needs(0)) c.give(0, conv_input_grad(c.g, c.in(1), c.out_grad, w, c.g.at(c.in(0)).shape, groups));
  if (c.needs(1)) c.give(1, c.g.conv(c.in(0), c.out_grad, w, groups));
}

// 2 * N*Ho*Wo * Kh*Kw*(Ci/groups) * Co for both rows.
Cost cost_conv(const Graph& g, const Node& n) {
  const Window2D w = n.window();
  const Shape& xs = g.at(n.in[0]).shape;
  const Shape& ys = n.op == Op::conv ? n.shape : g.at(n.in[1]).shape;
  Cost c = movement_cost(g, n);
  c.flops = 2.0 * double(num_elements(ys)) * double(w.size[0] * w.size[1] * (xs[3] / std::max<int64_t>(n.groups(), 1)));
  return c;
}

}  // namespace

bool conv_in_chunks(const Node& node, std::span<const Tensor* const> in, Tensor& out, const ChunkDone& done) {
  if (out.dtype() != DType::f32 || in[0]->dtype() != DType::f32 || in[1]->dtype() != DType::f32) return false;
  const Window2D win = node.window();
  const ConvGeom c = conv_geom(win, in[0]->shape(), out.shape()[3], node.groups());
  if (patch_conv_takes(win, c)) return false;
  return chunked_forward(win, c, in[0]->data<float>(), in[1]->data<float>(), out.data<float>(), node.attrs.transpose_rhs,
                        done);
}

namespace {
// filter_grad_f32 takes the few-taps kernel: no patch product comes first.
bool few_taps_filter_grad_taken(const Window2D& win, const ConvGeom& c) {
  return few_taps_apply(win, c) && !bf16_patch_filter_grad_applies(win, c) && !f32_patch_filter_grad_applies(win, c);
}

// oneDNN's ConvShape of a filter gradient that filter_grad_f32 takes on oneDNN's f32 primitive,
// where it has one, unless its operands are exactly bf16 (bf16_exact_filter_grad): the ways it
// tries before by shape do not apply.
std::optional<ConvShape> onednn_filter_grad_shape(const Window2D& win, const ConvGeom& c) {
  if (c.groups != 1 || few_taps_apply(win, c) || bf16_patch_filter_grad_applies(win, c) ||
      f32_patch_filter_grad_applies(win, c) || (c.cg() == 1 && c.og() == 1))
    return std::nullopt;
  return onednn_shape(win, c);
}
}  // namespace

bool filter_grad_in_image_chunks(const Node& node, const Shape& xs) {
  const Window2D win = node.window();
  const ConvGeom c = conv_geom(win, xs, node.shape[3], node.groups());
  return few_taps_filter_grad_taken(win, c) || onednn_filter_grad_shape(win, c).has_value();
}

ImageChunkedFilterGrad image_chunked_filter_grad(const Node& node, std::span<const Tensor* const> in) {
  const Window2D win = node.window();
  auto c = std::make_shared<const ConvGeom>(conv_geom(win, in[0]->shape(), node.shape[3], node.groups()));
  const float *x = in[0]->data<float>(), *dy = in[1]->data<float>();
  const int64_t size = c->depth() * c->co;
  if (few_taps_filter_grad_taken(win, *c)) {
    const int64_t images = conv_chunk_images(c->n, c->ho * c->wo);
    const WholeColumns whole = whole_column_run(*c);
    return {images, (c->n + images - 1) / images,
            [c, whole, x, dy, images](int64_t t, float* part) { few_taps_filter_grad_part(*c, whole, x, dy, images, t, part); },
            [size](const float* parts, int64_t count, float* dw) { sum_in_order(parts, count, size, dw); }};
  }
  const std::optional<ConvShape> s = onednn_filter_grad_shape(win, *c);
  // bf16_exact_filter_grad takes bf16 primitives where both operands are exactly bf16: an input
  // that is not rules them out before the output gradient is made (f32 data fail at once).
  if (s && bf16_convs() && c->ci >= kMinBf16Channels && narrowed(x, c->n * c->h * c->w * c->ci, 0)) return {};
  const FilterGradChunks chunks = s ? onednn_filter_grad_chunks(*s) : FilterGradChunks{};
  if (chunks.count == 0) return {};
  return {chunks.images, chunks.count,
          [s = *s, x, dy](int64_t t, float* part) { onednn_filter_grad_chunk(s, x, dy, t, part); },
          [s = *s](const float* parts, int64_t count, float* dw) { onednn_filter_grad_sum(s, parts, count, dw); }};
}

NodeId conv_input_grad(Graph& g, NodeId dy, NodeId w, const Window2D& win, const Shape& xs, int64_t groups) {
  const Shape ys = g.at(dy).shape;
  NodeId flipped = swap_channels(g, reverse_spatial(g, w), groups);
  return g.conv(dy, flipped, input_grad_window(win, {xs[1], xs[2]}, {ys[1], ys[2]}), groups);
}

extern const OpInfo conv_row = {Op::conv, shape_conv, in_f32<ref_conv>, in_f32<fast_conv>, grad_conv, cost_conv};
extern const OpInfo conv_filter_grad_row = {Op::conv_filter_grad, shape_conv_filter_grad, in_f32<ref_conv_filter_grad>,
                                            in_f32<fast_conv_filter_grad>, grad_conv_filter_grad, cost_conv};

}  // namespace tpu
