// Native fusion code (ops/fusion_jit.h), for each instruction set the CPU runs (AVX2, AVX-512):
// random fused bodies, compiled to native code and run by the fusion program alone, give the
// same bits (any NaN standing for any other), whole
// chunks and the partial last one, from the first element or from a later chunk. Bodies mix
// every leaf form (operands read in place, bool and bf16 operands, splats, broadcasts along
// either dim: per-channel operands of 64 channels (within a chunk), 512 (whole chunks), 96 and
// 1000; per-row ones over rows of 16, 64 and 256 (read a vector at a time) and others), every
// op the native code takes and every result type.
#include <doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>

#include "ops/fusion_jit.h"
#include "ops/fusion_program.h"

using namespace tpu;

namespace {

Tensor random_tensor(DType t, const Shape& s, std::mt19937& rng) {
  Tensor x(t, s);
  std::uniform_real_distribution<float> unit(-3, 3);
  // A NaN whose payload lies in its low half only: bf16 keeps the upper half, which would read
  // as an infinity without the quiet bit that the rounding sets.
  const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 1e-40f, 1.0f, std::bit_cast<float>(0x7f800001u)};
  for (int64_t i = 0; i < x.size(); ++i) {
    const float v = rng() % 11 == 0 ? special[rng() % 8] : unit(rng);
    if (t == DType::boolean) x.data<uint8_t>()[i] = rng() % 2;
    else if (t == DType::u8) x.data<uint8_t>()[i] = uint8_t(rng());
    else if (t == DType::bf16) x.data<uint16_t>()[i] = f32_to_bf16(v);
    else x.data<float>()[i] = v;
  }
  return x;
}

// Which leaves a random body has beyond its f32 operands, scalar and constant.
enum class Leaves { plain, rows, all };

// A random body over an [m, c] result: f32 operands, a scalar, a constant, with Leaves::rows a
// row broadcast along m (a per-channel operand), with Leaves::all also a bool and a bf16
// operand and a column broadcast; then `ops` random ops, the last f32 value its result
// (rounded to bf16 for a bf16 result; the last mask for a bool one). Its parameters' tensors
// go to `args`.
Graph random_body(const Shape& s, int operands, Leaves leaves, int ops, DType result, std::span<const Op> unary,
                  std::mt19937& rng, std::vector<Tensor>& args) {
  Graph g;
  std::vector<NodeId> f, masks;
  auto param = [&](DType t, const Shape& shape) {
    args.push_back(random_tensor(t, shape, rng));
    return g.parameter(t, shape);
  };
  for (int i = 0; i < operands; ++i) f.push_back(param(DType::f32, s));
  f.push_back(g.broadcast(param(DType::f32, {}), s, {}));
  f.push_back(g.full(DType::f32, s, 0.5));
  masks.push_back(g.broadcast(param(DType::boolean, {}), s, {}));
  if (leaves != Leaves::plain) f.push_back(g.broadcast(param(DType::f32, {s[1]}), s, {1}));
  if (leaves == Leaves::all) {
    masks.push_back(param(DType::boolean, s));
    f.push_back(g.convert(param(DType::bf16, s), DType::f32));
    f.push_back(g.convert(param(DType::u8, s), DType::f32));  // a data set's image bytes
    f.push_back(g.broadcast(param(DType::f32, {s[0]}), s, {0}));
  }
  auto any = [&](const std::vector<NodeId>& v) { return v[rng() % v.size()]; };
  const Op binary[] = {Op::add, Op::sub, Op::mul, Op::div, Op::max, Op::min};
  const Cmp cmps[] = {Cmp::lt, Cmp::le, Cmp::gt, Cmp::ge, Cmp::eq, Cmp::ne};
  for (int k = 0; k < ops; ++k) {
    switch (rng() % 9) {
      case 4: f.push_back(g.convert(g.convert(any(f), DType::bf16), DType::f32)); break;  // a rounding
      case 0: f.push_back(g.unary(unary[rng() % unary.size()], any(f))); break;
      case 1: masks.push_back(g.compare(cmps[rng() % 6], any(f), any(f))); break;
      case 2: f.push_back(g.select(any(masks), any(f), any(f))); break;
      case 3: f.push_back(g.convert(any(masks), DType::f32)); break;
      default: f.push_back(g.binary(binary[rng() % 6], any(f), any(f))); break;
    }
  }
  if (result == DType::boolean) g.outputs = {masks.back()};
  else g.outputs = {result == DType::bf16 ? g.convert(f.back(), DType::bf16) : f.back()};
  return g;
}

void check_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  for (int64_t i = 0; i < got.size(); ++i) {
    if (got.dtype() != DType::f32) {
      const float u = float(got.get(i)), v = float(want.get(i));
      if (std::memcmp(got.raw() + i * size_of(got.dtype()), want.raw() + i * size_of(got.dtype()), size_of(got.dtype())) != 0 &&
          !(std::isnan(u) && std::isnan(v)))
        FAIL_CHECK(what << " element " << i << ": " << u << " vs " << v);
      continue;
    }
    const float u = got.data<float>()[i], v = want.data<float>()[i];
    if (std::memcmp(&u, &v, sizeof u) != 0 && !(std::isnan(u) && std::isnan(v)))
      FAIL_CHECK(what << " element " << i << ": " << u << " vs " << v << " (bits " << std::hex
                      << std::bit_cast<uint32_t>(u) << " vs " << std::bit_cast<uint32_t>(v) << std::dec << ")");
  }
}

}  // namespace

