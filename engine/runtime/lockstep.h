// Lock-step fusions: elementwise fusions of one shape that run back to back in the schedule are
// evaluated together, range by range (each parallel task runs its range of blocks for every
// one of them in turn), so a fusion reading an earlier one's result, or the same operand,
// finds that range still in cache. Adam's three updates per weight (m, v, then the weight
// from both) read 7 weight-sized tensors this way instead of 10 from memory.
//
// A fusion and the reductions after it over operands of its shape, along the same dims, run as
// one too, tile by tile (ops/fusion.h run_with_reductions): those that read its result or its
// operands (a relu's gradient, then its sum for the bias gradient and a BatchNorm's two backward
// sums) reduce each tile while it is in cache, where they read it from memory once each. A run
// whose tiles would cut what a member makes in blocks goes one member after the other.
//
// A conv and the fusions after it that read its result element by element run as one too
// (ops/fusion.h run_after_conv): a bias and an activation are applied to each chunk of the conv's
// result while it is in cache, as the chunk's primitive made it (oneDNN's post-ops would do the
// same inside the primitive, but only for the few forms they know), and a max pool of that
// reads the chunk's images there too.
//
// A max pool's gradient (select_and_scatter), the reductions after it over operands of its
// shape and a filter gradient of its result run as one too (ops/fusion.h run_after_scatter):
// each tile of a bias gradient's sum is taken as soon as the images it spans are scattered, and
// each chunk's partial filter gradient right after the chunk, while they are in cache.
//
// The scheduler first moves a fusion whose readers are all such members to just before the
// first of them (so m and v land next to the weight update), then cuts runs. Results are
// bitwise those of running the members one after the other: every element is computed by the
// same block evaluation either way, and every reduction takes the same tiles.
#pragma once
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "ir/graph.h"

namespace tpu {

// Members smaller than this gain nothing: their operands stay in cache anyway.
constexpr int64_t kLockStepMinElements = int64_t(1) << 16;

// Reader r reads every operand that is x element by element: r is a fusion of x's shape (of
// at least kLockStepMinElements), or a tiled reduction of an operand of x's shape, and its body
// (if any) reads x in step (broadcasts it nowhere). Such a fusion may also write over x.
bool reads_in_step(const Graph& g, const Node& r, NodeId x);

// `order` with each fusion whose readers are all lock-step candidates reading it in step, of
// its slot (slot[n]: the schedule class of n; readers of other classes stay apart), moved to just
// before its first reader.
std::vector<NodeId> sink_into_readers(const Graph& g, std::span<const NodeId> order, std::span<const int32_t> slot);

// `order` with a filter gradient of a max pool's gradient (a select_and_scatter followed by
// tiled reductions of its result) moved to just after those reductions, where it joins their
// run (an input gradient between them reads the scatter's result too, conv2's in the CNN),
// when its other operand is made before there.
std::vector<NodeId> pull_filter_grads(const Graph& g, std::span<const NodeId> order, std::span<const int32_t> slot);

// runs[k] > 0 where a run of that many lock-step members starts at order[k], else 0: fusions of
// one shape, at most one fusion then reductions over the same dims of operands of its shape, a
// conv then fusions of its result's shape and pools of those, or a select_and_scatter then such
// reductions and at most one filter gradient of its result.
std::vector<int32_t> lockstep_runs(const Graph& g, std::span<const NodeId> order, std::span<const int32_t> slot);

// Where a value lives: a space (an arena, an argument's buffer, a buffer of its own) and a
// byte range in it.
struct BufferRange {
  int64_t space;
  size_t begin, end;
};
// True when `members` (a run) may run in lock-step: wherever a member's result overlaps a
// buffer another member reads or writes, it is that same buffer, read element by element (by
// the member writing over it, where an earlier member wrote it).
bool lockstep_safe(const Graph& g, std::span<const NodeId> members, const std::function<BufferRange(NodeId)>& where);

}  // namespace tpu
