#include "kernels/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <atomic>
#include <vector>

#include "core/error.h"
#include "kernels/convert.h"
#include "kernels/gemm_packed.h"
#include "kernels/gemm_small_k.h"
#include "kernels/transpose.h"
#include "kernels/onednn_matmul.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;
using Mat = Eigen::Map<RowMajor>;

// Output columns per panel: one task, one thread, one fixed order of arithmetic. oneDNN
// gains from wider panels (fewer calls, each packing a larger part of B; bench/gemm.cpp), and
// so does the packed kernel (each row of A is packed once per panel).
constexpr int64_t kEigenPanel = 128;
constexpr int64_t kOnednnPanel = 256;
constexpr int64_t kPackedPanel = 256;

// A product whose output is a single panel is split into row blocks as well: otherwise a
// large product of few columns (the CNN's 3136 -> 128 dense layer, a transformer's 64-wide
// projections) ran on one thread. Like the panels, the blocks follow from the shape alone, so
// the arithmetic is the same on any number of threads.
constexpr int64_t kSplitRowsFrom = int64_t(1) << 24;  // FLOPs of a product worth splitting
constexpr int64_t kRowBlocks = 4;
constexpr int64_t kMinBlockRows = 64;  // each block re-packs B: fewer rows lose more than they gain

// Rows [i0, i0 + h) and columns [j0, j0 + w) of one batch element's output.
struct Tile {
  int64_t i0, h, j0, w;
};

int64_t rows_per_block(const GemmShape& s, int64_t panels) {
  if (panels > 1 || 2 * s.m * s.k * s.n < kSplitRowsFrom) return std::max<int64_t>(s.m, 1);
  const int64_t rows = std::max(kMinBlockRows, (s.m + kRowBlocks - 1) / kRowBlocks);
  return std::min(s.m, (rows + 15) / 16 * 16);  // a block taller than the product made a bad oneDNN operand
}

// The heights of a product's row blocks: the full one and the last one.
std::array<int64_t, 2> block_heights(const GemmShape& s, int64_t width) {
  const int64_t rows = rows_per_block(s, (s.n + width - 1) / width);
  return {rows, s.m % rows ? s.m % rows : rows};
}

// Runs f(p, tile) for every batch element p and tile of panel width `width` across the pool.
template <class F>
void for_each_tile(const GemmShape& s, int64_t width, F f) {
  const int64_t panels = (s.n + width - 1) / width;
  const int64_t rows = rows_per_block(s, panels), blocks = (s.m + rows - 1) / rows;
  parallel_for(s.batch * blocks * panels, [&](int64_t t) {
    const int64_t p = t / (blocks * panels), i0 = t / panels % blocks * rows, j0 = t % panels * width;
    f(p, Tile{i0, std::min(rows, s.m - i0), j0, std::min(width, s.n - j0)});
  });
}

// One tile of one batch element with Eigen.
void eigen_tile(const GemmShape& s, const float* a_data, const float* b_data, float* c_data, Tile t) {
  ConstMat a(a_data, s.ta ? s.k : s.m, s.ta ? s.m : s.k);
  ConstMat b(b_data, s.tb ? s.n : s.k, s.tb ? s.k : s.n);
  Mat c(c_data, s.m, s.n);
  auto out = c.block(t.i0, t.j0, t.h, t.w);
  if (!s.ta && !s.tb) out.noalias() = a.middleRows(t.i0, t.h) * b.middleCols(t.j0, t.w);
  else if (s.ta && !s.tb) out.noalias() = a.middleCols(t.i0, t.h).transpose() * b.middleCols(t.j0, t.w);
  else if (!s.ta && s.tb) out.noalias() = a.middleRows(t.i0, t.h) * b.transpose().middleCols(t.j0, t.w);
  else out.noalias() = a.middleCols(t.i0, t.h).transpose() * b.transpose().middleCols(t.j0, t.w);
}

