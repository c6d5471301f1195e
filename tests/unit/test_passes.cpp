// One test per pass: IR text in, the pass, the changed flag and IR text out.
#include <doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "autodiff/gradients.h"
#include "core/error.h"
#include "kernels/onednn.h"
#include "passes/pass.h"
#include "runtime/executable.h"

using namespace tpu;

namespace {

// Runs `pass` on the graph parsed from `in`; checks the flag and the printed result.
void expect(PassFn pass, const std::string& in, bool changed, const std::string& out) {
  PassResult r = pass(parse_graph(in));
  CHECK(r.changed == changed);
  CHECK(print_graph(r.graph) == out);
  CHECK(verify_graph(r.graph).empty());
}

// Checks that the pass's `optimized` graph gives bit for bit the numbers of the graph parsed
// from `in`, both compiled without the pipeline.
void expect_same_numbers(const std::string& in, Graph optimized, const std::vector<Tensor>& args) {
  CompileOptions plain;
  plain.optimize = false;
  auto want = Executable::compile(parse_graph(in), plain).run(args);
  auto got = Executable::compile(std::move(optimized), plain).run(args);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0);
}

// The body of each output of a fused graph (each one a fusion node).
std::vector<const Graph*> output_bodies(const Graph& g) {
  std::vector<const Graph*> bodies;
  for (NodeId o : g.outputs) {
    REQUIRE(g.at(o).op == Op::fusion);
    bodies.push_back(g.at(o).attrs.body().get());
  }
  return bodies;
}

}  // namespace

