// GEMM micro-benchmark: GFLOP/s of the dot kernels on the MLP's shapes (784-512-512-10 at
// batch 256: the forward products and the backward ones with transposes), f32 and bf16, on
// 1 and 2 threads. Build and run:
//   cmake --build build --target bench_gemm && build/bench_gemm [--reps 30]
// Each cell, over --reps timed runs after warm-up: the best and the median GFLOP/s by the wall
// clock, and the median GFLOP/s per busy core by process CPU time, which other load on a
// shared machine affects less (x2 on 2 threads: what two free cores would give; on 1 thread
// it is at least the wall-clock rate unless a library starts threads of its own).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "runtime/thread_pool.h"

using namespace tpu;

namespace {

struct Case {
  const char* name;
  GemmShape s;
};

// M x K x N; ta / tb: the transposed operands the MLP's backward pass uses (dx2 = dy2 w2^T,
// dw2 = h1^T dy2, dw1 = x^T dy1).
const Case kCases[] = {
    {"256x784x512", {1, 256, 784, 512, false, false}},
    {"256x512x512", {1, 256, 512, 512, false, false}},
    {"256x512x512tb", {1, 256, 512, 512, false, true}},
    {"512x256x512ta", {1, 512, 256, 512, true, false}},
    {"784x256x512ta", {1, 784, 256, 512, true, false}},
    // The CNN's dense layer (3136 -> 128 at batch 128): forward, dx = dy w^T, dw = x^T dy.
    {"128x3136x128", {1, 128, 3136, 128, false, false}},
    {"128x128x3136tb", {1, 128, 128, 3136, false, true}},
    {"3136x128x128ta", {1, 3136, 128, 128, true, false}},
    // The d-256 transformer's feed-forward layer (32 x 128 tokens, 256 -> 1024): forward and
    // the weight gradient dw = x^T dy.
    {"4096x256x1024", {1, 4096, 256, 1024, false, false}},
    {"256x4096x1024ta", {1, 256, 4096, 1024, true, false}},
    // and its second layer's, 1024 -> 256: dw = x^T dy of more rows than columns.
    {"1024x4096x256ta", {1, 1024, 4096, 256, true, false}},
    // Its attention ("attn": a batch of 128 products, 32 sequences x 4 heads): scores = q k^T,
    // out = p v, and the gradients dp = dout v^T, dv = p^T dout (dq = ds k and dk = ds^T q
    // repeat these shapes).
    {"attn128x64x128tb", {128, 128, 64, 128, false, true}},
    {"attn128x128x64", {128, 128, 128, 64, false, false}},
    {"attn128x128x64ta", {128, 128, 128, 64, true, false}},
};

struct Timing {
  double best = 0;    // GFLOP/s by the wall clock: the best run
  double median = 0;  // the median run
  double core = 0;    // GFLOP/s per busy core by process CPU time (median run): what other
                      // load on a shared machine hides from the wall clock
};

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

Timing measure(const GemmShape& s, int reps, const std::function<void()>& run) {
  for (int i = 0; i < 3; ++i) run();
  std::vector<double> wall, core;
  const double flops = 2.0 * double(s.batch * s.m * s.n * s.k);
  for (int i = 0; i < reps; ++i) {
    const double c0 = cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    run();
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    wall.push_back(flops / sec / 1e9);
    core.push_back(flops / (cpu_seconds() - c0) / 1e9);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(core.begin(), core.end());
  return {wall.back(), wall[wall.size() / 2], core[core.size() / 2]};
}

struct Operands {
  std::vector<float> a, b, c;
  std::vector<uint16_t> a16, b16;
};

Operands operands(const GemmShape& s) {
  Operands o;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  o.a.resize(size_t(s.batch * s.m * s.k));
  o.b.resize(size_t(s.batch * s.k * s.n));
  o.c.resize(size_t(s.batch * s.m * s.n));
  for (float& x : o.a) x = u(rng);
  for (float& x : o.b) x = u(rng);
  o.a16.resize(o.a.size());
  o.b16.resize(o.b.size());
  round_to_bf16(o.a.data(), o.a16.data(), int64_t(o.a.size()));
  round_to_bf16(o.b.data(), o.b16.data(), int64_t(o.b.size()));
  return o;
}

// The register-only FMA rate: independent fused multiply-adds on the widest vectors the
// build targets, nothing loaded or stored. The ceiling any f32 GEMM can approach.
double fma_peak(int threads) {
#ifdef __AVX512F__
  constexpr int kLanes = 16;
#else
  constexpr int kLanes = 8;  // AVX2
#endif
  constexpr int kAcc = 12;
  typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
  const int64_t iters = 20'000'000;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> sink(static_cast<size_t>(threads));
  parallel_for(threads, [&](int64_t t) {
    Vec acc[kAcc], x, y;
    for (int l = 0; l < kLanes; ++l) x[l] = 0.999f, y[l] = 0.001f * float(l + t);
    for (int i = 0; i < kAcc; ++i) acc[i] = y * float(i);
    asm("" : "+v"(x), "+v"(y));  // in registers, not reloaded from the stack by every FMA
    for (int64_t it = 0; it < iters; ++it)
      for (int i = 0; i < kAcc; ++i) acc[i] = acc[i] * x + y;
    float total = 0;
    for (int i = 0; i < kAcc; ++i)
      for (int l = 0; l < kLanes; ++l) total += acc[i][l];
    sink[size_t(t)] = total;
  });
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile float keep = sink[0];  // the loops must not be optimised away
  (void)keep;
  return 2.0 * double(iters) * kAcc * kLanes * threads / sec / 1e9;
}

void cell(const Timing& t) { std::printf(" %5.0f %5.0f %5.0f |", t.best, t.median, t.core); }

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  const Bf16Gemm default_way = bf16_gemm();
  std::printf("%s\n", gemm_backend_report().c_str());
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    double peak = 0;
    for (int i = 0; i < 3; ++i) peak = std::max(peak, fma_peak(threads));
    std::printf("f32 FMA peak (registers only), %d thread%s: %.0f GFLOP/s\n", threads, threads > 1 ? "s" : "", peak);
  }
  std::printf("GFLOP/s per cell over %d runs: best and median by the wall clock, median per busy core by CPU time\n\n", reps);