// One tile with oneDNN: the operands of rows [i0, i0 + h) and columns [j0, j0 + w).
template <class T>
void onednn_tile(MatmulInput in, const GemmShape& s, const T* a, const T* b, float* c, Tile t) {
  const T* rows = a + (s.ta ? t.i0 : t.i0 * s.k);
  onednn_matmul_tile(in, s, rows, b, c + t.i0 * s.n, t.h, t.j0, t.w);
}

// The widened (f32) copies of bf16 operands, per calling thread, reused from call to call.
struct Widened {
  std::vector<float> a, b;
};

void widen_parallel(const uint16_t* src, float* dst, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t t) {
    const int64_t i0 = t * kChunk;
    widen_bf16(src + i0, dst + i0, std::min(kChunk, n - i0));
  });
}

Widened& widen_operands(const GemmShape& s, const uint16_t* a, const uint16_t* b) {
  thread_local Widened w;
  const int64_t na = s.batch * s.m * s.k, nb = s.batch * s.k * s.n;
  if (int64_t(w.a.size()) < na) w.a.resize(size_t(na));
  if (int64_t(w.b.size()) < nb) w.b.resize(size_t(nb));
  widen_parallel(a, w.a.data(), na);
  widen_parallel(b, w.b.data(), nb);
  return w;
}

// Whether oneDNN has an implementation for every tile size of `s` (full and last row blocks,
// full and last panels): checked before anything is written.
bool onednn_tiles_supported(MatmulInput in, const GemmShape& s) {
  const int64_t widths[] = {std::min(kOnednnPanel, s.n), s.n % kOnednnPanel ? s.n % kOnednnPanel : std::min(kOnednnPanel, s.n)};
  for (int64_t h : block_heights(s, kOnednnPanel))
    for (int64_t w : widths)
      if (!onednn_matmul_supported(in, s, h, w)) return false;
  return true;
}

// A batch of products each too small to split (attention's, one per sequence and head) goes to
// oneDNN in groups of whole elements, one call per group: called one element at a time, the
// calls cost more than the arithmetic (bench/gemm.cpp's attn cases). Groups follow from the
// shape alone, as panels and blocks do.
constexpr int64_t kGroupFlops = int64_t(1) << 24;  // per call, about
constexpr int64_t kMinGroups = 8;                  // calls to share among the threads, at least
constexpr int64_t kMaxGroup = 1024;                // elements per call, at most: each group size
                                                   // makes (and self-checks) a primitive

int64_t group_size(const GemmShape& s) {
  const int64_t flops = 2 * s.m * s.k * s.n;
  if (s.batch < 2 || s.k == 0 || flops == 0 || flops >= kSplitRowsFrom) return 1;
  const int64_t per_call = std::max<int64_t>(1, kGroupFlops / flops);
  return std::clamp<int64_t>(std::min({per_call, s.batch / kMinGroups, kMaxGroup}), 1, s.batch);
}

// The sizes of s's groups: the full one and the last one.
std::array<int64_t, 2> group_sizes(const GemmShape& s) {
  const int64_t g = group_size(s);
  return {g, s.batch % g ? s.batch % g : g};
}

// Whether s goes in groups: several elements per call, and oneDNN has both sizes' primitives.
bool groups_apply(MatmulInput in, const GemmShape& s) {
  if (group_size(s) < 2) return false;
  for (int64_t count : group_sizes(s))
    if (!onednn_matmul_group_supported(in, s, count)) return false;
  return true;
}

template <class T>
void onednn_groups(MatmulInput in, const GemmShape& s, const T* a, const T* b, float* c) {
  const int64_t g = group_size(s), groups = (s.batch + g - 1) / g;
  parallel_for(groups, [&](int64_t t) {
    const int64_t p = t * g;
    if (!onednn_matmul_group(in, s, std::min(g, s.batch - p), a + p * s.m * s.k, b + p * s.k * s.n, c + p * s.m * s.n))
      throw Error("oneDNN lost the grouped product primitive groups_apply found");
  });
}