TEST_CASE("dead code elimination drops what no output needs") {
  expect(dead_code_elimination,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = neg f32[2] %0\nreturn %2\n", true,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = neg f32[2] %0\nreturn %1\n");
  expect(dead_code_elimination, "graph g\n%0 = parameter f32[2] index=0\n%1 = neg f32[2] %0\nreturn %1\n", false,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = neg f32[2] %0\nreturn %1\n");
}

TEST_CASE("passes that rewrite in place keep parameters, locations and outputs in step") {
  const std::string in =
      "graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = parameter f32[2] index=1\n"
      "%3 = exp f32[2] %0  # a.lua:1\n%4 = add f32[2] %0, %2  # a.lua:2\n%5 = add f32[2] %0, %2  # a.lua:3\n"
      "return %5, %4\n";
  PassResult cse = common_subexpression_elimination(parse_graph(in));
  CHECK(print_graph(cse.graph) ==
        "graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = parameter f32[2] index=1\n"
        "%3 = add f32[2] %0, %2  # a.lua:2\nreturn %3, %3\n");
  PassResult dce = dead_code_elimination(std::move(cse.graph));
  CHECK(print_graph(dce.graph) ==
        "graph g\n%0 = parameter f32[2] index=0\n%1 = parameter f32[2] index=1\n"
        "%2 = add f32[2] %0, %1  # a.lua:2\nreturn %2, %2\n");
  CHECK(dce.graph.params == std::vector<NodeId>{0, 1});
  CHECK(verify_graph(dce.graph).empty());
}

TEST_CASE("common subexpression elimination merges equal nodes and equal small constants") {
  expect(common_subexpression_elimination,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = exp f32[2] %0\n"
         "%3 = constant f32[] literal=[2]\n%4 = constant f32[] literal=[2]\n%5 = add f32[2] %1, %2\nreturn %5, %3, %4\n",
         true,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = constant f32[] literal=[2]\n"
         "%3 = add f32[2] %1, %1\nreturn %3, %2, %2\n");
}

TEST_CASE("common subexpression elimination finds equal nodes among many readers of one operand") {
  // 40 slices of one vector, then the same 40 again, then 40 scalar constants twice: more
  // readers of %0 (and more leaves) than a chain of candidates holds, so the later ones are
  // looked up by hash.
  Graph g;
  g.share_scalars(false);
  NodeId x = g.parameter(DType::f32, {64});
  std::vector<NodeId> outs;
  for (int round = 0; round < 2; ++round) {
    for (int64_t k = 0; k < 40; ++k) outs.push_back(g.slice(x, {k}, {k + 1}));
    for (int k = 0; k < 40; ++k) outs.push_back(g.scalar(DType::f32, k));
  }
  g.outputs = outs;
  REQUIRE(g.nodes.size() == 161);
  PassResult r = common_subexpression_elimination(std::move(g));
  CHECK(r.changed);
  CHECK(r.graph.nodes.size() == 81);
  for (size_t i = 0; i < 80; ++i) CHECK(r.graph.outputs[i] == r.graph.outputs[i + 80]);
  CHECK(verify_graph(r.graph).empty());
}

TEST_CASE("common subexpression elimination finds equal readers of a scalar's broadcast") {
  // The broadcast is every mul's newest operand, so the muls are found by their other one;
  // a node of broadcasts only (%b * %b) is found by the newest of them.
  Graph g;
  NodeId b = g.broadcast(g.scalar(DType::f32, 0.9), {8}, {});
  std::vector<NodeId> params, outs;
  for (int k = 0; k < 40; ++k) params.push_back(g.parameter(DType::f32, {8}));
  NodeId late = g.broadcast(g.scalar(DType::f32, 0.5), {8}, {});
  for (int round = 0; round < 2; ++round) {
    for (NodeId p : params) outs.push_back(g.binary(Op::mul, g.binary(Op::mul, p, b), late));
    outs.push_back(g.binary(Op::mul, b, late));
  }
  g.outputs = outs;
  const size_t before = g.nodes.size();
  PassResult r = common_subexpression_elimination(std::move(g));
  CHECK(r.changed);
  CHECK(r.graph.nodes.size() == before - 81);
  for (size_t i = 0; i < 41; ++i) CHECK(r.graph.outputs[i] == r.graph.outputs[i + 41]);
  CHECK(verify_graph(r.graph).empty());
}

TEST_CASE("constant folding evaluates nodes of constants") {
  expect(constant_folding,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = constant f32[2] literal=[1,2]\n%2 = exp f32[2] %1\n"
         "%3 = add f32[2] %0, %2\nreturn %3\n",
         true,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = constant f32[2] literal=[1,2]\n"
         "%2 = constant f32[2] literal=[2.71828175,7.38905621]\n%3 = add f32[2] %0, %2\nreturn %3\n");
}

// A closed-over tensor of equal elements (Keras's PositionEmbedding adds its rows to zeros of the
// input's shape) that elementwise ops read becomes a broadcast scalar, as a folded result of
// equal elements does; its bits as they were (a -0 stays -0). A constant of differing elements,
// of one element, read by a dot or returned stays (a broadcast would be written out each step).
TEST_CASE("constant folding makes a constant of equal elements a broadcast scalar") {
  expect(constant_folding,
         "graph g\n%0 = parameter f32[2,3] index=0\n%1 = constant f32[2,3] literal=[-0,-0,-0,-0,-0,-0]\n"
         "%2 = add f32[2,3] %0, %1\n%3 = constant f32[2] literal=[1,2]\n%4 = constant f32[1] literal=[5]\n"
         "%5 = constant f32[3,2] literal=[1,1,1,1,1,1]\n%6 = dot f32[2,2] %0, %5\n"
         "%7 = constant f32[2] literal=[7,7]\nreturn %2, %3, %4, %6, %7\n",
         true,
         "graph g\n%0 = parameter f32[2,3] index=0\n%1 = constant f32[] literal=[-0]\n%2 = broadcast f32[2,3] %1\n"
         "%3 = add f32[2,3] %0, %2\n%4 = constant f32[2] literal=[1,2]\n%5 = constant f32[1] literal=[5]\n"
         "%6 = constant f32[3,2] literal=[1,1,1,1,1,1]\n%7 = dot f32[2,2] %0, %6\n"
         "%8 = constant f32[2] literal=[7,7]\nreturn %3, %4, %5, %7, %8\n");
}

// A broadcast scalar constant folds with what reads it, as the constant it came from did: a sum
// of it and another constant, read by a dot, is one constant (not a fusion run every step).
TEST_CASE("constant folding folds through a broadcast scalar constant") {
  expect(constant_folding,
         "graph g\n%0 = parameter f32[3,2] index=0\n%1 = constant f32[2,2] literal=[2,2,2,2]\n"
         "%2 = constant f32[2,2] literal=[1,2,3,4]\n%3 = add f32[2,2] %1, %2\n%4 = dot f32[3,2] %0, %3\nreturn %4\n",
         true,
         "graph g\n%0 = parameter f32[3,2] index=0\n%1 = constant f32[] literal=[2]\n%2 = broadcast f32[2,2] %1\n"
         "%3 = constant f32[2,2] literal=[1,2,3,4]\n%4 = constant f32[2,2] literal=[3,4,5,6]\n"
         "%5 = dot f32[3,2] %0, %4\nreturn %5\n");
}

TEST_CASE("algebraic simplification applies exact identities only") {
  const std::string head = "graph g\n%0 = parameter f32[2] index=0\n%1 = constant f32[] literal=[1]\n"
                           "%2 = broadcast f32[2] %1\n";
  expect(algebraic_simplification, head + "%3 = mul f32[2] %0, %2\n%4 = neg f32[2] %3\n%5 = neg f32[2] %4\nreturn %5\n",
         true, head + "%3 = neg f32[2] %0\nreturn %0\n");
  // x + 0 is not x when x is -0, so it stays.
  const std::string zero = "graph g\n%0 = parameter f32[2] index=0\n%1 = constant f32[] literal=[0]\n"
                           "%2 = broadcast f32[2] %1\n%3 = add f32[2] %0, %2\nreturn %3\n";
  expect(algebraic_simplification, zero, false, zero);
  expect(algebraic_simplification,
         "graph g\n%0 = parameter f32[2,3] index=0\n%1 = transpose f32[3,2] %0 dims=[1,0]\n"
         "%2 = transpose f32[2,3] %1 dims=[1,0]\nreturn %2\n",
         true, "graph g\n%0 = parameter f32[2,3] index=0\n%1 = transpose f32[3,2] %0 dims=[1,0]\nreturn %0\n");
}

// Gradients are taken on the traced graph: compiled, stop_gradient is its operand, and the
// gradient it stopped is as autodiff left it (d/dx of x * stop_gradient(x) is x, not 2x).
TEST_CASE("algebraic simplification drops stop_gradient after the gradients are taken") {
  expect(algebraic_simplification,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = stop_gradient f32[2] %0\n%2 = neg f32[2] %1\nreturn %2\n", true,
         "graph g\n%0 = parameter f32[2] index=0\n%1 = neg f32[2] %0\nreturn %1\n");
  Graph g;
  const NodeId x = g.parameter(DType::f32, {3});
  const NodeId loss = g.reduce(g.binary(Op::mul, x, g.stop_gradient(x)), {0}, ReduceKind::sum);
  g.outputs = gradients(g, loss, std::vector<NodeId>{x});
  Executable exe = Executable::compile(g);
  for (const Node& n : exe.graph().nodes) CHECK(n.op != Op::stop_gradient);
  Tensor arg(DType::f32, {3});
  for (int64_t i = 0; i < 3; ++i) arg.set(i, double(i) - 0.5);
  const std::vector<Tensor> args = {arg};
  const Tensor dx = exe.run(args)[0];
  for (int64_t i = 0; i < 3; ++i) CHECK(dx.get(i) == arg.get(i));
}

// A data set's map casts image bytes, then flattens them: the reshape moves onto the argument,
// so the convert fuses with what follows. A reshape of a computed value's convert stays.
TEST_CASE("algebraic simplification reshapes an argument before its convert") {
  expect(algebraic_simplification,
         "graph g\n%0 = parameter u8[2,3,4] index=0\n%1 = convert f32[2,3,4] %0\n%2 = reshape f32[2,12] %1\nreturn %2\n",
         true,
         "graph g\n%0 = parameter u8[2,3,4] index=0\n%1 = convert f32[2,3,4] %0\n"  // dead: DCE drops it
         "%2 = reshape u8[2,12] %0\n%3 = convert f32[2,12] %2\nreturn %3\n");
  const std::string computed = "graph g\n%0 = parameter f32[2,3] index=0\n%1 = neg f32[2,3] %0\n"
                               "%2 = convert bf16[2,3] %1 to=bf16\n%3 = reshape bf16[6] %2\nreturn %3\n";
  expect(algebraic_simplification, computed, false, computed);
}

TEST_CASE("algebraic simplification sums before it negates, with the same values") {
  const std::string in = "graph g\n%0 = parameter f32[300,7] index=0\n%1 = neg f32[300,7] %0\n"
                         "%2 = reduce f32[7] %1 dims=[0] kind=sum\nreturn %2\n";
  expect(algebraic_simplification, in, true,
         "graph g\n%0 = parameter f32[300,7] index=0\n%1 = neg f32[300,7] %0\n"  // dead: DCE drops it
         "%2 = reduce f32[7] %0 dims=[0] kind=sum\n%3 = neg f32[7] %2\nreturn %3\n");
  const std::string max = "graph g\n%0 = parameter f32[300,7] index=0\n%1 = neg f32[300,7] %0\n"
                          "%2 = reduce f32[7] %1 dims=[0] kind=max\nreturn %2\n";
  expect(algebraic_simplification, max, false, max);
  std::vector<Tensor> args = {Tensor(DType::f32, {300, 7})};
  for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, std::sin(double(i)) * std::exp(double(i % 13)));
  CompileOptions plain;
  plain.optimize = false;
  const Tensor want = Executable::compile(parse_graph(in), plain).run(args)[0];
  const Tensor got = Executable::compile(algebraic_simplification(parse_graph(in)).graph, plain).run(args)[0];
  CHECK(std::memcmp(want.raw(), got.raw(), want.bytes()) == 0);
}

