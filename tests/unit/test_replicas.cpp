// Replicated (SPMD) execution: sharded arguments, all_reduce in a fixed order, invariant
// results computed once, per-replica results stacked, independence from the thread count.
#include <doctest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"

using namespace tpu;

namespace {

// loss_r = sum(x_r * w) on each replica's rows; total = all_reduce(loss); w2 = w - total.
Graph replicated_step() {
  Graph g;
  NodeId w = g.parameter(DType::f32, {3});
  NodeId x = g.parameter(DType::f32, {2, 3});  // one replica's rows
  NodeId loss = g.reduce(g.binary(Op::mul, x, g.broadcast(w, {2, 3}, {1})), {0, 1}, ReduceKind::sum);
  NodeId total = g.add(Op::all_reduce, {loss});
  NodeId w2 = g.binary(Op::sub, w, g.broadcast(total, {3}, {}));
  g.outputs = {w2, total, loss};
  return g;
}

Tensor iota_tensor(Shape s) {
  Tensor t(DType::f32, std::move(s));
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, double(i + 1));
  return t;
}

}  // namespace

TEST_CASE("replicas get their rows, all_reduce sums them, results come back right") {
  CompileOptions o;
  o.replicas = 4;
  o.sharded = {false, true};
  Executable exe = Executable::compile(replicated_step(), o);
  Tensor w = iota_tensor({3});                // 1 2 3
  Tensor x = iota_tensor({8, 3});             // 4 replicas x 2 rows
  std::vector<Tensor> r = exe.run(std::vector<Tensor>{w, x});
  // per replica r: rows 2r, 2r+1; loss_r = sum over its 6 values of x * w
  double total = 0, per[4] = {0, 0, 0, 0};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 3; ++j) per[i / 2] += x.get(i * 3 + j) * w.get(j);
  for (double p : per) total += p;
  CHECK(r[1].shape() == Shape{});
  CHECK(r[1].get(0) == total);
  CHECK(r[0].get(2) == 3 - total);
  REQUIRE(r[2].shape() == Shape{4});  // the per-replica loss, stacked
  for (int i = 0; i < 4; ++i) CHECK(r[2].get(i) == per[i]);
  CHECK(!exe.output_per_replica(0));
  CHECK(exe.output_per_replica(2));
}

TEST_CASE("a sharded argument must hold every replica's rows") {
  CompileOptions o;
  o.replicas = 4;
  o.sharded = {false, true};
  Executable exe = Executable::compile(replicated_step(), o);
  CHECK_THROWS_WITH_AS(exe.run(std::vector<Tensor>{iota_tensor({3}), iota_tensor({2, 3})}),
                       doctest::Contains("should be f32[8,3]"), Error);
}

TEST_CASE("replicated results do not depend on the thread count") {
  Graph g;
  NodeId w = g.parameter(DType::f32, {64, 256});
  NodeId x = g.parameter(DType::f32, {16, 64});
  NodeId h = g.unary(Op::tanh, g.dot(x, w));
  NodeId gw = g.add(Op::all_reduce, {g.dot(x, h, true, false)});
  g.outputs = {g.binary(Op::sub, w, gw)};
  CompileOptions o;
  o.replicas = 8;
  o.sharded = {false, true};
  Executable exe = Executable::compile(g, o);
  Tensor wt = iota_tensor({64, 256}), xt = iota_tensor({128, 64});
  for (int64_t i = 0; i < wt.size(); ++i) wt.set(i, std::sin(double(i)) * 0.01);
  for (int64_t i = 0; i < xt.size(); ++i) xt.set(i, std::cos(double(i)));
  set_num_threads(1);
  Tensor one = exe.run(std::vector<Tensor>{wt, xt})[0];
  set_num_threads(2);
  Tensor two = exe.run(std::vector<Tensor>{wt, xt})[0];
  set_num_threads(0);
  CHECK(std::memcmp(one.raw(), two.raw(), one.bytes()) == 0);
}

TEST_CASE("a value every replica reads is not overwritten by a replica that runs ahead") {
  // v = exp(w) is computed once and read by every replica early on; replica 0 then frees and
  // reuses buffers of v's size while later replicas have yet to read v.
  auto build = [] {
    Graph g;
    NodeId w = g.parameter(DType::f32, {2, 64});
    NodeId x = g.parameter(DType::f32, {2, 64});  // one replica's rows
    NodeId v = g.add(Op::exp, {w});
    NodeId a = g.binary(Op::mul, x, v);
    for (Op op : {Op::tanh, Op::exp, Op::neg, Op::exp, Op::tanh, Op::neg}) a = g.add(op, {a});
    g.outputs = {g.reduce(a, {0, 1}, ReduceKind::sum)};
    return g;
  };
  CompileOptions o;
  o.replicas = 4;
  o.sharded = {false, true};
  o.optimize = false;  // keep every step its own buffer
  Executable exe = Executable::compile(build(), o);
  Tensor w(DType::f32, {2, 64}), x(DType::f32, {8, 64});
  for (int64_t i = 0; i < w.size(); ++i) w.set(i, 0.01 * double(i % 7));
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, 0.02 * double(i % 11) - 0.1);
  CompileOptions one;
  one.optimize = false;
  Executable single = Executable::compile(build(), one);
  for (int run = 0; run < 3; ++run) {
    std::vector<Tensor> r = exe.run(std::vector<Tensor>{w, x});
    REQUIRE(r[0].shape() == Shape{4});
    for (int rep = 0; rep < 4; ++rep) {
      Tensor rows = x.rows(2 * rep, 2);
      CHECK(r[0].get(rep) == single.run(std::vector<Tensor>{w, rows})[0].get(0));
    }
  }
}

