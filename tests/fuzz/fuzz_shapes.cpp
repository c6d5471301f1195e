// libFuzzer target: the shape rule (core/shape.h) and the graph builders' shape rules, fed
// random shapes (0, negative, huge, overflowing dims) and random ops on them. Building may only
// refuse with tpu::Error; every shape that is built must pass the rule; a graph small enough
// to run is differentiated, compiled and run on zeros, and must give results of its types.
#include <fuzzer/FuzzedDataProvider.h>

#include <climits>
#include <vector>

#include "autodiff/gradients.h"
#include "core/tensor.h"
#include "fuzz_common.h"
#include "ir/graph.h"
#include "ops/op_table.h"
#include "runtime/executable.h"

namespace {

using tpu::DType;
using tpu::Graph;
using tpu::NodeId;
using tpu::Shape;

constexpr int64_t kRunnable = 1 << 12;  // the most elements a value of a graph that runs may have

// A dimension: mostly small (shapes that fit each other), sometimes one of the values at the
// rule's edges or past int64's.
int64_t dim(FuzzedDataProvider& in) {
  static constexpr int64_t kEdges[] = {0, -1, INT64_MIN, INT64_MAX, int64_t(1) << 20, (int64_t(1) << 20) - 1,
                                       int64_t(1) << 32, INT32_MAX, tpu::kMaxElements - 1, tpu::kMaxElements,
                                       tpu::kMaxElements / 3 + 1, int64_t(1) << 62};
  const uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 200) return pick % 5;
  if (pick < 240) return kEdges[pick % std::size(kEdges)];
  return in.ConsumeIntegral<int64_t>();
}

Shape shape(FuzzedDataProvider& in) {
  Shape s;
  for (size_t rank = in.ConsumeIntegralInRange<size_t>(0, 5); s.size() < rank;) s.push_back(dim(in));
  return s;
}

DType dtype(FuzzedDataProvider& in) {
  static constexpr DType kTypes[] = {DType::f32, DType::bf16, DType::i32, DType::u8, DType::boolean};
  return kTypes[in.ConsumeIntegralInRange<size_t>(0, std::size(kTypes) - 1)];
}

struct Builder {
  FuzzedDataProvider& in;
  Graph g;
  std::vector<NodeId> nodes;

  NodeId any() { return nodes.empty() ? -1 : nodes[in.ConsumeIntegralInRange<size_t>(0, nodes.size() - 1)]; }
  int64_t axis() { return in.ConsumeIntegralInRange<int64_t>(-1, 5); }
  int rank(NodeId x) { return int(g.at(x).shape.size()); }
  // A permutation of x's dims, or now and then a list that is not one.
  Shape perm(NodeId x) {
    Shape p;
    for (int i = 0; i < rank(x); ++i) p.push_back(i);
    for (size_t i = p.size(); i > 1; --i) std::swap(p[i - 1], p[in.ConsumeIntegralInRange<size_t>(0, i - 1)]);
    if (in.ConsumeBool() && in.ConsumeBool()) p = shape(in);
    return p;
  }