// oneDNN tiles; false when oneDNN has no implementation for the shape.
template <class T>
bool onednn_gemm(MatmulInput in, const GemmShape& s, const T* a, const T* b, float* c) {
  if (s.batch == 0 || s.n == 0 || s.m == 0) return true;
  if (s.k == 0) {  // oneDNN 2.6 dies of a division by zero making a K = 0 primitive (lhs transposed)
    std::fill(c, c + s.batch * s.m * s.n, 0.0f);
    return true;
  }
  if (groups_apply(in, s)) return onednn_groups(in, s, a, b, c), true;
  if (!onednn_tiles_supported(in, s)) return false;
  for_each_tile(s, kOnednnPanel, [&](int64_t p, Tile t) {
    onednn_tile(in, s, a + p * s.m * s.k, b + p * s.k * s.n, c + p * s.m * s.n, t);
  });
  return true;
}

// bf16 products go to oneDNN in row blocks of the full width, where every operand is
// contiguous: its AMX kernel takes nothing else, and a column panel of a wider product (a
// strided view) fell back to an AVX-512 kernel at a third of its speed or less. A transposed
// left operand's row block is a strided column slab, so each block copies its slab first.
// Wider products keep the panels: a full-width block would re-pack all of B per block.
// (gemm_bf16_onednn_impls tells which kernels a product's tiles get.)
constexpr int64_t kBf16FullWidthUpTo = 4096;
constexpr int64_t kBf16BlockFlops = int64_t(1) << 26;  // per block, up to kBf16MaxBlocks blocks
constexpr int64_t kBf16MaxBlocks = 8;

// Rows per block of a bf16 product: from its shape alone, as the panels' widths are.
int64_t bf16_block_rows(const GemmShape& s) {
  const int64_t flops = 2 * s.m * s.k * s.n;
  if (flops < kSplitRowsFrom) return std::max<int64_t>(s.m, 1);
  const int64_t blocks = std::clamp<int64_t>(flops / kBf16BlockFlops, kRowBlocks, kBf16MaxBlocks);
  const int64_t rows = std::max(kMinBlockRows, (s.m + blocks - 1) / blocks);
  return std::min(s.m, (rows + 31) / 32 * 32);
}

// The shape oneDNN sees for a block of h rows: a transposed A is the block's own [K, h] copy.
GemmShape bf16_block_shape(const GemmShape& s, int64_t h) {
  GemmShape b = s;
  if (s.ta) b.m = h;
  return b;
}

// Columns [i0, i0 + h) of the [K, M] operand a, as a contiguous [K, h] copy (per thread).
const uint16_t* column_slab(const GemmShape& s, const uint16_t* a, int64_t i0, int64_t h) {
  thread_local std::vector<uint16_t> slab;
  if (int64_t(slab.size()) < s.k * h) slab.resize(size_t(s.k * h));
  for (int64_t p = 0; p < s.k; ++p) std::copy_n(a + p * s.m + i0, h, slab.data() + p * h);
  return slab.data();
}

// Whether s goes to oneDNN in full-width row blocks: a product of fewer rows (a token at a time)
// gains nothing from AMX and would lose the panels' threads; a trivial one is onednn_gemm's.
bool bf16_blocks_apply(const GemmShape& s) {
  return s.batch > 0 && s.m >= kMinBlockRows && s.k > 0 && s.n > 0 && s.n <= kBf16FullWidthUpTo;
}

// The heights of a bf16 product's row blocks: the full one and the last one.
std::array<int64_t, 2> bf16_block_heights(const GemmShape& s) {
  const int64_t rows = bf16_block_rows(s);
  return {rows, s.m % rows ? s.m % rows : rows};
}

// Whether oneDNN has an implementation for both heights of s's row blocks (makes them).
bool bf16_blocks_supported(const GemmShape& s) {
  for (int64_t h : bf16_block_heights(s))
    if (!onednn_matmul_supported(MatmulInput::bf16, bf16_block_shape(s, h), h, s.n)) return false;
  return true;
}

