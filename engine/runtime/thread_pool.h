// A fixed pool of worker threads for splitting kernels into tasks. Work is always cut into
// the same tasks whatever the thread count, so results never depend on it.
#pragma once
#include <cstdint>
#include <functional>

#include "core/scoped_flag.h"

namespace tpu {

void set_num_threads(int n);  // 0 = hardware concurrency
int num_threads();
// Runs task(i) for i in [0, count), spread over the pool; returns when all are done.
// Exceptions from a task are rethrown here (the first one).
void parallel_for(int64_t count, const std::function<void(int64_t)>& task);

// While one lives, parallel_for on this thread runs its tasks here, one after another: a
// background thread's small work (a data set's map beside the training step) then neither
// waits for the pool's current region nor holds up the step's next one. Same tasks, same
// results.
class SerialScope : ScopedFlag {
 public:
  SerialScope();
};

}  // namespace tpu
