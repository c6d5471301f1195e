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

// A squared error's gradient: x * x gives both operands one product (g * x), made once, where
// two equal ones made a duplicate for CSE to find (at the loss, early in a deep model's graph,
// which made CSE rewrite all that follows). The same value: (g * x) + (g * x).
TEST_CASE("the gradient of x * x makes its product once") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {5});
  NodeId loss = g.reduce(g.binary(Op::mul, x, x), {0}, ReduceKind::sum);
  const size_t before = g.nodes.size();
  const NodeId dx = gradients(g, loss, std::vector<NodeId>{x})[0];
  size_t products = 0;
  for (size_t i = before; i < g.nodes.size(); ++i) products += g.nodes[i].op == Op::mul;
  CHECK(products == 1);
  g.outputs = {dx};
  Tensor v(DType::f32, {5});
  for (int64_t i = 0; i < 5; ++i) v.set(i, 0.3 * double(i) - 0.7);
  const std::vector<Tensor> args = {v};
  const Tensor got = Executable::compile(g).run(args)[0];
  for (int64_t i = 0; i < 5; ++i) CHECK(got.get(i) == double(2 * float(v.get(i))));
}

// Against a constant, max's and min's gradients read their result, not x: relu's input then
// need not be stored (it fuses into the relu's pass). Past the constant strictly, as TF's,
// PyTorch's and JAX's relu (0 at 0) and relu6 (0 at 0 and 6); between two variables a tie still
// goes to the first operand.
TEST_CASE("max and min against a constant send the gradient where the result is past it") {
  Graph g;
  const NodeId x = g.parameter(DType::f32, {5}), y = g.parameter(DType::f32, {5});
  const NodeId relu6 = g.binary(Op::min, g.binary(Op::max, x, g.full(DType::f32, {5}, 0)), g.full(DType::f32, {5}, 6));
  const NodeId both = g.binary(Op::max, x, y);
  const NodeId loss = g.reduce(g.binary(Op::add, relu6, both), {0}, ReduceKind::sum);
  const size_t before = g.nodes.size();
  g.outputs = gradients(g, loss, std::vector<NodeId>{x, y});
  for (size_t i = before; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == Op::compare && g.nodes[i].in[0] == x) CHECK(g.nodes[i].in[1] == y);  // only max(x, y) reads x
  Tensor xs(DType::f32, {5}), ys(DType::f32, {5});
  const double xv[] = {-1, 0, 3, 6, 7}, yv[] = {0, 0, 5, 6, 8};
  for (int64_t i = 0; i < 5; ++i) xs.set(i, xv[i]), ys.set(i, yv[i]);
  const std::vector<Tensor> args = {xs, ys};
  const std::vector<Tensor> d = Executable::compile(g).run(args);
  // relu6 gives x 0, 0, 1, 0, 0; max(x, y) gives x the ties (0 and 6), y the rest
  const double dx[] = {0, 1, 1, 1, 0}, dy[] = {1, 0, 1, 0, 1};
  for (int64_t i = 0; i < 5; ++i) {
    CHECK(d[0].get(i) == dx[i]);
    CHECK(d[1].get(i) == dy[i]);
  }
}

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

