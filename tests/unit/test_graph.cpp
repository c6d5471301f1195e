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

namespace {
// Parses "%0 = parameter f32[2,3] dims=[2,3]" and then `line` as %1; returns the error text.
std::string parse_error(const std::string& line) {
  try {
    parse_graph("graph g\n%0 = parameter f32[2,3] dims=[2,3]\n" + line + "\nreturn %0\n");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}
}  // namespace

TEST_CASE("a node with the wrong operand count is an error naming the op and both counts") {
  CHECK(parse_error("%1 = reshape f32[6] dims=[6]").find("line 3: reshape takes 1 operand, given 0") != std::string::npos);
  CHECK(parse_error("%1 = add f32[2,3] %0").find("add takes 2 operands, given 1") != std::string::npos);
  CHECK(parse_error("%1 = select f32[2,3] %0, %0").find("select takes 3 operands, given 2") != std::string::npos);
  CHECK(parse_error("%1 = neg f32[2,3] %0, %0").find("neg takes 1 operand, given 2") != std::string::npos);
  CHECK(parse_error("%1 = parameter f32[2] %0 dims=[2]").find("parameter takes 0 operands, given 1") != std::string::npos);
  CHECK(parse_error("%1 = concat f32[2,3]").find("concat takes at least 1 operand, given 0") != std::string::npos);
  CHECK(parse_error("%1 = rng f32[2] %0, %0, %0 dims=[2]").find("rng takes 1 to 2 operands, given 3") != std::string::npos);
  Graph g;
  NodeId x = g.parameter(DType::f32, {2});
  CHECK_THROWS_WITH_AS(g.add(Op::dot, {x}), "dot takes 2 operands, given 1", Error);
  g.nodes.push_back(Node{Op::exp, DType::f32, {2}, {}, {}, -1});  // made by hand, as a pass might
  CHECK(verify_graph(g) == "%1: exp takes 1 operand, given 0");
}

TEST_CASE("attribute lists of the wrong length or size are errors, not crashes") {
  CHECK(parse_error("%1 = transpose f32[3] %0 dims=[0]").find("not a permutation") != std::string::npos);
  CHECK(parse_error("%1 = transpose f32[3,2,9] %0 dims=[1,0,2]").find("not a permutation") != std::string::npos);
  CHECK(parse_error("%1 = slice f32[1] %0 dims=[0] dims2=[1,3]").find("out of range") != std::string::npos);
  CHECK(parse_error("%1 = pad f32[2,3] %0 dims=[0] dims2=[0]").find("does not fit") != std::string::npos);
  CHECK(parse_error("%1 = broadcast f32[2,3] %0 dims=[0] dims2=[2,3]").find("cannot broadcast") != std::string::npos);
  CHECK(parse_error("%1 = reduce f32[] %0 dims=[0,1,2]").find("bad axes") != std::string::npos);
  CHECK(parse_error("%1 = reshape f32[6] %0 dims=[-1,-6]").find("cannot reshape") != std::string::npos);
  // Products and sums that would overflow int64 are refused before they are computed.
  CHECK(parse_error("%1 = reshape f32[6] %0 dims=[4294967296,4294967296,6]").find("cannot reshape") != std::string::npos);
  CHECK(parse_error("%1 = pad f32[2,3] %0 dims=[0,0] dims2=[0,9223372036854775807]").find("does not fit") != std::string::npos);
  CHECK(parse_error("%1 = parameter f32[2] dims=[4294967296,4294967296]").find("more than 2^40") != std::string::npos);
  const std::string x4 = "%1 = parameter f32[1,4,4,1] dims=[1,4,4,1]\n";
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 dims=[1,1]").find("bad window") != std::string::npos);
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 dims=[1,1,1,1,1,1,1,1] dims2=[0]").find("bad window") !=
        std::string::npos);
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 dims=[1,1,1,1,9223372036854775807,1,1,1] dims2=[0,0,0,0]")
            .find("bad window") != std::string::npos);
}

TEST_CASE("the parser refuses bad ids, literals and nesting") {
  CHECK(parse_error("%4294967297 = neg f32[2,3] %0").find("out of range") != std::string::npos);
  CHECK(parse_error("%1 = neg f32[2,3] %4294967296").find("out of range") != std::string::npos);
  CHECK(parse_error("%1 = constant i32[2] literal=[1,2.5]").find("not a valid i32 value") != std::string::npos);
  CHECK(parse_error("%1 = constant u8[1] literal=[300]").find("not a valid u8 value") != std::string::npos);
  CHECK(parse_error("%1 = constant i32[1] literal=[inf]").find("not a valid i32 value") != std::string::npos);
  CHECK(parse_error("%1 = constant f32[3] literal=[1,2]").find("2 values, type needs 3") != std::string::npos);
  // The declared type is checked before anything is allocated for it.
  CHECK(parse_error("%1 = constant f32[1099511627776,1099511627776] literal=[1]").find("more than 2^40") != std::string::npos);
  CHECK(parse_error("%1 = constant f32[-1] literal=[]").find("negative dimension") != std::string::npos);
  std::string nested;
  for (int i = 0; i < 100; ++i) nested += "%0 = fusion f32[] {\n";
  CHECK_THROWS_WITH_AS(parse_graph(nested), doctest::Contains("nested deeper than 8"), Error);
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
