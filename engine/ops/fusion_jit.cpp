#include "ops/fusion_jit.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/erf_f32.h"
#include "kernels/exp_f32.h"
#include "kernels/tanh_f32.h"

#if defined(__x86_64__) && defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#define TPU_FUSION_JIT 1
#endif

namespace tpu {

namespace {

// Where each constant the native code reads sits in kConstants (in floats): the eight that
// AVX-512 code keeps in registers, then the transcendentals' (exp, the logistic function, erf,
// tanh; read as broadcast memory operands), as kernels/exp_f32.h, erf_f32.h and tanh_f32.h
// write them.
enum ConstantIndex {
  kExpLow = 8, kExpHigh, kLog2e, kRoundMagic, kLn2Hi, kLn2Lo, kExponentBias, kExpTaylor,
  kErfLeadHi = kExpTaylor + int(exp_detail::kTaylor.size()), kErfLeadLo, kFour, kTwoAndHalf, kErfNear,
  kErfFar = kErfNear + erf_detail::kTerms, kTanhFarHigh = kErfFar + int(erf_detail::kFar.size()), kTanhTwo, kTanhNear,
  kConstantCount = kTanhNear + int(tanh_detail::kNear.size())
};

constexpr std::array<uint32_t, kConstantCount> constant_table() {
  std::array<uint32_t, kConstantCount> t{0x80000000u, 0x7fffffffu, 0x3f800000u, 0u, 1u, 0x7fffu, 0xffff0000u, 0x00400000u};
  auto put = [&](int at, float v) { t[size_t(at)] = std::bit_cast<uint32_t>(v); };
  put(kExpLow, exp_detail::kLow), put(kExpHigh, exp_detail::kHigh), put(kLog2e, exp_detail::kLog2e);
  put(kRoundMagic, exp_detail::kRound), put(kLn2Hi, exp_detail::kLn2Hi), put(kLn2Lo, exp_detail::kLn2Lo);
  t[kExponentBias] = uint32_t(exp_detail::kBias);
  for (size_t i = 0; i < exp_detail::kTaylor.size(); ++i) put(kExpTaylor + int(i), exp_detail::kTaylor[i]);
  put(kErfLeadHi, erf_detail::kLeadHi), put(kErfLeadLo, erf_detail::kLeadLo), put(kFour, 4.0f), put(kTwoAndHalf, 2.5f);
  for (size_t i = 0; i < erf_detail::kNear.size(); ++i) put(kErfNear + int(i), erf_detail::kNear[i]);
  for (size_t i = 0; i < erf_detail::kFar.size(); ++i) put(kErfFar + int(i), erf_detail::kFar[i]);
  put(kTanhFarHigh, tanh_detail::kFarHigh), put(kTanhTwo, 2.0f);
  for (size_t i = 0; i < tanh_detail::kNear.size(); ++i) put(kTanhNear + int(i), tanh_detail::kNear[i]);
  return t;
}
alignas(64) constexpr std::array<uint32_t, kConstantCount> kConstantTable = constant_table();

// The same, each constant repeated in 8 lanes: AVX2 code's memory operands.
constexpr std::array<uint32_t, 8 * kConstantCount> constant_rows() {
  std::array<uint32_t, 8 * kConstantCount> rows{};
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = kConstantTable[i / 8];
  return rows;
}
alignas(64) constexpr std::array<uint32_t, 8 * kConstantCount> kConstantRows = constant_rows();

}  // namespace

const uint32_t* const FusionJit::kConstants = kConstantTable.data();
const uint32_t* const FusionJit::kConstantVectors = kConstantRows.data();

namespace {

using Code = FusionProgram::Code;
using Instr = FusionProgram::Instr;

using Isa = FusionJit::Isa;

Isa cpu_isa() {
#ifdef TPU_FUSION_JIT
  __builtin_cpu_init();
  // Each also checks that the OS saves the vector state.
  if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2")) return Isa::avx2;
#endif
  return Isa::none;
}
std::atomic<Isa> jit_isa{FusionJit::best_isa()};

// Registers zmm0..kValueRegs-1 hold values; the rest are fixed (a scratch vector and the
// constants, zmm31 down to zmm24 in kConstants' order), k1..kMaskRegs masks and k7 a scratch
// mask. A body with a transcendental gives two value registers to its working values.
constexpr int kValueRegs = 23, kScratch = 23, kQuietBit = 24, kHighHalf = 25, kRoundingBias = 26, kIntOne = 27,
              kZero = 28, kOne = 29, kAbsMask = 30, kSignMask = 31;
constexpr int kTranscendentalValueRegs = 21, kTemp1 = 21, kTemp2 = 22;
constexpr int kMaskRegs = 6, kScratchMask = 7;
// AVX2: ymm0..13 hold values and masks (a mask's lanes all ones or all zeros), ymm14 and ymm15
// are scratch (a body with a transcendental gives it ymm12 and 13 too); the constants stay in
// memory (kConstantVectors, at rcx all along).
constexpr int kAvx2ValueRegs = 14, kAvx2Scratch = 14, kAvx2Scratch2 = 15, kAvx2VectorFloats = 8;
constexpr int kAvx2TranscendentalValueRegs = 12, kAvx2Temp1 = 12, kAvx2Temp2 = 13;
enum Constant { kSignBit, kAllButSign, kOneF, kZeroF, kOneI, kBf16Bias, kUpperHalf, kBf16Quiet };
int32_t constant_at(int c) { return int32_t(8 * sizeof(uint32_t)) * c; }  // a row of kConstantVectors
int32_t float_at(int c) { return int32_t(sizeof(uint32_t)) * c; }       // an element of kConstants
// General registers of the entry's arguments (System V): at, masks, out, constants, chunks;
// rax scratch.
constexpr int kRax = 0, kConstReg = 1, kOut = 2, kMasksReg = 6, kAt = 7, kChunks = 8;
constexpr int kVectorFloats = 16, kVectors = int(kFusionChunk / kVectorFloats);

#ifdef TPU_FUSION_JIT
bool makes_mask(Code c) { return c == Code::load_bool || c == Code::splat_bool || c == Code::compare; }
bool is_leaf(Code c) { return c <= Code::gather; }

// The native opcode (map 0F, no prefix) of an f32 arithmetic op, or 0. max and min are
// comparisons and selections, not vmaxps / vminps: those return an operand flushed to zero
// when the thread treats subnormal operands as zero, where the kernels pass on its bits.
uint8_t arithmetic_opcode(Op op) {
  switch (op) {
    case Op::add: return 0x58;
    case Op::mul: return 0x59;
    case Op::sub: return 0x5C;
    case Op::div: return 0x5E;
    default: return 0;
  }
}

// AVX2 code's transcendentals take fused multiply-adds (FMA3: every AVX-512 CPU has them).
bool has_fma() {
  static const bool fma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
  }();
  return fma;
}

bool is_transcendental(const Instr& x) {
  return x.code == Code::unary && (x.op == Op::exp || x.op == Op::sigmoid || x.op == Op::erf || x.op == Op::tanh);
}

bool takes(const Instr& x, Isa isa) {
  switch (x.code) {
    case Code::unary:
      return x.op == Op::neg || x.op == Op::abs || x.op == Op::sqrt ||
             (is_transcendental(x) && (isa == Isa::avx512 || has_fma()));
    case Code::binary: return arithmetic_opcode(x.op) != 0 || x.op == Op::max || x.op == Op::min;
    default: return true;
  }
}

// The vcmpps predicate of each Cmp (ordered, false on NaN, but ne: true on NaN), as C++'s
// comparisons of floats.
uint8_t predicate(uint8_t cmp) {
  switch (Cmp(cmp)) {
    case Cmp::eq: return 0x00;
    case Cmp::lt: return 0x01;
    case Cmp::le: return 0x02;
    case Cmp::ne: return 0x04;
    case Cmp::ge: return 0x0D;
    case Cmp::gt: return 0x0E;
  }
  return 0;
}

// x86-64 machine code: EVEX-encoded 512-bit vector instructions and the few general ones.
class Emitter {
 public:
  std::vector<uint8_t> bytes;

