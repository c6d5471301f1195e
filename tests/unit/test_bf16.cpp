// The bf16 compute path: the f32 <-> bf16 casts, bf16 dots with f32 sums (every GEMM way
// this build has) against f32 references on the MLP's shapes, their gradients, determinism
// across thread counts, the dot result type in the IR text; bf16-exact convs under every way.
#include <doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "autodiff/gradients.h"
#include "core/error.h"
#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "kernels/onednn.h"
#include "kernels/onednn_matmul.h"
#include "ops/conv.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "small_image_convs.h"
#include "thread_count_runs.h"

using namespace tpu;

namespace {

Tensor uniform(DType t, Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor x(t, std::move(s));
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, u(rng));
  return x;
}

Tensor run1(const Graph& g, std::vector<Tensor> args) { return Executable::compile(g).run(args)[0]; }

// Every GEMM way this build can run; restores the default when it goes out of scope.
struct Ways {
  Bf16Gemm saved = bf16_gemm();
  std::vector<Bf16Gemm> all;
  Ways() {
    for (Bf16Gemm w : {Bf16Gemm::widen_eigen, Bf16Gemm::onednn, Bf16Gemm::widen_f32})
      if (bf16_gemm_available(w)) all.push_back(w);
  }
  ~Ways() { set_bf16_gemm(saved); }
};

struct Reference {
  std::vector<double> c, abs;  // op(A) op(B) and op(|A|) op(|B|), in double
};

Reference reference_gemm(const Tensor& a, const Tensor& b, int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
  std::vector<double> A(static_cast<size_t>(m * k)), B(static_cast<size_t>(k * n));  // op(A), op(B)
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) A[size_t(i * k + kk)] = a.get(ta ? kk * m + i : i * k + kk);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j) B[size_t(kk * n + j)] = b.get(tb ? j * k + kk : kk * n + j);
  Reference r{std::vector<double>(size_t(m * n)), std::vector<double>(size_t(m * n))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = A[size_t(i * k + kk)];
      const double* brow = &B[size_t(kk * n)];
      double* c = &r.c[size_t(i * n)];
      double* s = &r.abs[size_t(i * n)];
      for (int64_t j = 0; j < n; ++j) {
        c[j] += av * brow[j];
        s[j] += std::fabs(av * brow[j]);
      }
    }
  return r;
}

}  // namespace

TEST_CASE("f32 -> bf16 rounds to nearest even and keeps NaN, in the kernel and the bulk loop") {
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x7f800000, 0xff800000,  // zeros, infinities
                                0x7fc00000, 0x7f800001, 0xffbfffff, 0x7fff8000,  // NaNs (signalling too)
                                0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,  // ties to even, near ties
                                0x7f7fffff, 0x00000001, 0x807fffff, 0x00008000,  // overflow to inf, subnormals
                                0x3f800000, 0xc0490fdb};
  std::mt19937 rng(9);
  for (int i = 0; i < 1 << 20; ++i) bits.push_back(uint32_t(rng()));
  const int64_t n = int64_t(bits.size());
  Tensor x(DType::f32, {n});
  std::memcpy(x.raw(), bits.data(), x.bytes());

  Graph g;
  g.outputs = {g.convert(g.parameter(DType::f32, {n}), DType::bf16)};
  Tensor fast = run1(g, {x});
  std::vector<uint16_t> bulk(static_cast<size_t>(n));
  round_to_bf16(x.data<float>(), bulk.data(), n);
  int64_t wrong = 0, not_nearest = 0, nan_lost = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = bits[size_t(i)];
    const uint16_t want = f32_to_bf16(std::bit_cast<float>(u));
    wrong += fast.data<uint16_t>()[i] != want || bulk[size_t(i)] != want;
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    nan_lost += nan != std::isnan(bf16_to_f32(want));
    // Not exact: the nearer of the neighbours below and above. Measured in float arithmetic,
    // which reads a subnormal as zero (tputrain flushes subnormals), so only for normal values.
    const bool subnormal = (u & 0x7f800000u) == 0;
    if (!nan && !subnormal && (u & 0xffffu)) {
      const double v = std::bit_cast<float>(u), r = bf16_to_f32(want);
      const double down = bf16_to_f32(uint16_t(u >> 16)), up = bf16_to_f32(uint16_t((u >> 16) + 1));
      not_nearest += std::isfinite(r) && std::fabs(r - v) > std::fabs(v - (r == down ? up : down));
    }
  }
  CHECK(wrong == 0);
  CHECK(nan_lost == 0);
  CHECK(not_nearest == 0);
  CHECK(fast.data<uint16_t>()[8] == 0x3f80);   // 1 + 2^-8 ties to the even 1
  CHECK(fast.data<uint16_t>()[9] == 0x3f82);   // 1 + 3 * 2^-8 ties to the even 1 + 2^-6
  CHECK(fast.data<uint16_t>()[12] == 0x7f80);  // FLT_MAX rounds up to infinity
}

