#include "kernels/onednn_conv.h"

#include <algorithm>

namespace tpu {

namespace {

// Images per chunk: about kRows output positions, so each primitive call has enough work
// to amortise loading its filter, but at least kMinChunks chunks where the batch allows: a
// late stage's small images (ResNet50's 4x4 and 2x2 at 64x64 inputs, a batch of 64) made one
// chunk, which one thread ran while the others waited (ResNet50's step took 1.3x as long).
constexpr int64_t kRows = 2048;
constexpr int64_t kMinChunks = 4;

// The pool's threads take chunks in turn, so the chunk count decides how evenly they share a
// pass: 13 chunks of 10 (a 14x14 stage at batch 128) kept one of two threads busy for 7 chunks
// while the other ran 6. Of the sizes down to half the one above, the one whose busiest thread
// (on 2 or on 4 threads) has the fewest images more than its share is taken; the larger on a tie.
int64_t busiest_images(int64_t n, int64_t size, int64_t threads) {
  const int64_t count = (n + size - 1) / size, last = n - (count - 1) * size;
  const int64_t rounds = (count + threads - 1) / threads;
  return count % threads == 1 ? (rounds - 1) * size + last : rounds * size;
}

}  // namespace

int64_t conv_chunk_images(int64_t n, int64_t positions) {
  if (n <= 1) return 1;
  int64_t most = std::clamp<int64_t>(kRows / std::max<int64_t>(positions, 1), 1, n);
  most = std::min(most, (n + kMinChunks - 1) / kMinChunks);
  int64_t best = most;
  double best_excess = 1e300;
  for (int64_t size = most; size >= (most + 1) / 2; --size) {
    double excess = 0;  // the busiest thread's images over an even share, the worse of 2 and 4 threads
    for (int64_t threads : {2, 4}) excess = std::max(excess, double(busiest_images(n, size, threads) * threads) / double(n));
    if (excess < best_excess) best = size, best_excess = excess;
  }
  return best;
}

}  // namespace tpu

#ifdef TPU_HAVE_ONEDNN

#include <atomic>
#include <bit>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "core/error.h"
#include "kernels/onednn_util.h"
#include "kernels/product_check.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

using namespace onednn;
using tag = memory::format_tag;
using dtype = memory::data_type;

enum class Pass : uint8_t { forward, filter_grad, data_grad };

struct Key {
  Pass pass;
  dtype in;     // of the operands (forward: f32 or bf16); results are f32
  ConvShape s;  // n: the images of one chunk
  auto operator<=>(const Key&) const = default;
};

// The fast implementations want the filter in a blocked layout of their own: a reorder
// moves it from HWIO before the forward conv, and the filter gradient back to HWIO after.
struct Entry {
  bool ok = false;
  // forward: src, weights, dst; filter_grad: src, diff_dst, diff_weights;
  // data_grad: diff_dst, weights, diff_src
  Call conv;
  std::optional<Call> filter;  // the reorder, when the layouts differ
  size_t blocked_bytes = 0;    // the filter in the primitive's layout
};

memory::desc image(int64_t n, int64_t h, int64_t w, int64_t c, dtype t = dtype::f32) { return {{n, c, h, w}, t, tag::nhwc}; }
// The filter in our layout (user = true): HWIO, or with groups [Kh,Kw,Ci/G,G*(Co/G)], which
// is oneDNN's grouped layout hwigo; else in the layout the primitive picks.
memory::desc filter(const ConvShape& s, bool user, dtype t = dtype::f32) {
  if (s.groups == 1 && user && s.filter_oi)  // [Kh,Kw,Co,Ci]: no format tag names it, strides do
    return {{s.co, s.ci, s.kh, s.kw}, t, memory::dims{s.ci, 1, s.kw * s.co * s.ci, s.co * s.ci}};
  if (s.groups == 1) return {{s.co, s.ci, s.kh, s.kw}, t, user ? tag::hwio : tag::any};
  return {{s.groups, s.co / s.groups, s.ci / s.groups, s.kh, s.kw}, t, user ? tag::hwigo : tag::any};
}

