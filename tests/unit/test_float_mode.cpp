// Subnormals flush to zero on every computing thread, in every kind of kernel, as on a TPU.
#include <doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/executable.h"
#include "runtime/float_mode.h"
#include "runtime/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

using namespace tpu;

namespace {

Tensor filled(Shape s, float v) {
  Tensor t(DType::f32, std::move(s));
  for (float& x : t.span<float>()) x = v;
  return t;
}

// Results of one graph that makes subnormals three ways: an elementwise product whose result
// is subnormal (FTZ), a subnormal input scaled up (DAZ), and a dot of such products.
std::vector<Tensor> run_graph(int threads) {
  set_num_threads(threads);
  Graph g;
  const int64_t n = 4096;  // large enough to be split across the pool
  NodeId a = g.parameter(DType::f32, {n}), b = g.parameter(DType::f32, {n});
  NodeId m = g.parameter(DType::f32, {64, 64}), k = g.parameter(DType::f32, {64, 64});
  g.outputs = {g.binary(Op::mul, a, g.full(DType::f32, {n}, 1e-10)),
               g.binary(Op::mul, b, g.full(DType::f32, {n}, 1e10)),
               g.dot(m, k)};
  std::vector<Tensor> out = Executable::compile(std::move(g)).run(
      std::vector<Tensor>{filled({n}, 1e-30f), filled({n}, 1e-40f), filled({64, 64}, 1e-20f), filled({64, 64}, 1e-20f)});
  set_num_threads(0);
  return out;
}

}  // namespace

#if defined(__x86_64__) || defined(__i386__)
TEST_CASE("the test binary's main thread flushes subnormals") { CHECK(flushes_subnormals()); }

TEST_CASE("pool workers flush subnormals even when a thread that does not starts them") {
  std::thread([] {
    _mm_setcsr(_mm_getcsr() & ~0x8040u);  // neither FTZ nor DAZ on this thread
    set_num_threads(1);
    set_num_threads(2);  // the workers start here
  }).join();
  std::atomic<int> off{0}, on_workers{0};
  const auto main_thread = std::this_thread::get_id();
  parallel_for(16, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // so the worker takes some
    off += !flushes_subnormals();
    on_workers += std::this_thread::get_id() != main_thread;
  });
  CHECK(off == 0);
  CHECK(on_workers > 0);
  set_num_threads(0);
}

TEST_CASE("elementwise ops and dots give zero where a result or input is subnormal, on any thread count") {
  for (int threads : {1, 2}) {
    std::vector<Tensor> out = run_graph(threads);
    for (float v : out[0].span<float>()) REQUIRE(v == 0.0f);  // 1e-30 * 1e-10 = 1e-40: flushed
    for (float v : out[1].span<float>()) REQUIRE(v == 0.0f);  // 1e-40 reads as 0
    for (float v : out[2].span<float>()) REQUIRE(v == 0.0f);  // 64 products of 1e-40
  }
}
#endif
