#include "runtime/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"
#include "runtime/float_mode.h"
#include "runtime/signals.h"

namespace tpu {

namespace {

// Set while a thread runs a task: a parallel_for inside a task runs serially on that thread
// (replicas already fill the pool; nesting would oversubscribe or deadlock). SerialScope sets
// it too.
thread_local bool in_task = false;

// Regions come back to back in a step (tens of them, often well under a millisecond each), so
// waking a sleeping thread through the kernel for each one would cost more than some of them
// take: a worker that finished a region spins for a while on the generation counter before it
// sleeps, the caller wakes sleepers only when there are any, and it spins on the workers'
// completion before it sleeps itself.
constexpr auto kSpin = std::chrono::microseconds(100);

// Calls `done` until it returns true or kSpin has passed; returns its last answer.
template <class F>
bool spin_until(F done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// A thread inherits its creator's scheduling policy: a worker started by a SCHED_BATCH thread
// (a data set's prefetcher, or an embedding host's own batch thread) would run every later
// step's kernels at that policy. Workers set the ordinary one for themselves; a refusal leaves
// them as they were.
void use_normal_policy() {
#ifdef SCHED_BATCH
  if (sched_getscheduler(0) != SCHED_BATCH) return;  // leave a host's real-time choice alone
  sched_param none{};
  sched_setscheduler(0, SCHED_OTHER, &none);
#endif
}

// "8.00 GiB": the stacks of n threads, at the default stack size.
std::string stack_text(int n) {
  size_t stack = 8 << 20;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &stack);
    pthread_attr_destroy(&attr);
  }
  return format_bytes(double(stack) * n);
}

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return int(workers_.size()) + 1; }

  void resize(int n) {
    stop();
    stopping_ = false;
    try {
      for (int i = 1; i < n; ++i) workers_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
      // The host has no room for another thread (stacks, or its limit on threads): the pool
      // goes back to this thread alone and the caller learns why.
      const size_t started = workers_.size();
      stop();
      stopping_ = false;
      throw Error("out of host memory: " + std::to_string(n) + " threads need " + stack_text(n) +
                  " of stack (the host started " + std::to_string(started + 1) + ")");
    }
  }

  void run(int64_t count, const std::function<void(int64_t)>& task) {
    if (count <= 1 || workers_.empty() || in_task) {
      for (int64_t i = 0; i < count; ++i) task(i);
      return;
    }
    std::unique_lock lock(run_mutex_);  // one parallel region at a time
    bool wake = false;
    {
      std::lock_guard g(m_);
      task_ = &task;
      next_ = 0;
      count_ = count;
      pending_ = count;
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);
      wake = sleeping_ > 0;
    }
    if (wake) cv_.notify_all();
    drain();
    // Every worker must have left drain() too: one still inside could take an index of the
    // next region while it is being set up.
    auto finished = [&] { return pending_.load() == 0 && active_.load() == 0; };
    spin_until(finished);
    // Under the lock: a worker that joined after the spin saw none is waited for, and one that
    // comes later finds no task.
    std::unique_lock g(m_);
    done_cv_.wait(g, finished);
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void drain() {
    for (;;) {
      int64_t i = next_.fetch_add(1);
      if (i >= count_) return;
      try {
        in_task = true;
        (*task_)(i);
        in_task = false;
      } catch (...) {
        in_task = false;
        std::lock_guard g(m_);
        if (!error_) error_ = std::current_exception();
      }
      pending_.fetch_sub(1);
    }
  }

  void work() {
    block_async_signals();
    use_normal_policy();
    flush_subnormals();
    uint64_t seen = 0;
    for (;;) {
      spin_until([&] { return generation_.load(std::memory_order_acquire) != seen || stopping_.load(); });
      {
        std::unique_lock g(m_);
        if (generation_ == seen && !stopping_) {
          ++sleeping_;
          cv_.wait(g, [&] { return stopping_ || generation_ != seen; });
          --sleeping_;
        }
        if (stopping_) return;
        seen = generation_;
        if (!task_) continue;  // the region already ended
        ++active_;
      }
      drain();
      std::lock_guard g(m_);
      --active_;
      done_cv_.notify_all();
    }
  }

  void stop() {
    {
      std::lock_guard g(m_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex run_mutex_, m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* task_ = nullptr;  // guarded by m_
  std::atomic<int64_t> next_{0}, pending_{0};
  int64_t count_ = 0;
  std::atomic<int> active_{0};  // workers inside drain(); changed under m_
  int sleeping_ = 0;            // workers waiting on cv_; guarded by m_
  std::atomic<uint64_t> generation_{0};  // changed under m_
  std::atomic<bool> stopping_{false};    // changed under m_
  std::exception_ptr error_;
};

int default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

}  // namespace

void set_num_threads(int n) { pool().resize(n > 0 ? n : default_threads()); }
int num_threads() { return pool().size(); }
void parallel_for(int64_t count, const std::function<void(int64_t)>& task) { pool().run(count, task); }

SerialScope::SerialScope() : ScopedFlag(in_task) {}

}  // namespace tpu