// oneDNN bf16 row blocks (bf16_tiling has checked that oneDNN has both heights' primitives).
void onednn_bf16_blocks(const GemmShape& s, const uint16_t* a, const uint16_t* b, float* c) {
  const int64_t rows = bf16_block_rows(s), blocks = (s.m + rows - 1) / rows;
  parallel_for(s.batch * blocks, [&](int64_t t) {
    const int64_t p = t / blocks, i0 = t % blocks * rows, h = std::min(rows, s.m - i0);
    const uint16_t* ap = a + p * s.m * s.k;
    const uint16_t* block = !s.ta ? ap + i0 * s.k : h == s.m ? ap : column_slab(s, ap, i0, h);
    onednn_matmul_tile(MatmulInput::bf16, bf16_block_shape(s, h), block, b + p * s.k * s.n, c + p * s.m * s.n + i0 * s.n,
                       h, 0, s.n);
  });
}

// A transposed left operand with an inner dimension at least as long as its rows (a weight
// gradient, summed over a batch's rows) is cut along K instead of into row blocks: each part's
// rows of A and of B are contiguous, B is read once rather than once per block, and the parts'
// products are added in part order. B transposed too would make B's parts strided.
constexpr int64_t kBf16MaxParts = 4;
constexpr int64_t kBf16MinPartK = 256;

int64_t bf16_part_k(const GemmShape& s) {
  const int64_t flops = 2 * s.m * s.k * s.n;
  if (!s.ta || s.tb || s.k < s.m || flops < kSplitRowsFrom) return s.k;
  const int64_t parts = std::clamp<int64_t>(std::min(flops / kBf16BlockFlops, s.k / kBf16MinPartK), 1, kBf16MaxParts);
  return std::min(s.k, ((s.k + parts - 1) / parts + 31) / 32 * 32);
}

// The shape of a K part of kk rows.
GemmShape bf16_part_shape(const GemmShape& s, int64_t kk) { return {1, s.m, kk, s.n, true, false}; }

// The inner sizes of s's K parts: the full one and the last one.
std::array<int64_t, 2> bf16_part_ks(const GemmShape& s) {
  const int64_t kk = bf16_part_k(s);
  return {kk, s.k % kk ? s.k % kk : kk};
}

bool bf16_parts_supported(const GemmShape& s) {
  for (int64_t kk : bf16_part_ks(s))
    if (!onednn_matmul_supported(MatmulInput::bf16, bf16_part_shape(s, kk), s.m, s.n)) return false;
  return true;
}

// c = part 0 + part 1 + ..., each part's product computed on its own, then added in order
// (bf16_tiling has checked that oneDNN has both parts' primitives).
void onednn_bf16_k_parts(const GemmShape& s, const uint16_t* a, const uint16_t* b, float* c) {
  const int64_t kk = bf16_part_k(s), parts = (s.k + kk - 1) / kk, mn = s.m * s.n;
  // The parts after the first, per calling thread, reused from call to call (a step's weight
  // gradients would otherwise allocate and clear megabytes each).
  // (A pointer for the tasks: inside them the name would be the running thread's own buffer.)
  thread_local std::vector<float> buffer;
  if (int64_t(buffer.size()) < s.batch * (parts - 1) * mn) buffer.resize(size_t(s.batch * (parts - 1) * mn));
  float* const partial = buffer.data();
  parallel_for(s.batch * parts, [&](int64_t t) {
    const int64_t p = t / parts, part = t % parts, k0 = part * kk;
    float* out = part == 0 ? c + p * mn : partial + (p * (parts - 1) + part - 1) * mn;
    onednn_matmul_tile(MatmulInput::bf16, bf16_part_shape(s, std::min(kk, s.k - k0)), a + p * s.m * s.k + k0 * s.m,
                       b + p * s.k * s.n + k0 * s.n, out, s.m, 0, s.n);
  });
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (mn + kChunk - 1) / kChunk;
  parallel_for(s.batch * chunks, [&](int64_t t) {
    const int64_t p = t / chunks, i0 = t % chunks * kChunk, i1 = std::min(mn, i0 + kChunk);
    float* out = c + p * mn;
    for (int64_t part = 1; part < parts; ++part) {
      const float* add = partial + (p * (parts - 1) + part - 1) * mn;
      for (int64_t i = i0; i < i1; ++i) out[i] += add[i];
    }
  });
}