TEST_CASE("bf16 -> f32 is exact for all 65536 values") {
  Tensor x(DType::bf16, {65536});
  for (int i = 0; i < 65536; ++i) x.data<uint16_t>()[i] = uint16_t(i);
  Graph g;
  g.outputs = {g.convert(g.parameter(DType::bf16, {65536}), DType::f32)};
  Tensor y = run1(g, {x});
  for (int i = 0; i < 65536; ++i) REQUIRE(std::bit_cast<uint32_t>(y.data<float>()[i]) == uint32_t(i) << 16);
}

TEST_CASE("bf16 GEMM agrees with the f32 reference within bf16 tolerance on the MLP's shapes") {
  struct Dims {
    int64_t m, k, n;
    bool ta, tb;
  };
  // Forward 784-512-512-10 at batch 256, and the backward products with their transposes.
  const Dims shapes[] = {{256, 784, 512, false, false}, {256, 512, 512, false, false}, {256, 512, 10, false, false},
                         {256, 512, 512, false, true},  {512, 256, 512, true, false},  {784, 256, 512, true, false},
                         {256, 10, 512, false, true}};
  Ways ways;
  uint32_t seed = 100;
  for (const Dims& d : shapes) {
    Tensor a32 = uniform(DType::f32, d.ta ? Shape{d.k, d.m} : Shape{d.m, d.k}, seed++);
    Tensor b32 = uniform(DType::f32, d.tb ? Shape{d.n, d.k} : Shape{d.k, d.n}, seed++);
    Graph g;
    NodeId a = g.parameter(DType::f32, a32.shape()), b = g.parameter(DType::f32, b32.shape());
    g.outputs = {g.dot(g.convert(a, DType::bf16), g.convert(b, DType::bf16), d.ta, d.tb, DType::f32)};
    REQUIRE(g.at(g.outputs[0]).dtype == DType::f32);
    Tensor a16(DType::bf16, a32.shape()), b16(DType::bf16, b32.shape());
    round_to_bf16(a32.data<float>(), a16.data<uint16_t>(), a32.size());
    round_to_bf16(b32.data<float>(), b16.data<uint16_t>(), b32.size());
    const Reference exact = reference_gemm(a32, b32, d.m, d.k, d.n, d.ta, d.tb);     // f32 inputs
    const Reference rounded = reference_gemm(a16, b16, d.m, d.k, d.n, d.ta, d.tb);   // bf16 inputs
    // Rounding to bf16 (8 significant bits) changes an operand by at most 2^-8 of itself, so
    // a product by 2^-7 + 2^-16; f32 sums of K terms add at most about K 2^-24 of the sum of
    // magnitudes.
    const double f32_sums = double(d.k + 4) * std::ldexp(1.0, -24) * 1.01;
    const double bf16_inputs = std::ldexp(1.0, -7) + std::ldexp(1.0, -15);
    for (Bf16Gemm way : ways.all) {
      set_bf16_gemm(way);
      INFO(bf16_gemm_name(way) << " " << d.m << "x" << d.k << "x" << d.n << " ta " << d.ta << " tb " << d.tb);
      Tensor c = run1(g, {a32, b32});
      double err2 = 0, ref2 = 0;
      int64_t bad_f32 = 0, bad_bf16 = 0;
      for (int64_t i = 0; i < c.size(); ++i) {
        const double v = c.data<float>()[i];
        const size_t e = size_t(i);
        bad_f32 += std::fabs(v - exact.c[e]) > (bf16_inputs + f32_sums) * exact.abs[e];
        bad_bf16 += std::fabs(v - rounded.c[e]) > f32_sums * rounded.abs[e];
        err2 += (v - exact.c[e]) * (v - exact.c[e]);
        ref2 += exact.c[e] * exact.c[e];
      }
      CHECK(bad_f32 == 0);
      CHECK(bad_bf16 == 0);
      CHECK(std::sqrt(err2 / ref2) < std::ldexp(1.0, -7));  // typical: well under one rounding
    }
  }
}