// The forward descriptor, which the filter gradient's needs as a hint too.
dnnl::convolution_forward::primitive_desc forward_pd(const ConvShape& s, dtype in) {
  const memory::dims strides{s.stride[0], s.stride[1]}, dilates{s.dilation[0] - 1, s.dilation[1] - 1},
      lo{s.pad_lo[0], s.pad_lo[1]}, hi{s.pad_hi[0], s.pad_hi[1]};
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                    image(s.n, s.h, s.w, s.ci, in), filter(s, false, in),
                                    image(s.n, s.ho, s.wo, s.co), strides, dilates, lo, hi);
  return {d, primitive_attributes(), cpu_engine()};
}

// The filter gradient is f32 for bf16 operands too.
dnnl::convolution_backward_weights::primitive_desc filter_grad_pd(const ConvShape& s, dtype in) {
  const memory::dims strides{s.stride[0], s.stride[1]}, dilates{s.dilation[0] - 1, s.dilation[1] - 1},
      lo{s.pad_lo[0], s.pad_lo[1]}, hi{s.pad_hi[0], s.pad_hi[1]};
  dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, image(s.n, s.h, s.w, s.ci, in),
                                             filter(s, false), image(s.n, s.ho, s.wo, s.co, in), strides,
                                             dilates, lo, hi);
  return {d, primitive_attributes(), cpu_engine(), forward_pd(s, in)};
}

// The input gradient is f32 for bf16 operands too.
dnnl::convolution_backward_data::primitive_desc data_grad_pd(const ConvShape& s, dtype in) {
  const memory::dims strides{s.stride[0], s.stride[1]}, dilates{s.dilation[0] - 1, s.dilation[1] - 1},
      lo{s.pad_lo[0], s.pad_lo[1]}, hi{s.pad_hi[0], s.pad_hi[1]};
  dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, image(s.n, s.h, s.w, s.ci),
                                          filter(s, false, in), image(s.n, s.ho, s.wo, s.co, in), strides, dilates,
                                          lo, hi);
  return {d, primitive_attributes(), cpu_engine(), forward_pd(s, in)};
}

std::optional<Call> reorder(const memory::desc& from, const memory::desc& to) {
  if (from == to) return std::nullopt;
  dnnl::reorder::primitive_desc pd(cpu_engine(), from, cpu_engine(), to, primitive_attributes());
  return Call{dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, pd.scratchpad_desc()};
}

void make_primitives(const Key& key, Entry& e) {
  const ConvShape& s = key.s;
  if (key.pass == Pass::forward) {
    auto pd = forward_pd(s, key.in);
    e.conv = {dnnl::convolution_forward(pd),
              {{DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_WEIGHTS, pd.weights_desc()}, {DNNL_ARG_DST, pd.dst_desc()}},
              pd.scratchpad_desc()};
    e.filter = reorder(filter(s, true, key.in), pd.weights_desc());
    e.blocked_bytes = pd.weights_desc().get_size();
  } else if (key.pass == Pass::data_grad) {
    auto pd = data_grad_pd(s, key.in);
    e.conv = {dnnl::convolution_backward_data(pd),
              {{DNNL_ARG_DIFF_DST, pd.diff_dst_desc()},
               {DNNL_ARG_WEIGHTS, pd.weights_desc()},
               {DNNL_ARG_DIFF_SRC, pd.diff_src_desc()}},
              pd.scratchpad_desc()};
    e.filter = reorder(filter(s, true, key.in), pd.weights_desc());
    e.blocked_bytes = pd.weights_desc().get_size();
  } else {
    auto pd = filter_grad_pd(s, key.in);
    // Where oneDNN has no direct kernel for a depthwise filter gradient (AVX2, small images:
    // MobileNetV2's 2x2x960 blocks) it runs a GEMM per channel, 17 ms a pass at batch 64
    // where the direct loop in ops/conv.cpp that then takes the pass needs 0.3 ms.
    const bool depthwise = s.groups > 1 && s.groups == s.ci && s.groups == s.co;
    if (depthwise && std::string_view(pd.impl_info_str()).find("gemm") != std::string_view::npos)
      throw dnnl::error(dnnl_unimplemented, "a GEMM per channel");
    e.conv = {dnnl::convolution_backward_weights(pd),
              {{DNNL_ARG_SRC, pd.src_desc()},
               {DNNL_ARG_DIFF_DST, pd.diff_dst_desc()},
               {DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc()}},
              pd.scratchpad_desc()};
    e.filter = reorder(pd.diff_weights_desc(), filter(s, true));  // the gradient is f32
    e.blocked_bytes = pd.diff_weights_desc().get_size();
  }
}