namespace {

Tensor wavy(Shape s, double scale, double phase) {
  Tensor t(DType::f32, std::move(s));
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, std::sin(double(i) * 0.37 + phase) * scale);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// One replica's program: h = tanh(x w); gw = x^T h (a weight gradient's shape), all-reduced;
// then more per-replica work of h's size after the product, which could take h's buffer if
// the product's operands were freed before the all_reduce reads them.
Graph weight_gradient_step(bool product_is_output, int64_t kind) {
  Graph g;
  NodeId w = g.parameter(DType::f32, {64, 300});
  NodeId x = g.parameter(DType::f32, {16, 64});  // one replica's rows
  NodeId h = g.unary(Op::tanh, g.dot(x, w));
  NodeId gw = g.dot(x, h, true, false);
  Attrs mean;
  mean.axis = kind;
  NodeId total = g.add(Op::all_reduce, {gw}, mean);
  NodeId later = h;
  for (Op op : {Op::exp, Op::neg, Op::tanh}) later = g.add(op, {later});
  NodeId loss = g.add(Op::all_reduce, {g.reduce(later, {0, 1}, ReduceKind::sum)});
  g.outputs = {g.binary(Op::sub, w, total), loss};
  if (product_is_output) g.outputs.push_back(gw);
  return g;
}

}  // namespace

TEST_CASE("an all_reduce of a per-replica dot sums the products as they come: the bits of the per-replica path") {
  for (int64_t kind : {0, 1}) {  // sum, mean
    for (bool optimize : {true, false}) {
      CAPTURE(kind);
      CAPTURE(optimize);
      CompileOptions o;
      o.replicas = 8;
      o.sharded = {false, true};
      o.optimize = optimize;
      // With the product also a result, every replica computes it in a step of its own and
      // the all_reduce adds the stored products: the path the summed one must reproduce.
      Executable summed = Executable::compile(weight_gradient_step(false, kind), o);
      Executable stored = Executable::compile(weight_gradient_step(true, kind), o);
      const std::vector<Tensor> args{wavy({64, 300}, 0.05, 0.0), wavy({128, 64}, 1.0, 1.0)};
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        std::vector<Tensor> a = summed.run(args), b = stored.run(args);
        CHECK(same_bits(a[0], b[0]));
        CHECK(same_bits(a[1], b[1]));
      }
      set_num_threads(0);
      CHECK(summed.cost().flops == stored.cost().flops);
      CHECK(summed.num_kernels() == stored.num_kernels());
    }
  }
}

TEST_CASE("a summed all_reduce of dots equals each replica's product added in replica order") {
  CompileOptions o;
  o.replicas = 4;
  o.sharded = {false, true};
  Executable exe = Executable::compile(weight_gradient_step(false, 0), o);
  Executable single = Executable::compile(weight_gradient_step(true, 0));
  const Tensor w = wavy({64, 300}, 0.05, 0.0), x = wavy({64, 64}, 1.0, 2.0);
  Tensor sum(DType::f32, {64, 300});
  for (int r = 0; r < 4; ++r) {
    Tensor gw = single.run(std::vector<Tensor>{w, x.rows(16 * r, 16)})[2];
    for (int64_t i = 0; i < sum.size(); ++i)
      sum.data<float>()[i] = r == 0 ? gw.data<float>()[i] : sum.data<float>()[i] + gw.data<float>()[i];
  }
  Tensor expected(DType::f32, {64, 300});
  for (int64_t i = 0; i < sum.size(); ++i) expected.data<float>()[i] = w.data<float>()[i] - sum.data<float>()[i];
  CHECK(same_bits(exe.run(std::vector<Tensor>{w, x})[0], expected));
}

TEST_CASE("two threads running one executable take turns and each get their own results") {
  // Its arena is reused run after run: a data set's map may run on the prefetch thread while
  // the caller's thread runs it too.
  Graph g;
  NodeId x = g.parameter(DType::f32, {64, 64});
  NodeId y = g.unary(Op::exp, g.binary(Op::mul, x, x));
  g.outputs = {g.reduce(g.binary(Op::add, y, x), {0, 1}, ReduceKind::sum)};
  const Executable exe = Executable::compile(std::move(g));
  auto expected = [&](float scale) {
    Tensor t = iota_tensor({64, 64});
    double sum = 0;
    for (int64_t i = 0; i < t.size(); ++i) {
      const float v = float(t.get(i)) * scale;
      sum += double(std::exp(v * v) + v);
    }
    return sum;
  };
  auto work = [&](float scale, int& wrong) {
    Tensor t = iota_tensor({64, 64});
    for (int64_t i = 0; i < t.size(); ++i) t.set(i, t.get(i) * scale);
    const double want = expected(scale);
    for (int k = 0; k < 300; ++k) {
      const double got = exe.run(std::vector<Tensor>{t})[0].get(0);
      if (std::abs(got - want) > 1e-4 * std::abs(want)) ++wrong;
    }
  };
  int wrong_a = 0, wrong_b = 0;
  std::thread other([&] { work(1e-3f, wrong_b); });
  work(2e-4f, wrong_a);
  other.join();
  CHECK(wrong_a == 0);
  CHECK(wrong_b == 0);
}

TEST_CASE("kernels run under OpTimesExcluded stay out of op_times") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {8});
  g.outputs = {g.unary(Op::exp, x)};
  const Executable exe = Executable::compile(std::move(g));
  const std::vector<Tensor> args = {iota_tensor({8})};
  auto calls = [] {
    int64_t n = 0;
    for (const OpTime& t : op_times()) n += t.calls;
    return n;
  };
  set_op_profiling(true);
  const int64_t before = calls();
  {
    OpTimesExcluded untimed;
    exe.run(args);
  }
  CHECK(calls() == before);
  exe.run(args);
  CHECK(calls() > before);
  set_op_profiling(false);
}
