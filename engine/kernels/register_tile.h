// The register tile of the f32 GEMM kernels (kernels/gemm_small_k.cpp, kernels/gemm_packed.cpp):
// kRows x (kVecs vectors of kLanes) results, its accumulators plus the loaded row of B within
// the register file (24 + 3 of AVX-512's 32 vector registers, 12 + 2 of AVX2's 16).
#pragma once
#include <cstdint>

namespace tpu::register_tile {

#ifdef __AVX512F__
constexpr int kLanes = 16, kVecs = 3, kRows = 8;
#else
constexpr int kLanes = 8, kVecs = 2, kRows = 6;
#endif
constexpr int kCols = kLanes * kVecs;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
// The same at any float's address, and allowed to alias the floats it is read from.
typedef float UnalignedVec __attribute__((vector_size(kLanes * sizeof(float)), aligned(alignof(float)), may_alias));

// Float loads and stores (a copy through memcpy compiles to integer moves, whose results
// reach the FMA units a cycle later on some cores).
inline Vec load(const float* p) { return *reinterpret_cast<const UnalignedVec*>(p); }
inline void store(float* p, Vec v) { *reinterpret_cast<UnalignedVec*>(p) = v; }

}  // namespace tpu::register_tile