// Small integers are exact bf16 values and keep every sum exact, so each way (oneDNN's bf16
// convs under Bf16Gemm::onednn, f32 ones otherwise) must give the reference's values.
TEST_CASE("convs of exactly-bf16 operands match the reference under every bf16 way") {
  auto small_ints = [](Shape s, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> u(-4, 4);
    Tensor x(DType::f32, std::move(s));
    for (int64_t i = 0; i < x.size(); ++i) x.set(i, u(rng));
    return x;
  };
  Window2D same;
  same.pad_lo = {1, 1}, same.pad_hi = {1, 1};
  Graph g;
  NodeId x = g.parameter(DType::f32, {8, 12, 12, 16});
  NodeId w = g.parameter(DType::f32, {3, 3, 16, 8});
  NodeId dy = g.parameter(DType::f32, {8, 12, 12, 8});
  NodeId strided_dy = g.parameter(DType::f32, {8, 6, 6, 8});
  Window2D grad = same, strided = same;
  grad.size = {3, 3};
  strided.stride = {2, 2}, strided.pad_hi = {0, 0};
  g.outputs = {g.conv(x, w, same), g.conv_filter_grad(x, dy, grad),
               conv_input_grad(g, strided_dy, w, strided, {8, 12, 12, 16}, 1)};  // the oneDNN input gradient
  REQUIRE(verify_graph(g).empty());
  std::vector<Tensor> args = {small_ints({8, 12, 12, 16}, 1), small_ints({3, 3, 16, 8}, 2), small_ints({8, 12, 12, 8}, 3),
                              small_ints({8, 6, 6, 8}, 4)};
  CompileOptions reference;
  reference.reference_kernels = true;
  const std::vector<Tensor> want = Executable::compile(g, reference).run(args);
  Ways ways;
  for (Bf16Gemm way : ways.all) {
    set_bf16_gemm(way);
    INFO(bf16_gemm_name(way));
    const std::vector<Tensor> got = Executable::compile(g).run(args);
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0);
  }
}

// The same over small images (small_image_convs.h), where bf16 convs run as bf16 products of
// patch matrices (ops/conv.cpp) where the CPU has bf16 instructions, oneDNN's elsewhere.
TEST_CASE("convs of exactly-bf16 operands over small images match the reference under every bf16 way") {
  auto small_ints = [](const Shape& s, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> u(-4, 4);
    Tensor x(DType::f32, s);
    for (int64_t i = 0; i < x.size(); ++i) x.set(i, u(rng));
    return x;
  };
  if (!onednn_native_bf16()) MESSAGE("no bf16 instructions on this CPU: the bf16 patch-matrix convs are not tested");
  std::vector<Shape> shapes;
  const Graph g = small_image_convs(shapes);
  std::vector<Tensor> args;
  for (size_t i = 0; i < shapes.size(); ++i) args.push_back(small_ints(shapes[i], uint32_t(i + 1)));
  REQUIRE(verify_graph(g).empty());
  CompileOptions reference;
  reference.reference_kernels = true;
  const std::vector<Tensor> want = Executable::compile(g, reference).run(args);
  Ways ways;
  for (Bf16Gemm way : ways.all) {
    set_bf16_gemm(way);
    INFO(bf16_gemm_name(way));
    const std::vector<Tensor> got = Executable::compile(g).run(args);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i);
      CHECK(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0);
    }
  }
}

