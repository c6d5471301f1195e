// The data pipeline's randomness: one stream of uniform integers per (seed, epoch), the same
// on every machine and run, and the buffer shuffle tpu.data's shuffle(n) makes with it.
//
//   IndexStream s(seed, epoch);
//   int64_t j = s.below(10);                                  // uniform in [0, 10)
//   std::vector<int64_t> order = buffer_shuffle(0, 60000, 60000, s);   // a permutation
//
// The stream is splitmix64 (a 64-bit counter through a mixing function); below(n) takes the top
// 53 bits modulo n. tpu.data.random wraps it for Lua (its stream of a seed is this one).
#pragma once
#include <cstdint>
#include <vector>

namespace tpu {

class IndexStream {
 public:
  IndexStream(int64_t seed, int64_t epoch);
  int64_t below(int64_t n);  // 1 <= n < 2^53

 private:
  uint64_t state_;
};

// The order in which shuffle(buffer) passes on the items first, first + 1, ...,
// first + count - 1: a buffer of the first `buffer` items; each step takes the item at
// below(held) and puts the next incoming item in its place (once none is left, the last held
// item). A buffer of at least `count` gives a uniform permutation.
std::vector<int64_t> buffer_shuffle(int64_t first, int64_t count, int64_t buffer, IndexStream& s);

}  // namespace tpu
