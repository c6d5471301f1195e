// Lock-step fusions (runtime/lockstep.h): Adam's updates of one weight run range by range,
// with results bitwise those of the reference kernels; runs are cut where buffers would clash.
#include <doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "ops/reduce.h"
#include "ops/reduce_window.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "runtime/lockstep.h"
#include "runtime/thread_pool.h"

using namespace tpu;

namespace {

// w, m, v, g [256, 512] and a step size: Adam's three updates, with a reduction of g between
// m' and v' in graph order (so the scheduler has to bring them together).
Graph adam_update() {
  Graph g;
  const Shape s{256, 512};
  NodeId w = g.parameter(DType::f32, s), m = g.parameter(DType::f32, s), v = g.parameter(DType::f32, s);
  NodeId grad = g.parameter(DType::f32, s), alpha = g.parameter(DType::f32, {});
  auto times = [&](NodeId x, double c) { return g.binary(Op::mul, x, g.full(DType::f32, s, c)); };
  NodeId m2 = g.binary(Op::add, times(m, 0.9), times(grad, 0.1));
  NodeId norm = g.reduce(grad, {0, 1}, ReduceKind::sum);
  NodeId v2 = g.binary(Op::add, times(v, 0.999), times(g.binary(Op::mul, grad, grad), 0.001));
  NodeId step = g.binary(Op::div, g.binary(Op::mul, g.broadcast(alpha, s, {}), m2),
                         g.binary(Op::add, g.unary(Op::sqrt, v2), g.full(DType::f32, s, 1e-7)));
  g.outputs = {g.binary(Op::sub, w, step), m2, v2, norm};
  return g;
}

std::vector<Tensor> adam_inputs() {
  std::vector<Tensor> args;
  for (int a = 0; a < 4; ++a) {
    Tensor t(DType::f32, {256, 512});
    for (int64_t i = 0; i < t.size(); ++i) t.set(i, a == 2 ? 1 + std::cos(double(i + a)) : std::sin(double(i * (a + 1))));
    args.push_back(t);
  }
  Tensor alpha(DType::f32, {});
  alpha.set(0, 1e-3);
  args.push_back(alpha);
  return args;
}

std::vector<Tensor> copies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) {
    Tensor c(t.dtype(), t.shape());
    std::memcpy(c.raw(), t.raw(), t.bytes());
    out.push_back(c);
  }
  return out;
}

}  // namespace

TEST_CASE("Adam's three updates of a weight run in lock-step, bitwise as one after the other") {
  CompileOptions lockstep;
  lockstep.donated = {true, true, true, false, false};  // w, m, v updated in place
  Executable exe = Executable::compile(adam_update(), lockstep);
  CHECK(exe.lockstep_members() == 3);
  CompileOptions apart = lockstep;
  apart.lockstep = false;
  Executable sequential = Executable::compile(adam_update(), apart);
  CHECK(sequential.lockstep_members() == 0);

  const std::vector<Tensor> inputs = adam_inputs();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<Tensor> got = exe.run(copies(inputs)), want = sequential.run(copies(inputs));
    REQUIRE(got.size() == 4);
    for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0, i);
    CHECK(got[0].get(7) != inputs[0].get(7));  // the weight moved
  }
  set_num_threads(0);
}

namespace {

// The fused Adam graph, its scheduled nodes in graph order (every op but parameters and
// constants) and the fusions computing m', v' and the new weight.
struct Fused {
  Graph g;
  std::vector<NodeId> order, fusions;
};
Fused fused_adam() {
  Fused f{run_pipeline(adam_update(), {}), {}, {}};
  for (NodeId n = 0; n < NodeId(f.g.nodes.size()); ++n) {
    const Op op = f.g.at(n).op;
    if (op == Op::parameter || op == Op::constant) continue;
    f.order.push_back(n);
    if (op == Op::fusion && f.g.at(n).shape == Shape{256, 512}) f.fusions.push_back(n);
  }
  return f;
}

}  // namespace

