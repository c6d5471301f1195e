// Signals and compute threads: a handler installed with install_signal_handler runs on the
// alternate stack, so signals that land in the middle of a oneDNN f32 GEMM leave the heap
// intact; the pool's workers block asynchronous signals, so those land on the main thread only.
// A stop request (SIGINT, SIGTERM, SIGHUP) stops the compiler between its passes.
#include <doctest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "kernels/gemm.h"
#include "runtime/executable.h"
#include "runtime/signals.h"
#include "runtime/thread_pool.h"

using namespace tpu;

namespace {

std::atomic<int> signals_taken{0};
void count_signal(int) { signals_taken.fetch_add(1); }

// Products of halves and quarters: exact in f32, so every entry of C is 0.125 k.
bool gemm_is_exact(const GemmShape& s) {
  std::vector<float> a(size_t(s.m * s.k), 0.5f), b(size_t(s.k * s.n), 0.25f), c(size_t(s.m * s.n));
  if (!gemm_f32_onednn(s, a.data(), b.data(), c.data())) return true;  // no oneDNN in this build
  for (float x : c)
    if (x != 0.125f * float(s.k)) return false;
  return true;
}

}  // namespace

TEST_CASE("signals arriving during f32 GEMMs leave the heap intact") {
  const struct sigaction previous = install_signal_handler(SIGUSR1, count_signal);
  signals_taken = 0;
  const pthread_t main_thread = pthread_self();
  std::atomic<bool> done{false};
  std::thread sender([&] {
    while (!done) {
      pthread_kill(main_thread, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const int64_t shapes[][3] = {{32, 64, 512}, {32, 512, 512}, {32, 512, 4}, {256, 784, 512}, {512, 32, 64}};
  bool exact = true;
  for (int i = 0; i < 1500 && exact; ++i) {
    const auto& mkn = shapes[i % 5];
    exact = gemm_is_exact({.m = mkn[0], .k = mkn[1], .n = mkn[2], .ta = i % 3 == 1, .tb = i % 7 == 2});
    // Heap traffic between the products: a heap the signal frames overwrote fails here.
    std::vector<void*> blocks;
    for (size_t j = 0; j < 32; ++j) blocks.push_back(std::memset(std::malloc(64 + 37 * j), 1, 64 + 37 * j));
    for (void* p : blocks) std::free(p);
  }
  done = true;
  sender.join();
  restore_signal_handler(SIGUSR1, previous);
  CHECK(exact);
  CHECK(signals_taken > 100);
}

TEST_CASE("the pool's workers block asynchronous signals") {
  set_num_threads(2);
  const pthread_t main_thread = pthread_self();
  std::atomic<int> started{0}, workers_seen{0}, workers_blocking{0};
  parallel_for(2, [&](int64_t) {
    // Both tasks wait for each other, so one of them runs on the worker.
    started.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (started < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (pthread_equal(pthread_self(), main_thread)) return;
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    workers_seen.fetch_add(1);
    if (sigismember(&mask, SIGINT) && sigismember(&mask, SIGTERM) && sigismember(&mask, SIGPROF))
      workers_blocking.fetch_add(1);
  });
  set_num_threads(0);
  CHECK(workers_seen == 1);
  CHECK(workers_blocking == 1);
}

TEST_CASE("a stop request stops compiling, naming the signal") {
  const std::string text = "graph g\n%0 = parameter f32[2] dims=[2]\n%1 = exp f32[2] %0\nreturn %1\n";
  CHECK_NOTHROW(Executable::compile(parse_graph(text), {}));
  request_stop(SIGTERM);
  request_stop(SIGINT);  // the first signal stays
  CHECK(stop_signal() == SIGTERM);
  CHECK_THROWS_WITH_AS(Executable::compile(parse_graph(text), {}), "interrupted (SIGTERM) while compiling", Error);
  clear_stop_request();
  request_stop(SIGINT);
  CHECK_THROWS_WITH_AS(poll_stop("tracing"), "interrupted (SIGINT) while tracing", Error);
  clear_stop_request();
  CHECK_NOTHROW(Executable::compile(parse_graph(text), {}));
}
