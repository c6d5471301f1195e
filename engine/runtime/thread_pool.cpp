#include "runtime/thread_pool.h"

#include "runtime/signals.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tpu {

namespace {

// Set while a thread runs a task: a parallel_for inside a task runs serially on that thread
// (replicas already fill the pool; nesting would oversubscribe or deadlock).
thread_local bool in_task = false;

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return int(workers_.size()) + 1; }

  void resize(int n) {
    stop();
    stopping_ = false;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { work(); });
  }

  void run(int64_t count, const std::function<void(int64_t)>& task) {
    if (count <= 1 || workers_.empty() || in_task) {
      for (int64_t i = 0; i < count; ++i) task(i);
      return;
    }
    std::unique_lock lock(run_mutex_);  // one parallel region at a time
    {
      std::lock_guard g(m_);
      task_ = &task;
      next_ = 0;
      count_ = count;
      pending_ = count;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    drain();
    // Every worker must have left drain() too: one still inside could take an index of the
    // next region while it is being set up.
    std::unique_lock g(m_);
    done_cv_.wait(g, [&] { return pending_ == 0 && active_ == 0; });
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
      if (pending_.fetch_sub(1) == 1) {
        std::lock_guard g(m_);
        done_cv_.notify_all();
      }
    }
  }

  void work() {
    block_async_signals();
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock g(m_);
        cv_.wait(g, [&] { return stopping_ || (generation_ != seen && task_); });
        if (stopping_) return;
        seen = generation_;
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
  const std::function<void(int64_t)>* task_ = nullptr;
  std::atomic<int64_t> next_{0}, pending_{0};
  int64_t count_ = 0;
  int active_ = 0;  // workers inside drain(); guarded by m_
  uint64_t generation_ = 0;
  bool stopping_ = false;
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

}  // namespace tpu