// A per-thread buffer of at least `bytes` (one per `slot`), reused from call to call.
float* thread_buffer(int slot, size_t bytes) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[slot];
  if (b.size() * sizeof(float) < bytes) b.resize((bytes + sizeof(float) - 1) / sizeof(float));
  return b.data();
}

// The filter in e's layout: reordered into this thread's buffer `slot` when they differ.
const void* forward_filter(const Entry& e, const void* f, int slot) {
  if (!e.filter) return f;
  float* blocked = thread_buffer(slot, e.blocked_bytes);
  run(*e.filter, {f, blocked});
  return blocked;
}

// One chunk of the filter gradient into df (HWIO).
void filter_grad_chunk(const Entry& e, const void* x, const void* dy, float* df) {
  if (!e.filter) return run(e.conv, {x, dy, df});
  float* blocked = thread_buffer(1, e.blocked_bytes);
  run(e.conv, {x, dy, blocked});
  run(*e.filter, {blocked, df});
}

// Flat index of the input element that output (b, oh, ow) reads at filter tap (i, j),
// channel 0, or -1 for padding.
int64_t input_at(const ConvShape& s, int64_t b, int64_t oh, int64_t ow, int64_t i, int64_t j) {
  const int64_t ih = oh * s.stride[0] - s.pad_lo[0] + i * s.dilation[0];
  const int64_t iw = ow * s.stride[1] - s.pad_lo[1] + j * s.dilation[1];
  if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) return -1;
  return ((b * s.h + ih) * s.w + iw) * s.ci;
}

std::vector<float> probe(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = probe_value(uint32_t(i) + seed);
  return v;
}

// The probe values as the operand type wants them (exact in bf16).
std::vector<uint16_t> upper_halves(const std::vector<float>& v) {
  std::vector<uint16_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = uint16_t(std::bit_cast<uint32_t>(v[i]) >> 16);
  return r;
}

// Up to 64 output elements spread over the result, first and last included.
std::vector<int64_t> samples(int64_t n) { return spread_indices(n, 64); }

// An image-to-image primitive's run on probe data: its image operand, its filter, its result.
struct ProbeRun {
  std::vector<float> image, filter, out;
};

// Runs an image-to-image primitive (forward or input gradient, with its filter reorder) once on
// probe operands of the given sizes, as bf16 operands when `in` is bf16.
ProbeRun run_on_probes(dtype in, const Entry& e, int64_t image, int64_t filter, int64_t out) {
  ProbeRun r{probe(image, 0), probe(filter, 7919), std::vector<float>(size_t(out))};
  if (in == dtype::bf16) {
    const std::vector<uint16_t> ib = upper_halves(r.image), fb = upper_halves(r.filter);
    run(e.conv, {ib.data(), forward_filter(e, fb.data(), 0), r.out.data()});
  } else {
    run(e.conv, {r.image.data(), forward_filter(e, r.filter.data(), 0), r.out.data()});
  }
  return r;
}

// Runs a new forward primitive (with its reorder) once on probe data and checks sampled
// outputs against sums in double. Library implementations for some shapes and CPUs compute
// wrong results without any error; a primitive that fails here is not used.
bool check_forward(const ConvShape& s, dtype in, const Entry& e) {
  const int64_t cg = s.ci / s.groups, og = s.co / s.groups;  // channels per group
  const ProbeRun r = run_on_probes(in, e, s.n * s.h * s.w * s.ci, s.kh * s.kw * cg * s.co, s.n * s.ho * s.wo * s.co);
  const auto& [x, f, y] = r;
  for (int64_t at : samples(int64_t(y.size()))) {
    const int64_t m = at % s.co, o = at / s.co, ow = o % s.wo, oh = o / s.wo % s.ho, b = o / (s.wo * s.ho);
    double sum = 0, mag = 0;
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        const int64_t in = input_at(s, b, oh, ow, i, j);
        for (int64_t c = 0; in >= 0 && c < cg; ++c) {
          const size_t tap = size_t(i * s.kw + j);
          const size_t at = s.filter_oi ? (tap * size_t(s.co) + size_t(m)) * size_t(cg) + size_t(c)
                                        : (tap * size_t(cg) + size_t(c)) * size_t(s.co) + size_t(m);
          const double p = double(x[size_t(in + m / og * cg + c)]) * f[at];
          sum += p, mag += std::abs(p);
        }
      }
    if (!close_to_probe_sum(y[size_t(at)], sum, mag, s.kh * s.kw * cg)) return false;
  }
  return true;
}

