#include "data/prefetch.h"

#include <sched.h>

#include <chrono>

#include "data/batching.h"
#include "runtime/signals.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The thread is woken by a push, which comes right before the caller's training step; as an
// ordinary thread it preempted the caller there (the scheduler puts a woken thread on its
// waker's core), delaying the step by its gather and maps while the step's other workers
// waited. SCHED_BATCH keeps its share of the CPU but does not preempt on waking: it runs when a
// core frees up (a pool worker going to sleep, the caller waiting). The MLP of
// bench/tputrain_models.lua fed by a pipeline: 68.1k -> 69.8k samples/s (in memory: 73.9k).
// A refusal leaves the thread as it was. Threads inherit the policy, so the thread must not
// be the one that starts the shared pool (see the constructor).
void yield_to_waker() {
#ifdef SCHED_BATCH
  sched_param none{};
  sched_setscheduler(0, SCHED_BATCH, &none);
#endif
}
}  // namespace

BatchPrefetcher::Gather BatchPrefetcher::rows_of(std::vector<Tensor> sources) {
  return [sources = std::move(sources)](const std::vector<int64_t>& indices) {
    std::vector<Tensor> batch;
    batch.reserve(sources.size());
    for (const Tensor& t : sources) batch.push_back(gather_rows(t, indices));
    return batch;
  };
}

BatchPrefetcher::BatchPrefetcher(Gather gather, size_t depth)
    : gather_(std::move(gather)), depth_(depth < 1 ? 1 : depth) {
  // The pool is started by the first thread that needs it and its workers inherit that
  // thread's policy: started from here (a gather or a map running kernels first), they would
  // all stay SCHED_BATCH. Starting it now, from the caller, keeps them ordinary.
  num_threads();
  thread_ = std::thread([this] {
    block_async_signals();
    yield_to_waker();
    HostAllocationScope host;  // batches of a data set, on the host
    run();
  });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void BatchPrefetcher::push(std::vector<int64_t> indices, Then then) {
  {
    std::lock_guard lock(mu_);
    requests_.push_back({std::move(indices), std::move(then)});
    ++pending_;
  }
  work_cv_.notify_one();
}

std::optional<std::vector<Tensor>> BatchPrefetcher::pop() {
  std::unique_lock lock(mu_);
  if (pending_ == 0) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  const bool was_ready = !ready_.empty();
  ready_cv_.wait(lock, [this] { return !ready_.empty(); });
  stats_.wait_ms += ms_since(t0);
  // A failed request's error stays at the front: the batches before it were popped first, and
  // every later pop rethrows it (the thread stopped there).
  if (ready_.front().error) std::rethrow_exception(ready_.front().error);
  std::vector<Tensor> batch = std::move(ready_.front().batch);
  ready_.pop_front();
  --pending_;
  ++stats_.batches;
  stats_.ready += was_ready ? 1 : 0;
  // Room for the next batch, but the thread only has work once one is pushed: waking it now
  // (the queue drained, the usual case) would switch to it and back for nothing.
  const bool has_work = !requests_.empty();
  lock.unlock();
  if (has_work) work_cv_.notify_one();
  return batch;
}

size_t BatchPrefetcher::pending() const {
  std::lock_guard lock(mu_);
  return pending_;
}

BatchPrefetcher::Stats BatchPrefetcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::vector<Tensor> BatchPrefetcher::prepare(const Request& r) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> batch = gather_(r.indices);
  const double gather_ms = ms_since(t0);
  double then_ms = 0;
  if (r.then) {
    t0 = std::chrono::steady_clock::now();
    batch = r.then(std::move(batch));
    then_ms = ms_since(t0);
  }
  std::lock_guard lock(mu_);
  stats_.gather_ms += gather_ms;
  stats_.then_ms += then_ms;
  return batch;
}

void BatchPrefetcher::run() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stop_ || (!requests_.empty() && ready_.size() < depth_ && !failed_); });
    if (stop_) return;
    Request request = std::move(requests_.front());
    requests_.pop_front();
    lock.unlock();
    Result result;
    try {
      result.batch = prepare(request);
    } catch (...) {
      result.error = std::current_exception();
    }
    lock.lock();
    failed_ = failed_ || result.error;
    ready_.push_back(std::move(result));
    ready_cv_.notify_all();
  }
}

}  // namespace tpu
