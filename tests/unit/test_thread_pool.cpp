// The host thread pool: every index of every region runs exactly once, back-to-back regions
// never mix, nested regions run serially, and errors reach the caller.
#include <doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"
#include "sched_policy.h"

using namespace tpu;

TEST_CASE("back-to-back small regions run each index once and never hang") {
  set_num_threads(2);
  std::vector<std::atomic<int>> hits(4);
  for (int region = 0; region < 20000; ++region) {
    const int64_t count = 2 + region % 3;
    for (auto& h : hits) h = 0;
    parallel_for(count, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
    for (int64_t i = 0; i < 4; ++i) REQUIRE(hits[size_t(i)] == (i < count ? 1 : 0));
  }
  set_num_threads(0);
}

TEST_CASE("a nested region runs serially inside its task; errors reach the caller") {
  std::atomic<int> total{0};
  parallel_for(4, [&](int64_t) { parallel_for(3, [&](int64_t) { total.fetch_add(1); }); });
  CHECK(total == 12);
  CHECK_THROWS_AS(parallel_for(8, [](int64_t i) { if (i == 5) throw std::runtime_error("task 5"); }), std::runtime_error);
  parallel_for(8, [&](int64_t) { total.fetch_add(1); });  // the pool still works
  CHECK(total == 20);
}

TEST_CASE("under a SerialScope, a region runs on the calling thread, in order") {
  set_num_threads(2);
  std::vector<int64_t> order;
  const std::thread::id self = std::this_thread::get_id();
  bool elsewhere = false;
  {
    SerialScope serial;
    parallel_for(64, [&](int64_t i) {
      order.push_back(i);  // no lock: one thread
      if (std::this_thread::get_id() != self) elsewhere = true;
    });
  }
  CHECK(!elsewhere);
  std::vector<int64_t> want(64);
  for (int64_t i = 0; i < 64; ++i) want[size_t(i)] = i;
  CHECK(order == want);
  std::atomic<int> after{0};
  parallel_for(8, [&](int64_t) { after.fetch_add(1); });  // the scope ended: the pool again
  CHECK(after == 8);
  set_num_threads(0);
}

#ifdef SCHED_BATCH
TEST_CASE("workers started by a SCHED_BATCH thread run at the ordinary policy") {
  if (!batch_policy_allowed()) {
    MESSAGE("skipped: this host refuses SCHED_BATCH");
    return;
  }
  // The pool's workers are started by a SCHED_BATCH thread, as when a prefetcher's gather is
  // the first to run kernels.
  std::thread([] {
    sched_param none{};
    sched_setscheduler(0, SCHED_BATCH, &none);
    set_num_threads(3);
  }).join();
  const std::thread::id self = std::this_thread::get_id();
  std::mutex m;
  std::vector<int> policies;  // of the tasks run by workers
  parallel_for(64, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // lets the workers take some
    if (std::this_thread::get_id() == self) return;
    std::lock_guard g(m);
    policies.push_back(sched_getscheduler(0));
  });
  set_num_threads(0);
  REQUIRE(!policies.empty());
  CHECK(std::count(policies.begin(), policies.end(), SCHED_OTHER) == std::ssize(policies));
}
#endif