namespace {

struct NativeCounts {
  int native = 0, loops = 0, bodies = 0;
};

// Random bodies compiled for `isa` (none: the program alone) against the program alone, their
// unary ops the transcendentals too.
NativeCounts compare_random_bodies(FusionJit::Isa isa) {
  std::mt19937 rng(7);
  const Op unary[] = {Op::neg, Op::abs, Op::sqrt, Op::exp, Op::sigmoid, Op::erf, Op::tanh};
  NativeCounts count;
  int &native = count.native, &loops = count.loops, &bodies = count.bodies;
  for (const Shape& s : {Shape{37, 96}, Shape{9, 1000}, Shape{3, 5}, Shape{12, 512}, Shape{40, 64}, Shape{30, 16},
                         Shape{17, 256}}) {
    for (int trial = 0; trial < 60; ++trial, ++bodies) {
      std::vector<Tensor> args;
      const int operands = 1 + int(rng() % 8), ops = 1 + int(rng() % (trial < 40 ? 12 : 60));
      const DType result = trial % 3 == 0 ? DType::f32 : trial % 3 == 1 ? DType::bf16 : DType::boolean;
      const Leaves leaves = (trial / 3) % 3 == 0 ? Leaves::plain : (trial / 3) % 3 == 1 ? Leaves::rows : Leaves::all;
      const Graph body = random_body(s, operands, leaves, ops, result, unary, rng, args);
      FusionJit::set_isa(FusionJit::Isa::none);
      const std::optional<FusionProgram> plain = FusionProgram::compile(body);
      FusionJit::set_isa(isa);
      const std::optional<FusionProgram> fast = FusionProgram::compile(body);
      REQUIRE(plain);
      REQUIRE(fast);
      CHECK_FALSE(plain->native());
      native += fast->native();
      loops += fast->native() && fast->native_loops();
      std::vector<const Tensor*> in;
      for (const Tensor& t : args) in.push_back(&t);
      const int64_t n = num_elements(s), cut = n / 2 / kFusionChunk * kFusionChunk;
      Tensor want(result, s), whole(result, s), halves(result, s);
      plain->run(in, want, 0, n);
      fast->run(in, whole, 0, n);
      fast->run(in, halves, 0, cut);
      fast->run(in, halves, cut, n);
      const std::string what = "body " + std::to_string(trial) + " on " + shape_str(s);
      check_same_bits(whole, want, what);
      check_same_bits(halves, want, what + " in two runs");
    }
  }
  return count;
}

}  // namespace

TEST_CASE("native fusion code gives the fusion program's bits") {
  const FusionJit::Isa best = FusionJit::best_isa();
  for (FusionJit::Isa isa : {FusionJit::Isa::avx2, FusionJit::Isa::avx512}) {
    if (isa > best) continue;
    CAPTURE(int(isa));
    const NativeCounts n = compare_random_bodies(isa);
    // Most bodies fit the registers (AVX2's 14 hold masks too) and get native code.
    CHECK(n.native > n.bodies / 2);
    CHECK(n.loops > n.bodies / 8);
  }
  FusionJit::set_isa(best);
  if (best == FusionJit::Isa::none) CHECK(compare_random_bodies(best).native == 0);
}

