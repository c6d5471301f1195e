// Batch building: gather_rows, pad_stack, and the BatchPrefetcher's background gather.
#include <doctest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/batching.h"
#include "data/prefetch.h"
#include "sched_policy.h"

using tpu::DType;
using tpu::Shape;
using tpu::Tensor;

namespace {

Tensor iota(DType dtype, Shape shape, int start = 0) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, double(start + i));
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(t.get(i));
  return v;
}

}  // namespace

TEST_CASE("gather_rows copies rows in the order of the indices") {
  Tensor t = iota(DType::i32, {4, 2});
  std::vector<int64_t> idx{3, 0, 3};
  Tensor g = tpu::gather_rows(t, idx);
  CHECK(g.shape() == Shape{3, 2});
  CHECK(values(g) == std::vector<double>{6, 7, 0, 1, 6, 7});
  Tensor u = tpu::gather_rows(iota(DType::u8, {5}), std::vector<int64_t>{4, 1});
  CHECK(u.dtype() == DType::u8);
  CHECK(values(u) == std::vector<double>{4, 1});
  CHECK(tpu::gather_rows(t, std::vector<int64_t>{}).shape() == Shape{0, 2});
  CHECK_THROWS_WITH_AS(tpu::gather_rows(t, std::vector<int64_t>{4}), "gather_rows: index 4 is out of range for 4 rows", tpu::Error);
  CHECK_THROWS_AS(tpu::gather_rows(t, std::vector<int64_t>{-1}), tpu::Error);
  CHECK_THROWS_AS(tpu::gather_rows(iota(DType::f32, {}), std::vector<int64_t>{0}), tpu::Error);
}

