// A fusion program's chunk as native code. The program (ops/fusion_program.h) runs each op
// over a whole chunk, so every op stores its chunk and the next one loads it again: on a CPU
// that double-pumps 512-bit vectors that is two cycles per vector per op, and an Adam update
// ran 5x slower than the same loop compiled. Here the body is compiled, once per program,
// into x86-64 vector code that takes one vector of the chunk at a time through the whole
// body in registers and stores the result only: AVX-512 (16 lanes, 23 value registers and
// mask registers) where the CPU runs it, else AVX2 (8 lanes, 14 registers for values and
// masks alike; on such a CPU the program's per-op chunk loops and their calls took a bias and
// ReLU over 12.8 MB 1.8x as long as the same loop compiled).
//
// It takes the f32 arithmetic whose results are exact IEEE operations (add, sub, mul, div,
// sqrt, max, min, neg, abs), comparisons, selections and the conversions between f32 and bool
// or bf16, so each element comes out bitwise as the program computes it; f32, bf16 and bool
// results. It also takes exp, sigmoid, erf and tanh (AVX2 code where the CPU has FMA): the
// kernels' own sequences of IEEE operations (kernels/exp_f32.h, erf_f32.h, tanh_f32.h),
// instruction for instruction, so the same bits (a GELU and its gradient over a BERT's
// [32, 128, 1024] ran 1.4x as fast as on the program, AVX-512). A body with any other op, or a
// CPU without AVX2, has no native form and runs on the program.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "ops/fusion_program.h"

namespace tpu {

class FusionJit {
 public:
  // The instruction set native code is made for: the best the CPU runs by default. Tests
  // pick each one the CPU runs (set_isa clamps to those) or none, to compare them.
  enum class Isa : uint8_t { none, avx2, avx512 };

  // The native form of a program's code (result register `root` of type `result`) for `isa`
  // (by default the one set now), or nullopt.
  static std::optional<FusionJit> compile(std::span<const FusionProgram::Instr> code, int32_t root, DType result);
  static std::optional<FusionJit> compile(std::span<const FusionProgram::Instr> code, int32_t root, DType result,
                                          Isa isa);
  // The same, shared by every program of the same code while one holds it: a deep model's
  // layers fuse into the same bodies, and each native form costs a mapping of its own.
  static std::shared_ptr<const FusionJit> shared(std::span<const FusionProgram::Instr> code, int32_t root,
                                                 DType result);
  // `chunks` whole chunks: `at[r]` points at the first chunk of f32 leaf register r, `masks`
  // holds the mask registers (register r's kFusionChunk lanes at masks + r * kFusionChunk),
  // `out` gets the result's elements (f32, bf16 or bool, as the program's result). Each
  // leaf's and the result's chunks follow one another; only a program that loops() takes more
  // than one chunk a call (its leaves are operands read in place, splats, operands repeating
  // every few chunks (the call stays within one period) or within one chunk).
  void run(const float* const* at, const int32_t* masks, std::byte* out, int64_t chunks) const {
    entry_(at, masks, out, constants_, chunks);
  }
  bool loops() const { return loops_; }
  // A spread operand (each of its values repeated n times) with n a multiple of the vector
  // width that divides a chunk (a softmax's or a LayerNorm's row statistics): the native code
  // broadcasts its values itself, at[r] pointing at the value of the chunk's first element.
  static bool reads_spread(const FusionProgram::Instr& x);
  // A leaf the native code reads in place, its pointer moving on with the chunks: an operand
  // of the result's shape, a per-channel one of whole chunks (within a period), such a spread one.
  static bool reads_in_place(const FusionProgram::Instr& x);

  static Isa best_isa();
  static void set_isa(Isa isa);
  static Isa isa();
  // Whether programs get native code: set_enabled(true) is set_isa(best_isa()).
  static void set_enabled(bool on);
  static bool enabled();

 private:
  using Entry = void (*)(const float* const*, const int32_t*, std::byte*, const uint32_t*, int64_t);
  // The sign bit, all but the sign bit, 1.0f, 0.0f, 1, a bf16 rounding's bias, the upper half,
  // a bf16 NaN's quiet bit: AVX-512 code broadcasts each into a register of its own; AVX2
  // code, short of registers, reads them as memory operands, a vector of 8 lanes each. After
  // the eight, the transcendentals' coefficients (AVX-512 code broadcasts them from memory).
  static const uint32_t* const kConstants;
  static const uint32_t* const kConstantVectors;
  struct Unmap {
    size_t size;
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Unmap> code_{nullptr, Unmap{0}};
  Entry entry_ = nullptr;
  const uint32_t* constants_ = kConstants;
  bool loops_ = false;
};

}  // namespace tpu