// A max pool's gradient through a relu-like comparison: the mask moves to the pooled side.
// Disjoint and overlapping padded windows, two comparisons, NaNs, ties and -0 in x: the same
// bits. A -0 in the select's other arm (not what the scatter leaves) keeps the graph as it is.
TEST_CASE("algebraic simplification masks a pool's gradient before it scatters it") {
  auto graph = [](const std::string& window, const std::string& cmp, const std::string& c, const std::string& zero) {
    return "graph g\n%0 = parameter f32[2,6,6,3] index=0\n%1 = parameter f32[2,3,3,3] index=1\n"
           "%2 = constant f32[] literal=[" + c + "]\n%3 = broadcast f32[2,6,6,3] %2\n"
           "%4 = constant f32[] literal=[" + zero + "]\n%5 = broadcast f32[2,6,6,3] %4\n"
           "%6 = select_and_scatter f32[2,6,6,3] %0, %1 window={" + window + "}\n"
           "%7 = compare bool[2,6,6,3] %0, %3 direction=" + cmp + "\n%8 = select f32[2,6,6,3] %7, %6, %5\nreturn %8\n";
  };
  std::vector<Tensor> args = {Tensor(DType::f32, {2, 6, 6, 3}), Tensor(DType::f32, {2, 3, 3, 3})};
  for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, i % 11 == 0 ? 0.5 : std::round(std::sin(double(i)) * 4) / 4);
  args[0].set(7, std::nan("")), args[0].set(50, -0.0), args[0].set(51, std::nan(""));
  for (int64_t i = 0; i < args[1].size(); ++i) args[1].set(i, std::cos(double(i)) + 0.1);
  for (const std::string window : {"size=2x2 stride=2x2 pad=0_0x0_0", "size=3x3 stride=2x2 pad=1_1x1_1"})
    for (const auto& [cmp, c] : {std::pair<std::string, std::string>{"gt", "0"}, {"lt", "0.5"}}) {
      INFO(window << ", " << cmp << " " << c);
      const std::string in = graph(window, cmp, c, "0");
      PassResult r = algebraic_simplification(parse_graph(in));
      CHECK(r.changed);
      const std::string printed = print_graph(dead_code_elimination(std::move(r.graph)).graph);
      CHECK(printed.find("select f32[2,3,3,3]") != std::string::npos);
      CHECK(printed.find("select f32[2,6,6,3]") == std::string::npos);
      expect_same_numbers(in, algebraic_simplification(parse_graph(in)).graph, args);
    }
  const std::string negative_zero = graph("size=2x2 stride=2x2 pad=0_0x0_0", "gt", "0", "-0");
  expect(algebraic_simplification, negative_zero, false, negative_zero);
}

// Attention's keys, [B,S,H,D] -> [B,H,D,S] for q k: the dot reads [B,H,S,D] (whole rows
// copied) through its flag; the same for a transposed left operand, through a convert, and a
// plain swap of the last two of a computed operand goes away. A parameter's swap is dot_layout's.
TEST_CASE("algebraic simplification reads a transposed dot operand through the dot's flag") {
  const std::string keys = "graph g\n%0 = parameter f32[2,5,3,4] index=0\n%1 = parameter f32[2,3,6,4] index=1\n";
  const std::string in = keys + "%2 = transpose f32[2,3,4,5] %0 dims=[0,2,3,1]\n%3 = dot f32[2,3,6,5] %1, %2\nreturn %3\n";
  expect(algebraic_simplification, in, true,
         keys + "%2 = transpose f32[2,3,4,5] %0 dims=[0,2,3,1]\n"  // dead: DCE drops it
                "%3 = transpose f32[2,3,5,4] %0 dims=[0,2,1,3]\n%4 = dot f32[2,3,6,5] %1, %3 tb\nreturn %4\n");
  const std::string lhs = keys + "%2 = transpose f32[2,3,4,5] %0 dims=[0,2,3,1]\n"
                                 "%3 = convert bf16[2,3,4,5] %2 to=bf16\n%4 = convert bf16[2,3,6,4] %1 to=bf16\n"
                                 "%5 = dot f32[2,3,5,6] %3, %4 ta tb to=f32\nreturn %5\n";
  expect(algebraic_simplification, lhs, true,
         keys + "%2 = transpose f32[2,3,4,5] %0 dims=[0,2,3,1]\n%3 = convert bf16[2,3,4,5] %2 to=bf16\n"
                "%4 = convert bf16[2,3,6,4] %1 to=bf16\n%5 = transpose f32[2,3,5,4] %0 dims=[0,2,1,3]\n"
                "%6 = convert bf16[2,3,5,4] %5 to=bf16\n%7 = dot f32[2,3,5,6] %6, %4 tb\nreturn %7\n");
  const std::string swapped = "graph g\n%0 = parameter f32[3,5] index=0\n%1 = parameter f32[4,5] index=1\n"
                              "%2 = exp f32[4,5] %1\n%3 = transpose f32[5,4] %2 dims=[1,0]\n"
                              "%4 = dot f32[3,4] %0, %3\nreturn %4\n";
  expect(algebraic_simplification, swapped, true,
         "graph g\n%0 = parameter f32[3,5] index=0\n%1 = parameter f32[4,5] index=1\n%2 = exp f32[4,5] %1\n"
         "%3 = transpose f32[5,4] %2 dims=[1,0]\n%4 = dot f32[3,4] %0, %2 tb\nreturn %4\n");
  const std::string weight = "graph g\n%0 = parameter f32[3,5] index=0\n%1 = parameter f32[4,5] index=1\n"
                             "%2 = transpose f32[5,4] %1 dims=[1,0]\n%3 = dot f32[3,4] %0, %2\nreturn %3\n";
  expect(algebraic_simplification, weight, false, weight);
  std::vector<Tensor> args = {Tensor(DType::f32, {2, 5, 3, 4}), Tensor(DType::f32, {2, 3, 6, 4})};
  for (Tensor& t : args)
    for (int64_t i = 0; i < t.size(); ++i) t.set(i, std::sin(double(i) + double(t.size())));
  CompileOptions plain;
  plain.optimize = false;
  for (const std::string& graph : {in, lhs}) {
    const Tensor want = Executable::compile(parse_graph(graph), plain).run(args)[0];
    const Tensor got = Executable::compile(algebraic_simplification(parse_graph(graph)).graph, plain).run(args)[0];
    for (int64_t i = 0; i < want.size(); ++i) CHECK(got.get(i) == doctest::Approx(want.get(i)).epsilon(1e-6));
  }
}