// How a bf16 product is cut for oneDNN: groups of small batch elements, K parts, full-width row
// blocks, or column panels (a product of few rows, a wide one, or one oneDNN has no contiguous
// implementation for).
enum class Bf16Tiling : uint8_t { groups, k_parts, row_blocks, panels };

Bf16Tiling bf16_tiling(const GemmShape& s) {
  if (groups_apply(MatmulInput::bf16, s)) return Bf16Tiling::groups;
  if (!bf16_blocks_apply(s)) return Bf16Tiling::panels;
  if (bf16_part_k(s) < s.k) return bf16_parts_supported(s) ? Bf16Tiling::k_parts : Bf16Tiling::panels;
  return bf16_blocks_supported(s) ? Bf16Tiling::row_blocks : Bf16Tiling::panels;
}

bool onednn_bf16_gemm(const GemmShape& s, const uint16_t* a, const uint16_t* b, float* c) {
  switch (bf16_tiling(s)) {
    case Bf16Tiling::groups: onednn_groups(MatmulInput::bf16, s, a, b, c); return true;
    case Bf16Tiling::k_parts: onednn_bf16_k_parts(s, a, b, c); return true;
    case Bf16Tiling::row_blocks: onednn_bf16_blocks(s, a, b, c); return true;
    case Bf16Tiling::panels: break;
  }
  return onednn_gemm(MatmulInput::bf16, s, a, b, c);
}

// The ways an f32 product's tiles are computed, and their panel widths.
enum class F32Way : uint8_t { packed, onednn, eigen };

int64_t panel_width(F32Way way) {
  return way == F32Way::packed ? kPackedPanel : way == F32Way::onednn ? kOnednnPanel : kEigenPanel;
}

// The way gemm_f32 computes s (past the small-k kernel).
F32Way f32_way(const GemmShape& s) {
  if (packed_gemm_used()) return F32Way::packed;
  return onednn_available() && onednn_tiles_supported(MatmulInput::f32, s) ? F32Way::onednn : F32Way::eigen;
}

// One f32 tile of batch element 0 (the caller offsets the pointers), exactly as gemm_f32
// computes it the given way.
void f32_tile(F32Way way, const GemmShape& s, const float* a, const float* b, float* c, Tile t) {
  switch (way) {
    case F32Way::packed: return gemm_f32_packed_tile(s, a, b, c, t.i0, t.h, t.j0, t.w);
    case F32Way::onednn: return onednn_tile(MatmulInput::f32, s, a, b, c, t);
    case F32Way::eigen: return eigen_tile(s, a, b, c, t);
  }
}

// All of s's tiles, the given way.
void f32_tiles(F32Way way, const GemmShape& s, const float* a, const float* b, float* c) {
  for_each_tile(s, panel_width(way), [&](int64_t p, Tile t) {
    f32_tile(way, s, a + p * s.m * s.k, b + p * s.k * s.n, c + p * s.m * s.n, t);
  });
}

// c += t over the tile (row stride n), one f32 rounding each.
void add_tile(const float* t, float* c, int64_t n, Tile tile) {
  for (int64_t i = tile.i0; i < tile.i0 + tile.h; ++i) {
    const float* src = t + i * n + tile.j0;
    float* dst = c + i * n + tile.j0;
    for (int64_t j = 0; j < tile.w; ++j) dst[j] = dst[j] + src[j];
  }
}

// A product panel of one part, per thread, reused from call to call (only the panel's
// columns are touched).
float* panel_scratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (int64_t(buf.size()) < n) buf.resize(size_t(n));
  return buf.data();
}

Bf16Gemm default_bf16_gemm() {
  if (onednn_fast_bf16()) return Bf16Gemm::onednn;
  // Without bf16 instructions oneDNN emulates them at a fraction of its f32 rate, and some
  // CPUs run them slower than f32 FMAs (onednn_fast_bf16), while widening to f32 costs one
  // pass over the operands and then runs at the f32 rate of gemm_f32, oneDNN's or the packed
  // kernel, both faster than Eigen (bench/gemm.cpp).
  return Bf16Gemm::widen_f32;
}

