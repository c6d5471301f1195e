// The machine's register-only multiply-add peak, the ceiling of the "% of peak" columns of
// bench/run.sh: independent fused multiply-adds on 512-bit vectors (f32) and, where the CPU has
// AVX512_BF16, bf16 dot-product instructions (vdpbf16ps: 32 products and 32 sums each), nothing
// loaded or stored, on N threads at once, each thread's rate by its own CPU time (what N free
// cores give, also on a busy machine); the best of 3 runs. Without AVX512_BF16 there is no
// native bf16 arithmetic, bf16 work is widened to f32, and the bf16 peak is the f32 one.
//
//   g++ -O2 -march=native -pthread bench/fma_peak.cpp -o fma_peak && ./fma_peak [threads]
// prints "f32 GFLOPS", then "bf16 GFLOPS" or "bf16 none".
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

namespace {

constexpr long kIters = 50'000'000;
constexpr int kAcc = 12;  // independent chains: enough to cover the FMA latency on 2 ports

float sum(const __m512* acc) {
  alignas(64) float lanes[16];
  float total = 0;
  for (int i = 0; i < kAcc; ++i) {
    _mm512_store_ps(lanes, acc[i]);
    for (float v : lanes) total += v;
  }
  return total;
}

float f32_chain(int seed) {
  __m512 acc[kAcc];
  __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f * float(seed + 1));
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  return sum(acc);
}

#ifdef __AVX512BF16__
float bf16_chain(int seed) {
  __m512 acc[kAcc];
  __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f * float(seed + 1)));
  __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.001f), _mm512_set1_ps(0.002f));
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  return sum(acc);
}
#endif

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// GFLOP/s of `chain` on `threads` threads; flops_per_op: per vector instruction. Each thread's
// rate is taken over its own CPU time, so other load on a shared machine does not lower it.
double rate(float (*chain)(int), int threads, double flops_per_op) {
  std::vector<float> sink(static_cast<size_t>(threads));
  std::vector<double> seconds(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      double t0 = thread_cpu_seconds();
      sink[size_t(t)] = chain(t);
      seconds[size_t(t)] = thread_cpu_seconds() - t0;
    });
  for (auto& th : pool) th.join();
  volatile float keep = sink[0];  // the chains must not be optimised away
  (void)keep;
  double total = 0;
  for (double sec : seconds) total += flops_per_op * double(kIters) * kAcc / sec / 1e9;
  return total;
}

double best_of_3(float (*chain)(int), int threads, double flops_per_op) {
  double best = 0;
  for (int i = 0; i < 3; ++i) best = std::max(best, rate(chain, threads, flops_per_op));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  std::printf("f32 %.1f\n", best_of_3(f32_chain, threads, 2.0 * 16));
#ifdef __AVX512BF16__
  std::printf("bf16 %.1f\n", best_of_3(bf16_chain, threads, 2.0 * 32));
#else
  std::printf("bf16 none\n");
#endif
  return 0;
}