// The same for a filter-gradient primitive: sampled filter elements.
bool check_filter_grad(const ConvShape& s, dtype in, const Entry& e) {
  const std::vector<float> x = probe(s.n * s.h * s.w * s.ci, 0), dy = probe(s.n * s.ho * s.wo * s.co, 7919);
  const int64_t cg = s.ci / s.groups, og = s.co / s.groups;  // channels per group
  std::vector<float> df(size_t(s.kh * s.kw * cg * s.co));
  if (in == dtype::bf16) filter_grad_chunk(e, upper_halves(x).data(), upper_halves(dy).data(), df.data());
  else filter_grad_chunk(e, x.data(), dy.data(), df.data());
  for (int64_t at : samples(int64_t(df.size()))) {
    const int64_t m = at % s.co, k = at / s.co % cg, j = at / (s.co * cg) % s.kw, i = at / (s.co * cg * s.kw);
    const int64_t c = m / og * cg + k;  // the input channel
    double sum = 0, mag = 0;
    for (int64_t b = 0; b < s.n; ++b)
      for (int64_t oh = 0; oh < s.ho; ++oh)
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          const int64_t in = input_at(s, b, oh, ow, i, j);
          if (in < 0) continue;
          const double p = double(x[size_t(in + c)]) * dy[size_t(((b * s.ho + oh) * s.wo + ow) * s.co + m)];
          sum += p, mag += std::abs(p);
        }
    if (!close_to_probe_sum(df[size_t(at)], sum, mag, s.n * s.ho * s.wo)) return false;
  }
  return true;
}

// The same for an input-gradient primitive: sampled input elements, each the sum over the
// filter taps that read it of the output gradient times the filter.
bool check_data_grad(const ConvShape& s, dtype in, const Entry& e) {
  const int64_t cg = s.ci / s.groups, og = s.co / s.groups;  // channels per group
  const ProbeRun r = run_on_probes(in, e, s.n * s.ho * s.wo * s.co, s.kh * s.kw * cg * s.co, s.n * s.h * s.w * s.ci);
  const auto& [dy, f, dx] = r;
  for (int64_t at : samples(int64_t(dx.size()))) {
    const int64_t c = at % s.ci, p = at / s.ci, iw = p % s.w, ih = p / s.w % s.h, b = p / (s.w * s.h);
    const int64_t g = c / cg, k = c % cg;
    double sum = 0, mag = 0;
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        const int64_t th = ih + s.pad_lo[0] - i * s.dilation[0], tw = iw + s.pad_lo[1] - j * s.dilation[1];
        if (th < 0 || tw < 0 || th % s.stride[0] != 0 || tw % s.stride[1] != 0) continue;
        const int64_t oh = th / s.stride[0], ow = tw / s.stride[1];
        if (oh >= s.ho || ow >= s.wo) continue;
        for (int64_t m = g * og; m < (g + 1) * og; ++m) {
          const double q = double(dy[size_t(((b * s.ho + oh) * s.wo + ow) * s.co + m)]) *
                           f[size_t(((i * s.kw + j) * cg + k) * s.co + m)];
          sum += q, mag += std::abs(q);
        }
      }
    if (!close_to_probe_sum(dx[size_t(at)], sum, mag, s.kh * s.kw * og)) return false;
  }
  return true;
}

bool check(const Key& key, const Entry& e) {
  switch (key.pass) {
    case Pass::forward: return check_forward(key.s, key.in, e);
    case Pass::filter_grad: return check_filter_grad(key.s, key.in, e);
    case Pass::data_grad: return check_data_grad(key.s, key.in, e);
  }
  return false;
}