  // op zmm/k reg, zmm vvvv, zmm rm (register form). map: 1 = 0F, 2 = 0F38; pp: 0 none, 1 66, 2 F3.
  void evex_rr(int map, int pp, int reg, int vvvv, int rm, int mask, uint8_t opcode) {
    prefix(map, pp, reg, vvvv, (rm & 8) != 0, (rm & 16) != 0, mask);
    byte(opcode);
    byte(uint8_t(0xC0 | (reg & 7) << 3 | (rm & 7)));
  }
  // op zmm reg, [base + disp] (base a general register, neither rsp, rbp, r12 nor r13).
  void evex_rm(int map, int pp, int reg, int base, int32_t disp, uint8_t opcode) {
    prefix(map, pp, reg, 0, (base & 8) != 0, false, 0);
    byte(opcode);
    byte(uint8_t(0x80 | (reg & 7) << 3 | (base & 7)));
    u32(uint32_t(disp));
  }
  // op zmm/k reg, zmm vvvv, [base + disp]{1to16}: the float there in every lane.
  void evex_rb(int map, int pp, int reg, int vvvv, int base, int32_t disp, uint8_t opcode) {
    prefix(map, pp, reg, vvvv, (base & 8) != 0, false, 0, true);
    byte(opcode);
    byte(uint8_t(0x80 | (reg & 7) << 3 | (base & 7)));
    u32(uint32_t(disp));
  }
  void mov_from(int dst, int base, int32_t disp) {  // mov dst, [base + disp] (base below 8)
    byte(uint8_t(0x48 | (dst & 8 ? 4 : 0))), byte(0x8B), byte(uint8_t(0x80 | (dst & 7) << 3 | base));
    u32(uint32_t(disp));
  }
  void add_imm(int reg, int32_t imm) {  // add reg, imm
    byte(uint8_t(0x48 | (reg & 8 ? 1 : 0))), byte(0x81), byte(uint8_t(0xC0 | (reg & 7)));
    u32(uint32_t(imm));
  }
  void dec(int reg) { byte(uint8_t(0x48 | (reg & 8 ? 1 : 0))), byte(0xFF), byte(uint8_t(0xC8 | (reg & 7))); }
  void jnz_to(size_t target) {  // jnz rel32 back to target
    byte(0x0F), byte(0x85);
    u32(uint32_t(int32_t(int64_t(target) - int64_t(bytes.size() + 4))));
  }
  void byte(uint8_t b) { bytes.push_back(b); }

  // VEX-encoded (AVX2) op, register form: reg, vvvv, rm; wide: 256 bits, else 128.
  void vex_rr(int map, int pp, bool wide, int reg, int vvvv, int rm, uint8_t opcode) {
    vex(map, pp, wide, reg, vvvv, rm);
    byte(opcode);
    byte(uint8_t(0xC0 | (reg & 7) << 3 | (rm & 7)));
  }
  // op reg, vvvv, [base + disp] (base as for evex_rm).
  void vex_rm(int map, int pp, bool wide, int reg, int vvvv, int base, int32_t disp, uint8_t opcode) {
    vex(map, pp, wide, reg, vvvv, base);
    byte(opcode);
    byte(uint8_t(0x80 | (reg & 7) << 3 | (base & 7)));
    u32(uint32_t(disp));
  }
  // vblendvps d, a, b, mask: d = mask ? b : a, lane by lane (by the mask's sign bits).
  void blend(int d, int a, int b, int mask) {
    vex_rr(3, 1, true, d, a, b, 0x4A);
    byte(uint8_t(mask << 4));
  }

 private:
  // The three VEX bytes: W0, the high bits of reg and rm (or base) and vvvv inverted.
  void vex(int map, int pp, bool wide, int reg, int vvvv, int rm) {
    byte(0xC4);
    byte(uint8_t((reg & 8 ? 0 : 0x80) | 0x40 | (rm & 8 ? 0 : 0x20) | map));
    byte(uint8_t((~vvvv & 15) << 3 | (wide ? 4 : 0) | pp));
  }

  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) byte(uint8_t(v >> (8 * i)));
  }
  // The four EVEX bytes: 512-bit length, W0, the high bits of reg / rm / vvvv inverted; with
  // `broadcast` a memory operand's one element goes to every lane.
  void prefix(int map, int pp, int reg, int vvvv, bool rm_bit3, bool rm_bit4, int mask, bool broadcast = false) {
    byte(0x62);
    byte(uint8_t((reg & 8 ? 0 : 0x80) | (rm_bit4 ? 0 : 0x40) | (rm_bit3 ? 0 : 0x20) | (reg & 16 ? 0 : 0x10) | map));
    byte(uint8_t((~vvvv & 15) << 3 | 0x04 | pp));
    byte(uint8_t(0x40 | (broadcast ? 0x10 : 0) | (vvvv & 16 ? 0 : 0x08) | mask));
  }
};

