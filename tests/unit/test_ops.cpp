// Table-driven op tests: for every op of ir/ops.def, the fast kernel (when there is one)
// against the reference kernel, and the gradient against central finite differences.
#include <doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "autodiff/gradients.h"
#include "core/error.h"
#include "ops/op_table.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"

using namespace tpu;

namespace {

enum class Fill { signed_unit, positive, index3, small_int };

struct Input {
  DType dtype;
  Shape shape;
  Fill fill = Fill::signed_unit;
};

struct OpCase {
  const char* name;
  std::vector<Input> inputs;
  std::function<NodeId(Graph&, const std::vector<NodeId>&)> build;
  bool differentiable = true;  // fusion runs after autodiff and has no gradient
};

// tanh(x * broadcast(b)) + 0.5 as one fusion node.
NodeId fused_chain(Graph& g, const std::vector<NodeId>& x) {
  auto body = std::make_shared<Graph>();
  NodeId px = body->parameter(DType::f32, {5, 3000});
  NodeId pb = body->parameter(DType::f32, {3000});
  NodeId t = body->unary(Op::tanh, body->binary(Op::mul, px, body->broadcast(pb, {5, 3000}, {1})));
  body->outputs = {body->binary(Op::add, t, body->full(DType::f32, {5, 3000}, 0.5))};
  Attrs a;
  a.body = body;
  return g.add(Op::fusion, {x[0], x[1]}, a);
}

Tensor random_tensor(const Input& in, std::mt19937& rng) {
  Tensor t(in.dtype, in.shape);
  std::uniform_real_distribution<double> unit(-1, 1), pos(0.5, 2.0);
  for (int64_t i = 0; i < t.size(); ++i) {
    switch (in.fill) {
      case Fill::signed_unit: t.set(i, unit(rng)); break;
      case Fill::positive: t.set(i, pos(rng)); break;
      case Fill::index3: t.set(i, double(rng() % 3)); break;
      case Fill::small_int: t.set(i, double(int(rng() % 7) - 3)); break;
    }
  }
  return t;
}

const std::vector<OpCase>& cases() {
  using V = const std::vector<NodeId>&;
  const DType f = DType::f32, i = DType::i32;
  static const std::vector<OpCase> all = {
      {"neg", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::neg, x[0]); }},
      {"neg_i32", {{i, {5}, Fill::small_int}}, [](Graph& g, V x) { return g.unary(Op::neg, x[0]); }},
      {"exp", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::exp, x[0]); }},
      {"log", {{f, {3, 4}, Fill::positive}}, [](Graph& g, V x) { return g.unary(Op::log, x[0]); }},
      {"sqrt", {{f, {3, 4}, Fill::positive}}, [](Graph& g, V x) { return g.unary(Op::sqrt, x[0]); }},
      {"rsqrt", {{f, {3, 4}, Fill::positive}}, [](Graph& g, V x) { return g.unary(Op::rsqrt, x[0]); }},
      {"tanh", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::tanh, x[0]); }},
      {"logistic", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::logistic, x[0]); }},
      {"abs", {{f, {3, 4}}}, [](Graph& g, V x) { return g.unary(Op::abs, x[0]); }},
      {"add", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::add, x[0], x[1]); }},
      {"sub", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::sub, x[0], x[1]); }},
      {"mul", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::mul, x[0], x[1]); }},
      {"div", {{f, {2, 3}}, {f, {2, 3}, Fill::positive}}, [](Graph& g, V x) { return g.binary(Op::div, x[0], x[1]); }},
      {"div_i32", {{i, {6}, Fill::small_int}, {i, {6}, Fill::small_int}}, [](Graph& g, V x) { return g.binary(Op::div, x[0], x[1]); }},
      {"max", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::max, x[0], x[1]); }},
      {"min", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::min, x[0], x[1]); }},
      {"pow", {{f, {2, 3}, Fill::positive}, {f, {2, 3}}}, [](Graph& g, V x) { return g.binary(Op::pow, x[0], x[1]); }},
      {"compare", {{f, {2, 3}}, {f, {2, 3}}}, [](Graph& g, V x) { return g.compare(Cmp::lt, x[0], x[1]); }},
      {"select", {{f, {2, 3}}, {f, {2, 3}}, {f, {2, 3}}},
       [](Graph& g, V x) { return g.select(g.compare(Cmp::gt, x[0], g.full(DType::f32, {2, 3}, 0)), x[1], x[2]); }},
      {"convert", {{f, {2, 3}}}, [](Graph& g, V x) { return g.convert(g.convert(x[0], DType::i32), DType::f32); }},
      {"convert_f32", {{i, {4}, Fill::small_int}}, [](Graph& g, V x) { return g.convert(x[0], DType::f32); }},
      {"broadcast", {{f, {3}}}, [](Graph& g, V x) { return g.broadcast(x[0], {2, 3, 4}, {1}); }},
      {"reshape", {{f, {2, 6}}}, [](Graph& g, V x) { return g.reshape(x[0], {3, 4}); }},
      {"transpose", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.transpose(x[0], {2, 0, 1}); }},
      {"slice", {{f, {4, 5}}}, [](Graph& g, V x) { return g.slice(x[0], {1, 2}, {3, 5}); }},
      {"pad", {{f, {2, 3}}}, [](Graph& g, V x) { return g.pad(x[0], {1, 0}, {2, 1}, 0.5); }},
      {"concat", {{f, {2, 3}}, {f, {2, 2}}}, [](Graph& g, V x) { return g.concat({x[0], x[1]}, 1); }},
      {"gather", {{f, {3, 4}}, {i, {5}, Fill::index3}}, [](Graph& g, V x) { return g.gather(x[0], x[1]); }},
      {"scatter_add", {{f, {3, 2}}, {i, {4}, Fill::index3}, {f, {4, 2}}},
       [](Graph& g, V x) { return g.scatter_add(x[0], x[1], x[2]); }},
      {"dot", {{f, {3, 4}}, {f, {4, 5}}}, [](Graph& g, V x) { return g.dot(x[0], x[1]); }},
      {"dot_ta", {{f, {4, 3}}, {f, {4, 5}}}, [](Graph& g, V x) { return g.dot(x[0], x[1], true, false); }},
      {"dot_tb", {{f, {3, 4}}, {f, {5, 4}}}, [](Graph& g, V x) { return g.dot(x[0], x[1], false, true); }},
      {"dot_tab", {{f, {2, 4, 3}}, {f, {2, 5, 4}}}, [](Graph& g, V x) { return g.dot(x[0], x[1], true, true); }},
      {"dot_wide", {{f, {7, 33}}, {f, {33, 300}}}, [](Graph& g, V x) { return g.dot(x[0], x[1]); }},
      {"reduce_sum", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.reduce(x[0], {0, 2}, ReduceKind::sum); }},
      {"reduce_max", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.reduce(x[0], {1}, ReduceKind::max); }},
      {"reduce_min", {{f, {2, 3, 4}}}, [](Graph& g, V x) { return g.reduce(x[0], {2}, ReduceKind::min); }},
      {"argmax", {{f, {3, 5}}}, [](Graph& g, V x) { return g.argmax(x[0], 1); }},
      {"fusion", {{f, {5, 3000}}, {f, {3000}}}, fused_chain, false},
      {"all_reduce", {{f, {3, 4}}}, [](Graph& g, V x) { return g.add(Op::all_reduce, {x[0]}); }},
      {"iota", {{f, {2, 3}}},
       [](Graph& g, V x) { return g.binary(Op::mul, x[0], g.convert(g.iota(DType::i32, {2, 3}, 1), DType::f32)); }},
  };
  return all;
}