TEST_CASE("the scheduler moves m' and v' next to the weight update and makes them one run") {
  Fused f = fused_adam();
  REQUIRE(f.fusions.size() == 3);
  const std::vector<int32_t> slot(f.g.nodes.size(), 0);
  for (int32_t run : lockstep_runs(f.g, f.order, slot)) CHECK(run < 3);  // the reduce sits between m' and v'
  const std::vector<NodeId> order = sink_into_readers(f.g, f.order, slot);
  REQUIRE(order.size() == f.order.size());
  const auto at = std::find(order.begin(), order.end(), f.fusions[0]) - order.begin();
  REQUIRE(at + 3 <= std::ptrdiff_t(order.size()));
  CHECK(std::vector<NodeId>(order.begin() + at, order.begin() + at + 3) == f.fusions);
  const std::vector<int32_t> runs = lockstep_runs(f.g, order, slot);
  CHECK(runs[size_t(at)] == 3);
  // Another schedule class keeps a reader apart.
  std::vector<int32_t> split = slot;
  split[size_t(f.fusions[2])] = 1;
  const std::vector<NodeId> kept = sink_into_readers(f.g, f.order, split);
  CHECK(kept == f.order);
}

namespace {

// A fusion of [256,512] values: `%id = fusion f32[256,512] %a {abs}`, or with two operands {a * b}.
std::string fusion_line(int id, int a, int b = -1) {
  const std::string head = "%" + std::to_string(id) + " = fusion f32[256,512] %" + std::to_string(a);
  if (b < 0)
    return head + " {\n  %0 = parameter f32[256,512] index=0\n  %1 = abs f32[256,512] %0\n  return %1\n}\n";
  return head + ", %" + std::to_string(b) +
         " {\n  %0 = parameter f32[256,512] index=0\n  %1 = parameter f32[256,512] index=1\n"
         "  %2 = mul f32[256,512] %0, %1\n  return %2\n}\n";
}

// sink_into_readers(order) of g: the same nodes, each operand before its readers.
std::vector<NodeId> sunk_in_order(const Graph& g, const std::vector<NodeId>& order, const std::vector<int32_t>& slot) {
  const std::vector<NodeId> sunk = sink_into_readers(g, order, slot);
  std::vector<NodeId> sorted = sunk, want = order;
  std::sort(sorted.begin(), sorted.end()), std::sort(want.begin(), want.end());
  CHECK(sorted == want);
  for (size_t k = 0; k < sunk.size(); ++k)
    for (NodeId i : g.at(sunk[k]).in) {
      const auto at = std::find(sunk.begin(), sunk.end(), i);
      CHECK_MESSAGE((at == sunk.end() || at < sunk.begin() + std::ptrdiff_t(k)), "%" << i << " after its reader %" << sunk[k]);
    }
  return sunk;
}

// g's program (nodes 1.. in order, one slot) schedules its operands first and gives the
// reference kernels' bits on x [256, 512].
std::vector<NodeId> check_schedule(const std::string& text) {
  const Graph g = parse_graph(text);
  std::vector<NodeId> order;
  for (NodeId n = 1; n < NodeId(g.nodes.size()); ++n) order.push_back(n);
  const std::vector<NodeId> sunk = sunk_in_order(g, order, std::vector<int32_t>(g.nodes.size(), 0));
  CompileOptions plain;
  plain.optimize = false;
  CompileOptions reference = plain;
  reference.reference_kernels = true;
  Tensor x(DType::f32, {256, 512});
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, std::sin(double(i)));
  const std::vector<Tensor> got = Executable::compile(g, plain).run(std::vector<Tensor>{x});
  const std::vector<Tensor> want = Executable::compile(g, reference).run(std::vector<Tensor>{x});
  for (size_t i = 0; i < got.size(); ++i) CHECK(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0);
  return sunk;
}

}  // namespace

// A fusion a waits on its first reader b, a fusion that waits in turn on its own reader c; a
// sum of a sits between b and c. Pulled in before c, a would land past the sum that reads it
// (a LayerNorm gradient's in GPT-2 read a value never made): a stays before its readers. So it
// does where it would land past two readers (two sums, as a LayerNorm gradient takes), or past
// one reading it twice: the schedule was once checked as it was being mended, and threw.
TEST_CASE("a fusion whose first reader is deferred in turn stays before its other readers") {
  const std::string head = "graph g\n%0 = parameter f32[256,512] index=0\n" + fusion_line(1, 0) + fusion_line(2, 1);
  const std::vector<NodeId> sunk =
      check_schedule(head + "%3 = reduce f32[512] %1 dims=[0] kind=sum\n" + fusion_line(4, 2, 0) + "return %4, %3\n");
  CHECK(sunk.back() == 4);
  check_schedule(head + "%3 = reduce f32[512] %1 dims=[0] kind=sum\n%4 = reduce f32[256] %1 dims=[1] kind=sum\n" +
                 fusion_line(5, 2, 0) + "return %5, %3, %4\n");
  check_schedule(head + fusion_line(3, 1, 1) + fusion_line(4, 2, 0) + "return %4, %3\n");
}

