// The rng row: counter-based random numbers. The key operand i32[2] holds a 64-bit stream
// key (high word first); element i of a draw is a hash of (key, i), so values depend only on
// the key and the element, never on threads or on what else the graph computes.
// The fold kind derives new keys instead: one per element of an i32 data operand.
#include <cmath>

#include "ops/kernel_util.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

RngKind kind_of(const Node& n) { return n.rng_kind(); }

std::string shape_rng(const Graph& g, Node& n) {
  const Node& key = g.at(n.in.at(0));
  if (key.dtype != DType::i32 || key.shape != Shape{2} || n.attrs.axis < 0 || n.attrs.axis > int64_t(RngKind::fold))
    return "rng needs a key i32[2] and a kind, got " + operands_str(g, n);
  const bool fold = kind_of(n) == RngKind::fold;
  if (n.in.size() != (fold ? 2u : 1u) || (fold && g.at(n.in[1]).dtype != DType::i32))
    return fold ? "rng fold needs a key i32[2] and i32 data, got " + operands_str(g, n)
                : "rng takes only a key, got " + operands_str(g, n);
  n.dtype = kind_of(n) == RngKind::bits || fold ? DType::i32 : DType::f32;
  if (fold) {
    n.shape = g.at(n.in[1]).shape;
    n.shape.push_back(2);
  }
  for (int64_t d : n.shape)
    if (d < 0) return "rng: negative dimension in " + shape_str(n.shape);
  return "";
}

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t key_of(const Tensor& k) {
  const int32_t* w = k.data<int32_t>();
  return uint64_t(uint32_t(w[0])) << 32 | uint32_t(w[1]);
}

uint64_t bits(uint64_t key, uint64_t i) { return mix(key ^ mix(i)); }

double unit(uint64_t key, uint64_t i) { return double(bits(key, i) >> 11) * 0x1.0p-53; }  // [0, 1)

float unit_f32(uint64_t key, uint64_t i) {
  float u = float(unit(key, i));
  return u < 1.0f ? u : 0x1.fffffep-1f;  // rounding may reach 1
}

// Box-Muller on counters 2c and 2c+1 (c = 64 i + attempt); truncated: resample |z| > 2.
float normal(uint64_t key, uint64_t i, bool truncated) {
  double z = 0;
  for (uint64_t attempt = 0; attempt < 64; ++attempt) {
    const uint64_t c = i * 64 + attempt;
    const double u1 = 1.0 - unit(key, 2 * c), u2 = unit(key, 2 * c + 1);
    z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
    if (!truncated || std::fabs(z) <= 2.0) break;
  }
  return float(truncated ? std::clamp(z, -2.0, 2.0) : z);
}

// Elements [begin, end) of the draw: one loop per kind, so the uniform and bits loops (the
// dropout masks of a step) compile to vector code.
void fill(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t begin, int64_t end) {
  const uint64_t key = key_of(*in[0]);
  switch (kind_of(n)) {
    case RngKind::uniform: {
      float* o = out.data<float>();
      for (int64_t e = begin; e < end; ++e) o[e] = unit_f32(key, uint64_t(e));
      return;
    }
    case RngKind::normal:
    case RngKind::truncated_normal: {
      const bool truncated = kind_of(n) == RngKind::truncated_normal;
      float* o = out.data<float>();
      for (int64_t e = begin; e < end; ++e) o[e] = normal(key, uint64_t(e), truncated);
      return;
    }
    case RngKind::bits: {
      int32_t* o = out.data<int32_t>();
      for (int64_t e = begin; e < end; ++e) o[e] = int32_t(uint32_t(bits(key, uint64_t(e)) >> 32));
      return;
    }
    case RngKind::fold: {
      const int32_t* data = in[1]->data<int32_t>();
      int32_t* o = out.data<int32_t>();
      for (int64_t e = begin; e < end; ++e) {
        const uint64_t derived = mix(key ^ mix(uint64_t(int64_t(data[e / 2])) + 0x632be59bd9b4e019ull));
        o[e] = int32_t(uint32_t(e % 2 == 0 ? derived >> 32 : derived));
      }
      return;
    }
  }
}

void ref_rng(const Node& n, std::span<const Tensor* const> in, Tensor& out) { fill(n, in, out, 0, out.size()); }

// The same elements in fixed chunks spread over the thread pool.
void fast_rng(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  constexpr int64_t kChunk = 16384;
  const int64_t total = out.size();
  parallel_for((total + kChunk - 1) / kChunk, [&](int64_t t) {
    fill(n, in, out, t * kChunk, std::min(total, (t + 1) * kChunk));
  });
}

Cost cost_rng(const Graph& g, const Node& n) {
  Cost c = movement_cost(g, n);
  c.flops = 12.0 * double(num_elements(n.shape));  // two hashes and a conversion per element
  return c;
}

}  // namespace

extern const OpInfo rng_row = {Op::rng, shape_rng, ref_rng, fast_rng, nullptr, cost_rng};

}  // namespace tpu