TEST_CASE("algebraic simplification reads a conv's channel-swapped filter through its flag") {
  const std::string head = "graph g\n%0 = parameter f32[2,6,6,24] index=0\n%1 = parameter f32[3,3,16,24] index=1\n";
  const std::string conv = " window={size=3x3 stride=1x1 pad=1_1x1_1}";
  const std::string in = head + "%2 = transpose f32[3,3,24,16] %1 dims=[0,1,3,2]\n%3 = conv f32[2,6,6,16] %0, %2" + conv +
                         "\nreturn %3\n";
  expect(algebraic_simplification, in, true,
         head + "%2 = transpose f32[3,3,24,16] %1 dims=[0,1,3,2]\n%3 = conv f32[2,6,6,16] %0, %1" + conv + " tb\nreturn %3\n");
  // Under mixed_bfloat16 a convert stands between them; another permutation, or groups, stay.
  const std::string cast = head + "%2 = transpose f32[3,3,24,16] %1 dims=[0,1,3,2]\n%3 = convert bf16[3,3,24,16] %2 to=bf16\n"
                           "%4 = convert bf16[2,6,6,24] %0 to=bf16\n%5 = conv bf16[2,6,6,16] %4, %3" + conv + "\nreturn %5\n";
  expect(algebraic_simplification, cast, true,
         head + "%2 = transpose f32[3,3,24,16] %1 dims=[0,1,3,2]\n%3 = convert bf16[3,3,24,16] %2 to=bf16\n"
                "%4 = convert bf16[2,6,6,24] %0 to=bf16\n%5 = convert bf16[3,3,16,24] %1 to=bf16\n"
                "%6 = conv bf16[2,6,6,16] %4, %5" + conv + " tb\nreturn %6\n");
  const std::string spatial = "graph g\n%0 = parameter f32[2,6,6,3] index=0\n%1 = parameter f32[3,3,3,4] index=1\n"
                              "%2 = transpose f32[3,3,3,4] %1 dims=[1,0,2,3]\n%3 = conv f32[2,6,6,4] %0, %2" + conv +
                              "\nreturn %3\n";
  expect(algebraic_simplification, spatial, false, spatial);
  const std::string grouped = "graph g\n%0 = parameter f32[2,6,6,4] index=0\n%1 = parameter f32[3,3,4,2] index=1\n"
                              "%2 = transpose f32[3,3,2,4] %1 dims=[0,1,3,2]\n%3 = conv f32[2,6,6,4] %0, %2" + conv +
                              " groups=2\nreturn %3\n";
  expect(algebraic_simplification, grouped, false, grouped);
  const std::string dilated = head + "%2 = transpose f32[3,3,24,16] %1 dims=[0,1,3,2]\n%3 = conv f32[2,12,12,16] %0, %2"
                              " window={size=3x3 stride=1x1 pad=1_2x1_2 lhs_dilation=2x2}\nreturn %3\n";
  expect(algebraic_simplification, dilated, false, dilated);
  // The same bits as the transposed copy, on the fast kernels (oneDNN reads the swapped filter
  // in place) and on the reference ones; a 2x2 image takes the patch product.
  for (const std::string& image : {std::string("2,9,9,24"), std::string("2,2,2,24")}) {
    const std::string out = image.substr(0, image.rfind(',')) + ",16";
    const std::string graph = "graph g\n%0 = parameter f32[" + image + "] index=0\n%1 = parameter f32[3,3,16,24] index=1\n"
                              "%2 = transpose f32[3,3,24,16] %1 dims=[0,1,3,2]\n%3 = conv f32[" + out + "] %0, %2" + conv +
                              "\nreturn %3\n";
    const Graph parsed = parse_graph(graph);
    std::vector<Tensor> args = {Tensor(DType::f32, parsed.at(0).shape), Tensor(DType::f32, {3, 3, 16, 24})};
    for (Tensor& t : args)
      for (int64_t i = 0; i < t.size(); ++i) t.set(i, std::sin(double(i) * 0.37 + double(t.size())));
    CompileOptions plain;
    plain.optimize = false;
    Executable::compile(parse_graph(graph), plain).run(args);  // the copy's primitive, made now
    const size_t created = onednn_primitives_created(), rejected = onednn_primitives_rejected();
    expect_same_numbers(graph, algebraic_simplification(parse_graph(graph)).graph, args);
    // The 9x9 images' primitive reads the swapped layout: one of its own (a shape no other test
    // makes), passing its check. (Over 64 outputs: no patch product takes it, with AVX-512 or
    // without.)
    if (onednn_available() && image[2] == '9') CHECK(onednn_primitives_created() > created);
    CHECK(onednn_primitives_rejected() == rejected);
    CompileOptions reference;
    reference.reference_kernels = true;
    reference.optimize = false;
    const Tensor want = Executable::compile(parse_graph(graph), reference).run(args)[0];
    const Tensor got = Executable::compile(algebraic_simplification(parse_graph(graph)).graph, reference).run(args)[0];
    CHECK(std::memcmp(want.raw(), got.raw(), want.bytes()) == 0);
    // Operands that are exactly bf16 values (as under mixed_bfloat16) take the bf16 primitive
    // where the CPU has bf16 dot products: it reads the swapped layout too.
    for (Tensor& t : args)
      for (int64_t i = 0; i < t.size(); ++i) t.set(i, double(i % 17 - 8) / 8);
    const size_t rejected_bf16 = onednn_primitives_rejected();
    expect_same_numbers(graph, algebraic_simplification(parse_graph(graph)).graph, args);
    CHECK(onednn_primitives_rejected() == rejected_bf16);
  }
}

TEST_CASE("algebraic simplification folds zero padding of rows and columns into a conv's window") {
  auto build = [](double value, Dims lo, Dims hi) {
    Graph g;
    NodeId x = g.parameter(DType::f32, {2, 7, 6, 3});
    NodeId w = g.parameter(DType::f32, {3, 3, 3, 4});
    NodeId padded = g.pad(x, lo, hi, value);
    Window2D win;
    win.stride = {2, 2};
    NodeId y = g.conv(padded, w, win);
    Window2D grad = g.at(y).window();
    NodeId dw = g.conv_filter_grad(padded, g.binary(Op::mul, y, y), grad);
    g.outputs = {y, dw};
    return g;
  };
  auto count = [](const Graph& g, Op op) {
    int n = 0;
    for (NodeId i = 0; i < NodeId(g.nodes.size()); ++i) n += g.at(i).op == op;
    return n;
  };
  const Graph g = build(0, {0, 1, 0, 0}, {0, 0, 1, 0});
  PassResult r = dead_code_elimination(algebraic_simplification(g).graph);
  CHECK(count(r.graph, Op::pad) == 0);
  CHECK(count(r.graph, Op::conv) == 1);
  CHECK(count(r.graph, Op::conv_filter_grad) == 1);
  CHECK(verify_graph(r.graph).empty());
  // Same values as the padded copy, on the reference kernels and on the fast ones.
  std::vector<Tensor> args = {Tensor(DType::f32, {2, 7, 6, 3}), Tensor(DType::f32, {3, 3, 3, 4})};
  for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, std::sin(double(i)));
  for (int64_t i = 0; i < args[1].size(); ++i) args[1].set(i, std::cos(double(i)));
  CompileOptions reference;
  reference.reference_kernels = true;
  reference.optimize = false;
  const auto want = Executable::compile(g, reference).run(args);
  const auto folded = Executable::compile(r.graph, reference).run(args);
  const auto fast = Executable::compile(g).run(args);
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(std::memcmp(want[i].raw(), folded[i].raw(), want[i].bytes()) == 0);
    for (int64_t k = 0; k < want[i].size(); ++k) REQUIRE(std::abs(want[i].get(k) - fast[i].get(k)) < 1e-4);
  }
  // A pad of another value, or of the batch, stays.
  CHECK(!algebraic_simplification(build(0.5, {0, 1, 0, 0}, {0, 0, 1, 0})).changed);
  CHECK(!algebraic_simplification(build(0, {1, 1, 0, 0}, {0, 0, 1, 0})).changed);
}