std::atomic<Bf16Gemm>& chosen() {
  static std::atomic<Bf16Gemm> way{default_bf16_gemm()};
  return way;
}

}  // namespace

void gemm_f32_eigen(const GemmShape& s, const float* a, const float* b, float* c) {
  f32_tiles(F32Way::eigen, s, a, b, c);
}

void gemm_f32_packed(const GemmShape& s, const float* a, const float* b, float* c) {
  f32_tiles(F32Way::packed, s, a, b, c);
}

bool gemm_f32_onednn(const GemmShape& s, const float* a, const float* b, float* c) {
  return onednn_available() && onednn_gemm(MatmulInput::f32, s, a, b, c);
}

namespace {

// C = A^T B with at least twice as many rows as columns and a long inner dimension (the weight
// gradient dw = x^T dy of a layer that narrows, a transformer's 1024 -> 256): oneDNN runs its
// row blocks, strided slabs of A, at two thirds of the rate it runs C^T = B^T A, whose panels
// read A whole (bench/gemm.cpp: 1024x4096x256ta against 256x4096x1024ta). So C^T is computed
// and transposed back: M*N moves against M*N*K products.
bool transposed_product_applies(const GemmShape& s) {
  return s.ta && !s.tb && s.n <= kOnednnPanel && s.m >= 2 * s.n && s.k >= s.m && 2 * s.m * s.k * s.n >= kSplitRowsFrom;
}

bool gemm_f32_transposed_product(const GemmShape& s, const float* a, const float* b, float* c) {
  thread_local std::vector<float> product;  // C^T, per calling thread, reused from call to call
  if (int64_t(product.size()) < s.batch * s.m * s.n) product.resize(size_t(s.batch * s.m * s.n));
  float* const ct = product.data();  // (the tasks below must not name the thread_local)
  if (!gemm_f32_onednn({s.batch, s.n, s.k, s.m, true, false}, b, a, ct)) return false;
  transpose_last_two(ct, c, s.batch, s.n, s.m);  // C^T [n, m] -> C [m, n]
  return true;
}

}  // namespace

void gemm_f32(const GemmShape& s, const float* a, const float* b, float* c) {
  if (small_k_gemm_applies(s)) return small_k_gemm_sum(s, std::span(&a, 1), std::span(&b, 1), c);
  if (packed_gemm_used()) return gemm_f32_packed(s, a, b, c);
  if (transposed_product_applies(s) && gemm_f32_transposed_product(s, a, b, c)) return;
  if (!gemm_f32_onednn(s, a, b, c)) gemm_f32_eigen(s, a, b, c);
}

namespace {

// Whether gemm_f32 may compute s whole rather than by tiles: transposed, or in groups of batch
// elements.
bool whole_product_way(const GemmShape& s) {
  return !packed_gemm_used() && (transposed_product_applies(s) || groups_apply(MatmulInput::f32, s));
}

// gemm_f32 of each part in turn, the first into c, the others through a scratch product added
// in part order.
void sum_whole_products(const GemmShape& s, std::span<const float* const> a, std::span<const float* const> b,
                        float* c) {
  const int64_t size = s.batch * s.m * s.n;
  thread_local std::vector<float> part;  // per calling thread, reused from call to call
  if (int64_t(part.size()) < size) part.resize(size_t(size));
  float* const t = part.data();  // (the tasks below must not name the thread_local)
  gemm_f32(s, a[0], b[0], c);
  constexpr int64_t kChunk = int64_t(1) << 14;
  for (size_t r = 1; r < a.size(); ++r) {
    gemm_f32(s, a[r], b[r], t);
    parallel_for((size + kChunk - 1) / kChunk, [&](int64_t k) {
      for (int64_t i = k * kChunk; i < std::min(size, (k + 1) * kChunk); ++i) c[i] = c[i] + t[i];
    });
  }
}

}  // namespace