// Random graphs of [256,512] fusions, sums and negations, in one slot or several: every
// schedule keeps each operand before its readers (140 of these 2000 threw before the fix
// above).
TEST_CASE("random graphs: deferred fusions never land past a reader") {
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text = "graph g\n%0 = parameter f32[256,512] index=0\n";
    std::vector<int> full = {0};  // the [256,512] values
    const int count = 3 + int(next(14));
    for (int id = 1; id <= count; ++id) {
      const int kind = int(next(10)), a = full[next(full.size())], b = full[next(full.size())];
      if (kind < 7) text += fusion_line(id, a, b), full.push_back(id);
      else if (kind < 9)
        text += "%" + std::to_string(id) + " = reduce f32[512] %" + std::to_string(a) + " dims=[0] kind=sum\n";
      else text += "%" + std::to_string(id) + " = neg f32[256,512] %" + std::to_string(a) + "\n", full.push_back(id);
    }
    text += "return %1";
    for (int id = 2; id <= count; ++id) text += ", %" + std::to_string(id);
    const Graph g = parse_graph(text + "\n");
    std::vector<NodeId> order;
    std::vector<int32_t> slot(g.nodes.size(), 0);
    for (NodeId n = 1; n <= count; ++n) {
      order.push_back(n);
      slot[size_t(n)] = trial % 2 ? int32_t(n) / 4 : 0;
    }
    INFO(text);
    CHECK_NOTHROW(sunk_in_order(g, order, slot));
  }
}

TEST_CASE("a run is safe only where overlapping buffers are the same one, read in step") {
  Fused f = fused_adam();
  REQUIRE(f.fusions.size() == 3);
  const Graph& g = f.g;
  // Every value its own buffer; the weight update (fusions[2]) may write into w's (parameter 0).
  std::function<BufferRange(NodeId)> own = [&](NodeId n) {
    return BufferRange{n == f.fusions[2] ? 0 : -3 - int64_t(n), 0, 512 * 1024};
  };
  auto w_buffer = [&](NodeId n) { return n == g.params[0] ? BufferRange{0, 0, 512 * 1024} : own(n); };
  CHECK(lockstep_safe(g, f.fusions, w_buffer));
  // m' lands in the arena where the gradient is, shifted by one row: the weight update would
  // read gradient rows that m' already overwrote.
  auto shifted = [&](NodeId n) {
    if (n == g.params[3]) return BufferRange{-1, 0, 512 * 1024};
    if (n == f.fusions[0]) return BufferRange{-1, 2048, 2048 + 512 * 1024};
    return w_buffer(n);
  };
  CHECK_FALSE(lockstep_safe(g, f.fusions, shifted));
  // Two results in one buffer.
  auto shared_result = [&](NodeId n) { return n == f.fusions[1] ? own(f.fusions[0]) : w_buffer(n); };
  CHECK_FALSE(lockstep_safe(g, f.fusions, shared_result));
}

namespace {

// A relu's gradient dy = (y > 0 ? g : 0), then its sums over `dims` (a bias gradient), of dy * x
// (a BatchNorm's) and the largest dy: after the pipeline, one fusion, a reduce and two
// reduce_fusions, each reading dy or what makes it.
Graph gradient_sums(const Shape& s, const Dims& dims) {
  Graph g;
  const NodeId y = g.parameter(DType::f32, s), grad = g.parameter(DType::f32, s), x = g.parameter(DType::f32, s);
  const NodeId dy = g.select(g.compare(Cmp::gt, y, g.full(DType::f32, s, 0)), grad, g.full(DType::f32, s, 0));
  g.outputs = {dy, g.reduce(dy, dims, ReduceKind::sum), g.reduce(g.binary(Op::mul, dy, x), dims, ReduceKind::sum),
               g.reduce(g.binary(Op::add, dy, x), dims, ReduceKind::max)};
  return g;
}

std::vector<Tensor> gradient_sum_inputs(const Shape& s) {
  std::vector<Tensor> args;
  for (int a = 0; a < 3; ++a) {
    Tensor t(DType::f32, s);
    for (int64_t i = 0; i < t.size(); ++i) t.set(i, std::sin(double(i * (a + 3)) * 0.37) * (1 + i % 7));
    args.push_back(t);
  }
  return args;
}

}  // namespace

