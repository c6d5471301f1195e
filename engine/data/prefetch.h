// BatchPrefetcher: gathers the next batches of a data set on a background thread, so the copy
// of a shuffled batch (or the decoding of an image folder's files) overlaps the training step
// (tpu.data's prefetch(n)).
//
//   BatchPrefetcher p({images, labels}, 2);   // hold at most 2 gathered batches
//   p.push({7, 3, 9});                        // rows to gather (0-based), in order
//   p.push({1, 0, 4});
//   std::optional<std::vector<Tensor>> b = p.pop();   // {u8[3,28,28], u8[3]}: rows 7, 3, 9
//
// push never blocks: requests are queued and the thread gathers them in order while fewer than
// `depth` results wait. A request may carry a `then` function, which the thread applies to the
// gathered batch (tpu.data runs a data set's compiled maps there, off the caller's step). pop
// blocks until the oldest request is ready; it returns nullopt when nothing is pending, and
// rethrows what gather or `then` threw for that request, in order: the batches before a failed
// one are returned first. The thread only reads the source tensors (shared buffers, never
// written) or runs the given gather and `then` functions, which must not touch the caller's
// state, and never calls back into the caller; the destructor stops and joins it.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/tensor.h"

namespace tpu {

class BatchPrefetcher {
 public:
  struct Stats {
    int64_t batches = 0;    // popped
    int64_t ready = 0;      // of those, already gathered when pop was called
    double gather_ms = 0;   // time the thread spent gathering
    double then_ms = 0;     // time the thread spent in the requests' `then` functions
    double wait_ms = 0;     // time pop spent waiting for the thread
  };

  // Makes the batch of one index list.
  using Gather = std::function<std::vector<Tensor>(const std::vector<int64_t>& indices)>;
  // What becomes of a gathered batch before pop returns it (none: the batch as gathered).
  using Then = std::function<std::vector<Tensor>(std::vector<Tensor> batch)>;

  // The gather of rows of in-memory tensors (one result per tensor).
  static Gather rows_of(std::vector<Tensor> sources);

  BatchPrefetcher(std::vector<Tensor> sources, size_t depth) : BatchPrefetcher(rows_of(std::move(sources)), depth) {}
  BatchPrefetcher(Gather gather, size_t depth);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  void push(std::vector<int64_t> indices, Then then = nullptr);
  std::optional<std::vector<Tensor>> pop();
  size_t pending() const;  // pushed and not yet popped
  Stats stats() const;

 private:
  struct Request {
    std::vector<int64_t> indices;
    Then then;
  };
  struct Result {  // a request's batch, or what its gather or `then` threw
    std::vector<Tensor> batch;
    std::exception_ptr error;
  };
  void run();
  std::vector<Tensor> prepare(const Request& r);  // gather, then `then`; times both

  const Gather gather_;
  const size_t depth_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::deque<Request> requests_;
  std::deque<Result> ready_;  // in request order
  bool failed_ = false;       // a result holds an error: the thread takes no more requests
  size_t pending_ = 0;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;  // started in the constructor's body, once every member is ready
};

}  // namespace tpu