// Where each value lives while a vector goes through the body: a zmm or a k register, chosen
// once (the same for every vector). Values die at their last reader; a result never shares a
// register with its operands (max and min read an operand after writing the result). A splat
// is the same in every vector: loaded once a chunk, it keeps its register. The first leaves'
// chunk pointers are loaded once a chunk too, into general registers.
struct Allocation {
  std::vector<int> reg;  // per register id of the program: the machine register, -1: unused
  std::vector<int> gpr;  // per register id: the general register holding its chunk pointer, or -1
  bool fits = true;
};

bool is_splat(Code c) { return c == Code::splat || c == Code::splat_bool; }

// How far an advancing leaf's pointer moves a chunk: a chunk of elements (floats, or bytes for
// a u8 operand), or of a spread operand's values (a chunk holds kFusionChunk / n of them).
int32_t advance_bytes(const Instr& x) {
  if (x.code == Code::load_u8) return int32_t(kFusionChunk);  // a byte an element
  return int32_t(sizeof(float) * (FusionJit::reads_spread(x) ? kFusionChunk / x.n : kFusionChunk));
}

// General registers free for chunk pointers (caller-saved; rcx and rsi once the constants and
// the splats are loaded; rsi last, as mask operands read through it). AVX2 code, and AVX-512
// code with a transcendental, read constants through rcx all along.
constexpr int kPointerRegs[] = {9, 10, 11, kConstReg, kMasksReg};
constexpr int kPointerRegsBesideConstants[] = {9, 10, 11, kMasksReg};

// Per register id: where the result reads it last (-1: the result does not depend on it; the
// root's: past the end) and whether it is a mask.
struct Liveness {
  std::vector<int64_t> last;
  std::vector<bool> mask;
  bool mask_loads = false;  // a mask operand is read chunk by chunk
};

Liveness liveness(std::span<const Instr> code, int32_t root) {
  int32_t ids = root + 1;
  for (const Instr& x : code) ids = std::max({ids, x.dst + 1, x.a + 1, x.b + 1, x.c + 1});
  Liveness lv{std::vector<int64_t>(size_t(ids), -1), std::vector<bool>(size_t(ids), false)};
  std::vector<bool> live(size_t(ids), false);
  live[size_t(root)] = true;
  for (size_t j = code.size(); j-- > 0;) {
    const Instr& x = code[j];
    lv.mask[size_t(x.dst)] = makes_mask(x.code);
    lv.mask_loads = lv.mask_loads || x.code == Code::load_bool;
    if (!live[size_t(x.dst)] || is_leaf(x.code)) continue;
    for (int32_t o : {x.a, x.b, x.c})
      if (o >= 0) live[size_t(o)] = true;
  }
  for (size_t j = 0; j < code.size(); ++j) {
    if (!live[size_t(code[j].dst)] || is_leaf(code[j].code)) continue;
    for (int32_t o : {code[j].a, code[j].b, code[j].c})
      if (o >= 0) lv.last[size_t(o)] = int64_t(j);
  }
  lv.last[size_t(root)] = int64_t(code.size());
  return lv;
}

Allocation allocate(std::span<const Instr> code, int32_t root, Isa isa) {
  Liveness lv = liveness(code, root);
  std::vector<int64_t>& last = lv.last;
  const std::vector<bool>& mask = lv.mask;
  const size_t ids = last.size();
  const bool avx2 = isa == Isa::avx2, transcendental = std::ranges::any_of(code, is_transcendental);
  const std::span<const int> pointer_set =
      avx2 || transcendental ? std::span<const int>(kPointerRegsBesideConstants) : std::span<const int>(kPointerRegs);
  // rsi holds the masks while a chunk's mask operands are read from them.
  const size_t pointer_regs = pointer_set.size() - (lv.mask_loads ? 1 : 0);
  Allocation al{std::vector<int>(ids, -1), std::vector<int>(ids, -1)};
  const int value_regs = avx2 ? (transcendental ? kAvx2TranscendentalValueRegs : kAvx2ValueRegs)
                              : (transcendental ? kTranscendentalValueRegs : kValueRegs);
  std::vector<bool> vector_free(size_t(value_regs), true);
  std::vector<bool> k_free(kMaskRegs + 1, true);
  k_free[0] = false;  // k0 cannot mask
  // AVX2 has no mask registers: a mask takes a vector register.
  auto pool = [&](int32_t id) -> std::vector<bool>& { return mask[size_t(id)] && !avx2 ? k_free : vector_free; };
  auto take = [&](std::vector<bool>& free) {
    for (size_t i = 0; i < free.size(); ++i)
      if (free[i]) return free[i] = false, int(i);
    return -1;
  };
  size_t pointers = 0;
  for (const Instr& x : code) {
    if (last[size_t(x.dst)] < 0 || !is_leaf(x.code)) continue;
    if (is_splat(x.code)) {
      al.reg[size_t(x.dst)] = take(pool(x.dst));
      al.fits = al.fits && al.reg[size_t(x.dst)] >= 0;
      last[size_t(x.dst)] = int64_t(code.size());  // kept
    } else if (!mask[size_t(x.dst)] && pointers < pointer_regs) {
      al.gpr[size_t(x.dst)] = pointer_set[pointers++];
    }
  }
  for (size_t j = 0; j < code.size() && al.fits; ++j) {
    const Instr& x = code[j];
    if (last[size_t(x.dst)] < 0 || is_splat(x.code)) continue;  // read by nothing, or loaded once
    const int r = take(pool(x.dst));
    al.fits = r >= 0;
    al.reg[size_t(x.dst)] = r;
    if (is_leaf(x.code)) continue;
    for (int32_t o : {x.a, x.b, x.c}) {
      if (o < 0 || last[size_t(o)] != int64_t(j)) continue;
      pool(o)[size_t(al.reg[size_t(o)])] = true;
      last[size_t(o)] = -2;  // freed once, however many operands name it
    }
  }
  return al;
}

// Once a chunk: the constants, the splats, the chunk pointers.
void emit_prologue(Emitter& e, std::span<const Instr> code, const Allocation& al) {
  for (int k = 0; k < 8; ++k) e.evex_rm(2, 1, kSignMask - k, kConstReg, float_at(k), 0x18);  // vbroadcastss
  for (const Instr& x : code) {
    const int d = al.reg[size_t(x.dst)];
    if (x.code == Code::splat && d >= 0) {
      e.mov_from(kRax, kAt, x.dst * int32_t(sizeof(float*)));
      e.evex_rm(1, 0, d, kRax, 0, 0x10);  // vmovups
    } else if (x.code == Code::splat_bool && d >= 0) {
      e.evex_rm(1, 2, kScratch, kMasksReg, int32_t(x.dst * kFusionChunk * 4), 0x6F);  // vmovdqu32
      e.evex_rr(2, 1, d, kScratch, kScratch, 0, 0x27);                                 // vptestmd
    }
  }
  for (const Instr& x : code)
    if (al.gpr[size_t(x.dst)] >= 0) e.mov_from(al.gpr[size_t(x.dst)], kAt, x.dst * int32_t(sizeof(float*)));
}

