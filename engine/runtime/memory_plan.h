// Memory planning: every intermediate gets an offset in one arena, from buffer liveness over
// the schedule, so a step allocates nothing. Sizes are tracked twice: host bytes (what the
// arena holds) and TPU bytes under the tile-padding model (the two minor dimensions rounded up
// to 8 and 128), which is what an HBM capacity check must count.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "ir/graph.h"

namespace tpu {

// Bytes a value of this type takes in TPU HBM: minor dims padded to (8, 128).
size_t tpu_padded_bytes(DType t, const Shape& s);

struct Buffer {
  NodeId node;         // the value that owns the storage
  size_t offset = 0;   // in the arena
  size_t bytes = 0;    // host bytes, rounded up to 64
  size_t tpu_bytes = 0;
  int32_t first = 0;   // schedule position that writes it
  int32_t last = 0;    // last schedule position that reads it
  // Its storage went on to a later node that writes over it (plan_memory's `writes_over`):
  // the two records then share offset and bytes while both live. No other two live buffers
  // overlap.
  bool passed_on = false;
};

struct MemoryPlan {
  std::vector<Buffer> buffers;
  size_t arena_bytes = 0;       // host arena size
  size_t peak_tpu_bytes = 0;    // largest sum of live tile-padded intermediates
};

// Whether node n may write its result over operand x's storage: it reads each element of x
// before it writes that element of its result, or adds into x (a scatter_add's base), and it
// reads x last (no node after it reads x; lock-step runs keep x's storage to their end all the
// same).
using WritesOver = std::function<bool(NodeId n, NodeId x)>;

// `schedule` lists the nodes in execution order; `planned[n]` says whether node n needs arena
// storage; `last_use[n]` is the schedule position of n's last reader. A node that
// `writes_over` an operand of its size whose storage it outlives takes that storage, as a TPU
// fusion writes over its operand's buffer: no second buffer live, half the memory traffic.
MemoryPlan plan_memory(const Graph& g, const std::vector<NodeId>& schedule, const std::vector<bool>& planned,
                       const std::vector<int32_t>& last_use, const WritesOver& writes_over = {});

}  // namespace tpu
