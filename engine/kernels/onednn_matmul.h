// oneDNN's matmul primitive on one output panel, for kernels/gemm.cpp. Primitives are made
// once per panel shape and cached (thread-safe), so a steady-state step creates none; each
// runs single-threaded: the caller splits the work into fixed panels across its own threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/gemm.h"

namespace tpu {

bool onednn_available();    // the build has oneDNN
bool onednn_native_bf16();  // and the CPU has bf16 dot-product instructions
std::string onednn_report();
size_t onednn_primitives_created();  // so far, by this process (tests: none in a steady step)
size_t onednn_primitives_rejected();  // made but wrong on their self-check, so never used

// Element type of the operands; the result is always f32.
enum class MatmulInput : uint8_t { f32, bf16 };

// Whether oneDNN has an implementation for panels of width w of `s` (makes the primitive).
bool onednn_matmul_supported(MatmulInput in, const GemmShape& s, int64_t w);
// Columns [j0, j0 + w) of C for batch element 0 of `s` (the caller offsets the pointers).
// Returns false when oneDNN has no implementation for this shape (nothing is written).
bool onednn_matmul_panel(MatmulInput in, const GemmShape& s, const void* a, const void* b, float* c, int64_t j0,
                         int64_t w);

}  // namespace tpu
