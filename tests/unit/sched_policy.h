// Scheduling-policy helpers shared by the tests of the prefetcher and the thread pool.
#pragma once
#include <sched.h>

#include <thread>

#ifdef SCHED_BATCH
// Whether this host lets a thread take SCHED_BATCH (a sandbox may refuse it), tried on a
// scratch thread so that the caller keeps its policy.
inline bool batch_policy_allowed() {
  bool allowed = false;
  std::thread([&] {
    sched_param none{};
    allowed = sched_setscheduler(0, SCHED_BATCH, &none) == 0;
  }).join();
  return allowed;
}
#endif