// The bf16 patch-matrix convs (a 2x2 conv, a pointwise filter gradient in parts, a strided
// 1x1 input gradient) on values whose sums round: the same bits on 1 and 2 threads.
TEST_CASE("bf16 convs over small images do not depend on the thread count") {
  auto widened = [](Graph& g, NodeId p) { return g.convert(g.convert(p, DType::bf16), DType::f32); };
  Window2D same, pointwise, strided;
  same.pad_lo = {1, 1}, same.pad_hi = {1, 1}, same.size = {3, 3};
  strided.stride = {2, 2};
  const std::vector<Shape> shapes = {{8, 2, 2, 64}, {3, 3, 64, 32}, {5, 60, 60, 8}, {5, 60, 60, 12}, {4, 3, 3, 24}, {1, 1, 16, 24}};
  Graph g;
  std::vector<NodeId> p;
  std::vector<Tensor> args;
  for (size_t i = 0; i < shapes.size(); ++i) {
    p.push_back(widened(g, g.parameter(DType::f32, shapes[i])));
    args.push_back(uniform(DType::f32, shapes[i], uint32_t(20 + i)));
  }
  g.outputs = {g.conv(p[0], p[1], same), g.conv_filter_grad(p[2], p[3], pointwise),
               conv_input_grad(g, p[4], p[5], strided, {4, 6, 6, 16}, 1)};
  REQUIRE(verify_graph(g).empty());
  Executable exe = Executable::compile(g);
  exe.run(args);  // makes the primitives
  run_on_1_and_2_threads(exe, args);
}

// Under mixed_bfloat16 a conv's operands are bf16 values widened to f32; its backward convs
// take the output gradient rounded to bf16 (as the dot's gradient does), so they run on bf16
// operands too. Expected: the gradients of the same conv given that rounded gradient directly.
TEST_CASE("a conv of widened bf16 operands rounds its output gradient to bf16") {
  Window2D same;
  same.pad_lo = {1, 1}, same.pad_hi = {1, 1};
  const Shape xs{2, 6, 6, 8}, ws{3, 3, 8, 4}, ys{2, 6, 6, 4};
  auto widened = [](Graph& g, NodeId p) { return g.convert(g.convert(p, DType::bf16), DType::f32); };
  Graph g;
  NodeId x = g.parameter(DType::f32, xs), w = g.parameter(DType::f32, ws), c = g.parameter(DType::f32, ys);
  NodeId xw = widened(g, x), ww = widened(g, w);
  NodeId loss = g.reduce(g.binary(Op::mul, g.conv(xw, ww, same), c), {0, 1, 2, 3}, ReduceKind::sum);
  std::vector<NodeId> wrt = {xw, ww};
  g.outputs = gradients(g, loss, wrt);
  REQUIRE(verify_graph(g).empty());
  // The same products by hand: d loss / d y = c, rounded to bf16.
  Graph h;
  NodeId hx = h.parameter(DType::f32, xs), hw = h.parameter(DType::f32, ws), hc = h.parameter(DType::f32, ys);
  NodeId dy = widened(h, hc), xb = widened(h, hx), wb = widened(h, hw);
  Window2D grad = same;
  grad.size = {3, 3};
  h.outputs = {conv_input_grad(h, dy, wb, grad, xs, 1), h.conv_filter_grad(xb, dy, grad)};
  REQUIRE(verify_graph(h).empty());
  std::vector<Tensor> args = {uniform(DType::f32, xs, 4), uniform(DType::f32, ws, 5), uniform(DType::f32, ys, 6)};
  CompileOptions reference;
  reference.reference_kernels = true;
  const std::vector<Tensor> got = Executable::compile(g, reference).run(args);
  const std::vector<Tensor> want = Executable::compile(h, reference).run(args);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    double worst = 0;
    for (int64_t k = 0; k < got[i].size(); ++k) worst = std::max(worst, std::abs(got[i].get(k) - want[i].get(k)));
    CHECK(worst == 0);
  }
  // The f32 gradient differs: the rounding is there.
  Graph f;
  f.parameter(DType::f32, xs);
  NodeId fw = f.parameter(DType::f32, ws), fc = f.parameter(DType::f32, ys);
  f.outputs = {conv_input_grad(f, fc, widened(f, fw), grad, xs, 1)};
  CHECK(std::memcmp(Executable::compile(f, reference).run(args)[0].raw(), got[0].raw(), got[0].bytes()) != 0);
}