  // One builder call on random operands and attributes.
  NodeId step() {
    NodeId x = any(), y = any();
    if (x < 0 || in.ConsumeIntegralInRange<int>(0, 9) == 0) return g.parameter(dtype(in), shape(in));
    switch (in.ConsumeIntegralInRange<int>(0, 21)) {
      case 0: return g.unary(tpu::Op::neg, x);
      case 1: return g.binary(tpu::Op::add, x, y);
      case 2: return g.broadcast(x, shape(in), perm(x));
      case 3: return g.broadcast_to(x, shape(in));
      case 4: return g.reshape(x, shape(in));
      case 5: return g.transpose(x, perm(x));
      case 6: return g.slice(x, shape(in), shape(in));
      case 7: return g.pad(x, shape(in), shape(in), 0);
      case 8: {
        std::vector<NodeId> xs{x, y};
        while (in.ConsumeBool()) xs.push_back(in.ConsumeBool() ? x : any());
        return g.concat(xs, axis());
      }
      case 9: return g.gather(x, y);
      case 10: return g.scatter_add(x, y, any());
      case 11: return g.dot(x, y, in.ConsumeBool(), in.ConsumeBool());
      case 12: return g.reduce(x, perm(x), tpu::ReduceKind(in.ConsumeIntegralInRange<int>(0, 2)));
      case 13: return g.argmax(x, axis());
      case 14: return g.iota(dtype(in), shape(in), axis());
      case 15: return g.full(dtype(in), shape(in), 1);
      case 16: return g.convert(x, dtype(in));
      case 17: return g.select(x, y, any());
      case 18: return g.sum_to(x, shape(in));
      case 19: return g.rng(x, tpu::RngKind(in.ConsumeIntegralInRange<int>(0, 3)), shape(in));
      case 20: {
        tpu::Window2D w;
        for (int i = 0; i < 2; ++i) {
          w.size[size_t(i)] = dim(in), w.stride[size_t(i)] = dim(in);
          w.pad_lo[size_t(i)] = dim(in), w.pad_hi[size_t(i)] = dim(in);
        }
        if (!in.ConsumeBool()) return g.reduce_window(x, tpu::WindowKind::sum, w);
        return g.conv(x, y, w, in.ConsumeIntegralInRange<int64_t>(-1, 8));  // feature groups, some bad
      }
      default: {
        Shape s = shape(in);  // a literal: only small tensors are made
        tpu::check_shape(s, "fuzz");
        if (tpu::num_elements(s) > kRunnable) return g.parameter(DType::f32, s);
        return g.constant(tpu::Tensor(dtype(in), s));
      }
    }
  }
};

void check_node(const Graph& g, NodeId id) {
  const Shape& s = g.at(id).shape;
  if (!tpu::shape_fault(s).empty()) fuzz::finding("a node was built with shape " + tpu::shape_str(s));
}

// Small values and little work: a window of 2^20 x 2^20 elements over padding is a valid
// request, but no fuzz input should take seconds.
bool runnable(const Graph& g) {
  double flops = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const tpu::Node& n = g.nodes[i];
    if (tpu::num_elements(n.shape) > kRunnable) return false;
    if (const tpu::CostRule cost = tpu::op_info(n.op).cost) flops += cost(g, n).flops;
  }
  return flops <= 1e8;
}

// Differentiates the first float output (when there is one), compiles and runs on zeros.
void run(Graph& g, bool differentiate) {
  if (g.outputs.empty() || !runnable(g)) return;
  if (differentiate) {
    NodeId y = g.outputs.back();
    if (tpu::is_float(g.at(y).dtype) && !g.params.empty() && tpu::is_float(g.at(g.params[0]).dtype)) {
      NodeId total = g.reduce(y, [&] {
        Shape all;
        for (size_t i = 0; i < g.at(y).shape.size(); ++i) all.push_back(int64_t(i));
        return all;
      }(), tpu::ReduceKind::sum);
      const NodeId x = g.params[0];
      for (NodeId d : tpu::gradients(g, total, std::span(&x, 1))) g.outputs.push_back(d);
    }
  }
  if (!runnable(g)) return;
  std::vector<tpu::Tensor> args;
  for (NodeId p : g.params) args.emplace_back(g.at(p).dtype, g.at(p).shape);
  std::vector<std::pair<DType, Shape>> types;
  for (NodeId o : g.outputs) types.emplace_back(g.at(o).dtype, g.at(o).shape);
  std::vector<tpu::Tensor> out = tpu::Executable::compile(std::move(g)).run(args);
  if (out.size() != types.size()) fuzz::finding("a run gave the wrong number of results");
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].dtype() != types[i].first || out[i].shape() != types[i].second)
      fuzz::finding("result " + std::to_string(i) + " is " + tpu::type_str(out[i].dtype(), out[i].shape()) +
                    ", expected " + tpu::type_str(types[i].first, types[i].second));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool differentiate = in.ConsumeBool();
  Builder b{in, {}, {}};
  while (in.remaining_bytes() > 0 && b.nodes.size() < 64) {
    fuzz::expect_only_tpu_errors([&] {
      NodeId id = b.step();
      check_node(b.g, id);
      b.nodes.push_back(id);
    });
  }
  if (!b.nodes.empty()) b.g.outputs = {b.nodes.back()};
  fuzz::expect_only_tpu_errors([&] { run(b.g, differentiate); });
  return 0;
}