// exp, the logistic function, erf and tanh in native code (AVX-512, and AVX2 with FMA): the
// kernels' operations one for one, so their bits, here over every range's edges (exp's clamps,
// erf's series, fit and saturation, tanh's two parts), the specials and a sweep; alone and in a
// GELU-like body, for each instruction set the CPU runs.
TEST_CASE("native exp, sigmoid, erf and tanh give the kernels' bits") {
  std::vector<float> xs = {0.0f, -0.0f, 1e-40f, -1e-40f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  for (float edge : {1.0f, 4.0f, 2.5f, 104.0f, 89.0f, 88.7f, 87.3f, 103.9f}) {
    for (float v = edge, k = 0; k < 4; ++k, v = std::nextafter(v, 0.0f)) xs.push_back(v), xs.push_back(-v);
    for (float v = edge, k = 0; k < 4; ++k, v = std::nextafter(v, 1e30f)) xs.push_back(v), xs.push_back(-v);
  }
  for (float v = -120; v <= 120; v += 0.0371f) xs.push_back(v);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> small(-6, 6);
  while (xs.size() % kFusionChunk != 0 || xs.size() < 4 * kFusionChunk) xs.push_back(small(rng));
  const Shape s{int64_t(xs.size())};
  Tensor in(DType::f32, s);
  std::memcpy(in.data<float>(), xs.data(), xs.size() * sizeof(float));
  const FusionJit::Isa best = FusionJit::best_isa();
  auto check = [&](const Graph& body, const std::string& what) {
    for (FusionJit::Isa isa : {FusionJit::Isa::avx2, FusionJit::Isa::avx512}) {
      if (isa > best) continue;
      CAPTURE(int(isa));
      FusionJit::set_isa(FusionJit::Isa::none);
      const std::optional<FusionProgram> plain = FusionProgram::compile(body);
      FusionJit::set_isa(isa);
      const std::optional<FusionProgram> fast = FusionProgram::compile(body);
      REQUIRE((plain && fast));
      CHECK(fast->native());  // an AVX2 CPU without FMA would not have it: none is known
      Tensor want(DType::f32, s), got(DType::f32, s);
      const std::vector<const Tensor*> args = {&in};
      plain->run(args, want, 0, want.size());
      fast->run(args, got, 0, got.size());
      check_same_bits(got, want, what);
    }
    FusionJit::set_isa(best);
  };
  for (Op op : {Op::exp, Op::sigmoid, Op::erf, Op::tanh}) {
    Graph g;
    g.outputs = {g.unary(op, g.parameter(DType::f32, s))};
    check(g, std::string(op_name(op)));
  }
  Graph gelu;  // x/2 (1 + erf(x / sqrt 2)) and its derivative's e^(-x^2 / 2)
  const NodeId x = gelu.parameter(DType::f32, s);
  auto c = [&](float v) { return gelu.full(DType::f32, s, v); };
  const NodeId half_x = gelu.binary(Op::mul, x, c(0.5f));
  const NodeId cdf = gelu.binary(Op::add, c(1), gelu.unary(Op::erf, gelu.binary(Op::mul, x, c(0.70710678f))));
  const NodeId pdf = gelu.unary(Op::exp, gelu.binary(Op::mul, gelu.binary(Op::mul, x, x), c(-0.5f)));
  const NodeId both = gelu.binary(Op::add, gelu.binary(Op::mul, half_x, cdf), gelu.unary(Op::sigmoid, pdf));
  gelu.outputs = {gelu.binary(Op::mul, both, gelu.unary(Op::tanh, x))};
  check(gelu, "a GELU-like body");
}

TEST_CASE("a body with more live values than registers runs on the fusion program") {
  const Shape s{10, 300};
  std::mt19937 rng(3);
  Graph g;
  std::vector<Tensor> args;
  std::vector<NodeId> squares;
  for (int i = 0; i < 32; ++i) {
    args.push_back(random_tensor(DType::f32, s, rng));
    const NodeId x = g.parameter(DType::f32, s);
    squares.push_back(g.binary(Op::mul, x, x));  // all live until the sum reads them
  }
  NodeId sum = squares[0];
  for (size_t i = 1; i < squares.size(); ++i) sum = g.binary(Op::add, sum, squares[i]);
  g.outputs = {sum};
  const std::optional<FusionProgram> p = FusionProgram::compile(g);
  REQUIRE(p);
  CHECK_FALSE(p->native());
  std::vector<const Tensor*> in;
  for (const Tensor& t : args) in.push_back(&t);
  Tensor out(DType::f32, s);
  p->run(in, out, 0, out.size());
  for (int64_t i = 0; i < out.size(); i += 97) {
    float want = args[0].data<float>()[i] * args[0].data<float>()[i];
    for (size_t k = 1; k < args.size(); ++k) {
      volatile float square = args[k].data<float>()[i] * args[k].data<float>()[i];  // no fused multiply-add
      want = want + square;
    }
    CHECK((std::bit_cast<uint32_t>(out.data<float>()[i]) == std::bit_cast<uint32_t>(want) || (std::isnan(want) && std::isnan(out.data<float>()[i]))));
  }
}

// A deep model fuses the same body once per layer: programs of the same code share one native
// form (one mapping), a different constant makes another, and the code compiles again once no
// program holds it.
TEST_CASE("programs of the same code share their native code") {
  if (!FusionJit::enabled()) return;  // a CPU without AVX2: no native code to share
  auto body = [](float scale) {
    Graph g;
    const Shape s{64, 32};
    const NodeId x = g.parameter(DType::f32, s), y = g.parameter(DType::f32, s);
    g.outputs = {g.binary(Op::add, g.binary(Op::mul, x, g.full(DType::f32, s, scale)), y)};
    return g;
  };
  std::optional<FusionProgram> a = FusionProgram::compile(body(0.5f));
  std::optional<FusionProgram> b = FusionProgram::compile(body(0.5f));
  const std::optional<FusionProgram> c = FusionProgram::compile(body(0.25f));
  REQUIRE((a && b && c && a->native() && c->native()));
  CHECK(a->native_code() == b->native_code());
  CHECK(a->native_code() != c->native_code());
  a.reset();
  CHECK(b->native_code() != nullptr);  // still held by b
  b.reset();
  const std::optional<FusionProgram> again = FusionProgram::compile(body(0.5f));
  REQUIRE((again && again->native()));
}