// d = a rounded to the nearest bf16 (ties to even), as an f32; a NaN's quiet bit set: the
// fusion program's rounded_to_bf16, in integer lanes.
void emit_round_to_bf16(Emitter& e, int d, int a) {
  e.evex_rr(1, 1, 2, d, a, 0, 0x72), e.byte(16);      // vpsrld d, a, 16
  e.evex_rr(1, 1, d, d, kIntOne, 0, 0xDB);            // vpandd: the lowest kept bit
  e.evex_rr(1, 1, d, d, kRoundingBias, 0, 0xFE);      // vpaddd 0x7fff
  e.evex_rr(1, 1, d, d, a, 0, 0xFE);                  // vpaddd a
  e.evex_rr(1, 1, d, d, kHighHalf, 0, 0xDB);          // vpandd 0xffff0000
  e.evex_rr(1, 0, kScratchMask, a, a, 0, 0xC2), e.byte(0x03);  // k7 = a is a NaN
  e.evex_rr(1, 1, kScratch, a, kHighHalf, 0, 0xDB);
  e.evex_rr(1, 1, kScratch, kScratch, kQuietBit, 0, 0xEB);     // vpord: quiet
  e.evex_rr(2, 1, d, d, kScratch, kScratchMask, 0x65);
}

// ---- The transcendentals: kernels/exp_f32.h's, erf_f32.h's and tanh_f32.h's operations one for
// one, in the same order (so the same bits), in either instruction set: the same opcodes,
// EVEX-encoded (constants broadcast from kConstants, the first eight in registers, masks in k7)
// or VEX-encoded (constants as 8-lane rows of kConstantVectors, masks in a vector register).

// A source operand: a register, or one of the constants in every lane.
struct Operand {
  int reg = -1;
  ConstantIndex constant = ConstantIndex(0);
};
Operand reg(int r) { return {r}; }
Operand constant(int c) { return {-1, ConstantIndex(c)}; }

class VectorOps {
 public:
  VectorOps(Emitter& e, Isa isa) : e_(e), avx2_(isa == Isa::avx2) {}
  // Registers free for the bodies' working values (the allocator leaves them out), and the mask.
  int temp1() const { return avx2_ ? kAvx2Temp1 : kTemp1; }
  int temp2() const { return avx2_ ? kAvx2Temp2 : kTemp2; }
  int temp3() const { return avx2_ ? kAvx2Scratch : kScratch; }

  // d = a op b (map 1 = 0F, 2 = 0F38; pp 0 none, 1 66, 2 F3), an immediate after it if imm >= 0.
  void op(int map, int pp, uint8_t opcode, int d, int a, Operand b, int imm = -1) {
    if (b.reg < 0 && !avx2_ && b.constant < 8) b.reg = kSignMask - b.constant;  // kept in a register
    if (b.reg >= 0 && avx2_) e_.vex_rr(map, pp, true, d, a, b.reg, opcode);
    else if (b.reg >= 0) e_.evex_rr(map, pp, d, a, b.reg, 0, opcode);
    else if (avx2_) e_.vex_rm(map, pp, true, d, a, kConstReg, constant_at(b.constant), opcode);
    else e_.evex_rb(map, pp, d, a, kConstReg, float_at(b.constant), opcode);
    if (imm >= 0) e_.byte(uint8_t(imm));
  }
  void mul(int d, int a, Operand b) { op(1, 0, 0x59, d, a, b); }
  void add(int d, int a, Operand b) { op(1, 0, 0x58, d, a, b); }
  void sub(int d, int a, Operand b) { op(1, 0, 0x5C, d, a, b); }
  void div(int d, int a, Operand b) { op(1, 0, 0x5E, d, a, b); }
  // vmaxps / vminps: a NaN in a gives b (the bodies replace such lanes).
  void max(int d, int a, Operand b) { op(1, 0, 0x5F, d, a, b); }
  void min(int d, int a, Operand b) { op(1, 0, 0x5D, d, a, b); }
  void bit_and(int d, int a, Operand b) { op(1, 1, 0xDB, d, a, b); }
  void bit_or(int d, int a, Operand b) { op(1, 1, 0xEB, d, a, b); }
  void bit_xor(int d, int a, Operand b) { op(1, 1, 0xEF, d, a, b); }
  void int_add(int d, int a, Operand b) { op(1, 1, 0xFE, d, a, b); }
  void int_sub(int d, int a, Operand b) { op(1, 1, 0xFA, d, a, b); }
  void fma213(int d, int m, Operand c) { op(2, 1, 0xA8, d, m, c); }   // d = d m + c
  void fma231(int d, int m, Operand c) { op(2, 1, 0xB8, d, m, c); }   // d = m c + d
  void fnma231(int d, int m, Operand c) { op(2, 1, 0xBC, d, m, c); }  // d = -(m c) + d
  void truncate_to_int(int d, int a) { op(1, 2, 0x5B, d, 0, reg(a)); }  // vcvttps2dq
  // vpsrad (ext 4) / vpslld (ext 6) d, a, imm: the opcode's extension in the reg field.
  void shift(int ext, int d, int a, int imm) {
    if (avx2_) e_.vex_rr(1, 1, true, ext, d, a, 0x72);
    else e_.evex_rr(1, 1, ext, d, a, 0, 0x72);
    e_.byte(uint8_t(imm));
  }
  void load(int d, int c) {
    if (avx2_) e_.vex_rm(1, 0, true, d, 0, kConstReg, constant_at(c), 0x10);  // vmovups
    else e_.evex_rm(2, 1, d, kConstReg, float_at(c), 0x18);                     // vbroadcastss
  }
  // The mask = a `predicate` b (vcmpps), then selections by it.
  void compare(int a, Operand b, int predicate) { op(1, 0, 0xC2, mask(), a, b, predicate); }
  void select(int d, int if_clear, int if_set) {  // d = mask ? if_set : if_clear
    if (avx2_) e_.blend(d, if_clear, if_set, mask());
    else e_.evex_rr(2, 1, d, if_clear, if_set, kScratchMask, 0x65);  // vblendmps
  }
  // d = a where a is a NaN.
  void keep_nan(int d, int a) {
    compare(a, reg(a), 0x03);  // unordered
    select(d, d, a);
  }
  // d = d * m + the constants from `first` to `last` (either way), in turn (Horner's rule).
  void horner(int d, int m, int first, int last) {
    const int step = first <= last ? 1 : -1;
    for (int c = first; c != last + step; c += step) fma213(d, m, constant(c));
  }