struct Built {
  Graph g;
  std::vector<Tensor> args;
  NodeId out;
};

Built build_case(const OpCase& c, uint32_t seed) {
  Built b;
  std::mt19937 rng(seed);
  std::vector<NodeId> params;
  for (const Input& in : c.inputs) {
    params.push_back(b.g.parameter(in.dtype, in.shape));
    b.args.push_back(random_tensor(in, rng));
  }
  b.out = c.build(b.g, params);
  return b;
}

void check_close(const Tensor& a, const Tensor& b, double tol, const char* what) {
  REQUIRE(a.same_type(b));
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.get(i), y = b.get(i);
    INFO(what << " element " << i << ": " << x << " vs " << y);
    CHECK(std::fabs(x - y) <= tol * (1 + std::fabs(y)));
  }
}

// loss(args) = sum(out * weights); returns its value in double.
double loss_of(const Executable& exe, const std::vector<Tensor>& args) {
  Tensor r = exe.run(args)[0];
  return r.get(0);
}

}  // namespace

TEST_CASE("every op has a row and a test case") {
  std::set<Op> seen;
  for (const OpCase& c : cases()) {
    Built b = build_case(c, 1);
    for (const Node& n : b.g.nodes) seen.insert(n.op);
  }
  for (int op = 0; op < kNumOps; ++op) {
    INFO("op " << op_name(Op(op)) << " has no test case");
    CHECK(seen.count(Op(op)) == 1);
    CHECK(op_info(Op(op)).op == Op(op));
  }
}

TEST_CASE("fast kernels agree with the reference kernels") {
  for (const OpCase& c : cases()) {
    SUBCASE(c.name) {
      Built b = build_case(c, 7);
      b.g.outputs = {b.out};
      CompileOptions reference;
      reference.reference_kernels = true;
      reference.optimize = false;
      CompileOptions fast_unoptimized;
      fast_unoptimized.optimize = false;
      Executable ref = Executable::compile(b.g, reference);
      Executable fast = Executable::compile(b.g, fast_unoptimized);
      check_close(fast.run(b.args)[0], ref.run(b.args)[0], 1e-5, c.name);
    }
  }
}

