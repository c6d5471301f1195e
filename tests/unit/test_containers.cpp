// The node containers: SmallVec (inline up to N, heap beyond) and StableVector (elements
// never move); OnceCache (values made once per key, across threads).
#include <doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/once_cache.h"
#include "core/small_vec.h"
#include "core/stable_vector.h"

using namespace tpu;

TEST_CASE("SmallVec behaves like a vector across the inline/heap boundary") {
  SmallVec<int64_t, 2> v{1, 2};
  CHECK(v.capacity() == 2);
  v.push_back(v[0]);  // an element of itself while it spills to the heap
  CHECK(v == SmallVec<int64_t, 2>{1, 2, 1});
  CHECK(v.capacity() >= 3);
  v.insert(v.begin() + 1, v.begin(), v.end());
  CHECK(v == SmallVec<int64_t, 2>{1, 1, 2, 1, 2, 1});
  v.erase(v.begin(), v.begin() + 4);
  CHECK(v == SmallVec<int64_t, 2>{2, 1});
  CHECK_THROWS_AS(v.at(2), std::out_of_range);

  SmallVec<int64_t, 2> moved = std::move(v);
  CHECK(v.empty());
  CHECK(moved.size() == 2);
  SmallVec<int64_t, 2> copy = moved;
  copy.resize(5, 7);
  CHECK(copy == SmallVec<int64_t, 2>{2, 1, 7, 7, 7});
  CHECK(moved < copy);
  CHECK(SmallVec<int64_t, 2>(std::vector<int64_t>{4, 5, 6}) == SmallVec<int64_t, 2>{4, 5, 6});
}

TEST_CASE("StableVector keeps references valid while it grows") {
  StableVector<std::string> v;
  v.push_back("first");
  const std::string* first = &v[0];
  for (int i = 1; i < 1000; ++i) v.push_back(std::to_string(i));
  CHECK(first == &v[0]);
  CHECK(v.size() == 1000);
  CHECK(v[999] == "999");
  CHECK(v[8] == "8");  // the first element of the second chunk
  v.truncate(10);
  CHECK(v.back() == "9");
  StableVector<std::string> copy = v;
  int seen = 0;
  for (const std::string& s : copy) seen += s.empty() ? 0 : 1;
  CHECK(seen == 10);
  StableVector<std::string> moved = std::move(copy);
  CHECK(copy.empty());
  CHECK(moved[9] == "9");
  // Chunks past the last element are freed; appending makes them again.
  for (int i = 10; i < 600; ++i) moved.push_back(std::to_string(i));
  moved.truncate(20);
  moved.release_unused();
  CHECK(moved.size() == 20);
  CHECK(moved[19] == "19");
  for (int i = 20; i < 700; ++i) moved.push_back(std::to_string(i));
  CHECK(moved[699] == "699");
  moved.truncate(0);
  moved.release_unused();
  moved.push_back("again");
  CHECK(moved[0] == "again");
}

// Two keys are made at the same time: the first key's make waits until the second key's has
// started (under one lock for the whole cache it would wait forever; the test gives up after
// 10 s). One key is made once however many threads ask, and a make that throws is made again.
TEST_CASE("OnceCache makes each key once, and other keys meanwhile") {
  OnceCache<int, std::string> cache;
  std::atomic<int> makes{0};
  std::promise<void> second_started;
  std::shared_future<void> started = second_started.get_future().share();
  auto make = [&](const int& key) {
    ++makes;
    if (key == 1) {
      if (started.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
        throw std::runtime_error("serialized");
    } else {
      second_started.set_value();
    }
    return std::make_shared<const std::string>(std::to_string(key));
  };
  auto first = std::async(std::launch::async, [&] { return *cache.get(1, make); });
  while (makes.load() == 0) std::this_thread::yield();  // key 1's make has begun
  CHECK(*cache.get(2, make) == "2");
  CHECK(first.get() == "1");

  std::vector<std::future<std::string>> askers;
  for (int t = 0; t < 4; ++t) askers.push_back(std::async(std::launch::async, [&] { return *cache.get(1, make); }));
  for (auto& a : askers) CHECK(a.get() == "1");
  CHECK(makes.load() == 2);

  int failures = 0;
  auto flaky = [&](const int&) {
    if (failures++ == 0) throw std::runtime_error("first make fails");
    return std::make_shared<const std::string>("made");
  };
  CHECK_THROWS_AS(cache.get(3, flaky), std::runtime_error);
  CHECK(*cache.get(3, flaky) == "made");
}