 private:
  int mask() const { return avx2_ ? kAvx2Scratch2 : kScratchMask; }
  Emitter& e_;
  bool avx2_;
};

// exp_reduced: d = e^r and t1 = k for c in t0 (which ends as r).
void emit_exp_reduced(VectorOps& v, int d, int t0, int t1) {
  v.load(t1, kRoundMagic);
  v.fma231(t1, t0, constant(kLog2e));  // c log2e + round
  v.sub(t1, t1, constant(kRoundMagic));  // k
  v.fnma231(t0, t1, constant(kLn2Hi));  // c - k ln2hi
  v.fnma231(t0, t1, constant(kLn2Lo));  // r
  v.load(d, kExpTaylor);
  v.horner(d, t0, kExpTaylor + 1, kExpTaylor + int(exp_detail::kTaylor.size()) - 1);
}

// t = 2^k for the float k in t (an integer within a float's exponent range).
void emit_power_of_two(VectorOps& v, int t) {
  v.int_add(t, t, constant(kExponentBias));
  v.shift(6, t, t, 23);  // vpslld
}

// d = e^x but for NaNs, which give some number; t0 and t1 are clobbered, t0 may be x. A NaN is
// clamped to kExpLow where the kernel takes 0: either way its lane is replaced.
void emit_exp_body(VectorOps& v, int d, int x, int t0, int t1) {
  v.max(t0, x, constant(kExpLow));  // c
  v.min(t0, t0, constant(kExpHigh));
  emit_exp_reduced(v, d, t0, t1);
  v.truncate_to_int(t1, t1);  // k as an integer
  v.shift(4, t0, t1, 1);      // vpsrad: k1 = k >> 1
  v.int_sub(t1, t1, reg(t0));  // k2 = k - k1
  for (int t : {t0, t1}) emit_power_of_two(v, t);  // 2^k1, 2^k2
  v.mul(d, d, reg(t0));  // p s1
  v.mul(d, d, reg(t1));  // p s1 s2
}

void emit_exp(VectorOps& v, int d, int a) {
  emit_exp_body(v, d, a, v.temp1(), v.temp2());
  v.keep_nan(d, a);
}

// 1 / (1 + e^-x), a NaN as it is.
void emit_sigmoid(VectorOps& v, int d, int a) {
  v.bit_xor(v.temp1(), a, constant(kSignBit));  // -x
  emit_exp_body(v, d, v.temp1(), v.temp1(), v.temp2());
  v.add(d, d, constant(kOneF));
  v.load(v.temp1(), kOneF);
  v.div(d, v.temp1(), reg(d));  // 1 / d
  v.keep_nan(d, a);
}

// erf: the series below 1, the fit with x's sign from 1, +-1 from 4; NaN and +-0 as they are.
void emit_erf(VectorOps& v, int d, int a) {
  const int z = v.temp1(), near = v.temp2(), far = v.temp3();
  v.mul(z, a, reg(a));  // z = x x
  v.load(d, kErfNear + erf_detail::kTerms - 1);
  v.horner(d, z, kErfNear + erf_detail::kTerms - 2, kErfNear);
  v.mul(near, a, reg(z));     // x z
  v.mul(near, near, reg(d));  // x z p
  v.fma231(near, a, constant(kErfLeadLo));
  v.fma231(near, a, constant(kErfLeadHi));
  const int mag = z;  // z is done with
  v.bit_and(mag, a, constant(kAllButSign));  // |x|
  v.max(d, mag, constant(kOneF));            // a NaN gives 1: its lane is replaced
  v.min(d, d, constant(kFour));
  v.sub(d, d, constant(kTwoAndHalf));  // u
  const int last = kErfFar + int(erf_detail::kFar.size()) - 1;
  v.load(far, last);
  v.horner(far, d, last - 1, kErfFar);
  v.min(far, far, constant(kOneF));  // q > 1 gives 1
  v.compare(mag, constant(kFour), 0x0D);  // |x| >= 4
  v.load(d, kOneF);
  v.select(far, far, d);  // 1 there
  v.bit_and(d, a, constant(kSignBit));  // x's sign
  v.bit_or(far, far, reg(d));           // on the positive far value
  v.compare(mag, constant(kOneF), 0x01);  // |x| < 1
  v.select(d, far, near);
  v.compare(a, constant(kZeroF), 0x08);  // x == 0 or a NaN
  v.select(d, d, a);
}

// tanh: the fit below 1, 1 - 2 / (e^2|x| + 1) with x's sign from 1; NaN and +-0 as they are.
void emit_tanh(VectorOps& v, int d, int a) {
  const int t0 = v.temp1(), t1 = v.temp2(), near = v.temp3();  // exp's body leaves near alone
  v.mul(t0, a, reg(a));  // z = x x
  const int last = kTanhNear + int(tanh_detail::kNear.size()) - 1;
  v.load(near, last);
  v.horner(near, t0, last - 1, kTanhNear);
  v.mul(t1, a, reg(t0));      // x z
  v.fma213(near, t1, reg(a));  // (x z) p + x
  v.bit_and(t0, a, constant(kAllButSign));  // |x|
  v.compare(t0, constant(kOneF), 0x01);     // |x| < 1: the mask stays until the selection
  v.add(t0, t0, reg(t0));                   // 2 |x|
  v.min(t0, t0, constant(kTanhFarHigh));    // tanh_detail::exp_far
  emit_exp_reduced(v, d, t0, t1);
  v.truncate_to_int(t1, t1);
  emit_power_of_two(v, t1);
  v.mul(d, d, reg(t1));  // e^2|x|
  v.add(d, d, constant(kOneF));  // e + 1
  v.load(t0, kTanhTwo);
  v.div(t0, t0, reg(d));  // 2 / (e + 1)
  v.load(t1, kOneF);
  v.sub(d, t1, reg(t0));  // 1 - that, at least 0
  v.bit_and(t0, a, constant(kSignBit));  // x's sign
  v.bit_or(d, d, reg(t0));
  v.select(d, d, near);  // near where |x| < 1
  v.compare(a, constant(kZeroF), 0x08);  // x == 0 or a NaN
  v.select(d, d, a);
}

