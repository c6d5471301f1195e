// A check shared by the kernel tests: results that must not depend on the host thread count.
#pragma once
#include <doctest.h>

#include <cstring>
#include <vector>

#include "kernels/onednn.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"

namespace tpu {

// Runs exe on 1 and then on 2 threads (the default count afterwards), checks that the second
// run made no oneDNN primitive (they are cached: none in a steady step) and that the results
// are bitwise the same; returns the 1-thread results.
inline std::vector<Tensor> run_on_1_and_2_threads(Executable& exe, const std::vector<Tensor>& args) {
  set_num_threads(1);
  std::vector<Tensor> one = exe.run(args);
  const size_t primitives = onednn_primitives_created();
  set_num_threads(2);
  std::vector<Tensor> two = exe.run(args);
  set_num_threads(0);
  CHECK(onednn_primitives_created() == primitives);
  for (size_t i = 0; i < one.size(); ++i) CHECK(std::memcmp(one[i].raw(), two[i].raw(), one[i].bytes()) == 0);
  return one;
}

}  // namespace tpu
