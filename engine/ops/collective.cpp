// all_reduce: the sum (or mean) of a value over the replicas of a replicated computation, the
// same on every replica. The executor combines the replicas in a fixed order (see
// runtime/executable.cpp); with one replica the kernel below is the whole story.
#include <algorithm>
#include <cstring>

#include "ops/collective.h"
#include "ops/kernel_util.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

std::string shape_all_reduce(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  if (x.dtype != DType::f32 && x.dtype != DType::i32) return "all_reduce needs f32 or i32 values, got " + type_of(g, n.in[0]);
  if (n.attrs.axis < 0 || n.attrs.axis > 1) return "all_reduce: kind must be sum (0) or mean (1)";
  n.dtype = x.dtype;
  n.shape = x.shape;
  return "";
}

// One replica: the sum and the mean over replicas are the value itself.
void ref_all_reduce(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  std::memcpy(out.raw(), in[0]->raw(), out.bytes());
}

void grad_all_reduce(GradContext& c) {
  c.give(0, c.g.all_reduce(c.out_grad, c.n().mean()));
}

Cost cost_all_reduce(const Graph& g, const Node& n) { return movement_cost(g, n); }

}  // namespace

// Sums the replicas' values in replica order into `out`; a mean divides the (cross-process)
// sum by the number of replicas afterwards.
namespace {
// In chunks that stay in cache while every replica's part is added (one pass over memory),
// across the pool; each element is still summed in replica order.
template <class T>
void sum_typed(std::span<const Tensor* const> parts, Tensor& out) {
  constexpr int64_t kChunk = 4096;
  T* o = out.data<T>();
  const int64_t m = out.size();
  parallel_for((m + kChunk - 1) / kChunk, [&](int64_t c) {
    const int64_t i0 = c * kChunk, len = std::min(kChunk, m - i0);
    std::memcpy(o + i0, parts[0]->data<T>() + i0, size_t(len) * sizeof(T));
    for (size_t r = 1; r < parts.size(); ++r) {
      const T* p = parts[r]->data<T>() + i0;
      for (int64_t i = 0; i < len; ++i) o[i0 + i] = T(o[i0 + i] + p[i]);
    }
  });
}
template <class T>
void divide_typed(Tensor& out, int64_t count) {
  T* o = out.data<T>();
  for (int64_t i = 0, m = out.size(); i < m; ++i) o[i] = T(o[i] / T(count));
}
}  // namespace

void combine_replicas(std::span<const Tensor* const> parts, Tensor& out) {
  if (out.dtype() == DType::f32) sum_typed<float>(parts, out);
  else sum_typed<int32_t>(parts, out);
}

void divide_by_count(Tensor& out, int64_t count) {
  if (out.dtype() == DType::f32) divide_typed<float>(out, count);
  else divide_typed<int32_t>(out, count);
}

extern const OpInfo all_reduce_row = {Op::all_reduce, shape_all_reduce, ref_all_reduce, nullptr, grad_all_reduce,
                                      cost_all_reduce, kAcrossReplicas};

}  // namespace tpu