// Over leading dims (columns 256 wide: tiles of 128 rows; 96 wide: of 336, whole chunks; 1001
// wide: a tile of 32 rows cuts the fusion's chunks, so the run goes one after the other) and
// over the last dim (rows).
TEST_CASE("a fusion and the reductions that read it run tile by tile, bitwise as one after the other") {
  struct Case {
    Shape shape;
    Dims dims;
    size_t members;
  };
  for (const Case& c : {Case{{64, 8, 256}, {0, 1}, 4}, Case{{700, 96}, {0}, 4}, Case{{70, 1001}, {0}, 4},
                      Case{{1024, 128}, {1}, 4}}) {
    INFO("shape " << shape_str(c.shape));
    Executable exe = Executable::compile(gradient_sums(c.shape, c.dims));
    CHECK(exe.lockstep_members() == c.members);
    CompileOptions apart;
    apart.lockstep = false;
    Executable sequential = Executable::compile(gradient_sums(c.shape, c.dims), apart);
    CHECK(sequential.lockstep_members() == 0);
    const std::vector<Tensor> inputs = gradient_sum_inputs(c.shape);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const std::vector<Tensor> got = exe.run(inputs), want = sequential.run(inputs);
      REQUIRE(got.size() == 4);
      for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0, i);
    }
  }
  set_num_threads(0);
}

// Tiles of whole 256-element chunks where one fits, so a fusion's program starts each at a chunk
// and the run goes tile by tile: 96 columns in 336 rows (not 341), 128-element rows 256 at a time;
// 1001 columns fit none (the run goes one after the other).
TEST_CASE("reduction tiles are whole chunks where one fits") {
  CHECK(reduce_tile({700, 96}, std::vector<int64_t>{0}) == 336 * 96);
  CHECK(reduce_tile({64, 8, 256}, std::vector<int64_t>{0, 1}) == 128 * 256);
  CHECK(reduce_tile({1024, 128}, std::vector<int64_t>{1}) == 256 * 128);
  CHECK(reduce_tile({70, 1001}, std::vector<int64_t>{0}) == 32 * 1001);
  CHECK(reduce_tile({70, 4000}, std::vector<int64_t>{0}) == 0);       // wider than a tile's columns
  CHECK(reduce_tile({4, 70, 96}, std::vector<int64_t>{1}) == 0);      // columns of several slices
}

// A reduction joins the run of the fusion it reads only over the same dims as the run's others,
// and a fusion after a reduction starts a run of its own.
TEST_CASE("reductions join a run over its shape and the dims of its first reduction") {
  Graph g;
  const Shape s{256, 512};
  const NodeId x = g.parameter(DType::f32, s);
  const NodeId f = g.unary(Op::exp, g.unary(Op::neg, x));
  const NodeId by_rows = g.reduce(f, {1}, ReduceKind::sum), by_columns = g.reduce(f, {0}, ReduceKind::sum);
  const NodeId after = g.unary(Op::tanh, g.unary(Op::neg, f));
  g.outputs = {by_rows, by_columns, after, f};
  Graph fused = run_pipeline(g, {});
  std::vector<NodeId> order;
  for (NodeId n = 0; n < NodeId(fused.nodes.size()); ++n)
    if (fused.at(n).op != Op::parameter && fused.at(n).op != Op::constant) order.push_back(n);
  REQUIRE(order.size() == 4);  // fusion, reduce, reduce, fusion
  CHECK(fused.at(order[0]).op == Op::fusion);
  CHECK(fused.at(order[3]).op == Op::fusion);
  const std::vector<int32_t> slot(fused.nodes.size(), 0);
  const std::vector<int32_t> runs = lockstep_runs(fused, order, slot);
  CHECK(runs == std::vector<int32_t>{2, 0, 0, 0});
}

