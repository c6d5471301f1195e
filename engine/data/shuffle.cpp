#include "data/shuffle.h"

#include <algorithm>

namespace tpu {

namespace {

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

IndexStream::IndexStream(int64_t seed, int64_t epoch)
    : state_(mix(mix(uint64_t(seed)) ^ (uint64_t(epoch) * 0xD1B54A32D192ED03ull))) {}

int64_t IndexStream::below(int64_t n) {
  state_ += 0x9E3779B97F4A7C15ull;
  return int64_t((mix(state_) >> 11) % uint64_t(n));
}

std::vector<int64_t> buffer_shuffle(int64_t first, int64_t count, int64_t buffer, IndexStream& s) {
  std::vector<int64_t> order;
  order.reserve(size_t(std::max<int64_t>(count, 0)));
  std::vector<int64_t> held;
  const int64_t filled = std::clamp<int64_t>(buffer, 0, std::max<int64_t>(count, 0));
  for (int64_t i = 0; i < filled; ++i) held.push_back(first + i);
  int64_t next = filled;  // the next incoming item, as an offset from first
  while (!held.empty()) {
    const size_t j = size_t(s.below(int64_t(held.size())));
    order.push_back(held[j]);
    if (next < count) {
      held[j] = first + next++;
    } else {
      held[j] = held.back();
      held.pop_back();
    }
  }
  return order;
}

}  // namespace tpu
