// oneDNN's matmul primitive on one output panel, for kernels/gemm.cpp. Primitives are made
// once per panel shape and cached (thread-safe), so a steady-state step creates none; each
// runs single-threaded: the caller splits the work into fixed panels across its own threads.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/gemm.h"
#include "kernels/onednn.h"

namespace tpu {

// Element type of the operands; the result is always f32.
enum class MatmulInput : uint8_t { f32, bf16 };

// Whether oneDNN has an implementation for tiles of h rows and w columns of `s` (makes the
// primitive).
bool onednn_matmul_supported(MatmulInput in, const GemmShape& s, int64_t h, int64_t w);
// oneDNN's name for its implementation of those tiles ("brg:avx512_core_amx_bf16"), "" without
// one: a test checks that bf16 tiles reach the AMX kernel where the CPU has it.
std::string onednn_matmul_impl(MatmulInput in, const GemmShape& s, int64_t h, int64_t w);
// Columns [j0, j0 + w) of h rows of C for batch element 0 of `s`: a and c point at the tile's
// first row of A (a column, when transposed) and of C; b at B. Returns false when oneDNN has no
// implementation for this shape (nothing is written).
bool onednn_matmul_tile(MatmulInput in, const GemmShape& s, const void* a, const void* b, float* c, int64_t h,
                        int64_t j0, int64_t w);

// `count` whole batch elements of `s` in one call, from the group's first element's A, B and C:
// small products (attention's, per sequence and head) cost more to call one at a time than to
// compute. The _supported and _impl forms as for tiles.
bool onednn_matmul_group_supported(MatmulInput in, const GemmShape& s, int64_t count);
std::string onednn_matmul_group_impl(MatmulInput in, const GemmShape& s, int64_t count);
bool onednn_matmul_group(MatmulInput in, const GemmShape& s, int64_t count, const void* a, const void* b, float* c);

}  // namespace tpu
