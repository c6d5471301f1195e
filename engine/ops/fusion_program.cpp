#include "ops/fusion_program.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "core/error.h"
#include "ops/fusion_jit.h"

namespace tpu {

namespace {

using Code = FusionProgram::Code;
using Instr = FusionProgram::Instr;
using Gather = FusionProgram::Gather;

constexpr int64_t kChunk = kFusionChunk;  // elements per register: sixteen AVX-512 vectors

bool is_f32(const Node& n) { return n.dtype == DType::f32; }
bool is_bool(const Node& n) { return n.dtype == DType::boolean; }
bool is_bf16(const Node& n) { return n.dtype == DType::bf16; }

// x rounded to the nearest bf16 (ties to even; NaNs stay quiet NaNs), as an f32: the rounding
// of kernels/convert.h's round_to_bf16.
float rounded_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return std::bit_cast<float>(((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded) << 16);
}

// The element map of broadcast b (rank at most kMaxRank).
Gather gather_of(const Node& b, const Shape& src) {
  Gather m;
  m.rank = int(b.shape.size());
  int64_t stride = 1;
  for (int d = m.rank; d-- > 0;) m.shape[d] = b.shape[size_t(d)], m.out_stride[d] = stride, stride *= b.shape[size_t(d)];
  stride = 1;
  for (size_t k = src.size(); k-- > 0;) {
    m.src_stride[b.attrs.dims()[k]] = src[k] == 1 ? 0 : stride;
    stride *= src[k];
  }
  return m;
}

// The instruction for a broadcast of operand `src` (a parameter or a scalar constant) to the
// result's shape, or nullopt when its pattern is not one the program takes.
std::optional<Instr> broadcast_instr(const Graph& body, const Node& b, int32_t dst, const std::vector<int32_t>& param_of,
                                     std::vector<Gather>& gathers) {
  const Node& src = body.at(b.in[0]);
  if (!is_f32(src) && !is_bool(src)) return std::nullopt;
  Instr in{is_bool(src) ? Code::splat_bool : Code::splat};
  in.dst = dst;
  if (src.op == Op::constant) {
    if (src.shape.size() != 0 || !is_f32(src)) return std::nullopt;
    in.value = float(src.attrs.literal()->get(0));
    return in;
  }
  if (src.op != Op::parameter) return std::nullopt;
  in.param = param_of[size_t(b.in[0])];
  const int64_t src_n = num_elements(src.shape), out_n = num_elements(b.shape);
  if (src_n == 1) return in;
  if (is_bool(src) || src_n == 0 || out_n == 0) return std::nullopt;  // empty: the plain kernel
  const auto& dims = b.attrs.dims();
  const size_t r = b.shape.size(), k = dims.size();
  bool trailing = true, leading = true;
  for (size_t i = 0; i < k; ++i) {
    trailing = trailing && dims[i] == int64_t(r - k + i);
    leading = leading && dims[i] == int64_t(i);
  }
  if (trailing) return in.code = kChunk % src_n == 0 ? Code::tiled : Code::repeat, in.n = src_n, in;
  if (leading) return in.code = Code::spread, in.n = out_n / src_n, in;
  if (r > size_t(FusionProgram::kMaxRank)) return std::nullopt;
  gathers.push_back(gather_of(b, src.shape));
  return in.code = Code::gather, in.n = int64_t(gathers.size()) - 1, in;
}

// select's branches and result are f32.
bool all_f32_values(const Graph& body, const Node& n) {
  return is_f32(n) && is_f32(body.at(n.in[1])) && is_f32(body.at(n.in[2]));
}

std::optional<Instr> convert_instr(const Node& from, const Node& n, Instr in) {
  if (is_bool(from) && is_f32(n)) return in.code = Code::bool_to_f32, in;
  if ((is_bf16(from) || from.dtype == DType::u8) && is_f32(n)) return in.code = Code::exact_to_f32, in;
  if (is_f32(from) && is_bf16(n)) return in.code = Code::f32_to_bf16, in;
  return std::nullopt;
}

std::optional<Instr> op_instr(const Graph& body, const Node& n, int32_t dst) {
  Instr in{Code::unary};
  in.dst = dst;
  in.a = n.in.size() > 0 ? n.in[0] : -1;
  in.b = n.in.size() > 1 ? n.in[1] : -1;
  in.c = n.in.size() > 2 ? n.in[2] : -1;
  auto all_f32 = [&] {
    for (NodeId i : n.in)
      if (!is_f32(body.at(i))) return false;
    return is_f32(n);
  };
  const FusedForm& fused = op_info(n.op).fused;
  in.fused = &fused;
  in.op = n.op;
  switch (fused.kind) {
    case FusedForm::Kind::unary: return all_f32() ? std::optional(in) : std::nullopt;
    case FusedForm::Kind::binary: in.code = Code::binary; return all_f32() ? std::optional(in) : std::nullopt;
    case FusedForm::Kind::compare:
      in.code = Code::compare, in.cmp = uint8_t(n.direction());
      return is_f32(body.at(n.in[0])) && is_f32(body.at(n.in[1])) ? std::optional(in) : std::nullopt;
    case FusedForm::Kind::select:
      in.code = Code::select;
      return is_bool(body.at(n.in[0])) && all_f32_values(body, n) ? std::optional(in) : std::nullopt;
    case FusedForm::Kind::convert: return convert_instr(body.at(n.in[0]), n, in);
    case FusedForm::Kind::none: return std::nullopt;
  }
  return std::nullopt;
}

// A chunk's registers: f32 values and masks (-1 true, 0 false) of every body node, and where
// each f32 value is read from (its register, or straight from an operand or the result).
struct Registers {
  std::vector<float> f;
  std::vector<int32_t> m;
  std::vector<const float*> at;
  // Per register of a repeating operand with a short period n: its n values and the first
  // kChunk again, so that every chunk lies in order in it (else null).
  std::vector<const float*> unrolled;
  std::vector<float> unrolled_values;
  void size_for(int32_t count) {
    f.resize(size_t(count) * kChunk);
    m.resize(size_t(count) * kChunk);
    at.resize(size_t(count));
    unrolled.assign(size_t(count), nullptr);
  }
  float* f_of(int32_t r) { return f.data() + int64_t(r) * kChunk; }
  int32_t* m_of(int32_t r) { return m.data() + int64_t(r) * kChunk; }
};

// Elements [i, i + n) of a broadcast through map m: a pointer into the source when they lie
// in order in one row of the innermost dim, a splat when that dim is the broadcast one; across
// rows of that dim, each row's part copied or filled (a per-image, per-channel scale, dims
// [0,3]: 256 elements over 144 channels are two or three copies, where an odometer over the dims
// took 256 steps). The innermost dim's source stride is 1 or 0: a broadcast's dims increase, so
// the output's last dim comes from the operand's last, or from none.
const float* gather_chunk(const Gather& m, const float* src, int64_t i, int64_t n, float* d) {
  int64_t idx[FusionProgram::kMaxRank], off = 0;
  for (int k = 0; k < m.rank; ++k) idx[k] = (i / m.out_stride[k]) % m.shape[k], off += idx[k] * m.src_stride[k];
  const int last = m.rank - 1;
  const bool along = m.src_stride[last] == 1;
  if (idx[last] + n <= m.shape[last]) return along ? src + off : (std::fill_n(d, n, src[off]), d);
  for (int64_t l = 0; l < n;) {
    const int64_t run = std::min(n - l, m.shape[last] - idx[last]);
    if (along) std::copy_n(src + off, run, d + l);
    else std::fill_n(d + l, run, src[off]);
    l += run;
    off -= idx[last] * m.src_stride[last], idx[last] = 0;  // the next row's start
    for (int k = last - 1; k >= 0; --k) {
      off += m.src_stride[k];
      if (++idx[k] < m.shape[k]) break;
      off -= m.src_stride[k] * m.shape[k];
      idx[k] = 0;
    }
  }
  return d;
}

// Operands of the leaf instructions for the chunk at element i: pointers into the operands
// where their elements lie in order, else the elements copied into the register.
template <class N>
void load_chunk(const Instr& x, std::span<const Gather> gathers, std::span<const Tensor* const> in, Registers& r,
                int64_t i, N len) {
  const int64_t n = len;
  float* d = r.f_of(x.dst);
  switch (x.code) {
    case Code::load: r.at[size_t(x.dst)] = in[size_t(x.param)]->data<float>() + i; return;
    case Code::load_bool: {
      const uint8_t* s = in[size_t(x.param)]->data<uint8_t>() + i;
      int32_t* m = r.m_of(x.dst);
      for (int64_t l = 0; l < len; ++l) m[l] = s[l] ? -1 : 0;
      return;
    }
    case Code::load_bf16: {
      const uint16_t* s = in[size_t(x.param)]->data<uint16_t>() + i;
      for (int64_t l = 0; l < len; ++l) d[l] = std::bit_cast<float>(uint32_t(s[l]) << 16);
      break;
    }
    case Code::load_u8: {  // image bytes: a data set's map converts them
      const uint8_t* s = in[size_t(x.param)]->data<uint8_t>() + i;
      for (int64_t l = 0; l < len; ++l) d[l] = float(s[l]);
      break;
    }
    case Code::repeat: {
      const float* s = in[size_t(x.param)]->data<float>();
      if (i % x.n + n <= x.n) {
        r.at[size_t(x.dst)] = s + i % x.n;
        return;
      }
      if (const float* u = r.unrolled[size_t(x.dst)]) {
        r.at[size_t(x.dst)] = u + i % x.n;
        return;
      }
      for (int64_t l = 0, j = i % x.n; l < n; ++l, j = j + 1 == x.n ? 0 : j + 1) d[l] = s[j];
      break;
    }
    case Code::spread: {
      const float* s = in[size_t(x.param)]->data<float>();
      if (i / x.n == (i + n - 1) / x.n) {
        std::fill_n(d, n, s[i / x.n]);
        break;
      }
      for (int64_t l = 0, q = i / x.n, j = i % x.n; l < n; ++l) {
        d[l] = s[q];
        if (++j == x.n) j = 0, ++q;
      }
      break;
    }
    case Code::gather:
      r.at[size_t(x.dst)] = gather_chunk(gathers[size_t(x.n)], in[size_t(x.param)]->data<float>(), i, n, d);
      return;
    default: return;  // splats and tiled operands are filled once per run
  }
  r.at[size_t(x.dst)] = d;
}

// One chunk of `len` elements from element i. N is the lane count: the constant kChunk for
// whole chunks (the loops then compile to vector code), a run-time count for the last one.
// The instruction computing `root` writes to `result` when that is given.
template <class N>
void run_chunk(std::span<const Instr> code, std::span<const Gather> gathers, std::span<const Tensor* const> in,
               Registers& r, int64_t i, N len, int32_t root, float* result) {
  for (const Instr& x : code) {
    if (x.code <= Code::gather) {
      load_chunk(x, gathers, in, r, i, len);
      continue;
    }
    float* d = x.dst == root && result ? result : r.f_of(x.dst);
    const float* a = r.at[size_t(x.a)];
    const float* b = x.b >= 0 ? r.at[size_t(x.b)] : nullptr;
    switch (x.code) {
      case Code::unary: x.fused->unary(a, d, len); break;
      case Code::binary: x.fused->binary(a, b, d, len); break;
      case Code::select: {
        const int32_t* p = r.m_of(x.a);
        const float *t = r.at[size_t(x.b)], *f = r.at[size_t(x.c)];
        for (int64_t l = 0; l < len; ++l) d[l] = p[l] ? t[l] : f[l];
        break;
      }
      case Code::bool_to_f32: {
        const int32_t* p = r.m_of(x.a);
        for (int64_t l = 0; l < len; ++l) d[l] = p[l] ? 1.0f : 0.0f;
        break;
      }
      case Code::exact_to_f32: for (int64_t l = 0; l < len; ++l) d[l] = a[l]; break;
      case Code::f32_to_bf16: for (int64_t l = 0; l < len; ++l) d[l] = rounded_to_bf16(a[l]); break;
      case Code::compare: {
        int32_t* m = r.m_of(x.dst);
        switch (Cmp(x.cmp)) {
          case Cmp::lt: for (int64_t l = 0; l < len; ++l) m[l] = a[l] < b[l] ? -1 : 0; break;
          case Cmp::le: for (int64_t l = 0; l < len; ++l) m[l] = a[l] <= b[l] ? -1 : 0; break;
          case Cmp::gt: for (int64_t l = 0; l < len; ++l) m[l] = a[l] > b[l] ? -1 : 0; break;
          case Cmp::ge: for (int64_t l = 0; l < len; ++l) m[l] = a[l] >= b[l] ? -1 : 0; break;
          case Cmp::eq: for (int64_t l = 0; l < len; ++l) m[l] = a[l] == b[l] ? -1 : 0; break;
          case Cmp::ne: for (int64_t l = 0; l < len; ++l) m[l] = a[l] != b[l] ? -1 : 0; break;
        }
        continue;
      }
      default: continue;
    }
    r.at[size_t(x.dst)] = d;
  }
}

}  // namespace

std::optional<FusionProgram> FusionProgram::compile(const Graph& body) {
  if (body.outputs.size() != 1) return std::nullopt;
  const NodeId root = body.outputs[0];
  const Shape& shape = body.at(root).shape;
  std::vector<int32_t> param_of(body.nodes.size(), -1);
  for (size_t i = 0; i < body.params.size(); ++i) param_of[size_t(body.params[i])] = int32_t(i);
  FusionProgram p;
  p.registers_ = int32_t(body.nodes.size());
  p.result_ = root;
  p.result_type_ = body.at(root).dtype;
  if (!is_f32(body.at(root)) && !is_bool(body.at(root)) && !is_bf16(body.at(root))) return std::nullopt;
  for (NodeId id = 0; id < NodeId(body.nodes.size()); ++id) {
    const Node& n = body.at(id);
    std::optional<Instr> in;
    if (n.op == Op::parameter || n.op == Op::constant) {
      if (n.shape != shape) continue;  // read through a broadcast
      if (n.op == Op::constant && is_f32(n) && num_elements(n.shape) == 1) {
        in = Instr{Code::splat};
        in->value = float(n.attrs.literal()->get(0));
      } else if (n.op == Op::parameter && (is_f32(n) || is_bool(n) || is_bf16(n) || n.dtype == DType::u8)) {
        in = Instr{is_bool(n)   ? Code::load_bool
                   : is_bf16(n) ? Code::load_bf16
                   : is_f32(n)  ? Code::load
                                : Code::load_u8};
        in->param = param_of[size_t(id)];
      }
    } else if (n.op == Op::broadcast) {
      in = broadcast_instr(body, n, id, param_of, p.gathers_);
    } else {
      in = op_instr(body, n, id);
    }
    if (!in) return std::nullopt;
    in->dst = id;
    p.code_.push_back(*in);
  }
  p.native_ = FusionJit::shared(p.code_, p.result_, p.result_type_);
  return p;
}

namespace {

// A chunk that wraps around a repeating operand's period (a per-channel scale over 96 or 144
// channels, not a divisor of the chunk) would be copied element by element: each operand with
// a period of at most kMaxUnrolled gets its values laid out once per run, period plus a chunk,
// and every chunk reads them in order from there. A period that is a multiple of the chunk
// (a bias over 1024 features) never wraps inside a chunk: chunks read it in place.
constexpr int64_t kMaxUnrolled = 1024;

bool unrolled(const FusionProgram::Instr& x) {
  return x.code == FusionProgram::Code::repeat && x.n <= kMaxUnrolled && x.n % kChunk != 0;
}

// dst[l] = src[l % period] for l < len, without a division per element: a run pays this for
// each operand it lays out, and runs are as short as a lock-step run's tile.
void repeat_period(const float* src, int64_t period, float* dst, int64_t len) {
  for (int64_t l = 0; l < len; l += period) std::copy_n(src, std::min(period, len - l), dst + l);
}

void unroll_repeats(std::span<const FusionProgram::Instr> code, std::span<const Tensor* const> in, Registers& r) {
  size_t total = 0;
  for (const auto& x : code)
    if (unrolled(x)) total += size_t(x.n + kChunk);
  if (total == 0) return;
  r.unrolled_values.resize(total);
  float* at = r.unrolled_values.data();
  for (const auto& x : code) {
    if (!unrolled(x)) continue;
    repeat_period(in[size_t(x.param)]->data<float>(), x.n, at, x.n + kChunk);
    r.unrolled[size_t(x.dst)] = at;
    at += x.n + kChunk;
  }
}

}  // namespace

bool FusionProgram::native_loops() const { return native_ && native_->loops(); }

void FusionProgram::run(std::span<const Tensor* const> in, Tensor& out, int64_t begin, int64_t end) const {
  run_range(in, out.raw() + begin * int64_t(size_of(result_type_)), begin, end);
}

void FusionProgram::run_into(std::span<const Tensor* const> in, float* dst, int64_t begin, int64_t end) const {
  if (result_type_ != DType::f32) throw Error("fusion program: run_into takes an f32 result");
  run_range(in, reinterpret_cast<std::byte*>(dst), begin, end);
}

void FusionProgram::run_range(std::span<const Tensor* const> in, std::byte* dst, int64_t begin, int64_t end) const {
  if (begin % kChunk != 0)
    throw Error("fusion program: a run must start at a multiple of " + std::to_string(kChunk) + " elements");
  thread_local Registers r;
  r.size_for(registers_);
  unroll_repeats(code_, in, r);
  // Splats and tiled operands hold the same values in every chunk: filled once.
  for (const Instr& x : code_) {
    if (x.code == Code::splat) {
      const float v = x.param >= 0 ? in[size_t(x.param)]->data<float>()[0] : x.value;
      std::fill_n(r.f_of(x.dst), kChunk, v);
      r.at[size_t(x.dst)] = r.f_of(x.dst);
    } else if (x.code == Code::splat_bool) {
      std::fill_n(r.m_of(x.dst), kChunk, in[size_t(x.param)]->data<uint8_t>()[0] ? -1 : 0);
    } else if (x.code == Code::tiled) {  // every chunk starts at a multiple of kChunk
      repeat_period(in[size_t(x.param)]->data<float>(), x.n, r.f_of(x.dst), kChunk);
      r.at[size_t(x.dst)] = r.f_of(x.dst);
    }
  }
  // Where a leaf the native code reads in place has element i (a spread one: its value).
  // (A u8 operand's pointer is to its bytes: the native code widens them.)
  auto in_place = [&](const Instr& x, int64_t i) {
    if (x.code == Code::load_u8) return reinterpret_cast<const float*>(in[size_t(x.param)]->data<uint8_t>() + i);
    const float* src = in[size_t(x.param)]->data<float>();
    return x.code == Code::load ? src + i : x.code == Code::repeat ? src + i % x.n : src + i / x.n;
  };
  int64_t i = begin;
  while (native_ && native_->loops() && end - i >= kChunk) {  // whole chunks, a period of each operand at most
    int64_t chunks = (end - i) / kChunk;
    for (const Instr& x : code_) {
      if (!FusionJit::reads_in_place(x)) continue;
      r.at[size_t(x.dst)] = in_place(x, i);
      if (x.code == Code::repeat) chunks = std::min(chunks, (x.n - i % x.n) / kChunk);
    }
    native_->run(r.at.data(), r.m.data(), dst + (i - begin) * int64_t(size_of(result_type_)), chunks);
    i += chunks * kChunk;
  }
  for (; i < end; i += kChunk) {
    const int64_t len = std::min(kChunk, end - i);
    // An f32 result is computed straight into the output (copied there when the root is a
    // leaf); a bool one is a mask and a bf16 one an f32 of a bf16 value, stored as such.
    float* result = result_type_ == DType::f32 ? reinterpret_cast<float*>(dst) + (i - begin) : nullptr;
    if (native_ && len == kChunk) {  // the leaves' chunks, then the body as native code
      for (const Instr& x : code_) {  // (load_chunk leaves splats and tiled operands as they are)
        if (FusionJit::reads_in_place(x)) r.at[size_t(x.dst)] = in_place(x, i);
        else if (x.code <= Code::gather) load_chunk(x, gathers_, in, r, i, std::integral_constant<int64_t, kChunk>());
      }
      native_->run(r.at.data(), r.m.data(), dst + (i - begin) * int64_t(size_of(result_type_)), 1);
      continue;
    }
    if (len == kChunk) run_chunk(code_, gathers_, in, r, i, std::integral_constant<int64_t, kChunk>(), result_, result);
    else run_chunk(code_, gathers_, in, r, i, len, result_, result);
    if (result && r.at[size_t(result_)] != result) std::copy_n(r.at[size_t(result_)], len, result);
    if (result_type_ == DType::boolean) {
      const int32_t* m = r.m_of(result_);
      uint8_t* o = reinterpret_cast<uint8_t*>(dst) + (i - begin);
      for (int64_t l = 0; l < len; ++l) o[l] = m[l] ? 1 : 0;
    } else if (result_type_ == DType::bf16) {
      const float* v = r.at[size_t(result_)];
      uint16_t* o = reinterpret_cast<uint16_t*>(dst) + (i - begin);
      for (int64_t l = 0; l < len; ++l) o[l] = uint16_t(std::bit_cast<uint32_t>(v[l]) >> 16);
    }
  }
}

namespace {

// Keyed by the body's address; the weak pointer tells a body that died (and left its address
// to another) from the one the entry was made for.
struct CacheEntry {
  std::weak_ptr<const Graph> body;
  std::unique_ptr<const FusionProgram> program;  // null: the body does not fit
};

const FusionProgram* shared_lookup(const std::shared_ptr<const Graph>& body) {
  static std::mutex mu;
  static std::unordered_map<const Graph*, CacheEntry> cache;
  static size_t swept_at = 0;
  std::lock_guard lock(mu);
  CacheEntry& e = cache[body.get()];
  if (e.body.expired()) {
    std::optional<FusionProgram> p = FusionProgram::compile(*body);
    e = {body, p ? std::make_unique<const FusionProgram>(std::move(*p)) : nullptr};
  }
  const FusionProgram* found = e.program.get();
  if (cache.size() > 2 * swept_at + 256) {  // drop the entries of dead bodies now and then
    std::erase_if(cache, [](const auto& kv) { return kv.second.body.expired(); });
    swept_at = cache.size();
  }
  return found;
}

}  // namespace

const FusionProgram* fusion_program(const Node& fusion) {
  // Each thread keeps what it looked up: replicas run fusions on several threads at once, and
  // the shared cache's lock would be taken for every fusion of every step. A program lives as
  // long as its body, so a live body's entry here is valid.
  struct Seen {
    std::weak_ptr<const Graph> body;
    const FusionProgram* program;
  };
  thread_local std::unordered_map<const Graph*, Seen> seen;
  const std::shared_ptr<const Graph>& body = fusion.attrs.body();
  auto it = seen.find(body.get());
  if (it != seen.end() && !it->second.body.expired()) return it->second.program;
  if (seen.size() > 4096) std::erase_if(seen, [](const auto& kv) { return kv.second.body.expired(); });
  const FusionProgram* p = shared_lookup(body);
  seen[body.get()] = {body, p};
  return p;
}

}  // namespace tpu