TEST_CASE("the IR text names kinds, directions and windows, and parses them back") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {1, 6, 6, 2});
  NodeId w = g.parameter(DType::f32, {2, 2, 2, 3});
  NodeId key = g.parameter(DType::i32, {2});
  Window2D pool;
  pool.size = {3, 3}, pool.stride = {2, 2}, pool.pad_lo = {1, 0}, pool.pad_hi = {1, 2};
  NodeId m = g.reduce_window(x, WindowKind::max, pool);
  Window2D dilated;
  dilated.lhs_dilation = {2, 1}, dilated.rhs_dilation = {1, 2};
  NodeId c = g.conv(x, w, dilated);
  NodeId depthwise = g.conv(x, g.parameter(DType::f32, {3, 3, 1, 4}), {}, 2);
  NodeId pos = g.compare(Cmp::gt, m, g.full(DType::f32, {1, 3, 3, 2}, 0));
  NodeId r = g.reduce(g.select(pos, m, g.unary(Op::sigmoid, m)), {2}, ReduceKind::max);
  NodeId noise = g.rng(key, RngKind::normal, {1, 3, 2});
  NodeId s = g.slice(g.pad(r, {0, 1, 0}, {0, 0, 0}, 0), {0, 1, 0}, {1, 4, 2});
  g.outputs = {g.all_reduce(g.binary(Op::add, s, noise), true), c, depthwise};
  const std::string text = print_graph(g);
  for (const char* piece :
       {"%1 = parameter f32[2,2,2,3] index=1\n", " window={size=3x3 stride=2x2 pad=1_1x0_2} kind=max\n",
        " window={size=2x2 stride=1x1 pad=0_0x0_0 lhs_dilation=2x1 rhs_dilation=1x2}\n", " direction=gt\n", "sigmoid f32",
        " dims=[2] kind=max\n", " kind=normal\n", " lo=[0,1,0] hi=[0,0,0]\n", " start=[0,1,0] limit=[1,4,2]\n",
        " kind=mean\n", " window={size=3x3 stride=1x1 pad=0_0x0_0} groups=2\n"}) {
    INFO(piece << " in\n" << text);
    CHECK(text.find(piece) != std::string::npos);
  }
  Graph back = parse_graph(text);
  CHECK(print_graph(back) == text);
  CHECK(back.at(m).window() == pool);
  CHECK(back.at(c).window().rhs_dilation == dilated.rhs_dilation);
  CHECK(back.at(c).groups() == 1);
  CHECK(back.at(depthwise).groups() == 2);
  CHECK(back.at(pos).direction() == Cmp::gt);
  CHECK(back.at(back.outputs[0]).mean());
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
  CHECK(parse_error("%1 = slice f32[1] %0 start=[0] limit=[1,3]").find("out of range") != std::string::npos);
  CHECK(parse_error("%1 = pad f32[2,3] %0 lo=[0] hi=[0]").find("does not fit") != std::string::npos);
  CHECK(parse_error("%1 = broadcast f32[2,3] %0 dims=[0]").find("cannot broadcast") != std::string::npos);
  CHECK(parse_error("%1 = reduce f32[] %0 dims=[0,1,2]").find("bad axes") != std::string::npos);
  CHECK(parse_error("%1 = reshape f32[-1,-6] %0").find("cannot reshape") != std::string::npos);
  // Products and sums that would overflow int64 are refused before they are computed.
  CHECK(parse_error("%1 = reshape f32[4294967296,4294967296,6] %0").find("cannot reshape") != std::string::npos);
  CHECK(parse_error("%1 = pad f32[2,3] %0 lo=[0,0] hi=[0,9223372036854775807]").find("does not fit") != std::string::npos);
  CHECK(parse_error("%1 = parameter f32[4294967296,4294967296]").find("is too large: a tensor has fewer than 2^40 elements") != std::string::npos);
  // A shape that is an attribute is the type's: a dims= (older texts wrote one) repeats it.
  CHECK(parse_error("%1 = rng f32[3,2] %0 dims=[2,3] kind=uniform").find("dims= does not repeat the type's shape for rng") != std::string::npos);
  const std::string x4 = "%1 = parameter f32[1,4,4,1] dims=[1,4,4,1]\n";
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 kind=max").find("bad window") != std::string::npos);
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 window={size=0x1}").find("bad window attributes size=0x1") !=
        std::string::npos);
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 window={lhs_dilation=9223372036854775807x1}")
            .find("bad window") != std::string::npos);
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 window={size=1x1 pad=0_0}").find("expected 'x'") !=
        std::string::npos);
  CHECK(parse_error(x4 + "%2 = reduce_window f32[1,4,4,1] %1 window={size=1x1 stride=1x1 pad=0_0x0_0} kind=mode")
            .find("unknown kind 'mode' for reduce_window") != std::string::npos);
  CHECK(parse_error("%1 = compare bool[2,3] %0, %0 axis=2").find("unknown attribute 'axis' for compare") != std::string::npos);
  CHECK(parse_error("%1 = neg f32[2,3] %0 window={size=1x1}").find("unknown attribute 'window' for neg") != std::string::npos);
}

TEST_CASE("the parser refuses bad ids, literals and nesting") {
  CHECK(parse_error("%4294967297 = neg f32[2,3] %0").find("out of range") != std::string::npos);
  CHECK(parse_error("%1 = neg f32[2,3] %4294967296").find("out of range") != std::string::npos);
  CHECK(parse_error("%1 = constant i32[2] literal=[1,2.5]").find("not a valid i32 value") != std::string::npos);
  CHECK(parse_error("%1 = constant u8[1] literal=[300]").find("not a valid u8 value") != std::string::npos);
  CHECK(parse_error("%1 = constant i32[1] literal=[inf]").find("not a valid i32 value") != std::string::npos);
  CHECK(parse_error("%1 = constant f32[3] literal=[1,2]").find("2 values, type needs 3") != std::string::npos);
  // The declared type is checked before anything is allocated for it.
  CHECK(parse_error("%1 = constant f32[1099511627776,1099511627776] literal=[1]").find("is too large: a tensor has fewer than 2^40 elements") != std::string::npos);
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

TEST_CASE("while tracing, scalar constants and the broadcasts of scalars are made once") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {4, 3});
  CHECK(g.scalar(DType::f32, 0.9) != g.scalar(DType::f32, 0.9));  // off: every call a node
  g.share_scalars(true);
  const size_t before = g.nodes.size();
  NodeId a = g.scalar(DType::f32, 0.9);
  CHECK(g.scalar(DType::f32, 0.9) == a);
  CHECK(g.scalar(DType::bf16, 0.9) != a);                                  // per dtype
  CHECK(g.scalar(DType::f32, 0.1) != a);                                   // per value
  CHECK(g.scalar(DType::bf16, 0.1) == g.scalar(DType::bf16, 0.1000001));  // as the dtype holds it
  NodeId b = g.broadcast_to(a, {4, 3});
  CHECK(g.broadcast_to(a, {4, 3}) == b);
  CHECK(g.broadcast(a, {4, 3}, {}) == b);
  CHECK(g.broadcast_to(a, {3}) != b);                                      // per shape
  NodeId total = g.reduce(x, {0, 1}, ReduceKind::sum);                     // a computed scalar:
  CHECK(g.broadcast_to(total, {4, 3}) == g.broadcast_to(total, {4, 3}));   // shared too
  NodeId row = g.reduce(x, {0}, ReduceKind::sum);                          // not a scalar:
  CHECK(g.broadcast_to(row, {4, 3}) != g.broadcast_to(row, {4, 3}));       // each call a node
  CHECK(g.nodes.size() == before + 11);  // 4 scalars, 2 shared broadcasts, a sum and its broadcast, the reduce, 2 broadcasts
  CHECK(verify_graph(g).empty());
  Graph copy = g;  // a copy does not share: its new nodes are its own
  CHECK(copy.scalar(DType::f32, 0.9) != a);
  Graph moved = std::move(g);  // a move keeps sharing
  CHECK(moved.scalar(DType::f32, 0.9) == a);
  moved.share_scalars(false);
  CHECK(moved.scalar(DType::f32, 0.9) != a);
}