TEST_CASE("bf16 dot and its gradient do not depend on the thread count") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {256, 784});
  NodeId w = g.parameter(DType::f32, {784, 512});
  NodeId v = g.parameter(DType::f32, {512, 10});
  NodeId h = g.dot(g.convert(x, DType::bf16), g.convert(w, DType::bf16), false, false, DType::f32);
  NodeId y = g.dot(g.convert(h, DType::bf16), g.convert(v, DType::bf16), false, false, DType::f32);
  NodeId loss = g.reduce(g.binary(Op::mul, y, y), {0, 1}, ReduceKind::sum);
  std::vector<NodeId> wrt = {x, w, v};
  g.outputs = gradients(g, loss, wrt);
  g.outputs.push_back(h);
  REQUIRE(verify_graph(g).empty());
  std::vector<Tensor> args = {uniform(DType::f32, {256, 784}, 1), uniform(DType::f32, {784, 512}, 2),
                              uniform(DType::f32, {512, 10}, 3)};
  Ways ways;
  for (Bf16Gemm way : ways.all) {
    set_bf16_gemm(way);
    INFO(bf16_gemm_name(way));
    Executable exe = Executable::compile(g);
    std::vector<Tensor> one = run_on_1_and_2_threads(exe, args);
    const size_t primitives = onednn_primitives_created();
    std::vector<Tensor> again = exe.run(args);
    CHECK(onednn_primitives_created() == primitives);  // cached: none made in a steady step
    for (size_t i = 0; i < one.size(); ++i) CHECK(std::memcmp(one[i].raw(), again[i].raw(), one[i].bytes()) == 0);
  }
}

// oneDNN's AMX kernel takes contiguous operands only; a strided tile silently ran on its older
// AVX-512 kernel at a third of the speed. Where the CPU has AMX, every tile of the transformer's
// and the MLP's products, and of their gradients' (transposed operands), must get it.
TEST_CASE("bf16 products reach oneDNN's AMX kernel where the CPU has it") {
  if (onednn_report().find("ISA avx512_core_amx") == std::string::npos) {
    MESSAGE("skipped: oneDNN finds no AMX on this CPU (" << onednn_report() << ")");
    return;
  }
  const GemmShape shapes[] = {{1, 4096, 256, 1024, false, false}, {1, 4096, 1024, 256, false, true},
                              {1, 256, 4096, 1024, true, false},  {1, 256, 784, 512, false, false},
                              {1, 784, 256, 512, true, false},    {1, 256, 512, 784, false, true},
                              {1, 1000, 300, 700, true, false},
                              // attention's, per sequence and head (groups of whole elements)
                              {128, 128, 64, 128, false, true},   {128, 128, 128, 64, false, false},
                              {128, 128, 128, 64, true, false}};
  for (const GemmShape& s : shapes) {
    for (const std::string& impl : gemm_bf16_onednn_impls(s)) {
      INFO(s.m << "x" << s.k << "x" << s.n << " ta " << s.ta << " tb " << s.tb);
      CHECK(impl.find("amx") != std::string::npos);
    }
  }
}

// Row blocks of a transposed left operand copy their column slab, and a transposed one with a
// long inner dimension is cut along it (parts added in order): both against the reference, with
// uneven last blocks and parts, and a batch of two giving each element's own bits.
TEST_CASE("bf16 products in row blocks and inner parts match the reference, transposed operands included") {
  Ways ways;
  const std::array<int64_t, 3> sizes[] = {{1000, 300, 700}, {256, 1100, 300}};  // m, k, n
  for (const auto& [m, k, n] : sizes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = uniform(DType::bf16, ta ? Shape{2, k, m} : Shape{2, m, k}, 11);
        Tensor b = uniform(DType::bf16, tb ? Shape{2, n, k} : Shape{2, k, n}, 12);
        Tensor a0 = a.rows(0, 1).reshaped(ta ? Shape{k, m} : Shape{m, k});
        Tensor b0 = b.rows(0, 1).reshaped(tb ? Shape{n, k} : Shape{k, n});
        const Reference ref = reference_gemm(a0, b0, m, k, n, ta, tb);
        for (Bf16Gemm way : ways.all) {
          set_bf16_gemm(way);
          INFO(bf16_gemm_name(way) << " " << m << "x" << k << "x" << n << " ta " << ta << " tb " << tb);
          std::vector<float> c(size_t(2 * m * n)), one(size_t(m * n));
          gemm_bf16({2, m, k, n, ta, tb}, a.data<uint16_t>(), b.data<uint16_t>(), c.data());
          gemm_bf16({1, m, k, n, ta, tb}, a.data<uint16_t>(), b.data<uint16_t>(), one.data());
          int64_t bad = 0;
          for (size_t i = 0; i < one.size(); ++i)
            bad += std::fabs(c[i] - ref.c[i]) > double(k + 4) * std::ldexp(1.0, -24) * 1.01 * ref.abs[i];
          CHECK(bad == 0);
          CHECK(std::memcmp(c.data(), one.data(), one.size() * 4) == 0);
        }
      }
}

