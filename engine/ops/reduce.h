// Reductions whose operand is made tile by tile rather than read from memory: a reduce_fusion
// (ops/fusion.cpp) runs its elementwise body into a tile of the operand, in cache, and reduces
// it there, so the operand is never stored whole.
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "core/shape.h"
#include "ir/op.h"

namespace tpu {

// Writes elements [begin, end) of the flattened operand to dst; begin is a multiple of the
// alignment reduce_produced was given.
using TileProducer = std::function<void(int64_t begin, int64_t end, float* dst)>;

// The f32 reduce of kind `kind` over the consecutive `dims` of an operand of `shape`, made by
// `produce`, into out. Reductions over the last dims give each row of up to 32768 values the
// unfused kernel's bits; a longer row (a full reduction) is taken in double over tiles of it and
// the tiles' values combined in tile order; over leading dims, column sums are taken in double
// over tiles of rows and the tiles' sums added in tile order, as the unfused kernel takes those
// of a whole operand with rows of up to 2048 values. Tiles depend on the shape alone: the same
// bits at any thread count. False, with nothing done, when the dims are not consecutive or a
// row of columns is wider than a tile.
bool reduce_produced(const Shape& shape, std::span<const int64_t> dims, ReduceKind kind, int64_t align,
                     const TileProducer& produce, float* out);

// One of several reductions made together (reduce_together): of kind `kind`, of an operand read
// in place (`operand`) or, when that is null, made by `produce`, into out.
struct TiledReduce {
  ReduceKind kind;
  const float* operand;
  TileProducer produce;
  float* out;
};

// The elements of each tile (the last may be shorter) in which reduce_together takes f32
// reductions over the consecutive `dims` of operands of `shape`, or 0 where it does not take them:
// rows over the last dims up to a tile long, or up to 2048 columns over leading dims.
int64_t reduce_tile(const Shape& shape, std::span<const int64_t> dims);

// Reductions over the same dims of operands of one shape, tile by tile (a BatchNorm's backward
// sums, a bias gradient and the gradient it sums): each task runs before(begin, end) on its
// tile's range (a fusion writing what the reductions then read, in cache), then each reduction's
// part of the tile. Each result has the bits reduce_produced, and the plain reduce, give it alone.
void reduce_together(const Shape& shape, std::span<const int64_t> dims, std::span<const TiledReduce> reduces,
                     int64_t align, const std::function<void(int64_t, int64_t)>& before);

// The same reductions of operands made image by image (slices of the first dim; a max pool's
// gradient, ops/fusion.h run_after_scatter): make(b0, b1) makes images [b0, b1) on the calling
// thread, tasks taking chunks of `chunk` consecutive images (0: a few chunks per thread), and
// the task that makes the last image a tile overlaps reduces the tile right after, mostly in its
// cache. Each result has the bits reduce_together gives it: each tile is reduced whole, as there.
void reduce_as_made(const Shape& shape, std::span<const int64_t> dims, std::span<const TiledReduce> reduces,
                    int64_t align, int64_t chunk, const std::function<void(int64_t, int64_t)>& make);

}  // namespace tpu
