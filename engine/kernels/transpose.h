// The transpose that swaps the last two dims of a row-major tensor, across the pool: the
// transpose row's kernel for that permutation (ops/movement.cpp), and the C^T -> C step of
// gemm_f32's transposed products (kernels/gemm.cpp) and a swapped conv filter's HWIO copy
// (ops/conv.cpp).
//
//   transpose_last_two(x, out, batch, rows, cols);  // out[b][j][i] = x[b][i][j]
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/simd.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace transpose_detail {

// Each task takes kTile columns of the operand, that is kTile rows of the result, in square
// tiles: the result's rows fill front to back while the operand is read in 64-byte strips.
// (Tasks over the operand's rows instead wrote every result row in scattered 64-byte pieces,
// and ran slower.) A narrow operand (few column tiles) also splits its rows, so every thread
// gets work. 4-byte elements go through 8x8 blocks in vector registers where the CPU has AVX.
constexpr int64_t kTile = 16;

// dst[j][i] = src[i][j] for an 8x8 block of 4-byte elements (row strides in elements).
inline void transpose_8x8(const uint32_t* src, int64_t src_stride, uint32_t* dst, int64_t dst_stride) {
#ifdef __AVX__
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i * src_stride));
  simd::transpose8x8(r);
  for (int j = 0; j < 8; ++j) _mm256_storeu_ps(reinterpret_cast<float*>(dst + j * dst_stride), r[j]);
#else
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 8; ++i) dst[j * dst_stride + i] = src[i * src_stride + j];
#endif
}

}  // namespace transpose_detail

// out[b][j][i] = x[b][i][j] for `batch` matrices of rows x cols elements of type T.
template <class T>
void transpose_last_two(const T* x, T* out, int64_t batch, int64_t rows, int64_t cols) {
  using transpose_detail::kTile;
  const int64_t col_tiles = (cols + kTile - 1) / kTile, row_tiles = (rows + kTile - 1) / kTile;
  const int64_t wanted = 4 * int64_t(num_threads()), column_tasks = std::max<int64_t>(batch * col_tiles, 1);
  const int64_t row_parts = std::clamp<int64_t>(wanted / column_tasks, 1, std::max<int64_t>(row_tiles, 1));
  const int64_t part_rows = (row_tiles + row_parts - 1) / row_parts * kTile;
  parallel_for(batch * col_tiles * row_parts, [&](int64_t t) {
    const int64_t p = t / (col_tiles * row_parts), j0 = t / row_parts % col_tiles * kTile, j1 = std::min(cols, j0 + kTile);
    const int64_t first = t % row_parts * part_rows, last = std::min(rows, first + part_rows);
    const T* src = x + p * rows * cols;
    T* dst = out + p * rows * cols;
    for (int64_t i0 = first; i0 < last; i0 += kTile) {
      const int64_t i1 = std::min(last, i0 + kTile);
      if constexpr (sizeof(T) == 4) {
        if (i1 - i0 == kTile && j1 - j0 == kTile) {
          for (int64_t j = j0; j < j1; j += 8)
            for (int64_t i = i0; i < i1; i += 8)
              transpose_detail::transpose_8x8(reinterpret_cast<const uint32_t*>(src + i * cols + j), cols,
                                              reinterpret_cast<uint32_t*>(dst + j * rows + i), rows);
          continue;
        }
      }
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) dst[j * rows + i] = src[i * cols + j];
    }
  });
}

}  // namespace tpu
