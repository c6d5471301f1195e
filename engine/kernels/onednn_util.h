// Shared by the oneDNN kernels (kernels/onednn_matmul.cpp, kernels/onednn_conv.cpp): one CPU
// engine, primitives that run single-threaded on the caller's threads with that thread's own
// scratchpad and memory objects, probe data for the self-check of each new primitive.
#pragma once
#ifdef TPU_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/once_cache.h"

namespace tpu::onednn {

using dnnl::memory;

// Never destroyed: cached primitives and the threads' streams refer to it until the very end.
dnnl::engine& cpu_engine();
// oneDNN's own threads would come on top of ours: every thread that makes or runs a primitive
// calls this first (primitives keep the thread count they see when made).
void run_single_threaded();
// Attributes of every primitive: the scratchpad is passed in (the running thread's own), so no
// two threads ever share one whatever the library's build options; and f32 arithmetic is f32,
// whatever default the process set (ONEDNN_DEFAULT_FPMATH_MODE=BF16 in the environment lets
// newer oneDNN releases compute f32 products from bf16-rounded operands, which the self-check's
// probe values, exact in bf16, would not see).
dnnl::primitive_attr primitive_attributes();

// A primitive and the descriptors of its arguments.
struct Call {
  dnnl::primitive prim;
  std::vector<std::pair<int, memory::desc>> args;  // in the order run() takes their data
  memory::desc scratch;
};
// Runs c on this thread over `data` (one pointer per argument) and waits for it. The thread's
// memory objects for c are made once and re-pointed: a steady-state step allocates nothing.
void run(const Call& c, std::initializer_list<const void*> data);

// Deterministic probe values in [-1, 1), exact in bf16. Inline: a check fills whole operands
// with them (a pointwise filter gradient's, millions of values), a call each was a third of it.
inline float probe_value(uint32_t i) {
  uint32_t x = i * 2654435761u + 12345u;
  x ^= x >> 15;
  return float(int(x % 255u) - 127) / 128.0f;
}

// For onednn_primitives_created / onednn_primitives_rejected (kernels/onednn.h).
void count_primitive(bool rejected);

}  // namespace tpu::onednn

#endif
