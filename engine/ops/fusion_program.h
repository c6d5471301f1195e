// A fusion body as straight-line code over chunks of kFusionChunk elements: every op of the
// body for one chunk at a time, in register-sized arrays, where the block evaluation
// (ops/fusion.cpp) makes one pass over a 4096-element block per op. Only bodies whose every op
// has a fused form in its row (OpInfo::fused: the chunk loop of the kernel's own element
// function, a comparison, a selection or a conversion between f32 and bool or bf16), over f32
// values (bf16 and bool ones only as operands, conversions and the result), are taken: each
// element then comes out bitwise as the block evaluation computes it. A bf16 value is held as
// the f32 of the same value. Where ops/fusion_jit.h takes a body, its whole chunks run as
// native code (the same bits again).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_table.h"

namespace tpu {

class FusionJit;

class FusionProgram {
 public:
  // nullopt when the body holds an op or a dtype the program does not take.
  static std::optional<FusionProgram> compile(const Graph& body);
  // Elements [begin, end) of the result; begin a multiple of kFusionChunk (chunks start there).
  void run(std::span<const Tensor* const> in, Tensor& out, int64_t begin, int64_t end) const;
  // The same elements of an f32 result into dst[0 .. end - begin) (a reduce_fusion's tile).
  void run_into(std::span<const Tensor* const> in, float* dst, int64_t begin, int64_t end) const;
  DType result_type() const { return result_type_; }
  bool native() const { return native_ != nullptr; }  // whole chunks run as native code
  const FusionJit* native_code() const { return native_.get(); }  // shared by programs of the same code
  bool native_loops() const;                           // ... all of a run's in one call

  enum class Code : uint8_t {
    load, load_bool, load_bf16, load_u8,  // an operand of the result's shape (f32, bool, bf16, u8)
    splat, splat_bool,        // a scalar operand or constant
    tiled,                    // an operand repeating every `n` elements, n dividing a chunk: the same in every chunk
    repeat, spread,           // a broadcast operand: repeating every `n` elements, or each spanning `n`
    gather,                   // any other broadcast of an operand: gathers_[n] maps the elements
    unary, binary,            // the op's chunk loop (its row's FusedForm)
    compare, select, bool_to_f32,
    exact_to_f32,             // a bf16 or u8 value to f32: held exactly as one already
    f32_to_bf16,
  };
  struct Instr {
    Code code;
    uint8_t cmp = 0;          // compare: a Cmp
    int32_t dst = 0, a = -1, b = -1, c = -1;
    int32_t param = -1;       // load/splat/broadcast: the operand index (-1: a constant)
    float value = 0;          // a constant splat
    int64_t n = 0;            // repeat / spread period; gather: its map
    const FusedForm* fused = nullptr;  // unary / binary: the op's chunk loops
    Op op = Op::parameter;             // unary / binary: the op
  };
  // Where a broadcast's elements come from: the source offset of result element i is the sum
  // over dims of ((i / out_stride) % shape) * src_stride, src_stride 0 along broadcast dims.
  static constexpr int kMaxRank = 8;
  struct Gather {
    int rank = 0;
    int64_t shape[kMaxRank] = {}, out_stride[kMaxRank] = {}, src_stride[kMaxRank] = {};
  };

 private:
  // dst holds the result's elements from `begin` on.
  void run_range(std::span<const Tensor* const> in, std::byte* dst, int64_t begin, int64_t end) const;

  std::vector<Instr> code_;
  std::vector<Gather> gathers_;
  int32_t registers_ = 0;
  int32_t result_ = 0;
  DType result_type_ = DType::f32;
  std::shared_ptr<const FusionJit> native_;  // whole chunks as native code (ops/fusion_jit.h), or null
};

// The program of a fusion node's body, compiled on first use and kept while the body lives;
// null when the body does not fit the program's form.
const FusionProgram* fusion_program(const Node& fusion);

}  // namespace tpu