// Batches of small products go to oneDNN in groups of whole elements (an uneven last group,
// each operand transposed): every element against its reference, the same bits on 1 and 2
// threads.
TEST_CASE("bf16 products in groups of small batch elements match the reference") {
  Ways ways;
  const int64_t batch = 19, m = 64, k = 48, n = 40;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = uniform(DType::bf16, ta ? Shape{batch, k, m} : Shape{batch, m, k}, 13);
      Tensor b = uniform(DType::bf16, tb ? Shape{batch, n, k} : Shape{batch, k, n}, 14);
      for (Bf16Gemm way : ways.all) {
        set_bf16_gemm(way);
        INFO(bf16_gemm_name(way) << " ta " << ta << " tb " << tb);
        std::vector<float> one(size_t(batch * m * n)), two(one.size());
        set_num_threads(1);
        gemm_bf16({batch, m, k, n, ta, tb}, a.data<uint16_t>(), b.data<uint16_t>(), one.data());
        set_num_threads(2);
        gemm_bf16({batch, m, k, n, ta, tb}, a.data<uint16_t>(), b.data<uint16_t>(), two.data());
        set_num_threads(0);
        CHECK(std::memcmp(one.data(), two.data(), one.size() * 4) == 0);
        int64_t bad = 0;
        for (int64_t p = 0; p < batch; ++p) {
          Tensor ap = a.rows(p, 1).reshaped(ta ? Shape{k, m} : Shape{m, k});
          Tensor bp = b.rows(p, 1).reshaped(tb ? Shape{n, k} : Shape{k, n});
          const Reference ref = reference_gemm(ap, bp, m, k, n, ta, tb);
          for (int64_t i = 0; i < m * n; ++i)
            bad += std::fabs(one[size_t(p * m * n + i)] - ref.c[size_t(i)]) >
                   double(k + 4) * std::ldexp(1.0, -24) * 1.01 * ref.abs[size_t(i)];
        }
        CHECK(bad == 0);
      }
    }
}