// Under mixed_bfloat16 the conv reads the padded input cast to bf16 and widened back: the
// padding moves past the casts (zeros stay zeros) and then into the window.
TEST_CASE("algebraic simplification folds zero padding into a conv through the casts between them") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {2, 7, 6, 8});
  NodeId w = g.parameter(DType::f32, {3, 3, 8, 4});
  NodeId padded = g.convert(g.convert(g.pad(x, {0, 0, 0, 0}, {0, 1, 1, 0}, 0), DType::bf16), DType::f32);
  Window2D win;
  win.stride = {2, 2};
  NodeId y = g.conv(padded, g.convert(g.convert(w, DType::bf16), DType::f32), win);
  g.outputs = {y, g.conv_filter_grad(padded, y, g.at(y).window())};
  const PassResult r = dead_code_elimination(algebraic_simplification(g).graph);
  int pads = 0;
  for (const Node& n : r.graph.nodes) pads += n.op == Op::pad;
  CHECK(pads == 0);
  CHECK(verify_graph(r.graph).empty());
  std::vector<Tensor> args = {Tensor(DType::f32, {2, 7, 6, 8}), Tensor(DType::f32, {3, 3, 8, 4})};
  for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, std::sin(double(i)));
  for (int64_t i = 0; i < args[1].size(); ++i) args[1].set(i, std::cos(double(i)));
  CompileOptions reference;
  reference.reference_kernels = true;
  reference.optimize = false;
  const auto want = Executable::compile(g, reference).run(args);
  const auto folded = Executable::compile(r.graph, reference).run(args);
  for (size_t i = 0; i < want.size(); ++i) CHECK(std::memcmp(want[i].raw(), folded[i].raw(), want[i].bytes()) == 0);
  // A pad of another value stays before its casts.
  Graph h;
  NodeId v = h.parameter(DType::f32, {4});
  h.outputs = {h.convert(h.pad(v, {1}, {0}, 0.5), DType::bf16)};
  CHECK(!algebraic_simplification(h).changed);
}

TEST_CASE("algebraic simplification keeps -0 padding, and a pad read elsewhere, before a convert") {
  // -0 padding: moved past the convert it would become +0 (the rule pads with +0).
  Graph neg;
  NodeId v = neg.parameter(DType::f32, {4});
  neg.outputs = {neg.convert(neg.pad(v, {1}, {0}, -0.0), DType::bf16)};
  CHECK(!algebraic_simplification(neg).changed);
  // Another reader of the pad: moving it would make the padded copy twice.
  Graph shared;
  NodeId x = shared.parameter(DType::f32, {4});
  NodeId padded = shared.pad(x, {1}, {1}, 0);
  shared.outputs = {shared.convert(padded, DType::bf16), shared.unary(Op::neg, padded)};
  CHECK(!algebraic_simplification(shared).changed);
  // A graph output is a reader too.
  Graph output;
  NodeId y = output.parameter(DType::f32, {4});
  NodeId p = output.pad(y, {0}, {2}, 0);
  output.outputs = {output.convert(p, DType::bf16), p};
  CHECK(!algebraic_simplification(output).changed);
  // The sole reader still moves a +0 pad.
  Graph sole;
  NodeId z = sole.parameter(DType::f32, {4});
  sole.outputs = {sole.convert(sole.pad(z, {1}, {0}, 0), DType::bf16)};
  const PassResult r = dead_code_elimination(algebraic_simplification(sole).graph);
  CHECK(r.graph.at(r.graph.outputs[0]).op == Op::pad);
  CHECK(verify_graph(r.graph).empty());
}

TEST_CASE("elementwise fusion makes one kernel of a chain with its broadcasts") {
  PassResult r = elementwise_fusion(parse_graph(
      "graph g\n%0 = parameter f32[4,3] index=0\n%1 = parameter f32[3] index=0\n"
      "%2 = broadcast f32[4,3] %1 dims=[1]\n%3 = add f32[4,3] %0, %2\n%4 = tanh f32[4,3] %3\n"
      "%5 = dot f32[4,4] %4, %4 tb\n%6 = exp f32[4,4] %5\nreturn %6, %4\n"));
  CHECK(r.changed);
  CHECK(print_graph(r.graph) ==
        "graph g\n%0 = parameter f32[4,3] index=0\n%1 = parameter f32[3] index=0\n"
        "%2 = broadcast f32[4,3] %1 dims=[1]\n"
        "%3 = fusion f32[4,3] %0, %1 {\n  %0 = parameter f32[4,3] index=0\n  %1 = parameter f32[3] index=1\n"
        "  %2 = broadcast f32[4,3] %1 dims=[1]\n  %3 = add f32[4,3] %0, %2\n  %4 = tanh f32[4,3] %3\n"
        "  return %4\n}\n%4 = dot f32[4,4] %3, %3 tb\n%5 = exp f32[4,4] %4\nreturn %5, %3\n");
  CHECK(verify_graph(r.graph).empty());
  // The printed fusion parses back.
  CHECK(print_graph(parse_graph(print_graph(r.graph))) == print_graph(r.graph));
}

namespace {
// Elementwise fusion of the graph `text`, which it changes, then dead code elimination; the
// result verified.
Graph fused_and_pruned(const std::string& text) {
  PassResult r = elementwise_fusion(parse_graph(text));
  CHECK(r.changed);
  Graph out = dead_code_elimination(std::move(r.graph)).graph;
  CHECK(verify_graph(out).empty());
  return out;
}

// f32 arguments of these shapes, argument a's element i 2 sin(3 i + a).
std::vector<Tensor> sine_args(const std::vector<Shape>& shapes) {
  std::vector<Tensor> args;
  for (size_t a = 0; a < shapes.size(); ++a) {
    args.emplace_back(DType::f32, shapes[a]);
    for (int64_t i = 0; i < args[a].size(); ++i) args[a].set(i, std::sin(double(i * 3 + a)) * 2);
  }
  return args;
}
}  // namespace

TEST_CASE("elementwise fusion recomputes a cheap op read by two groups instead of storing it") {
  // %4 = x + bias feeds relu (%7) and, through compare/select, its gradient (%9): each fusion
  // recomputes %4 from x, so no fusion writes it.
  Graph out = fused_and_pruned(
      "graph g\n%0 = parameter f32[4,3] index=0\n%1 = parameter f32[3] index=0\n%2 = parameter f32[4,3] index=0\n"
      "%3 = broadcast f32[4,3] %1 dims=[1]\n%4 = add f32[4,3] %0, %3\n%5 = constant f32[] literal=[0]\n"
      "%6 = broadcast f32[4,3] %5\n%7 = max f32[4,3] %4, %6\n"
      "%8 = compare bool[4,3] %4, %6 direction=ge\n%9 = select f32[4,3] %8, %2, %6\n"
      "%10 = dot f32[4,4] %7, %9 tb\nreturn %10\n");
  int fusions = 0;
  for (const Node& n : out.nodes) {
    CHECK(n.op != Op::add);  // only inside the bodies
    if (n.op != Op::fusion) continue;
    ++fusions;
    CHECK(n.in[0] == 0);  // each reads x itself
    int adds = 0;
    for (const Node& b : n.attrs.body()->nodes) adds += b.op == Op::add;
    CHECK(adds == 1);
  }
  CHECK(fusions == 2);
}