std::shared_ptr<const Entry> make_entry(const Key& key) {
  auto e = std::make_shared<Entry>();
  try {
    make_primitives(key, *e);
  } catch (const dnnl::error&) {
    count_primitive(false);
    return e;  // no implementation for this shape
  }
  e->ok = check(key, *e);
  count_primitive(!e->ok);
  return e;
}

OnceCache<Key, Entry> cache;  // primitives, each made and checked once

std::shared_ptr<const Entry> lookup(Pass pass, dtype in, ConvShape s, int64_t images) {
  s.n = images;
  return cache.get(Key{pass, in, s}, make_entry);
}

struct Chunks {
  int64_t size, count, last;  // images per chunk, chunks, images in the last one
  std::shared_ptr<const Entry> full, tail;
  const Entry& at(int64_t t) const { return t == count - 1 ? *tail : *full; }
};

std::atomic<bool> enabled{true};

std::optional<Chunks> chunks_for(Pass pass, dtype in, const ConvShape& s) {
  if (s.n == 0 || !enabled.load(std::memory_order_relaxed)) return std::nullopt;
  Chunks c;
  c.size = conv_chunk_images(s.n, s.ho * s.wo);
  c.count = (s.n + c.size - 1) / c.size;
  c.last = s.n - (c.count - 1) * c.size;
  run_single_threaded();  // before a primitive is made: it keeps the thread count it sees
  c.full = lookup(pass, in, s, c.size);
  c.tail = c.last == c.size ? c.full : lookup(pass, in, s, c.last);
  if (!c.full->ok || !c.tail->ok) return std::nullopt;
  return c;
}

// A pass that reads one image tensor and the filter and writes another, over chunks of the
// batch: the forward conv (x to y) or the input gradient (dy to dx), for operands of type T
// (float or bf16 bits), with `done` (if any) called for each chunk of dst.
template <class T>
bool image_to_image(Pass pass, dtype type, const ConvShape& s, const T* src, const T* f, float* dst,
                    const ChunkDone& done = {}) {
  const std::optional<Chunks> c = chunks_for(pass, type, s);
  if (!c) return false;
  const void* f_full = forward_filter(*c->full, f, 0);
  const void* f_tail = c->tail == c->full ? f_full : forward_filter(*c->tail, f, 1);
  const int64_t x = c->size * s.h * s.w * s.ci, y = c->size * s.ho * s.wo * s.co;
  const int64_t in = pass == Pass::forward ? x : y, out = pass == Pass::forward ? y : x;
  parallel_for(c->count, [&](int64_t t) {
    run_single_threaded();
    run(c->at(t).conv, {src + t * in, t == c->count - 1 ? f_tail : f_full, dst + t * out});
    if (done) done(t * out, t == c->count - 1 ? t * out + c->last * (out / c->size) : (t + 1) * out);
  });
  return true;
}

// Chunk t's partial filter gradient into part, on the calling thread.
template <class T>
void filter_grad_part(const Chunks& c, const ConvShape& s, const T* x, const T* dy, int64_t t, float* part) {
  const int64_t in = c.size * s.h * s.w * s.ci, out = c.size * s.ho * s.wo * s.co;
  run_single_threaded();
  filter_grad_chunk(c.at(t), x + t * in, dy + t * out, part);
}

int64_t filter_size(const ConvShape& s) { return s.kh * s.kw * s.ci / s.groups * s.co; }

// The chunks' partials summed in chunk order, in slices across the pool.
void sum_parts(const ConvShape& s, const float* partial, int64_t count, float* df) {
  constexpr int64_t kSlice = 4096;
  const int64_t size = filter_size(s);
  parallel_for((size + kSlice - 1) / kSlice, [&](int64_t slice) {
    const int64_t e0 = slice * kSlice, e1 = std::min(size, e0 + kSlice);
    std::copy(partial + e0, partial + e1, df + e0);
    for (int64_t t = 1; t < count; ++t)
      for (int64_t e = e0; e < e1; ++e) df[e] += partial[t * size + e];
  });
}