// The transcendental x.op of a into d.
void emit_transcendental(Emitter& e, Isa isa, Op op, int d, int a) {
  VectorOps v(e, isa);
  if (op == Op::exp) emit_exp(v, d, a);
  else if (op == Op::sigmoid) emit_sigmoid(v, d, a);
  else if (op == Op::erf) emit_erf(v, d, a);
  else emit_tanh(v, d, a);
}

// The result's vector v into out: f32 as it is, bf16 as its upper halves, bool as bytes.
void emit_store(Emitter& e, int root, DType type, int v) {
  if (type == DType::f32) return e.evex_rm(1, 0, root, kOut, v * 64, 0x11);  // vmovups
  if (type == DType::bf16) {
    e.evex_rr(1, 1, 2, kScratch, root, 0, 0x72), e.byte(16);  // vpsrld scratch, root, 16
    return e.evex_rm(2, 2, kScratch, kOut, v * 32, 0x33);     // vpmovdw [out], scratch
  }
  e.evex_rr(2, 1, kScratch, kZero, kIntOne, root, 0x65);  // 1 where the mask is set
  e.evex_rm(2, 2, kScratch, kOut, v * 16, 0x31);          // vpmovdb [out], scratch
}

// One vector (number v of the chunk) through the body.
void emit_vector(Emitter& e, std::span<const Instr> code, const Allocation& al, int32_t root, DType type, int v) {
  const int32_t offset = v * kVectorFloats * int32_t(sizeof(float));
  const std::vector<int>& reg = al.reg;
  for (const Instr& x : code) {
    const int d = reg[size_t(x.dst)];
    if (d < 0 || is_splat(x.code)) continue;
    const int a = x.a >= 0 ? reg[size_t(x.a)] : 0, b = x.b >= 0 ? reg[size_t(x.b)] : 0;
    const int c = x.c >= 0 ? reg[size_t(x.c)] : 0;
    switch (x.code) {
      case Code::load_bool:  // the mask register's lanes (-1 or 0) in memory
        e.evex_rm(1, 2, kScratch, kMasksReg, int32_t(x.dst * kFusionChunk * 4) + offset, 0x6F);  // vmovdqu32
        e.evex_rr(2, 1, d, kScratch, kScratch, 0, 0x27);                                            // vptestmd
        break;
      case Code::unary:
        if (x.op == Op::sqrt) e.evex_rr(1, 0, d, 0, a, 0, 0x51);
        else if (x.op == Op::neg) e.evex_rr(1, 1, d, a, kSignMask, 0, 0xEF);  // vpxord: the sign flipped
        else if (is_transcendental(x)) emit_transcendental(e, Isa::avx512, x.op, d, a);
        else e.evex_rr(1, 1, d, a, kAbsMask, 0, 0xDB);                        // vpandd: the sign cleared
        break;
      case Code::binary:
        if (x.op == Op::max || x.op == Op::min) {  // (a > b or a NaN) ? a : b, a < b for min
          e.evex_rr(1, 0, kScratchMask, a, b, 0, 0xC2), e.byte(x.op == Op::max ? 0x0E : 0x01);  // vcmpps k7, a, b
          e.evex_rr(2, 1, d, b, a, kScratchMask, 0x65);                                           // d = k7 ? a : b
          e.evex_rr(1, 0, kScratchMask, a, a, 0, 0xC2), e.byte(0x03);                             // k7 = a unordered
          e.evex_rr(2, 1, d, d, a, kScratchMask, 0x65);
        } else {
          e.evex_rr(1, 0, d, a, b, 0, arithmetic_opcode(x.op));
        }
        break;
      case Code::compare: e.evex_rr(1, 0, d, a, b, 0, 0xC2), e.byte(predicate(x.cmp)); break;
      case Code::select: e.evex_rr(2, 1, d, c, b, a, 0x65); break;         // d = a ? b : c
      case Code::bool_to_f32: e.evex_rr(2, 1, d, kZero, kOne, a, 0x65); break;
      case Code::exact_to_f32: e.evex_rr(1, 0, d, 0, a, 0, 0x28); break;  // vmovaps: held exactly
      case Code::load_u8: {  // 16 bytes, widened to 16 ints, converted (exactly) to floats
        int base = al.gpr[size_t(x.dst)];
        if (base < 0) e.mov_from(kRax, kAt, x.dst * int32_t(sizeof(float*))), base = kRax;
        e.evex_rm(2, 1, d, base, v * kVectorFloats, 0x31);  // vpmovzxbd
        e.evex_rr(1, 0, d, 0, d, 0, 0x5B);                   // vcvtdq2ps
        break;
      }
      case Code::f32_to_bf16: emit_round_to_bf16(e, d, a); break;
      default: {  // an f32 leaf: its chunk's vector v (a spread one: the value the vector repeats)
        int base = al.gpr[size_t(x.dst)];
        if (base < 0) e.mov_from(kRax, kAt, x.dst * int32_t(sizeof(float*))), base = kRax;
        if (FusionJit::reads_spread(x))
          e.evex_rm(2, 1, d, base, int32_t(sizeof(float) * (v * kVectorFloats / x.n)), 0x18);  // vbroadcastss
        else
          e.evex_rm(1, 0, d, base, offset, 0x10);  // vmovups
        break;
      }
    }
  }
  emit_store(e, reg[size_t(root)], type, v);
}

// ---- AVX2: the same code in 256-bit VEX instructions, masks in vector registers.

void emit_prologue_avx2(Emitter& e, std::span<const Instr> code, const Allocation& al) {
  for (const Instr& x : code) {
    const int d = al.reg[size_t(x.dst)];
    if (x.code == Code::splat && d >= 0) {
      e.mov_from(kRax, kAt, x.dst * int32_t(sizeof(float*)));
      e.vex_rm(1, 0, true, d, 0, kRax, 0, 0x10);  // vmovups
    } else if (x.code == Code::splat_bool && d >= 0) {
      e.vex_rm(1, 0, true, d, 0, kMasksReg, int32_t(x.dst * kFusionChunk * 4), 0x10);  // its lanes, -1 or 0
    }
  }
  for (const Instr& x : code)
    if (al.gpr[size_t(x.dst)] >= 0) e.mov_from(al.gpr[size_t(x.dst)], kAt, x.dst * int32_t(sizeof(float*)));
}