// A swish under a folded BatchNorm: y = x * inv + shift, s = sigmoid(y); the swish y * s and
// its gradient's factor s * (1 - s) are two groups. The whole chain y, s is recomputed in each
// (a chain through recomputed users), so no fusion writes y or s: each reads x itself.
TEST_CASE("elementwise fusion recomputes a chain of cheap ops read by two groups") {
  const std::string in =
      "graph g\n%0 = parameter f32[4,3] index=0\n%1 = parameter f32[3] index=1\n%2 = parameter f32[3] index=2\n"
      "%3 = broadcast f32[4,3] %1 dims=[1]\n%4 = mul f32[4,3] %0, %3\n%5 = broadcast f32[4,3] %2 dims=[1]\n"
      "%6 = add f32[4,3] %4, %5\n%7 = sigmoid f32[4,3] %6\n%8 = mul f32[4,3] %6, %7\n"
      "%9 = constant f32[] literal=[1]\n%10 = broadcast f32[4,3] %9\n%11 = sub f32[4,3] %10, %7\n"
      "%12 = mul f32[4,3] %7, %11\n%13 = dot f32[4,4] %8, %12 tb\nreturn %13\n";
  Graph out = fused_and_pruned(in);
  int fusions = 0;
  for (const Node& n : out.nodes) {
    CHECK(n.op != Op::sigmoid);  // only inside the bodies
    if (n.op != Op::fusion) continue;
    ++fusions;
    CHECK(n.in[0] == 0);  // each reads x itself
  }
  CHECK(fusions == 2);
  expect_same_numbers(in, std::move(out), sine_args({{4, 3}, {3}, {3}}));
}

// GPT-2's tanh GELU: u = x + b, its cube term s = (0.044715 u) u, read by the tanh's group and
// by the gradient's, which reads the factor 0.044715 u too. s reads two tensors (the factor and
// u), both cheap ops on u: the chain is recomputed in each group from x, so no fusion writes s
// (a [batch, T, 4 d] tensor written once and read twice); the numbers are the unfused graph's.
TEST_CASE("elementwise fusion recomputes a chain that reads one tensor along two paths") {
  const std::string in =
      "graph g\n%0 = parameter f32[4,3] index=0\n%1 = parameter f32[3] index=1\n%2 = parameter f32[4,3] index=2\n"
      "%3 = broadcast f32[4,3] %1 dims=[1]\n%4 = add f32[4,3] %0, %3\n%5 = constant f32[] literal=[0.044715]\n"
      "%6 = broadcast f32[4,3] %5\n%7 = mul f32[4,3] %6, %4\n%8 = mul f32[4,3] %7, %4\n%9 = mul f32[4,3] %8, %4\n"
      "%10 = add f32[4,3] %4, %9\n%11 = tanh f32[4,3] %10\n%12 = mul f32[4,3] %2, %8\n%13 = mul f32[4,3] %12, %7\n"
      "%14 = dot f32[4,4] %11, %13 tb\nreturn %14\n";
  Graph out = fused_and_pruned(in);
  int fusions = 0;
  for (const Node& n : out.nodes) {
    if (n.op != Op::fusion) continue;
    ++fusions;
    for (NodeId i : n.in) CHECK(out.at(i).op == Op::parameter);  // x, b, g: no fusion reads another
  }
  CHECK(fusions == 2);
  expect_same_numbers(in, std::move(out), sine_args({{4, 3}, {3}, {4, 3}}));
}

// A LayerNorm's x - mean, x a residual sum a + b that is stored (its mean reads it): recomputed
// in both groups that read it, from x, not through x from a and b (two reads), and not stored.
TEST_CASE("elementwise fusion recomputes from the nearest one tensor, not past it") {
  Graph out = fused_and_pruned(
      "graph g\n%0 = parameter f32[4,3] index=0\n%1 = parameter f32[4,3] index=1\n%2 = add f32[4,3] %0, %1\n"
      "%3 = reduce f32[4] %2 dims=[1] kind=sum\n%4 = broadcast f32[4,3] %3 dims=[0]\n%5 = sub f32[4,3] %2, %4\n"
      "%6 = tanh f32[4,3] %5\n%7 = exp f32[4,3] %5\n%8 = dot f32[4,4] %6, %7 tb\nreturn %8\n");
  int bodies_with_sub = 0;
  for (const Node& n : out.nodes) {
    CHECK(n.op != Op::sub);
    if (n.op != Op::fusion) continue;
    for (const Node& b : n.attrs.body()->nodes) bodies_with_sub += b.op == Op::sub;
  }
  CHECK(bodies_with_sub == 2);
}

// A product of two different tensors stays one read each: recomputing it in two groups would
// have both read two tensors where they read one.
TEST_CASE("elementwise fusion stores a cheap op of two tensors read by two groups") {
  PassResult r = elementwise_fusion(parse_graph(
      "graph g\n%0 = parameter f32[4,3] index=0\n%1 = parameter f32[4,3] index=1\n%2 = mul f32[4,3] %0, %1\n"
      "%3 = tanh f32[4,3] %2\n%4 = exp f32[4,3] %2\n%5 = dot f32[4,4] %3, %4 tb\nreturn %5\n"));
  Graph out = dead_code_elimination(std::move(r.graph)).graph;
  int products = 0;  // the product stays a node of its own, stored once and read by the tanh and the exp
  for (const Node& n : out.nodes) {
    products += n.op == Op::mul;
    if (n.op == Op::fusion)
      for (const Node& b : n.attrs.body()->nodes) CHECK(b.op != Op::mul);
  }
  CHECK(products == 1);
}

// A softmax's probabilities y = e / s (e = exp(x - max), s its row sums), read by a dropout
// (mask ? y * 1.25 : 0) and by its gradient's sum of g * y: the division is recomputed in both
// groups from e, so no fusion writes y; the numbers are the unfused graph's.
TEST_CASE("elementwise fusion recomputes a softmax's division read by the dropout and the gradient") {
  const std::string in =
      "graph g\n%0 = parameter f32[4,6] index=0\n%1 = parameter bool[4,6] index=1\n%2 = parameter f32[4,6] index=2\n"
      "%3 = reduce f32[4] %0 dims=[1] kind=max\n%4 = broadcast f32[4,6] %3 dims=[0]\n%5 = sub f32[4,6] %0, %4\n"
      "%6 = exp f32[4,6] %5\n%7 = reduce f32[4] %6 dims=[1] kind=sum\n%8 = broadcast f32[4,6] %7 dims=[0]\n"
      "%9 = div f32[4,6] %6, %8\n%10 = constant f32[] literal=[1.25]\n%11 = broadcast f32[4,6] %10\n"
      "%12 = mul f32[4,6] %9, %11\n%13 = constant f32[] literal=[0]\n%14 = broadcast f32[4,6] %13\n"
      "%15 = select f32[4,6] %1, %12, %14\n%16 = mul f32[4,6] %2, %9\n%17 = reduce f32[4] %16 dims=[1] kind=sum\n"
      "%18 = dot f32[4,4] %15, %6 tb\nreturn %18, %17\n";
  Graph out = fused_and_pruned(in);
  int fusions = 0, reads_of_fusions = 0;  // e and the dropout; the dropout and the gradient's sum read e
  for (const Node& n : out.nodes) {
    CHECK(n.op != Op::div);  // only inside the bodies
    if (n.op != Op::fusion && n.op != Op::reduce_fusion) continue;
    fusions += n.op == Op::fusion;
    for (NodeId i : n.in) reads_of_fusions += out.at(i).op == Op::fusion;
  }
  CHECK(fusions == 2);
  CHECK(reads_of_fusions == 2);
  std::vector<Tensor> args = {Tensor(DType::f32, {4, 6}), Tensor(DType::boolean, {4, 6}), Tensor(DType::f32, {4, 6})};
  for (size_t a = 0; a < args.size(); ++a)
    for (int64_t i = 0; i < args[a].size(); ++i) args[a].set(i, a == 1 ? double(i % 3 != 0) : std::sin(double(i * 3 + a)) * 2);
  expect_same_numbers(in, std::move(out), args);
}