// Products with a short inner dimension sum in registers (gemm_small_k.h), and those gemm_f32
// computes whole go part by part. Otherwise each panel task computes every part's product of
// its columns in part order, the first one in place and the others through a scratch panel
// added at once, while it is still in cache. Either way: the same bits as gemm_f32 per part
// followed by a sum in part order.
void gemm_f32_sum(const GemmShape& s, std::span<const float* const> a, std::span<const float* const> b, float* c) {
  if (a.empty() || a.size() != b.size()) throw Error("gemm_f32_sum needs one right operand per left one");
  if (small_k_gemm_applies(s)) return small_k_gemm_sum(s, a, b, c);
  if (s.batch == 0 || s.n == 0 || s.m == 0) return;
  if (s.k == 0) return std::fill(c, c + s.batch * s.m * s.n, 0.0f);  // as gemm_f32
  if (whole_product_way(s)) return sum_whole_products(s, a, b, c);
  const F32Way way = f32_way(s);
  for_each_tile(s, panel_width(way), [&](int64_t p, Tile tile) {
    const int64_t ao = p * s.m * s.k, bo = p * s.k * s.n;
    float* out = c + p * s.m * s.n;
    f32_tile(way, s, a[0] + ao, b[0] + bo, out, tile);
    float* t = panel_scratch(s.m * s.n);
    for (size_t r = 1; r < a.size(); ++r) {
      f32_tile(way, s, a[r] + ao, b[r] + bo, t, tile);
      add_tile(t, out, s.n, tile);
    }
  });
}

void gemm_bf16(const GemmShape& s, const uint16_t* a, const uint16_t* b, float* c) {
  const Bf16Gemm way = chosen().load(std::memory_order_relaxed);
  if (way == Bf16Gemm::onednn && onednn_bf16_gemm(s, a, b, c)) return;
  Widened& w = widen_operands(s, a, b);
  if (way == Bf16Gemm::widen_eigen) gemm_f32_eigen(s, w.a.data(), w.b.data(), c);
  else gemm_f32(s, w.a.data(), w.b.data(), c);
}

std::vector<std::string> gemm_bf16_onednn_impls(const GemmShape& s) {
  std::vector<std::string> out;
  if (!onednn_available()) return out;
  const Bf16Tiling tiling = bf16_tiling(s);
  if (tiling == Bf16Tiling::groups) {
    for (int64_t count : group_sizes(s)) out.push_back(onednn_matmul_group_impl(MatmulInput::bf16, s, count));
    return out;
  }
  if (tiling == Bf16Tiling::k_parts) {
    for (int64_t kk : bf16_part_ks(s)) out.push_back(onednn_matmul_impl(MatmulInput::bf16, bf16_part_shape(s, kk), s.m, s.n));
    return out;
  }
  if (tiling == Bf16Tiling::row_blocks) {
    for (int64_t h : bf16_block_heights(s)) out.push_back(onednn_matmul_impl(MatmulInput::bf16, bf16_block_shape(s, h), h, s.n));
    return out;
  }
  const int64_t last_w = s.n % kOnednnPanel ? s.n % kOnednnPanel : std::min(kOnednnPanel, s.n);
  for (int64_t h : block_heights(s, kOnednnPanel))
    for (int64_t w : {std::min(kOnednnPanel, s.n), last_w}) out.push_back(onednn_matmul_impl(MatmulInput::bf16, s, h, w));
  return out;
}

std::string_view bf16_gemm_name(Bf16Gemm way) {
  switch (way) {
    case Bf16Gemm::widen_eigen: return "widen+eigen";
    case Bf16Gemm::onednn: return "onednn-bf16";
    case Bf16Gemm::widen_f32: return "widen+f32";
  }
  return "?";
}

bool bf16_gemm_available(Bf16Gemm way) { return way != Bf16Gemm::onednn || onednn_available(); }

Bf16Gemm bf16_gemm() { return chosen().load(); }

void set_bf16_gemm(Bf16Gemm way) {
  if (!bf16_gemm_available(way)) throw Error(std::string(bf16_gemm_name(way)) + " needs a build with oneDNN");
  chosen().store(way);
}

std::string gemm_backend_report() {
  return onednn_report() + "; bf16 GEMM: " + std::string(bf16_gemm_name(bf16_gemm()));
}

}  // namespace tpu