// d = op(a, constant c): the constant a memory operand.
void with_constant(Emitter& e, int pp, int d, int a, Constant c, uint8_t opcode) {
  e.vex_rm(1, pp, true, d, a, kConstReg, constant_at(c), opcode);
}

// As emit_round_to_bf16.
void emit_round_to_bf16_avx2(Emitter& e, int d, int a) {
  e.vex_rr(1, 1, true, 2, d, a, 0x72), e.byte(16);  // vpsrld d, a, 16
  with_constant(e, 1, d, d, kOneI, 0xDB);           // vpand: the lowest kept bit
  with_constant(e, 1, d, d, kBf16Bias, 0xFE);       // vpaddd 0x7fff
  e.vex_rr(1, 1, true, d, d, a, 0xFE);              // vpaddd a
  with_constant(e, 1, d, d, kUpperHalf, 0xDB);      // vpand 0xffff0000
  e.vex_rr(1, 0, true, kAvx2Scratch, a, a, 0xC2), e.byte(0x03);  // a is a NaN
  with_constant(e, 1, kAvx2Scratch2, a, kUpperHalf, 0xDB);
  with_constant(e, 1, kAvx2Scratch2, kAvx2Scratch2, kBf16Quiet, 0xEB);  // vpor: quiet
  e.blend(d, d, kAvx2Scratch2, kAvx2Scratch);
}

// As emit_store: 8 lanes, bf16 and bool narrowed through the two 128-bit halves.
void emit_store_avx2(Emitter& e, int root, DType type, int v) {
  constexpr int s = kAvx2Scratch, t = kAvx2Scratch2;
  if (type == DType::f32) return e.vex_rm(1, 0, true, root, 0, kOut, v * 32, 0x11);  // vmovups
  if (type == DType::bf16) e.vex_rr(1, 1, true, 2, s, root, 0x72), e.byte(16);      // vpsrld s, root, 16
  else with_constant(e, 1, s, root, kOneI, 0xDB);                                    // 1 where the mask is set
  e.vex_rr(3, 1, true, s, 0, t, 0x39), e.byte(1);  // vextracti128 t, s, 1
  e.vex_rr(2, 1, false, s, s, t, 0x2B);            // vpackusdw: 8 words
  if (type == DType::bf16) return e.vex_rm(1, 2, false, s, 0, kOut, v * 16, 0x7F);  // vmovdqu
  e.vex_rr(1, 1, false, s, s, s, 0x67);              // vpackuswb: 8 bytes
  e.vex_rm(1, 1, false, s, 0, kOut, v * 8, 0xD6);    // vmovq
}

// (a > b or a NaN) ? a : b into d, a < b for min, as the AVX-512 code.
void emit_max_min_avx2(Emitter& e, Op op, int d, int a, int b) {
  e.vex_rr(1, 0, true, kAvx2Scratch, a, b, 0xC2), e.byte(op == Op::max ? 0x0E : 0x01);  // vcmpps
  e.blend(d, b, a, kAvx2Scratch);
  e.vex_rr(1, 0, true, kAvx2Scratch, a, a, 0xC2), e.byte(0x03);  // a unordered
  e.blend(d, d, a, kAvx2Scratch);
}

void emit_op_avx2(Emitter& e, const Instr& x, int d, int a, int b, int c) {
  switch (x.code) {
    case Code::unary:
      if (is_transcendental(x)) emit_transcendental(e, Isa::avx2, x.op, d, a);
      else if (x.op == Op::sqrt) e.vex_rr(1, 0, true, d, 0, a, 0x51);
      else if (x.op == Op::neg) with_constant(e, 0, d, a, kSignBit, 0x57);  // vxorps: the sign flipped
      else with_constant(e, 0, d, a, kAllButSign, 0x54);                    // vandps: the sign cleared
      break;
    case Code::binary:
      if (x.op == Op::max || x.op == Op::min) emit_max_min_avx2(e, x.op, d, a, b);
      else e.vex_rr(1, 0, true, d, a, b, arithmetic_opcode(x.op));
      break;
    case Code::compare: e.vex_rr(1, 0, true, d, a, b, 0xC2), e.byte(predicate(x.cmp)); break;
    case Code::select: e.blend(d, c, b, a); break;                                 // d = a ? b : c
    case Code::bool_to_f32: with_constant(e, 0, d, a, kOneF, 0x54); break;         // 1.0f where set
    case Code::exact_to_f32: e.vex_rr(1, 0, true, d, 0, a, 0x28); break;           // vmovaps
    case Code::f32_to_bf16: emit_round_to_bf16_avx2(e, d, a); break;
    default: break;
  }
}

// One vector (number v of the chunk) through the body.
void emit_vector_avx2(Emitter& e, std::span<const Instr> code, const Allocation& al, int32_t root, DType type, int v) {
  const int32_t offset = v * kAvx2VectorFloats * int32_t(sizeof(float));
  const std::vector<int>& reg = al.reg;
  for (const Instr& x : code) {
    const int d = reg[size_t(x.dst)];
    if (d < 0 || is_splat(x.code)) continue;
    int base = al.gpr[size_t(x.dst)];
    if (x.code == Code::load_bool) {  // the mask's lanes (-1 or 0) in memory
      e.vex_rm(1, 0, true, d, 0, kMasksReg, int32_t(x.dst * kFusionChunk * 4) + offset, 0x10);
    } else if (is_leaf(x.code)) {
      if (base < 0) e.mov_from(kRax, kAt, x.dst * int32_t(sizeof(float*))), base = kRax;
      if (x.code == Code::load_u8) {  // 8 bytes, widened to 8 ints, converted (exactly) to floats
        e.vex_rm(2, 1, true, d, 0, base, v * kAvx2VectorFloats, 0x31);  // vpmovzxbd
        e.vex_rr(1, 0, true, d, 0, d, 0x5B);                             // vcvtdq2ps
      } else if (FusionJit::reads_spread(x)) {  // the value the vector repeats
        e.vex_rm(2, 1, true, d, 0, base, int32_t(sizeof(float) * (v * kAvx2VectorFloats / x.n)), 0x18);  // vbroadcastss
      } else {
        e.vex_rm(1, 0, true, d, 0, base, offset, 0x10);  // vmovups
      }
    } else {
      emit_op_avx2(e, x, d, x.a >= 0 ? reg[size_t(x.a)] : 0, x.b >= 0 ? reg[size_t(x.b)] : 0,
                   x.c >= 0 ? reg[size_t(x.c)] : 0);
    }
  }
  emit_store_avx2(e, reg[size_t(root)], type, v);
}
#endif

}  // namespace