TEST_CASE("elementwise fusion decides each group before it rewrites the graph in place") {
  // %5 is a lone exp of %3, which fuses nothing. By the time the in-place rewrite reaches %5,
  // %3's slot holds the broadcast that moved down behind the fusion of %2 and %3: looking at
  // the operands then would take %5 for an op that absorbs a broadcast.
  const std::string in =
      "graph g\n%0 = parameter f32[4] index=0\n%1 = parameter f32[] index=1\n%2 = exp f32[4] %0\n"
      "%3 = neg f32[4] %2\n%4 = broadcast f32[4] %1\n%5 = exp f32[4] %3\nreturn %3, %4, %5\n";
  PassResult r = elementwise_fusion(parse_graph(in));
  CHECK(r.changed);
  CHECK(verify_graph(r.graph).empty());
  REQUIRE(r.graph.nodes.size() == 5);
  CHECK(r.graph.at(2).op == Op::fusion);
  CHECK(r.graph.at(3).op == Op::broadcast);
  CHECK(r.graph.at(4).op == Op::exp);
}

TEST_CASE("elementwise fusion puts a result only a reduce reads into that reduce") {
  // %2 (even a lone op) is read by the reduce alone: one reduce_fusion. %4 is also returned,
  // and %6 feeds a reduce and an add: both are stored as they were.
  const std::string in =
      "graph g\n%0 = parameter f32[8,64] index=0\n%1 = parameter f32[64] index=1\n"
      "%2 = mul f32[8,64] %0, %0\n%3 = reduce f32[64] %2 dims=[0] kind=sum\n"
      "%4 = exp f32[8,64] %0\n%5 = reduce f32[8] %4 dims=[1] kind=max\n"
      "%6 = neg f32[8,64] %0\n%7 = reduce f32[64] %6 dims=[0] kind=sum\n%8 = add f32[8,64] %6, %0\n"
      "return %3, %4, %5, %7, %8\n";
  PassResult r = elementwise_fusion(parse_graph(in));
  CHECK(r.changed);
  CHECK(verify_graph(r.graph).empty());
  std::vector<Op> ops;
  for (const Node& n : r.graph.nodes) ops.push_back(n.op);
  CHECK(ops == std::vector<Op>{Op::parameter, Op::parameter, Op::reduce_fusion, Op::exp, Op::reduce, Op::neg,
                               Op::reduce, Op::add});
  const Node& fused = r.graph.at(2);
  CHECK(fused.shape == Shape{64});
  CHECK(fused.reduce_kind() == ReduceKind::sum);
  CHECK(fused.attrs.dims() == Dims{0});
  CHECK(fused.attrs.body()->at(fused.attrs.body()->outputs[0]).op == Op::mul);
  // The same numbers as the graph before the pass.
  std::vector<Tensor> args = {Tensor(DType::f32, {8, 64}), Tensor(DType::f32, {64})};
  for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, std::sin(double(i)));
  expect_same_numbers(in, std::move(r.graph), args);
}

TEST_CASE("elementwise fusion gives identical fused computations one shared body") {
  // tanh(x + 1) on two parameters and tanh(x + 2) on a third: the first two fuse into the
  // same body, the third into its own (its constant differs).
  std::string in = "graph g\n%0 = parameter f32[4] index=0\n%1 = parameter f32[4] index=1\n"
                   "%2 = parameter f32[4] index=2\n%3 = constant f32[] literal=[1]\n"
                   "%4 = constant f32[] literal=[2]\n";
  int next = 5;
  std::vector<int> results;
  for (auto [x, c] : {std::pair{0, 3}, {1, 3}, {2, 4}}) {
    const int b = next++, a = next++, t = next++;
    in += "%" + std::to_string(b) + " = broadcast f32[4] %" + std::to_string(c) + "\n";
    in += "%" + std::to_string(a) + " = add f32[4] %" + std::to_string(x) + ", %" + std::to_string(b) + "\n";
    in += "%" + std::to_string(t) + " = tanh f32[4] %" + std::to_string(a) + "\n";
    results.push_back(t);
  }
  in += "return %" + std::to_string(results[0]) + ", %" + std::to_string(results[1]) + ", %" +
        std::to_string(results[2]) + "\n";
  PassResult r = elementwise_fusion(parse_graph(in));
  CHECK(r.changed);
  CHECK(verify_graph(r.graph).empty());
  const std::vector<const Graph*> bodies = output_bodies(r.graph);
  CHECK(bodies[0] == bodies[1]);
  CHECK(bodies[0] != bodies[2]);
  // Shared or not, each fusion computes its own value.
  Executable exe = Executable::compile(parse_graph(in));
  std::vector<Tensor> args;
  for (int k = 0; k < 3; ++k) {
    args.emplace_back(DType::f32, Shape{4});
    for (int64_t i = 0; i < 4; ++i) args.back().set(i, 0.25 * double(k + i));
  }
  std::vector<Tensor> out = exe.run(args);
  for (int k = 0; k < 3; ++k)
    for (int64_t i = 0; i < 4; ++i)
      CHECK(out[size_t(k)].get(i) == doctest::Approx(std::tanh(0.25 * double(k + i) + (k == 2 ? 2 : 1))).epsilon(1e-6));
}

TEST_CASE("elementwise fusion shares a body only where operand order, types and shapes agree") {
  // sub(x, 1) twice (one body), sub(1, x) (the operands swapped), sub(x, 1) on f32[2] (another
  // parameter shape) and on an f32[4] that is a convert from i32 (a third operand read): four bodies.
  std::string in = "graph g\n%0 = parameter f32[4] index=0\n%1 = parameter f32[4] index=1\n"
                   "%2 = parameter f32[4] index=2\n%3 = parameter f32[2] index=3\n%4 = parameter i32[4] index=4\n"
                   "%5 = constant f32[] literal=[1]\n"
                   "%6 = broadcast f32[4] %5\n%7 = sub f32[4] %0, %6\n%8 = tanh f32[4] %7\n"
                   "%9 = broadcast f32[4] %5\n%10 = sub f32[4] %1, %9\n%11 = tanh f32[4] %10\n"
                   "%12 = broadcast f32[4] %5\n%13 = sub f32[4] %12, %2\n%14 = tanh f32[4] %13\n"
                   "%15 = broadcast f32[2] %5\n%16 = sub f32[2] %3, %15\n%17 = tanh f32[2] %16\n"
                   "%18 = convert f32[4] %4\n%19 = broadcast f32[4] %5\n%20 = sub f32[4] %18, %19\n"
                   "%21 = tanh f32[4] %20\n"
                   "return %8, %11, %14, %17, %21\n";
  PassResult r = elementwise_fusion(parse_graph(in));
  CHECK(verify_graph(r.graph).empty());
  const std::vector<const Graph*> bodies = output_bodies(r.graph);
  CHECK(bodies[0] == bodies[1]);
  for (size_t i = 1; i < bodies.size(); ++i)
    for (size_t j = i + 1; j < bodies.size(); ++j) CHECK(bodies[i] != bodies[j]);
  std::vector<Tensor> args;
  for (int k = 0; k < 5; ++k) {
    args.emplace_back(k == 4 ? DType::i32 : DType::f32, Shape{k == 3 ? 2 : 4});
    for (int64_t i = 0; i < args.back().size(); ++i) args.back().set(i, double(k + i));
  }
  expect_same_numbers(in, std::move(r.graph), args);
}

