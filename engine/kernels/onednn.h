// What the build's oneDNN can do, and counts of the primitives the kernels made with it
// (kernels/onednn_matmul.h, kernels/onednn_conv.h).
#pragma once
#include <cstddef>
#include <string>

namespace tpu {

bool onednn_available();    // the build has oneDNN
bool onednn_avx512_kernels();  // and runs its AVX-512 kernels (the CPU has them, ONEDNN_MAX_CPU_ISA allows them)
bool onednn_native_bf16();  // and the CPU has bf16 dot-product instructions
bool onednn_fast_bf16();    // and its bf16 primitives outrun f32 ones on widened operands
std::string onednn_report();
size_t onednn_primitives_created();   // so far, by this process (tests: none in a steady step)
size_t onednn_primitives_rejected();  // made but wrong on their self-check, so never used

}  // namespace tpu