bool FusionJit::reads_spread(const FusionProgram::Instr& x) {
  return x.code == Code::spread && x.n % kVectorFloats == 0 && kFusionChunk % x.n == 0;
}

bool FusionJit::reads_in_place(const FusionProgram::Instr& x) {
  return x.code == Code::load || x.code == Code::load_u8 || (x.code == Code::repeat && x.n % kFusionChunk == 0) ||
         reads_spread(x);
}

FusionJit::Isa FusionJit::best_isa() {
  static const Isa best = cpu_isa();
  return best;
}

void FusionJit::set_isa(Isa isa) { jit_isa = std::min(isa, best_isa()); }
FusionJit::Isa FusionJit::isa() { return jit_isa; }
void FusionJit::set_enabled(bool on) { set_isa(on ? best_isa() : Isa::none); }
bool FusionJit::enabled() { return jit_isa != Isa::none; }

void FusionJit::Unmap::operator()(void* p) const {
#ifdef TPU_FUSION_JIT
  munmap(p, size);
#else
  (void)p;
#endif
}

namespace {

#ifdef TPU_FUSION_JIT
// The whole entry: the prologue, then the chunks in a loop (the leaf pointers that advance,
// and the result's, move on a chunk each time).
std::vector<uint8_t> entry_code(std::span<const Instr> code, const Allocation& al, int32_t root, DType result,
                                Isa isa) {
  Emitter e;
  if (isa == Isa::avx2) emit_prologue_avx2(e, code, al);
  else emit_prologue(e, code, al);
  const size_t loop = e.bytes.size();
  if (isa == Isa::avx2)
    for (int v = 0; v < int(kFusionChunk / kAvx2VectorFloats); ++v) emit_vector_avx2(e, code, al, root, result, v);
  else
    for (int v = 0; v < kVectors; ++v) emit_vector(e, code, al, root, result, v);
  for (const Instr& x : code)
    if (al.gpr[size_t(x.dst)] >= 0 && FusionJit::reads_in_place(x)) e.add_imm(al.gpr[size_t(x.dst)], advance_bytes(x));
  e.add_imm(kOut, int32_t(kFusionChunk * size_of(result)));
  e.dec(kChunks);
  e.jnz_to(loop);
  e.byte(0xC5), e.byte(0xF8), e.byte(0x77);  // vzeroupper
  e.byte(0xC3);                              // ret
  return std::move(e.bytes);
}

// Whether a call may take many chunks: every leaf read is a splat, or one whose pointer
// advances (or stays, tiled) in a general register.
bool takes_many_chunks(std::span<const Instr> code, const Allocation& al) {
  for (const Instr& x : code)
    if (is_leaf(x.code) && !is_splat(x.code) && al.reg[size_t(x.dst)] >= 0 &&
        (al.gpr[size_t(x.dst)] < 0 || !(FusionJit::reads_in_place(x) || x.code == Code::tiled)))
      return false;
  return true;
}
#endif

}  // namespace

std::optional<FusionJit> FusionJit::compile(std::span<const FusionProgram::Instr> code, int32_t root, DType result) {
  return compile(code, root, result, jit_isa);
}

std::optional<FusionJit> FusionJit::compile(std::span<const FusionProgram::Instr> code, int32_t root, DType result,
                                            Isa isa) {
#ifdef TPU_FUSION_JIT
  if (isa == Isa::none || code.empty()) return std::nullopt;
  if (result != DType::f32 && result != DType::bf16 && result != DType::boolean) return std::nullopt;
  for (const Instr& x : code)
    if (!takes(x, isa) || (x.dst == root && makes_mask(x.code) != (result == DType::boolean))) return std::nullopt;
  const Allocation al = allocate(code, root, isa);
  if (!al.fits || al.reg[size_t(root)] < 0) return std::nullopt;
  const std::vector<uint8_t> bytes = entry_code(code, al, root, result, isa);
  // Written, then made executable (never both).
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t size = (bytes.size() + page - 1) / page * page;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return std::nullopt;
  FusionJit jit;
  jit.code_ = std::unique_ptr<void, Unmap>(p, Unmap{size});
  std::memcpy(p, bytes.data(), bytes.size());
  if (mprotect(p, size, PROT_READ | PROT_EXEC) != 0) return std::nullopt;
  jit.entry_ = reinterpret_cast<Entry>(p);
  jit.constants_ = isa == Isa::avx2 ? kConstantVectors : kConstants;
  jit.loops_ = takes_many_chunks(code, al);
  return jit;
#else
  (void)code, (void)root, (void)result, (void)isa;
  return std::nullopt;
#endif
}

namespace {

// A program's code as bytes: equal keys compile to the same native code (its only inputs are
// the instructions, the root, the result type and the instruction set).
std::string code_key(std::span<const FusionProgram::Instr> code, int32_t root, DType result, FusionJit::Isa isa) {
  std::string key;
  key.reserve(code.size() * 48 + 8);
  auto put = [&](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(root), put(result), put(isa);
  for (const FusionProgram::Instr& x : code) {
    put(x.code), put(x.cmp), put(x.dst), put(x.a), put(x.b), put(x.c), put(x.param);
    put(std::bit_cast<uint32_t>(x.value)), put(x.n), put(x.fused), put(x.op);
  }
  return key;
}

}  // namespace

std::shared_ptr<const FusionJit> FusionJit::shared(std::span<const FusionProgram::Instr> code, int32_t root,
                                                   DType result) {
  const Isa isa = jit_isa;  // read once: the key and the code are for the same one
  if (isa == Isa::none) return nullptr;
  static std::mutex mu;
  static std::unordered_map<std::string, std::weak_ptr<const FusionJit>> cache;
  static size_t swept_at = 0;
  std::string key = code_key(code, root, result, isa);
  std::lock_guard lock(mu);
  std::weak_ptr<const FusionJit>& entry = cache[std::move(key)];
  std::shared_ptr<const FusionJit> found = entry.lock();
  if (!found) {
    std::optional<FusionJit> native = compile(code, root, result, isa);
    if (!native) return nullptr;  // the entry stays empty: the next such program tries again
    found = std::make_shared<const FusionJit>(std::move(*native));
    entry = found;
  }
  if (cache.size() > 2 * swept_at + 256) {  // drop the entries no program holds now and then
    std::erase_if(cache, [](const auto& kv) { return kv.second.expired(); });
    swept_at = cache.size();
  }
  return found;
}

}  // namespace tpu