TEST_CASE("gather_rows of consecutive rows is a view of the tensor's buffer") {
  Tensor t = iota(DType::f32, {5, 3});
  Tensor g = tpu::gather_rows(t, std::vector<int64_t>{1, 2, 3});
  CHECK(g.shape() == Shape{3, 3});
  CHECK(values(g) == std::vector<double>{3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(g.raw() == t.raw() + 3 * sizeof(float));
  CHECK(t.buffer_holders() == 2);
  // Not consecutive, or running past the end: copied, or refused.
  CHECK(tpu::gather_rows(t, std::vector<int64_t>{1, 3}).raw() != t.raw() + 3 * sizeof(float));
  CHECK(tpu::gather_rows(t, std::vector<int64_t>{2, 1}).buffer_holders() == 1);
  CHECK_THROWS_WITH_AS(tpu::gather_rows(t, std::vector<int64_t>{4, 5}), "gather_rows: index 5 is out of range for 5 rows", tpu::Error);
  CHECK_THROWS_AS(tpu::gather_rows(t, std::vector<int64_t>{-1, 0}), tpu::Error);
}

TEST_CASE("pad_stack pads every item at the end of each dimension") {
  std::vector<Tensor> items{iota(DType::i32, {3}, 1), iota(DType::i32, {1}, 7), iota(DType::i32, {0})};
  Tensor p = tpu::pad_stack(items, {4}, -1);
  CHECK(p.shape() == Shape{3, 4});
  CHECK(values(p) == std::vector<double>{1, 2, 3, -1, 7, -1, -1, -1, -1, -1, -1, -1});
  std::vector<Tensor> mats{iota(DType::f32, {2, 2}), iota(DType::f32, {1, 3}, 10)};
  Tensor m = tpu::pad_stack(mats, {2, 3}, 0);
  CHECK(values(m) == std::vector<double>{0, 1, 0, 2, 3, 0, 10, 11, 12, 0, 0, 0});
  std::vector<Tensor> scalars{iota(DType::u8, {}, 5), iota(DType::u8, {}, 6)};
  CHECK(values(tpu::pad_stack(scalars, {}, 0)) == std::vector<double>{5, 6});
  std::vector<Tensor> flags{iota(DType::boolean, {1}, 1)};
  CHECK(values(tpu::pad_stack(flags, {3}, 1)) == std::vector<double>{1, 1, 1});
  std::vector<Tensor> halves{iota(DType::bf16, {1}, 2)};
  CHECK(values(tpu::pad_stack(halves, {2}, 0.5)) == std::vector<double>{2, 0.5});
}

TEST_CASE("pad_stack refuses items that do not fit") {
  std::vector<Tensor> long_item{iota(DType::i32, {5})};
  CHECK_THROWS_WITH_AS(tpu::pad_stack(long_item, {4}, 0), "pad_stack: item 0 is i32[5], larger than [4]", tpu::Error);
  std::vector<Tensor> mixed{iota(DType::i32, {2}), iota(DType::f32, {2})};
  CHECK_THROWS_WITH_AS(tpu::pad_stack(mixed, {2}, 0), "pad_stack: item 1 is f32[2], expected i32 of rank 1", tpu::Error);
  std::vector<Tensor> ranks{iota(DType::i32, {2, 1})};
  CHECK_THROWS_AS(tpu::pad_stack(ranks, {2}, 0), tpu::Error);
  CHECK_THROWS_AS(tpu::pad_stack({}, {2}, 0), tpu::Error);
}

TEST_CASE("BatchPrefetcher returns the gathers in the order pushed") {
  Tensor x = iota(DType::f32, {10, 3}), y = iota(DType::u8, {10});
  tpu::BatchPrefetcher p({x, y}, 2);
  CHECK(!p.pop().has_value());
  for (int b = 0; b < 5; ++b) p.push({9 - 2 * b, 8 - 2 * b});
  CHECK(p.pending() == 5);
  for (int b = 0; b < 5; ++b) {
    auto batch = p.pop();
    REQUIRE(batch.has_value());
    REQUIRE(batch->size() == 2);
    CHECK((*batch)[0].shape() == Shape{2, 3});
    CHECK(values((*batch)[1]) == std::vector<double>{double(9 - 2 * b), double(8 - 2 * b)});
    CHECK((*batch)[0].get(0) == 3.0 * (9 - 2 * b));
  }
  CHECK(!p.pop().has_value());
  CHECK(p.stats().batches == 5);
}

TEST_CASE("BatchPrefetcher gathers ahead while the caller works, up to its depth") {
  Tensor x = iota(DType::i32, {1000, 64});
  tpu::BatchPrefetcher p({x}, 3);
  std::vector<int64_t> rows(100);
  std::iota(rows.begin(), rows.end(), 0);
  for (int b = 0; b < 8; ++b) p.push(rows);
  for (int b = 0; b < 8; ++b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the "training step"
    CHECK(p.pop().has_value());
  }
  auto s = p.stats();
  CHECK(s.batches == 8);
  CHECK(s.ready >= 7);  // gathered during the previous step
  CHECK(s.gather_ms > 0);
}

#ifdef SCHED_BATCH
TEST_CASE("BatchPrefetcher's thread does not preempt the caller that wakes it (SCHED_BATCH)") {
  if (!batch_policy_allowed()) {
    MESSAGE("skipped: this host refuses SCHED_BATCH");
    return;
  }
  Tensor x = iota(DType::f32, {4, 3});
  tpu::BatchPrefetcher p({x}, 1);
  std::atomic<int> policy{-1};
  p.push({0}, [&](std::vector<Tensor> batch) {
    policy = sched_getscheduler(0);
    return batch;
  });
  REQUIRE(p.pop().has_value());
  CHECK(policy == SCHED_BATCH);
}
#endif

TEST_CASE("BatchPrefetcher applies a request's `then` on its thread; its error reaches pop") {
  Tensor x = iota(DType::f32, {10, 3});
  tpu::BatchPrefetcher p({x}, 2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  auto doubled = [&](std::vector<Tensor> batch) {
    if (std::this_thread::get_id() == caller) on_caller = true;
    Tensor out(DType::f32, batch[0].shape());
    for (int64_t i = 0; i < out.size(); ++i) out.set(i, 2 * batch[0].get(i));
    return std::vector<Tensor>{out, batch[0]};
  };
  p.push({4, 1}, doubled);
  p.push({2});
  p.push({0}, [](std::vector<Tensor>) -> std::vector<Tensor> { throw tpu::Error("map failed"); });
  auto first = p.pop();
  REQUIRE(first.has_value());
  REQUIRE(first->size() == 2);
  CHECK(values((*first)[0]) == std::vector<double>{24, 26, 28, 6, 8, 10});
  CHECK(values((*first)[1]) == std::vector<double>{12, 13, 14, 3, 4, 5});
  auto second = p.pop();  // no `then`: as gathered
  REQUIRE(second.has_value());
  CHECK(values((*second)[0]) == std::vector<double>{6, 7, 8});
  CHECK_THROWS_WITH_AS(p.pop(), "map failed", tpu::Error);
  CHECK(!on_caller);
}

TEST_CASE("BatchPrefetcher returns the batches before a failed request, then its error") {
  tpu::BatchPrefetcher p({iota(DType::i32, {3})}, 3);
  p.push({0});
  p.push({1});
  p.push({7});
  p.push({2});  // after the failure: never gathered
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // all three done before any pop
  CHECK(values((*p.pop())[0]) == std::vector<double>{0});
  CHECK(values((*p.pop())[0]) == std::vector<double>{1});
  CHECK_THROWS_WITH_AS(p.pop(), "gather_rows: index 7 is out of range for 3 rows", tpu::Error);
  CHECK_THROWS_WITH_AS(p.pop(), "gather_rows: index 7 is out of range for 3 rows", tpu::Error);
}

TEST_CASE("BatchPrefetcher reports a failed gather and stops cleanly when destroyed") {
  {
    tpu::BatchPrefetcher p({iota(DType::i32, {3})}, 1);
    p.push({0});
    p.push({7});
    CHECK(p.pop().has_value());
    CHECK_THROWS_WITH_AS(p.pop(), "gather_rows: index 7 is out of range for 3 rows", tpu::Error);
  }
  {
    tpu::BatchPrefetcher p({iota(DType::i32, {100, 10})}, 1);
    for (int b = 0; b < 50; ++b) p.push({1, 2, 3});  // destroyed with work pending
  }
}