TEST_CASE("gradients agree with central finite differences") {
  for (const OpCase& c : cases()) {
    Built probe = build_case(c, 3);
    if (!is_float(probe.g.at(probe.out).dtype) || !c.differentiable) continue;
    SUBCASE(c.name) {
      Built b = build_case(c, 11);
      Graph& g = b.g;
      std::mt19937 rng(5);
      Tensor w = random_tensor({DType::f32, g.at(b.out).shape}, rng);
      NodeId weighted = g.binary(Op::mul, b.out, g.constant(w));
      std::vector<int64_t> all(g.at(weighted).shape.size());
      for (size_t k = 0; k < all.size(); ++k) all[k] = int64_t(k);
      NodeId loss = g.reduce(weighted, all, ReduceKind::sum);
      std::vector<NodeId> float_params;
      for (NodeId p : g.params)
        if (is_float(g.at(p).dtype)) float_params.push_back(p);
      std::vector<NodeId> grads = gradients(g, loss, float_params);
      Graph loss_graph = g;
      loss_graph.outputs = {loss};
      g.outputs = grads;
      CompileOptions reference;
      reference.reference_kernels = true;
      Executable loss_exe = Executable::compile(loss_graph, reference);
      Executable grad_exe = Executable::compile(g);
      std::vector<Tensor> analytic = grad_exe.run(b.args);
      size_t gi = 0;
      for (size_t p = 0; p < b.args.size(); ++p) {
        if (!is_float(b.args[p].dtype())) continue;
        const Tensor& an = analytic[gi++];
        for (int64_t e = 0; e < b.args[p].size(); ++e) {
          const double eps = 1e-3, x0 = b.args[p].get(e);
          std::vector<Tensor> plus = b.args, minus = b.args;
          plus[p] = Tensor(b.args[p].dtype(), b.args[p].shape());
          minus[p] = Tensor(b.args[p].dtype(), b.args[p].shape());
          std::memcpy(plus[p].raw(), b.args[p].raw(), b.args[p].bytes());
          std::memcpy(minus[p].raw(), b.args[p].raw(), b.args[p].bytes());
          plus[p].set(e, x0 + eps);
          minus[p].set(e, x0 - eps);
          double numeric = (loss_of(loss_exe, plus) - loss_of(loss_exe, minus)) / (2 * eps);
          INFO(c.name << " input " << p << " element " << e << ": analytic " << an.get(e) << " numeric " << numeric);
          CHECK(std::fabs(an.get(e) - numeric) <= 2e-2 * (1 + std::fabs(numeric)));
        }
      }
    }
  }
}

TEST_CASE("dot results do not depend on the thread count") {
  Graph g;
  NodeId a = g.parameter(DType::f32, {64, 300});
  NodeId b = g.parameter(DType::f32, {300, 700});
  g.outputs = {g.dot(a, b)};
  std::mt19937 rng(2);
  std::vector<Tensor> args = {random_tensor({DType::f32, {64, 300}}, rng), random_tensor({DType::f32, {300, 700}}, rng)};
  Executable exe = Executable::compile(g);
  set_num_threads(1);
  Tensor one = exe.run(args)[0];
  set_num_threads(2);
  Tensor two = exe.run(args)[0];
  set_num_threads(0);
  CHECK(std::memcmp(one.raw(), two.raw(), one.bytes()) == 0);
}

TEST_CASE("shape rules return errors that name the operands") {
  Graph g;
  NodeId a = g.parameter(DType::f32, {2, 3});
  NodeId b = g.parameter(DType::f32, {4, 5});
  CHECK_THROWS_WITH_AS(g.dot(a, b), doctest::Contains("f32[2,3], f32[4,5]"), Error);
  CHECK_THROWS_WITH_AS(g.binary(Op::add, a, b), doctest::Contains("f32[2,3], f32[4,5]"), Error);
  CHECK_THROWS_WITH_AS(g.reshape(a, {7}), doctest::Contains("cannot reshape f32[2,3]"), Error);
  CHECK_THROWS_AS(g.unary(Op::exp, g.parameter(DType::i32, {2})), Error);
}

TEST_CASE("gather reports an index out of range instead of reading outside the tensor") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {3, 2});
  NodeId idx = g.parameter(DType::i32, {1});
  g.outputs = {g.gather(x, idx)};
  Tensor bad(DType::i32, {1});
  bad.set(0, 3);
  Executable exe = Executable::compile(g);
  CHECK_THROWS_WITH_AS(exe.run(std::vector<Tensor>{Tensor(DType::f32, {3, 2}), bad}), doctest::Contains("index 3 out of range"), Error);
}
