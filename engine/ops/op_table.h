// The op table: one row per op of ir/ops.def with its shape rule, kernels, gradient and cost.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "ir/graph.h"

namespace tpu {

// Fills n.dtype and n.shape from the operands; returns "" or a message for the user.
using ShapeRule = std::string (*)(const Graph& g, Node& n);
// Computes `out` (already allocated with n's type) from the inputs.
using Kernel = void (*)(const Node& n, std::span<const Tensor* const> in, Tensor& out);

// What a gradient rule sees: the graph being extended, the node, the gradient flowing into
// its output, and a way to hand a gradient contribution to input i.
struct GradContext {
  Graph& g;
  NodeId node;
  NodeId out_grad;
  std::vector<NodeId> input_grads;  // -1 = none yet; the driver sums contributions
  std::vector<bool> wanted;          // input i lies on a path to a differentiated value
  const Node& n() const { return g.at(node); }
  bool needs(size_t i) const { return wanted.at(i); }
  NodeId in(size_t i) const { return g.at(node).in[i]; }
  void give(size_t i, NodeId grad);  // ignored unless needs(i)
};
using GradRule = void (*)(GradContext& c);

struct Cost {
  double flops = 0;
  double bytes = 0;  // bytes read and written
};
using CostRule = Cost (*)(const Graph& g, const Node& n);

// What passes and the runtime know of an op without naming it (OpInfo::traits, a mask).
enum Trait : uint8_t {
  // Element i of the result comes from element i of each operand, all of the result's shape:
  // the fusion pass fuses it, and it may write its result over an operand it reads last.
  kElementwise = 1,
  // (with kElementwise) Cheaper to recompute in each fusion that reads it than to write and read.
  kCheap = 2,
  // (without kElementwise) Also reads element i only for element i of the result, so it may
  // write over an operand of the result's shape (fusion: its operands come pre-broadcast).
  kInPlace = 4,
  // Never constant-folded: it is the form folding emits (broadcast of a scalar).
  kFoldedForm = 8,
  // Its value combines the replicas' values: never constant-folded.
  kAcrossReplicas = 16,
};

// Chunk loops the fusion program (ops/fusion_program.h) runs for an op over f32 values:
// d[l] = f(a[l]) or f(a[l], b[l]) for l < n.
// n is at most kFusionChunk, and is that on every chunk but the last (loops specialise on it).
// A program calls each op's loop once a chunk: with chunks of 64 elements those calls took
// most of a fusion's time (a BatchNorm's normalize-and-ReLU over [64,16,16,256]: 2.0 ms, 1.35
// with 256). 256 floats a register keep a body's registers within the first-level cache.
constexpr int64_t kFusionChunk = 256;
using ChunkUnary = void (*)(const float* a, float* d, int64_t n);
using ChunkBinary = void (*)(const float* a, const float* b, float* d, int64_t n);

// How the fusion program runs an elementwise op on f32 values: a chunk loop (the kernel's own
// element function, so results are the kernel's bits), one of the program's mask or conversion
// forms, or none (a body holding the op is evaluated block by block with the op's kernel).
struct FusedForm {
  enum class Kind : uint8_t { none, unary, binary, compare, select, convert };
  Kind kind = Kind::none;
  ChunkUnary unary = nullptr;
  ChunkBinary binary = nullptr;
};

struct OpInfo {
  Op op;
  ShapeRule shape;
  Kernel reference;  // plain loops, obviously right
  Kernel fast;       // optional (nullptr): Eigen / vectorised; tested against `reference`
  GradRule grad;     // nullptr: the op has no gradient (integer/bool results, leaves)
  CostRule cost;
  uint8_t traits = 0;  // Trait bits
  FusedForm fused = {};    // elementwise ops: how the fusion program runs it

  bool has(Trait t) const { return (traits & t) != 0; }
  bool elementwise() const { return has(kElementwise); }
  bool cheap() const { return has(kCheap); }
  bool writes_in_place() const { return has(kElementwise) || has(kInPlace); }
  bool foldable() const { return !has(kFoldedForm) && !has(kAcrossReplicas); }
};

const OpInfo& op_info(Op op);
// "" when `row` is consistent (kernels, traits and fused form agree), else the problem.
std::string row_problem(const OpInfo& row);
// The kernel the executor runs for `op`: the fast one when there is one.
Kernel kernel_for(Op op);

}  // namespace tpu
