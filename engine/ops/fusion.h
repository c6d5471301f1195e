// Running fusion nodes outside the op table: several of one size in lock-step, or with the
// reductions that read them (runtime/lockstep.h).
#pragma once
#include <span>

#include "core/tensor.h"
#include "ir/graph.h"

namespace tpu {

struct LockstepCall {
  const Node* node;
  std::span<const Tensor* const> in;
  Tensor* out;
};
// Every call's result, all of one element count: each parallel task evaluates its range of
// blocks for the calls in order. One call is the fusion kernel itself.
void run_fusions_in_lockstep(std::span<const LockstepCall> calls);

// A fusion (or none) then reductions (reduce, reduce_fusion) over the same dims of operands of
// its shape, tile by tile (ops/reduce.h reduce_together): each tile of the fusion's result is
// made, then reduced while in cache. The fusion's result and each reduction's have the bits
// each has alone; where a tile would cut the fusion's blocks, they run one after the other.
void run_with_reductions(std::span<const LockstepCall> calls);

// A conv then fusions of its result's shape that read it, or each other, element by element,
// and pools of those: each chunk of the conv's result (ops/conv.h conv_in_chunks) has the
// fusions' range of their results and the pools' images made at once, on the thread that made
// it, while it is in cache. Results are bitwise
// those of running the members one after the other, which is what they do where the conv's
// kernel does not make its result in chunks or a chunk would cut a fusion's block.
void run_after_conv(std::span<const LockstepCall> calls);

// A max pool's gradient (select_and_scatter, f32) then reductions of operands of its result's
// shape over the same dims (a bias gradient), and possibly a filter gradient of that result that
// its kernel computes over fixed chunks of images (ops/conv.h image_chunked_filter_grad): the
// scatter's images are made in chunks of consecutive images (the filter gradient's, when there
// is one), each chunk's partial filter gradient taken right after, and each tile of the
// reductions reduced by the task that made the last image it overlaps (ops/reduce.h
// reduce_as_made). Results are bitwise those of running the members one after the other, which
// they do where a reduction tile would cut a fusion chunk or block; a filter gradient that its
// kernel takes another way after all (no oneDNN primitive, an input exactly bf16) runs after
// the others.
void run_after_scatter(std::span<const LockstepCall> calls);

// The run a lock-step step holds: run_after_conv when it starts with a conv, run_after_scatter
// when with a select_and_scatter, run_with_reductions
// when it has a reduction, else run_fusions_in_lockstep.
void run_in_lockstep(std::span<const LockstepCall> calls);

}  // namespace tpu