namespace {

// relu(conv(x, w) + b) and a second reader of the conv's result, (conv + b) * 2: a 3x3 "same"
// conv of x [n,28,28,ci] to co channels; after the pipeline, a conv then two fusions. Pooled:
// the relu max-pooled instead, its fusion alone (writing over the conv's result), then the pool.
Graph conv_then_fusions(int64_t n, int64_t co, bool pooled = false, int64_t ci = 1) {
  Graph g;
  const NodeId x = g.parameter(DType::f32, {n, 28, 28, ci}), w = g.parameter(DType::f32, {3, 3, ci, co});
  const NodeId b = g.parameter(DType::f32, {co});
  Window2D same;
  same.size = {3, 3}, same.pad_lo = {1, 1}, same.pad_hi = {1, 1};
  const NodeId y = g.conv(x, w, same);
  const Shape s = g.at(y).shape;
  const NodeId biased = g.binary(Op::add, y, g.broadcast(b, s, {3}));
  const NodeId relu = g.binary(Op::max, biased, g.full(DType::f32, s, 0));
  g.outputs = {relu, g.binary(Op::mul, biased, g.full(DType::f32, s, 2))};
  Window2D pool;
  pool.size = {2, 2}, pool.stride = {2, 2};
  if (pooled) g.outputs = {g.reduce_window(relu, WindowKind::max, pool)};
  return g;
}

std::vector<Tensor> conv_inputs(int64_t n, int64_t co, int64_t ci = 1) {
  std::vector<Tensor> args{Tensor(DType::f32, {n, 28, 28, ci}), Tensor(DType::f32, {3, 3, ci, co}), Tensor(DType::f32, {co})};
  for (size_t a = 0; a < args.size(); ++a)
    for (int64_t i = 0; i < args[a].size(); ++i) args[a].set(i, std::sin(double(i) * 0.61 + double(a)) * (1 + i % 5));
  return args;
}

}  // namespace

// 8 images of 1 channel to 32 (the few-taps kernel) and 9 of 8 channels (oneDNN's, its last
// chunk one image): chunks of 2 images, 50176 elements, whole 256-element chunks of the
// fusions' programs. 32 images to 3 channels: chunks of 4704 elements would cut them, so
// the conv runs alone (its two fusions still run in lock-step with each other).
TEST_CASE("a conv and the fusions that read its result run chunk by chunk, bitwise as one after the other") {
  struct Case {
    int64_t n, ci, co;
    size_t members;
  };
  for (const Case& c : {Case{8, 1, 32, 3}, Case{9, 8, 32, 3}, Case{32, 1, 3, 2}}) {
    INFO(c.n << " images, " << c.ci << " to " << c.co << " channels");
    Executable exe = Executable::compile(conv_then_fusions(c.n, c.co, false, c.ci));
    CHECK(exe.lockstep_members() == c.members);
    CompileOptions apart;
    apart.lockstep = false;
    Executable sequential = Executable::compile(conv_then_fusions(c.n, c.co, false, c.ci), apart);
    const std::vector<Tensor> inputs = conv_inputs(c.n, c.co, c.ci);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const std::vector<Tensor> got = exe.run(inputs), want = sequential.run(inputs);
      REQUIRE(got.size() == 2);
      for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0, i);
    }
  }
  set_num_threads(0);
}

TEST_CASE("a fusion after a conv writes over the conv's result and a pool reads it, chunk by chunk") {
  Executable exe = Executable::compile(conv_then_fusions(8, 32, true));
  CHECK(exe.lockstep_members() == 3);
  size_t conv = 1, fusion = 0;
  for (const Buffer& b : exe.memory_plan().buffers) {
    if (exe.graph().at(b.node).op == Op::conv) conv = b.offset;
    if (exe.graph().at(b.node).op == Op::fusion) fusion = b.offset;
  }
  CHECK(conv == fusion);
  CompileOptions apart;
  apart.lockstep = false;
  Executable sequential = Executable::compile(conv_then_fusions(8, 32, true), apart);
  const std::vector<Tensor> inputs = conv_inputs(8, 32);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const Tensor got = exe.run(inputs)[0], want = sequential.run(inputs)[0];
    CHECK(std::memcmp(got.raw(), want.raw(), got.bytes()) == 0);
  }
  set_num_threads(0);
}