// The filter gradient over chunks of the batch, for operands of type T (float or bf16 bits).
template <class T>
bool filter_grad(dtype type, const ConvShape& s, const T* x, const T* dy, float* df) {
  const std::optional<Chunks> c = chunks_for(Pass::filter_grad, type, s);
  if (!c) return false;
  if (c->count == 1) return filter_grad_part(*c, s, x, dy, 0, df), true;
  float* partial = thread_buffer(0, size_t(c->count * filter_size(s)) * sizeof(float));
  parallel_for(c->count, [&](int64_t t) { filter_grad_part(*c, s, x, dy, t, partial + t * filter_size(s)); });
  sum_parts(s, partial, c->count, df);
  return true;
}

}  // namespace

void set_onednn_conv_enabled(bool on) { enabled = on; }

bool onednn_conv(const ConvShape& s, const float* x, const float* f, float* y, const ChunkDone& done) {
  return image_to_image(Pass::forward, dtype::f32, s, x, f, y, done);
}

bool onednn_conv_bf16(const ConvShape& s, const uint16_t* x, const uint16_t* f, float* y, const ChunkDone& done) {
  return onednn_native_bf16() && image_to_image(Pass::forward, dtype::bf16, s, x, f, y, done);
}

// The gradients take HWIO filters only (filter_oi is the forward conv's).
bool onednn_conv_filter_grad(const ConvShape& s, const float* x, const float* dy, float* df) {
  return !s.filter_oi && filter_grad(dtype::f32, s, x, dy, df);
}

bool onednn_conv_filter_grad_bf16(const ConvShape& s, const uint16_t* x, const uint16_t* dy, float* df) {
  return !s.filter_oi && onednn_native_bf16() && filter_grad(dtype::bf16, s, x, dy, df);
}

FilterGradChunks onednn_filter_grad_chunks(const ConvShape& s) {
  const std::optional<Chunks> c = s.filter_oi ? std::nullopt : chunks_for(Pass::filter_grad, dtype::f32, s);
  return c ? FilterGradChunks{c->size, c->count} : FilterGradChunks{};
}

void onednn_filter_grad_chunk(const ConvShape& s, const float* x, const float* dy, int64_t t, float* part) {
  const std::optional<Chunks> c = chunks_for(Pass::filter_grad, dtype::f32, s);
  if (!c) throw Error("onednn_filter_grad_chunk: no primitive for this shape");
  filter_grad_part(*c, s, x, dy, t, part);
}

void onednn_filter_grad_sum(const ConvShape& s, const float* parts, int64_t count, float* df) {
  sum_parts(s, parts, count, df);
}

bool onednn_conv_data_grad(const ConvShape& s, const float* dy, const float* f, float* dx) {
  return !s.filter_oi && image_to_image(Pass::data_grad, dtype::f32, s, dy, f, dx);
}

bool onednn_conv_data_grad_bf16(const ConvShape& s, const uint16_t* dy, const uint16_t* f, float* dx) {
  return !s.filter_oi && onednn_native_bf16() && image_to_image(Pass::data_grad, dtype::bf16, s, dy, f, dx);
}

}  // namespace tpu

#else  // no oneDNN in this build

namespace tpu {
bool onednn_conv(const ConvShape&, const float*, const float*, float*, const ChunkDone&) { return false; }
bool onednn_conv_bf16(const ConvShape&, const uint16_t*, const uint16_t*, float*, const ChunkDone&) { return false; }
bool onednn_conv_filter_grad(const ConvShape&, const float*, const float*, float*) { return false; }
bool onednn_conv_filter_grad_bf16(const ConvShape&, const uint16_t*, const uint16_t*, float*) { return false; }
bool onednn_conv_data_grad(const ConvShape&, const float*, const float*, float*) { return false; }
bool onednn_conv_data_grad_bf16(const ConvShape&, const uint16_t*, const uint16_t*, float*) { return false; }
FilterGradChunks onednn_filter_grad_chunks(const ConvShape&) { return {}; }
void onednn_filter_grad_chunk(const ConvShape&, const float*, const float*, int64_t, float*) {}
void onednn_filter_grad_sum(const ConvShape&, const float*, int64_t, float*) {}
void set_onednn_conv_enabled(bool) {}
}  // namespace tpu

#endif
