// Matrix products for the dot kernels. Every product is cut into fixed panels of output
// columns, each computed by one thread with one fixed sequence of arithmetic, so results are
// bitwise the same whatever the thread count.
//
//   GemmShape s{.batch = 1, .m = 256, .k = 784, .n = 512};
//   gemm_bf16(s, a_bits, b_bits, c);   // bf16 operands, products and sums in f32
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tpu {

// C[p] = op(A[p]) op(B[p]) for p < batch, row-major and contiguous: A is [M,K] ([K,M] when
// ta), B is [K,N] ([N,K] when tb), C is [M,N].
struct GemmShape {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool ta = false, tb = false;
};

// f32 x f32 -> f32: oneDNN's f32 matmul where the build has it and runs AVX-512 kernels
// (faster than Eigen on the MLP's shapes, bench/gemm.cpp), else our packed kernel
// (kernels/gemm_packed.h, faster than oneDNN's AVX2 kernels); A^T B with a short inner
// dimension (a replica's weight gradient) has a kernel of its own, kernels/gemm_small_k.h.
void gemm_f32(const GemmShape& s, const float* a, const float* b, float* c);
// The sum of parts' products, C = op(A[0]) op(B[0]) + op(A[1]) op(B[1]) + ..., added in part
// order: bitwise gemm_f32 of each part then the sum, without every part's product in memory.
void gemm_f32_sum(const GemmShape& s, std::span<const float* const> a, std::span<const float* const> b, float* c);
// Each way on its own (benchmarks, tests); the oneDNN one returns false without oneDNN.
void gemm_f32_eigen(const GemmShape& s, const float* a, const float* b, float* c);
void gemm_f32_packed(const GemmShape& s, const float* a, const float* b, float* c);
bool gemm_f32_onednn(const GemmShape& s, const float* a, const float* b, float* c);

// bf16 x bf16 -> f32, the MXU's contract: products of bf16 values (exact in f32) summed in
// f32. Ways to compute it:
enum class Bf16Gemm : uint8_t {
  widen_eigen,    // widen the operands to f32, Eigen's f32 GEMM (any CPU)
  onednn,         // oneDNN's bf16 matmul: the CPU's bf16 dot-product instructions
  widen_f32,      // widen the operands to f32, then gemm_f32 (oneDNN's f32 matmul or the packed kernel)
};
void gemm_bf16(const GemmShape& s, const uint16_t* a, const uint16_t* b, float* c);

// oneDNN's names for the implementations of the tiles Bf16Gemm::onednn gives oneDNN for s
// ("brg:avx512_core_amx_bf16"; empty without oneDNN): tests and benchmarks check that a CPU with
// AMX runs every tile there.
std::vector<std::string> gemm_bf16_onednn_impls(const GemmShape& s);

std::string_view bf16_gemm_name(Bf16Gemm way);
bool bf16_gemm_available(Bf16Gemm way);  // Bf16Gemm::onednn needs a build with oneDNN
// The way gemm_bf16 uses, and with it the bf16 convolutions (oneDNN's bf16 ones only with
// Bf16Gemm::onednn): oneDNN's bf16 primitives where they outrun f32 ones (onednn_fast_bf16:
// AMX, or AMD's AVX512_BF16), else the fastest measured without them. set_bf16_gemm is for
// tests and benchmarks.
Bf16Gemm bf16_gemm();
void set_bf16_gemm(Bf16Gemm way);  // throws tpu::Error when not available

// "oneDNN 2.6.3, ISA avx512_core_vnni, native bf16: no" or "oneDNN: not in this build".
std::string gemm_backend_report();

}  // namespace tpu