namespace {

// A max pool's gradient, summed for a bias gradient and, through a fusion, for a sum of squares:
// select_and_scatter(relu(p), dy) over 2x2 windows of n images [28,28,32], then two reductions
// over [0,1,2]. The relu is an intermediate read only by the scatter, which writes over it.
// With ci > 0, also the filter gradient of a 3x3 "same" conv of an input [n,28,28,ci] whose
// output gradient is the scatter's result; with `between`, an input gradient's conv of that
// result to 8 channels comes first in graph order.
Graph scatter_then_sums(int64_t n, int64_t ci = 0, bool between = false) {
  Graph g;
  const Shape s{n, 28, 28, 32};
  const NodeId p = g.parameter(DType::f32, s), dy = g.parameter(DType::f32, {n, 14, 14, 32});
  const NodeId relu = g.binary(Op::max, p, g.full(DType::f32, s, 0));
  Window2D pool;
  pool.size = {2, 2}, pool.stride = {2, 2};
  const NodeId dx = g.select_and_scatter(relu, dy, pool);
  g.outputs = {g.reduce(dx, {0, 1, 2}, ReduceKind::sum), g.reduce(g.binary(Op::mul, dx, dx), {0, 1, 2}, ReduceKind::sum)};
  if (ci == 0) return g;
  Window2D same;
  same.size = {3, 3}, same.pad_lo = {1, 1}, same.pad_hi = {1, 1};
  const NodeId x = g.parameter(DType::f32, {n, 28, 28, ci});
  if (between) g.outputs.push_back(g.conv(dx, g.parameter(DType::f32, {3, 3, 32, 8}), same));
  g.outputs.push_back(g.conv_filter_grad(x, dx, same));
  return g;
}

std::vector<Tensor> scatter_inputs(int64_t n, int64_t ci, bool between, bool bf16_exact) {
  std::vector<Tensor> inputs{Tensor(DType::f32, {n, 28, 28, 32}), Tensor(DType::f32, {n, 14, 14, 32})};
  if (ci > 0) inputs.emplace_back(DType::f32, Shape{n, 28, 28, ci});
  if (between) inputs.emplace_back(DType::f32, Shape{3, 3, 32, 8});
  for (size_t a = 0; a < inputs.size(); ++a)
    for (int64_t i = 0; i < inputs[a].size(); ++i) {
      const float v = float(std::sin(double(i) * 0.37 + double(a)) * (1 + i % 7));
      inputs[a].set(i, bf16_exact ? bf16_to_f32(f32_to_bf16(v)) : v);
    }
  return inputs;
}

}  // namespace

// 784 rows an image against tiles of 1024 rows: tiles span two images and the last is short,
// so a tile reduced before its last image is made reads the relu's values still there (the
// scatter writes over them).
TEST_CASE("a max pool's gradient and the sums of its result run image by image, bitwise as one after the other") {
  struct Case {
    int64_t n, ci;
    bool between = false, bf16_exact = false;
    size_t members;
  };
  // Filter gradients of 1 input channel (the few-taps kernel) and of 6 and 8 (oneDNN's f32
  // primitive), the latter pulled before an input gradient; of 8 exactly bf16 inputs (oneDNN's
  // bf16 primitives, where the CPU has them), which the run leaves to the kernel.
  for (const Case& c : {Case{3, 0, false, false, 3}, Case{5, 0, false, false, 3}, Case{12, 0, false, false, 3},
                        Case{5, 1, false, false, 4}, Case{12, 1, false, false, 4}, Case{5, 6, false, false, 4},
                        Case{5, 8, true, false, 4}, Case{5, 8, true, true, 4}}) {
    INFO(c.n << " images, filter gradient of " << c.ci << " channels" << std::string(c.bf16_exact ? ", exactly bf16" : ""));
    Executable exe = Executable::compile(scatter_then_sums(c.n, c.ci, c.between));
    CHECK(exe.lockstep_members() == c.members);
    size_t relu = 1, scatter = 0;
    bool vector_kernel = false;  // the scatter may write over the relu (ops/reduce_window.h)
    for (const Buffer& b : exe.memory_plan().buffers) {
      const Node& n = exe.graph().at(b.node);
      if (n.op == Op::fusion && b.bytes >= size_t(c.n * 28 * 28 * 32 * 4)) relu = b.offset;
      if (n.op == Op::select_and_scatter) scatter = b.offset, vector_kernel = scatter_may_write_over_input(exe.graph(), n);
    }
    CHECK((relu == scatter) == vector_kernel);
    CompileOptions apart;
    apart.lockstep = false;
    Executable sequential = Executable::compile(scatter_then_sums(c.n, c.ci, c.between), apart);
    const std::vector<Tensor> inputs = scatter_inputs(c.n, c.ci, c.between, c.bf16_exact);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const std::vector<Tensor> got = exe.run(inputs), want = sequential.run(inputs);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0, i);
    }
  }
  set_num_threads(0);
}

// A filter gradient whose input is the pool gradient itself stays out of the run: the run looks
// at its input before the scatter has made it.
TEST_CASE("a filter gradient of the pool gradient by itself does not join its run") {
  Graph g = scatter_then_sums(5);
  Window2D same;
  same.size = {3, 3}, same.pad_lo = {1, 1}, same.pad_hi = {1, 1};
  const NodeId dx = g.at(g.outputs[0]).in[0];
  REQUIRE(g.at(dx).op == Op::select_and_scatter);
  g.outputs.push_back(g.conv_filter_grad(dx, dx, same));
  CHECK(Executable::compile(g).lockstep_members() == 3);
}
