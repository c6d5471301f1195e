// The memory plan: no two buffers live at once overlap; peaks match hand-computed values.
#include <doctest.h>

#include "runtime/executable.h"
#include "runtime/memory_plan.h"

using namespace tpu;

namespace {
Executable unoptimized(Graph g) {
  CompileOptions o;
  o.optimize = false;
  return Executable::compile(std::move(g), o);
}
}  // namespace

TEST_CASE("tile padding rounds the two minor dimensions to 8 and 128") {
  CHECK(tpu_padded_bytes(DType::f32, {256, 784}) == 256 * 896 * 4);
  CHECK(tpu_padded_bytes(DType::f32, {10}) == 128 * 4);
  CHECK(tpu_padded_bytes(DType::f32, {3, 5, 130}) == 3 * 8 * 256 * 4);
  CHECK(tpu_padded_bytes(DType::f32, {}) == 8 * 128 * 4);
}

TEST_CASE("live buffers never overlap") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {32, 32});
  std::vector<NodeId> keep;
  NodeId cur = x;
  for (int i = 0; i < 30; ++i) {
    cur = g.unary(i % 2 ? Op::exp : Op::tanh, cur);
    if (i % 7 == 0) keep.push_back(cur);  // some values live long
  }
  NodeId total = cur;
  for (NodeId k : keep) total = g.binary(Op::add, total, k);
  g.outputs = {g.reduce(total, {0, 1}, ReduceKind::sum)};
  Executable exe = unoptimized(g);
  const auto& bufs = exe.memory_plan().buffers;
  REQUIRE(bufs.size() > 10);
  for (size_t i = 0; i < bufs.size(); ++i)
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      bool time_overlap = bufs[i].first <= bufs[j].last && bufs[j].first <= bufs[i].last;
      bool space_overlap = bufs[i].offset < bufs[j].offset + bufs[j].bytes && bufs[j].offset < bufs[i].offset + bufs[i].bytes;
      INFO("buffers " << i << " and " << j);
      CHECK(!(time_overlap && space_overlap));
    }
}

TEST_CASE("peak of a diamond is the hand-computed value") {
  // a = exp(x); b = tanh(a); c = neg(a); d = b + c; out = sum(d)
  // live while each runs: a:{a}, b:{a,b}, c:{a,b,c} (a is read by c, so c cannot take its
  // storage), d:{b,c,d} with a's storage reused by d: peak 3 buffers of 4 KiB, i.e. 3 x 32x128
  // padded f32 tiles.
  Graph g;
  NodeId x = g.parameter(DType::f32, {32, 32});
  NodeId a = g.unary(Op::exp, x);
  NodeId b = g.unary(Op::tanh, a);
  NodeId c = g.unary(Op::neg, a);
  NodeId d = g.binary(Op::add, b, c);
  g.outputs = {g.reduce(d, {0, 1}, ReduceKind::sum)};
  Executable exe = unoptimized(g);
  CHECK(exe.planned_bytes() == 3 * 32 * 32 * 4);
  CHECK(exe.memory_plan().peak_tpu_bytes == 3 * 32 * 128 * 4);
  CHECK(exe.memory_plan().buffers[3].offset == exe.memory_plan().buffers[0].offset);  // d reuses a
}

TEST_CASE("a donated parameter receives an elementwise update in place") {
  Graph g;
  NodeId w = g.parameter(DType::f32, {4});
  NodeId grad = g.parameter(DType::f32, {4});
  g.outputs = {g.binary(Op::sub, w, grad)};
  CompileOptions o;
  o.donated = {true, false};
  Executable exe = Executable::compile(g, o);
  REQUIRE(exe.donated_args().size() == 1);
  Tensor wt(DType::f32, {4}), gt(DType::f32, {4});
  for (int i = 0; i < 4; ++i) wt.set(i, 10 + i), gt.set(i, 1);
  std::vector<Tensor> args = {wt, gt};
  Tensor r = exe.run(args)[0];
  CHECK(r.raw() == wt.raw());  // the same buffer
  CHECK(r.get(3) == 12);
}
