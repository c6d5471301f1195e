// IR text round-trip, verifier, and the executor's buffer plan.
#include <doctest.h>

#include <cmath>

#include "autodiff/gradients.h"
#include "core/error.h"
#include "runtime/executable.h"

using namespace tpu;

namespace {
Graph small_mlp_step() {
  Graph g;
  g.name = "step";
  g.current_loc = g.intern_location("mlp.lua:3");
  NodeId x = g.parameter(DType::f32, {8, 4});
  NodeId w = g.parameter(DType::f32, {4, 3});
  NodeId h = g.unary(Op::tanh, g.dot(x, w));
  NodeId loss = g.reduce(g.binary(Op::mul, h, h), {0, 1}, ReduceKind::sum);
  NodeId nodes[] = {w};
  std::vector<NodeId> grads = gradients(g, loss, nodes);
  g.outputs = {loss, grads[0]};
  return g;
}
}  // namespace

TEST_CASE("printed IR parses back to the same text") {
  Graph g = small_mlp_step();
  Tensor c(DType::f32, {2});
  c.set(0, 0.1);
  c.set(1, -3e-8);
  g.outputs.push_back(g.constant(c));
  std::string text = print_graph(g);
  Graph back = parse_graph(text);
  CHECK(print_graph(back) == text);
  CHECK(back.params.size() == 2);
  CHECK(verify_graph(back).empty());
}

TEST_CASE("the parser names the line of bad input") {
  CHECK_THROWS_WITH_AS(parse_graph("graph g\n%0 = parameter f32[2] dims=[2]\n%1 = frobnicate f32[2] %0\nreturn %1\n"),
                       doctest::Contains("line 3"), Error);
  CHECK_THROWS_WITH_AS(parse_graph("graph g\n%0 = parameter f32[2] dims=[2]\n%1 = add f32[3] %0, %0\nreturn %1\n"),
                       doctest::Contains("shape rule"), Error);
  CHECK_THROWS_AS(parse_graph("graph g\n%0 = parameter f32[2] dims=[2]\n"), Error);
}

TEST_CASE("the verifier rejects a node typed against its rule") {
  Graph g = small_mlp_step();
  g.nodes[2].shape = {9, 9};
  CHECK(verify_graph(g).find("%2") != std::string::npos);
}

TEST_CASE("the buffer plan reuses storage of dead intermediates") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {256, 256});
  NodeId a = g.unary(Op::exp, x);
  NodeId b = g.unary(Op::tanh, a);  // a dies here
  NodeId c = g.unary(Op::exp, b);   // can reuse a's storage
  NodeId d = g.unary(Op::tanh, c);
  g.outputs = {g.reduce(d, {0, 1}, ReduceKind::sum)};
  CompileOptions unoptimized;
  unoptimized.optimize = false;  // fusion would leave a single intermediate
  Executable exe = Executable::compile(g, unoptimized);
  const size_t one = 256 * 256 * 4;
  CHECK(exe.planned_bytes() == 2 * one);  // 4 intermediates in 2 buffers
  Tensor in(DType::f32, {256, 256});
  Tensor r1 = exe.run(std::vector<Tensor>{in})[0];
  Tensor r2 = exe.run(std::vector<Tensor>{in})[0];
  CHECK(r1.get(0) == doctest::Approx(256 * 256 * std::tanh(std::exp(std::tanh(1.0)))));
  CHECK(r1.get(0) == r2.get(0));
}

TEST_CASE("the executor checks argument types") {
  Graph g = small_mlp_step();
  Executable exe = Executable::compile(g);
  CHECK_THROWS_WITH_AS(exe.run(std::vector<Tensor>{Tensor(DType::f32, {8, 4}), Tensor(DType::f32, {4, 4})}),
                       doctest::Contains("argument 2"), Error);
}

TEST_CASE("unused nodes are not run") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {4});
  g.unary(Op::exp, x);  // dead
  g.outputs = {g.unary(Op::neg, x)};
  CompileOptions unoptimized;
  unoptimized.optimize = false;
  CHECK(Executable::compile(g, unoptimized).num_kernels() == 1);
}