TEST_CASE("bf16 dot gradients are bf16 for bf16 operands and close to the f32 ones") {
  auto build = [](bool bf16, bool ta, bool tb) {
    Graph g;
    NodeId a = g.parameter(DType::f32, ta ? Shape{2, 40, 30} : Shape{2, 30, 40});
    NodeId b = g.parameter(DType::f32, tb ? Shape{2, 50, 40} : Shape{2, 40, 50});
    NodeId wgt = g.parameter(DType::f32, {2, 30, 50});
    NodeId a16 = bf16 ? g.convert(a, DType::bf16) : a, b16 = bf16 ? g.convert(b, DType::bf16) : b;
    NodeId y = g.dot(a16, b16, ta, tb, DType::f32);
    NodeId loss = g.reduce(g.binary(Op::mul, y, wgt), {0, 1, 2}, ReduceKind::sum);
    std::vector<NodeId> wrt = {a, b, a16, b16};
    g.outputs = gradients(g, loss, wrt);
    return g;
  };
  // Batched: two threads run the same primitive at once, each needing its own scratchpad
  // (a shared one gave wrong gradients now and then); repeated to catch such races.
  Ways ways;
  for (int rep = 0; rep < 4 * 60; ++rep) {
    const int flags = rep % 4;
    const bool ta = flags & 1, tb = flags & 2;
    const Bf16Gemm way = ways.all[size_t(rep / 4) % ways.all.size()];
    set_bf16_gemm(way);
    INFO("ta " << ta << " tb " << tb << " " << bf16_gemm_name(way));
    Graph g16 = build(true, ta, tb), g32 = build(false, ta, tb);
    REQUIRE(verify_graph(g16).empty());
    CHECK(g16.at(g16.outputs[0]).dtype == DType::f32);  // the f32 variables
    CHECK(g16.at(g16.outputs[2]).dtype == DType::bf16);  // the bf16 operands
    CHECK(g16.at(g16.outputs[3]).dtype == DType::bf16);
    std::vector<Tensor> args = {uniform(DType::f32, g32.at(g32.params[0]).shape, 7),
                                uniform(DType::f32, g32.at(g32.params[1]).shape, 8),
                                uniform(DType::f32, {2, 30, 50}, 9)};
    std::vector<Tensor> r16 = Executable::compile(g16).run(args), r32 = Executable::compile(g32).run(args);
    for (size_t i = 0; i < 2; ++i) {
      double err2 = 0, ref2 = 0;
      for (int64_t e = 0; e < r32[i].size(); ++e) {
        const double d = r16[i].get(e) - r32[i].get(e);
        err2 += d * d;
        ref2 += r32[i].get(e) * r32[i].get(e);
      }
      CHECK(std::sqrt(err2 / ref2) < std::ldexp(1.0, -6));  // three bf16 roundings on the way
    }
  }
  // bf16 x bf16 -> bf16 differentiates too, all in bf16.
  Graph g;
  NodeId a = g.parameter(DType::bf16, {3, 4}), b = g.parameter(DType::bf16, {4, 5});
  NodeId loss = g.reduce(g.convert(g.dot(a, b), DType::f32), {0, 1}, ReduceKind::sum);
  std::vector<NodeId> wrt = {a, b};
  g.outputs = gradients(g, loss, wrt);
  REQUIRE(verify_graph(g).empty());
  CHECK(g.at(g.outputs[0]).dtype == DType::bf16);
}

TEST_CASE("dot result type: the shape rule and the IR text") {
  Graph g;
  NodeId a = g.parameter(DType::bf16, {2, 3}), b = g.parameter(DType::bf16, {3, 4});
  NodeId f = g.parameter(DType::f32, {3, 4});
  CHECK(g.at(g.dot(a, b)).dtype == DType::bf16);
  CHECK(g.at(g.dot(a, b, false, false, DType::f32)).dtype == DType::f32);
  CHECK_THROWS_WITH_AS(g.dot(g.convert(a, DType::f32), f, false, false, DType::bf16),
                       doctest::Contains("f32[2,3], f32[3,4] cannot produce bf16"), Error);
  CHECK_THROWS_WITH_AS(g.dot(a, f), doctest::Contains("bf16[2,3], f32[3,4]"), Error);
  CHECK_THROWS_AS(g.dot(a, b, false, false, DType::i32), Error);
  g.outputs = {g.dot(a, g.parameter(DType::bf16, {4, 3}), false, true, DType::f32), g.dot(a, b)};
  const std::string text = print_graph(g);
  CHECK(text.find("to=bf16") != std::string::npos);
  Graph back = parse_graph(text);
  CHECK(print_graph(back) == text);
  CHECK(back.at(back.outputs[0]).dtype == DType::f32);
  CHECK(back.at(back.outputs[1]).dtype == DType::bf16);
}

TEST_CASE("elementwise ops on bf16 run (in f32, rounded once) instead of failing") {
  Graph g;
  NodeId x = g.parameter(DType::bf16, {4});
  NodeId y = g.binary(Op::add, g.unary(Op::exp, x), x);
  g.outputs = {g.convert(y, DType::f32), g.reduce(x, {0}, ReduceKind::max), g.convert(x, DType::i32)};
  Tensor in(DType::bf16, {4});
  const float v[] = {0.5f, -1.0f, 2.0f, -3.5f};
  for (int i = 0; i < 4; ++i) in.set(i, v[i]);
  std::vector<Tensor> r = Executable::compile(g).run(std::vector<Tensor>{in});
  for (int i = 0; i < 4; ++i) {
    const float e = bf16_to_f32(f32_to_bf16(std::exp(v[i])));
    CHECK(r[0].get(i) == double(bf16_to_f32(f32_to_bf16(e + v[i]))));
  }
  CHECK(r[1].get(0) == 2.0);
  CHECK(r[2].data<int32_t>()[3] == -3);
}
