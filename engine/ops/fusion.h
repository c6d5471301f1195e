// Running fusion nodes outside the op table: several of one size in lock-step
// (runtime/lockstep.h).
#pragma once
#include <span>

#include "core/tensor.h"
#include "ir/graph.h"

namespace tpu {

struct FusionCall {
  const Node* node;
  std::span<const Tensor* const> in;
  Tensor* out;
};
// Every call's result, all of one element count: each parallel task evaluates its range of
// blocks for the calls in order. One call is the fusion kernel itself.
void run_fusions_in_lockstep(std::span<const FusionCall> calls);

}  // namespace tpu