TEST_CASE("a cleanup pass marked idempotent changes nothing when it runs again right away") {
  // The pipeline skips such a pass while the graph is as it left it. Chains whose duplicates
  // and dead ends only appear once their operands are merged or dropped.
  const char* graphs[] = {
      "graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = exp f32[2] %0\n%3 = neg f32[2] %1\n"
      "%4 = neg f32[2] %2\n%5 = add f32[2] %3, %4\n%6 = add f32[2] %4, %3\n%7 = mul f32[2] %5, %6\n"
      "%8 = exp f32[2] %7\n%9 = neg f32[2] %8\nreturn %7\n",
      "graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = neg f32[2] %1\n%3 = tanh f32[2] %2\n"
      "%4 = constant f32[] literal=[2]\n%5 = constant f32[] literal=[2]\n%6 = broadcast f32[2] %4\n"
      "%7 = broadcast f32[2] %5\n%8 = mul f32[2] %0, %6\n%9 = mul f32[2] %0, %7\nreturn %8, %9\n",
  };
  int idempotent = 0;
  for (const Pass& p : cleanup_passes()) {
    if (!p.idempotent) continue;
    ++idempotent;
    for (const char* text : graphs) {
      INFO(std::string(p.name) << " on\n" << std::string(text));
      PassResult once = p.run(parse_graph(text));
      CHECK(once.changed);
      const std::string printed = print_graph(once.graph);
      PassResult twice = p.run(std::move(once.graph));
      CHECK_FALSE(twice.changed);
      CHECK(print_graph(twice.graph) == printed);
    }
  }
  CHECK(idempotent == 2);  // CSE and DCE
}

TEST_CASE("the pipeline preserves results bitwise and shrinks the graph") {
  Graph g = parse_graph(
      "graph g\n%0 = parameter f32[64,300] index=0\n%1 = parameter f32[300] index=0\n"
      "%2 = broadcast f32[64,300] %1 dims=[1]\n%3 = add f32[64,300] %0, %2\n"
      "%4 = constant f32[] literal=[1]\n%5 = broadcast f32[64,300] %4\n"
      "%6 = mul f32[64,300] %3, %5\n%7 = tanh f32[64,300] %6\n%8 = exp f32[64,300] %7\n"
      "%9 = reduce f32[300] %8 dims=[0] kind=sum\n%10 = sigmoid f32[300] %9\nreturn %10, %8\n");
  CompileOptions plain;
  plain.optimize = false;
  Executable a = Executable::compile(g, plain), b = Executable::compile(g);
  CHECK(b.num_kernels() < a.num_kernels());
  std::vector<Tensor> args = {Tensor(DType::f32, {64, 300}), Tensor(DType::f32, {300})};
  for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, std::sin(double(i)));
  for (int64_t i = 0; i < args[1].size(); ++i) args[1].set(i, std::cos(double(i)));
  auto ra = a.run(args), rb = b.run(args);
  for (size_t i = 0; i < ra.size(); ++i) CHECK(std::memcmp(ra[i].raw(), rb[i].raw(), ra[i].bytes()) == 0);
}

TEST_CASE("dot layout reads a transposed parameter untransposed when few rows multiply it") {
  const std::string params = "graph g\n%0 = parameter f32[32,64] index=0\n"
                             "%1 = parameter f32[16,64] index=1\n"
                             "%2 = parameter f32[128,64] index=2\n";
  expect(dot_layout, params + "%3 = dot f32[32,16] %0, %1 tb\nreturn %3\n", true,
         params + "%3 = transpose f32[64,16] %1 dims=[1,0]\n%4 = dot f32[32,16] %0, %3\nreturn %4\n");
  // Two such dots with nodes between and after them, a parameter among them and a location:
  // every node moves up by the transposes before it, and the transpose takes its dot's line.
  expect(dot_layout,
         params + "%3 = dot f32[32,16] %0, %1 tb\n%4 = parameter f32[32,16] index=3\n%5 = exp f32[32,16] %3\n"
                  "%6 = dot f32[32,16] %0, %1 tb  # a.lua:7\n%7 = add f32[32,16] %5, %6\n%8 = add f32[32,16] %7, %4\n"
                  "return %8, %3\n",
         true,
         params + "%3 = transpose f32[64,16] %1 dims=[1,0]\n%4 = dot f32[32,16] %0, %3\n"
                  "%5 = parameter f32[32,16] index=3\n%6 = exp f32[32,16] %4\n"
                  "%7 = transpose f32[64,16] %1 dims=[1,0]  # a.lua:7\n%8 = dot f32[32,16] %0, %7  # a.lua:7\n"
                  "%9 = add f32[32,16] %6, %8\n%10 = add f32[32,16] %9, %5\nreturn %10, %4\n");
  // Many rows (the kernels' rate does not suffer), or an operand that is no parameter: kept.
  const std::string many = params + "%3 = dot f32[128,16] %2, %1 tb\nreturn %3\n";
  expect(dot_layout, many, false, many);
  const std::string computed = params + "%3 = exp f32[16,64] %1\n%4 = dot f32[32,16] %0, %3 tb\nreturn %4\n";
  expect(dot_layout, computed, false, computed);
}

TEST_CASE("the pipeline does not rerun the cleanup passes after dead code elimination alone changed the graph") {
  // The dead exp goes in round one; folding, simplifying and merging had nothing to do before
  // and cannot have now. A graph where simplification makes dead code still gets a second round.
  auto runs = [](const std::string& text) {
    std::string order;
    PipelineOptions options;
    options.ran = [&](const char* pass, bool changed) { order += std::string(pass) + (changed ? "* " : " "); };
    Graph out = run_pipeline(parse_graph(text), options);
    CHECK(verify_graph(out).empty());
    return order;
  };
  CHECK(runs("graph g\n%0 = parameter f32[2] index=0\n%1 = exp f32[2] %0\n%2 = neg f32[2] %0\nreturn %2\n") ==
        "dot_layout constant_folding algebraic_simplification common_subexpression_elimination "
        "dead_code_elimination* elementwise_fusion dead_code_elimination ");
  CHECK(runs("graph g\n%0 = parameter f32[2] index=0\n%1 = neg f32[2] %0\n%2 = neg f32[2] %1\n"
             "%3 = exp f32[2] %2\nreturn %3\n") ==
        "dot_layout constant_folding algebraic_simplification* common_subexpression_elimination "
        "dead_code_elimination* constant_folding algebraic_simplification elementwise_fusion dead_code_elimination ");
}