  struct Method {
    std::string name;
    std::function<bool(const GemmShape&, Operands&)> run;  // false: not available
  };
  std::vector<Method> methods = {
      {"f32 eigen", [](const GemmShape& s, Operands& o) { return gemm_f32_eigen(s, o.a.data(), o.b.data(), o.c.data()), true; }},
      {"f32 onednn", [](const GemmShape& s, Operands& o) { return gemm_f32_onednn(s, o.a.data(), o.b.data(), o.c.data()); }},
      {"f32 packed", [](const GemmShape& s, Operands& o) { return gemm_f32_packed(s, o.a.data(), o.b.data(), o.c.data()), true; }},
  };
  for (Bf16Gemm way : {Bf16Gemm::widen_eigen, Bf16Gemm::onednn, Bf16Gemm::widen_f32}) {
    if (!bf16_gemm_available(way)) continue;
    std::string name = "bf16 " + std::string(bf16_gemm_name(way)) + (way == default_way ? " (default)" : "");
    methods.push_back({name, [way](const GemmShape& s, Operands& o) {
                         set_bf16_gemm(way);
                         gemm_bf16(s, o.a16.data(), o.b16.data(), o.c.data());
                         return true;
                       }});
  }

  std::printf("%-35s|", "method                      threads");
  for (const Case& c : kCases) std::printf(" %-17s |", c.name);
  std::printf("\n");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (Method& m : methods) {
      std::printf("%-32s %2d |", m.name.c_str(), threads);
      for (const Case& c : kCases) {
        Operands o = operands(c.s);
        if (!m.run(c.s, o)) {
          std::printf(" %17s |", "n/a");
          continue;
        }
        cell(measure(c.s, reps, [&] { m.run(c.s, o); }));
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  set_bf16_gemm(default_way);

  // The casts around every matmul: f32 -> bf16 and back, one thread.
  set_num_threads(1);
  const int64_t n = 256 * 784;
  std::vector<float> f(static_cast<size_t>(n), 0.3f);
  std::vector<uint16_t> h(static_cast<size_t>(n));
  auto gbps = [&](const std::function<void()>& run) {
    for (int i = 0; i < 3; ++i) run();
    double best = 1e30;
    for (int i = 0; i < reps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return double(n) * 6 / best / 1e9;
  };
  std::printf("\nconvert f32->bf16 %.1f GB/s, bf16->f32 %.1f GB/s (256x784, 1 thread, best)\n",
              gbps([&] { round_to_bf16(f.data(), h.data(), n); }), gbps([&] { widen_bf16(h.data(), f.data(), n); }));
  return 0;
}
