// The machine's register-only multiply-add peak, the ceiling of the "% of peak" columns of
// bench/run.sh: independent fused multiply-adds on the widest vectors the CPU has (512-bit with
// AVX-512, else 256-bit with AVX2 and FMA) for f32 and, where the CPU has
// AVX512_BF16, bf16 dot-product instructions (vdpbf16ps: 32 products and 32 sums each), nothing
// loaded or stored, on N threads at once, each thread's rate by its own CPU time (what N free
// cores give, also on a busy machine); the best of 3 runs. Without AVX512_BF16 there is no
// native bf16 arithmetic, bf16 work is widened to f32, and the bf16 peak is the f32 one.
// Where the CPU has AMX tiles (AMX_BF16, and the kernel lets the process use them), the bf16
// tile products (tdpbf16ps: 16 x 16 x 32 products and sums each) are measured too: oneDNN runs
// bf16 matrix products on them, so they, not vdpbf16ps, are the bf16 ceiling there.
//
//   g++ -O2 -march=native -pthread bench/fma_peak.cpp -o fma_peak && ./fma_peak [threads]
// prints "f32 GFLOPS", then "bf16 GFLOPS" or "bf16 none", then "amx_bf16 GFLOPS" or
// "amx_bf16 none".
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

namespace {

constexpr long kIters = 50'000'000;
constexpr int kAcc = 12;  // independent chains: enough to cover the FMA latency on 2 ports

#ifdef __AVX512F__
using Vec = __m512;
constexpr int kLanes = 16;
inline Vec splat(float v) { return _mm512_set1_ps(v); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline void store(float* p, Vec v) { _mm512_store_ps(p, v); }
#else
using Vec = __m256;
constexpr int kLanes = 8;
inline Vec splat(float v) { return _mm256_set1_ps(v); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline void store(float* p, Vec v) { _mm256_store_ps(p, v); }
#endif

float sum(const Vec* acc) {
  alignas(64) float lanes[kLanes];
  float total = 0;
  for (int i = 0; i < kAcc; ++i) {
    store(lanes, acc[i]);
    for (float v : lanes) total += v;
  }
  return total;
}

float f32_chain(int seed) {
  Vec acc[kAcc];
  Vec x = splat(0.999f), y = splat(0.001f * float(seed + 1));
  for (int i = 0; i < kAcc; ++i) acc[i] = splat(float(i));
  for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kAcc; ++i) acc[i] = fma(acc[i], x, y);
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

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
constexpr long kTileIters = kIters / 16;  // a tile product is 128 times the work of a vdpbf16ps

// Linux gives a process AMX's tile data only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA); false when the kernel or the hypervisor refuses.
bool amx_allowed() {
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}

// Tiles 0-3 accumulate 16 x 16 f32 each from A tiles 4, 5 and B tiles 6, 7 (16 rows of 64
// bytes: 16 x 32 bf16, B in pairs): four independent chains, nothing loaded in the loop.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

float amx_chain(int seed) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  alignas(64) uint16_t operand[16 * 32];
  for (auto& v : operand) v = uint16_t(0x3a80 + seed);  // a small bf16 value (about 0.001)
  alignas(64) float acc[16 * 16] = {};
  _tile_loadd(0, acc, 64);
  _tile_loadd(1, acc, 64);
  _tile_loadd(2, acc, 64);
  _tile_loadd(3, acc, 64);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (long it = 0; it < kTileIters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, 64);
  _tile_release();
  return acc[0];
}
#endif

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// GFLOP/s of `chain` on `threads` threads; flops_per_op: per vector instruction, ops: how many
// the chain runs. Each thread's rate is taken over its own CPU time, so other load on a shared
// machine does not lower it.
double rate(float (*chain)(int), int threads, double flops_per_op, double ops) {
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
  for (double sec : seconds) total += flops_per_op * ops / sec / 1e9;
  return total;
}

double best_of_3(float (*chain)(int), int threads, double flops_per_op, double ops = double(kIters) * kAcc) {
  double best = 0;
  for (int i = 0; i < 3; ++i) best = std::max(best, rate(chain, threads, flops_per_op, ops));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  std::printf("f32 %.1f\n", best_of_3(f32_chain, threads, 2.0 * kLanes));
#ifdef __AVX512BF16__
  std::printf("bf16 %.1f\n", best_of_3(bf16_chain, threads, 2.0 * 32));
#else
  std::printf("bf16 none\n");
#endif
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (amx_allowed()) {
    std::printf("amx_bf16 %.1f\n", best_of_3(amx_chain, threads, 2.0 * 16 * 16 * 32, double(kTileIters) * 4));
    return 0;
  }
#endif
  std::printf("amx_bf16 none\n");
  return 0;
}
