// The memory plan: no two buffers live at once overlap; peaks match hand-computed values.
#include <doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "ops/reduce_window.h"
#include "runtime/executable.h"
#include "runtime/memory_plan.h"
#include "runtime/planner.h"

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

TEST_CASE("hbm: a tensor constant counts as a parameter of its type would; a scalar constant does not") {
  // x @ W with W a constant (a closed-over weight) needs W's bytes on the core, as when W is
  // an argument.
  auto needs = [](bool w_is_argument) {
    Graph g;
    NodeId x = g.parameter(DType::f32, {8, 300});
    NodeId w = w_is_argument ? g.parameter(DType::f32, {300, 200}) : g.constant(Tensor(DType::f32, {300, 200}));
    NodeId two = g.constant(Tensor(DType::f32, {}));
    g.outputs = {g.binary(Op::mul, g.dot(x, w), g.broadcast(two, {8, 200}, {}))};
    return unoptimized(g).hbm_bytes();
  };
  CHECK(needs(false) == needs(true));
  CHECK(needs(false) > tpu_padded_bytes(DType::f32, {300, 200}));
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

namespace {
// relu(a @ b + 1) @ c, and (with `reread`) a @ b read again after the relu: after the
// pipeline, a dot and a fusion that reads its result element by element.
Graph dot_then_relu(bool reread) {
  Graph g;
  const NodeId a = g.parameter(DType::f32, {256, 64}), b = g.parameter(DType::f32, {64, 512});
  const NodeId c = g.parameter(DType::f32, {512, 16});
  const NodeId y = g.dot(a, b);
  const Shape s = g.at(y).shape;
  const NodeId r = g.binary(Op::max, g.binary(Op::add, y, g.full(DType::f32, s, 1)), g.full(DType::f32, s, 0));
  g.outputs = {g.dot(r, c)};
  if (reread) g.outputs.push_back(g.reduce(g.binary(Op::mul, y, r), {1}, ReduceKind::max));
  return g;
}

// The offsets of the planned dot's and fusion's buffers.
std::pair<size_t, size_t> dot_and_fusion_offsets(const Executable& exe) {
  size_t dot = 0, fusion = 0;
  int found = 0;
  for (const Buffer& b : exe.memory_plan().buffers) {
    const Node& n = exe.graph().at(b.node);
    if (n.op == Op::dot && n.shape == Shape{256, 512}) dot = b.offset, found += 1;
    if (n.op == Op::fusion && n.shape == Shape{256, 512}) fusion = b.offset, found += 2;
  }
  REQUIRE(found == 3);
  return {dot, fusion};
}
}  // namespace

TEST_CASE("a fusion writes over the operand it reads element by element when it reads it last") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<Tensor> args{Tensor(DType::f32, {256, 64}), Tensor(DType::f32, {64, 512}), Tensor(DType::f32, {512, 16})};
  for (Tensor& t : args)
    for (int64_t i = 0; i < t.size(); ++i) t.set(i, u(rng));
  CompileOptions reference;
  reference.reference_kernels = true;
  for (bool reread : {false, true}) {
    INFO("the dot's result read again later: " << reread);
    Executable exe = Executable::compile(dot_then_relu(reread));
    const auto [dot, fusion] = dot_and_fusion_offsets(exe);
    CHECK((dot == fusion) == !reread);
    const std::vector<Tensor> got = exe.run(args), want = Executable::compile(dot_then_relu(reread), reference).run(args);
    for (size_t i = 0; i < got.size(); ++i)
      for (int64_t e = 0; e < got[i].size(); ++e) CHECK(got[i].get(e) == doctest::Approx(want[i].get(e)).epsilon(1e-4));
  }
}

namespace {
// y = x * x, its 2x2 max pool's gradient for 2 * pool(y), pooled again (so it is stored);
// with `reread`, y is read again after the gradient.
Graph pool_gradient(bool reread) {
  Graph g;
  const NodeId x = g.parameter(DType::f32, {4, 8, 8, 16});
  const NodeId y = g.binary(Op::mul, x, x);
  Window2D pool;
  pool.size = pool.stride = {2, 2};
  const NodeId p = g.reduce_window(y, WindowKind::max, pool);
  const NodeId dx = g.select_and_scatter(y, g.binary(Op::mul, p, g.full(DType::f32, g.at(p).shape, 2)), pool);
  g.outputs = {g.reduce_window(dx, WindowKind::max, pool)};
  if (reread) g.outputs.push_back(g.reduce_window(g.binary(Op::add, dx, y), WindowKind::max, pool));
  return g;
}
}  // namespace

TEST_CASE("a 2x2 max pool's gradient writes over the pool's input when it reads it last") {
  std::vector<Tensor> args{Tensor(DType::f32, {4, 8, 8, 16})};
  for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, std::sin(double(i) * 0.7) * 3);
  CompileOptions reference;
  reference.reference_kernels = true;
  for (bool reread : {false, true}) {
    INFO("the pool's input read again later: " << reread);
    Executable exe = Executable::compile(pool_gradient(reread));
    size_t input = 0, scatter = 1;
    bool vector_kernel = false;  // the 2x2 kernel that may write over its input (a vector build)
    for (const Buffer& b : exe.memory_plan().buffers) {
      const Node& n = exe.graph().at(b.node);
      if (n.op == Op::mul || (n.op == Op::fusion && n.shape == Shape{4, 8, 8, 16} && n.in.size() == 1)) input = b.offset;
      if (n.op == Op::select_and_scatter) scatter = b.offset, vector_kernel = scatter_may_write_over_input(exe.graph(), n);
    }
    CHECK((input == scatter) == (!reread && vector_kernel));
    const std::vector<Tensor> got = exe.run(args), want = Executable::compile(pool_gradient(reread), reference).run(args);
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0);
  }
}

namespace {
// exp(p) [64, 8] with rows of u [12, 8] added at idx [12] (repeats among them), then exp; with
// `reread`, exp(p) read again after the scatter; with `base_as_updates`, the updates are exp(p)
// itself (p [12, 8]), which the scatter must not write over while it reads them.
Graph scatter_into_exp(bool reread, bool base_as_updates) {
  Graph g;
  const NodeId p = g.parameter(DType::f32, {base_as_updates ? 12 : 64, 8}), idx = g.parameter(DType::i32, {12});
  const NodeId u = g.parameter(DType::f32, {12, 8});
  const NodeId base = g.unary(Op::exp, p);
  const NodeId s = g.scatter_add(base, idx, base_as_updates ? base : u);
  g.outputs = {g.unary(Op::exp, s)};
  if (reread) g.outputs.push_back(g.binary(Op::mul, base, g.full(DType::f32, g.at(base).shape, 2)));
  return g;
}
}  // namespace

TEST_CASE("a scatter_add adds into its base's storage when it reads the base last and only as its base") {
  for (bool base_as_updates : {false, true})
    for (bool reread : {false, true}) {
      INFO("reread " << reread << ", base as updates " << base_as_updates);
      const Graph graph = scatter_into_exp(reread, base_as_updates);
      std::vector<Tensor> args{Tensor(DType::f32, graph.at(0).shape), Tensor(DType::i32, {12}),
                               Tensor(DType::f32, {12, 8})};
      for (int64_t i = 0; i < args[0].size(); ++i) args[0].set(i, std::sin(double(i) * 0.3));
      for (int64_t i = 0; i < 12; ++i) args[1].set(i, double(i * 5 % 7));  // rows 0..6, some twice
      for (int64_t i = 0; i < args[2].size(); ++i) args[2].set(i, std::cos(double(i) * 0.7));
      Executable exe = Executable::compile(graph);
      size_t base = 0, scatter = 1;
      for (const Buffer& b : exe.memory_plan().buffers) {
        const Node& n = exe.graph().at(b.node);
        if (n.op == Op::scatter_add) scatter = b.offset;
        else if (n.shape == graph.at(0).shape && n.in.size() == 1 && exe.graph().at(n.in[0]).op == Op::parameter)
          base = b.offset;
      }
      CHECK((base == scatter) == (!reread && !base_as_updates));
      // exp(exp(p) + the rows added), computed here.
      const Tensor& upd = base_as_updates ? args[0] : args[2];
      std::vector<float> sum(size_t(args[0].size()));
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = std::exp(float(args[0].get(int64_t(i))));
      for (int64_t r = 0; r < 12; ++r)
        for (int64_t j = 0; j < 8; ++j) {
          const float add = base_as_updates ? std::exp(float(upd.get(r * 8 + j))) : float(upd.get(r * 8 + j));
          sum[size_t(int64_t(args[1].get(r)) * 8 + j)] += add;
        }
      const Tensor got = exe.run(args)[0];
      for (int64_t i = 0; i < got.size(); ++i)
        CHECK(got.get(i) == doctest::Approx(std::exp(sum[size_t(i)])).epsilon(1e-5));
    }
}

// ---- The planner's stages (runtime/planner.h), one at a time ----

namespace {
bool elementwise(Op op) { return op == Op::add || op == Op::sub || op == Op::mul || op == Op::exp; }
}  // namespace

TEST_CASE("liveness: a node no output needs is not live") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {4});
  NodeId dead = g.unary(Op::exp, x);
  NodeId y = g.unary(Op::tanh, x);
  g.outputs = {y};
  Liveness lv = liveness(g);
  CHECK(lv.live[size_t(x)]);
  CHECK(!lv.live[size_t(dead)]);
  CHECK(lv.is_output[size_t(y)]);
  CHECK(!lv.is_output[size_t(x)]);
}

TEST_CASE("schedule: leaves are not steps; per-replica nodes run after invariant ones") {
  Graph g;
  NodeId w = g.parameter(DType::f32, {4});
  NodeId x = g.parameter(DType::f32, {4});  // sharded
  NodeId a = g.unary(Op::exp, x);           // per replica
  NodeId b = g.unary(Op::tanh, w);          // invariant
  g.outputs = {g.binary(Op::add, a, a), b};
  const std::vector<bool> inv = replica_invariant(g, {false, true});
  Schedule s = schedule(g, liveness(g), inv, false);
  REQUIRE(s.order.size() == 3);
  CHECK(s.order[0] == b);
  CHECK(s.order[1] == a);
  CHECK(s.phases == 1);
  CHECK(Schedule::group(s.slot[size_t(a)]) == 1);
  CHECK(s.slot[size_t(w)] == -1);
}

TEST_CASE("lifetimes: a reshape shares its operand's storage, which lives until the reshape's last reader") {
  Graph g;
  NodeId x = g.parameter(DType::f32, {2, 4});
  NodeId a = g.unary(Op::exp, x);     // 0
  NodeId r = g.reshape(a, {8});       // 1
  NodeId b = g.unary(Op::tanh, r);    // 2
  NodeId c = g.unary(Op::neg, b);     // 3
  g.outputs = {g.reduce(c, {0}, ReduceKind::sum)};  // 4
  Liveness lv = liveness(g);
  const std::vector<bool> inv(g.nodes.size(), true);
  Schedule s = schedule(g, lv, inv, false);
  Lifetimes lt = lifetimes(g, s.order, lv, inv, std::vector<NodeId>(g.nodes.size(), -1));
  CHECK(lt.owner[size_t(r)] == a);
  CHECK(lt.last_use[size_t(a)] == 2);
  CHECK(lt.last_use[size_t(b)] == 3);
  CHECK(lt.last_use[size_t(g.outputs[0])] == 5);  // a result outlives the run
  CHECK(lt.pos[size_t(x)] == -1);
}

TEST_CASE("donation: a result takes the first donated buffer of its size that is free, or that it reads in step") {
  Graph g;
  NodeId p0 = g.parameter(DType::f32, {4});     // read by c
  NodeId p1 = g.parameter(DType::f32, {4});     // read by a
  g.parameter(DType::f32, {2, 2});              // never read: free from the start
  g.parameter(DType::f32, {8});                 // another size
  NodeId a = g.unary(Op::exp, p1);              // 0
  NodeId b = g.unary(Op::tanh, a);              // 1
  NodeId c = g.binary(Op::add, b, p0);          // 2
  NodeId e = g.unary(Op::exp, b);               // 3
  g.outputs = {a, c, e};
  Liveness lv = liveness(g);
  const std::vector<bool> inv(g.nodes.size(), true), sharded(g.params.size(), false), donated(4, true);
  Schedule s = schedule(g, lv, inv, false);
  Lifetimes lt = lifetimes(g, s.order, lv, inv, std::vector<NodeId>(g.nodes.size(), -1));
  SUBCASE("elementwise readers write in place") {
    Donation d = donate(g, lt, lv, {donated, sharded, inv, elementwise});
    CHECK(d.args == std::vector<int32_t>{1, 0, 2});
    CHECK(d.into[size_t(c)] == 0);
    CHECK(d.into[size_t(b)] == -1);
  }
  SUBCASE("other readers wait until the parameter is free") {
    Donation d = donate(g, lt, lv, {donated, sharded, inv, [](Op) { return false; }});
    CHECK(d.args == std::vector<int32_t>{2, 1, 0});
  }
}

namespace {

// The plain search donation replaced: each result tries every parameter in order.
std::vector<int32_t> donate_by_search(const Graph& g, const Lifetimes& lt, const Liveness& lv,
                                      const std::vector<bool>& donated) {
  std::vector<int32_t> args;
  std::vector<bool> taken(g.params.size(), false), done(g.nodes.size(), false);
  auto bytes = [&](NodeId n) { return num_elements(g.at(n).shape) * int64_t(size_of(g.at(n).dtype)); };
  for (NodeId o : g.outputs) {
    if (g.at(o).op == Op::parameter || lt.owner[size_t(o)] != o || done[size_t(o)]) continue;
    for (size_t p = 0; p < g.params.size(); ++p) {
      const NodeId pn = g.params[p];
      const int32_t lu = lt.last_use[size_t(pn)], pos = lt.pos[size_t(o)];
      if (!donated[p] || taken[p] || lv.is_output[size_t(pn)] || bytes(pn) != bytes(o)) continue;
      if (!(lu < pos || (lu == pos && elementwise(g.at(o).op) && g.at(pn).shape == g.at(o).shape))) continue;
      taken[p] = done[size_t(o)] = true;
      args.push_back(int32_t(p));
      break;
    }
  }
  return args;
}

}  // namespace

TEST_CASE("donation: the same choices as trying every parameter for every result") {
  std::mt19937 rng(7);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  const std::vector<Shape> shapes = {{4}, {2, 2}, {8}, {4, 2}, {3}};
  for (int round = 0; round < 20; ++round) {
    Graph g;
    std::vector<NodeId> nodes;
    for (int i = 0; i < 30; ++i) nodes.push_back(g.parameter(DType::f32, shapes[pick(shapes.size())]));
    for (int i = 0; i < 60; ++i) {
      const NodeId x = nodes[pick(nodes.size())];
      NodeId y = nodes[pick(nodes.size())];
      if (g.at(y).shape != g.at(x).shape) y = x;
      nodes.push_back(pick(3) == 0 ? g.unary(Op::tanh, x) : g.binary(pick(2) ? Op::add : Op::mul, x, y));
    }
    for (int i = 0; i < 25; ++i) g.outputs.push_back(nodes[30 + pick(60)]);
    g.outputs.push_back(nodes[pick(30)]);  // a parameter as a result: never donated
    std::vector<bool> donated(g.params.size());
    for (size_t p = 0; p < donated.size(); ++p) donated[p] = pick(4) != 0;
    Liveness lv = liveness(g);
    const std::vector<bool> inv(g.nodes.size(), true), sharded(g.params.size(), false);
    Schedule s = schedule(g, lv, inv, false);
    Lifetimes lt = lifetimes(g, s.order, lv, inv, std::vector<NodeId>(g.nodes.size(), -1));
    Donation d = donate(g, lt, lv, {donated, sharded, inv, elementwise});
    INFO("round " << round);
    CHECK(d.args == donate_by_search(g, lt, lv, donated));
  }
}

namespace {

// Offsets by the plain method: a list of free ranges; the smallest that fits (of equal sizes,
// the one freed first), else the top, grown from a free range ending there.
std::vector<size_t> offsets_by_free_list(const std::vector<size_t>& bytes, const std::vector<int32_t>& last) {
  struct Range {
    size_t off, size, seq;
  };
  std::vector<Range> free;
  size_t top = 0, seq = 0;
  std::vector<size_t> offsets;
  auto release = [&](size_t off, size_t size) {
    for (size_t i = 0; i < free.size();) {
      if (free[i].off + free[i].size == off || off + size == free[i].off) {
        off = std::min(off, free[i].off), size += free[i].size;
        free.erase(free.begin() + std::ptrdiff_t(i));
      } else {
        ++i;
      }
    }
    free.push_back({off, size, seq++});
  };
  for (size_t k = 0; k < bytes.size(); ++k) {
    const Range* best = nullptr;
    for (const Range& r : free)
      if (r.size >= bytes[k] && (!best || r.size < best->size || (r.size == best->size && r.seq < best->seq))) best = &r;
    if (best) {
      const Range r = *best;
      offsets.push_back(r.off);
      free.erase(free.begin() + (best - free.data()));
      if (r.size > bytes[k]) free.push_back({r.off + bytes[k], r.size - bytes[k], seq++});
    } else {
      auto at_top = std::find_if(free.begin(), free.end(), [&](const Range& r) { return r.off + r.size == top; });
      const size_t off = at_top == free.end() ? top : at_top->off;
      if (at_top != free.end()) free.erase(at_top);
      offsets.push_back(off);
      top = off + bytes[k];
    }
    for (size_t j = 0; j <= k; ++j)
      if (last[j] == int32_t(k)) release(offsets[j], bytes[j]);
  }
  return offsets;
}

}  // namespace

TEST_CASE("offsets: the same as a plain free list on random lifetimes") {
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    Graph g;
    std::vector<NodeId> schedule;
    std::vector<int32_t> last_use(200, 0), last;
    std::vector<size_t> bytes;
    for (int32_t k = 0; k < 200; ++k) {
      const int64_t n = int64_t(rng() % 4 == 0 ? 16 * (1 + rng() % 8) : 16);  // many of one size
      schedule.push_back(g.parameter(DType::f32, {n}));
      last.push_back(std::min<int32_t>(199, k + int32_t(rng() % 20)));
      last_use[size_t(schedule.back())] = last.back();
      bytes.push_back(size_t(n) * 4);
    }
    MemoryPlan plan = plan_memory(g, schedule, std::vector<bool>(200, true), last_use);
    const std::vector<size_t> want = offsets_by_free_list(bytes, last);
    INFO("round " << round);
    REQUIRE(plan.buffers.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k) CHECK(plan.buffers[k].offset == want[k]);
  }
}

// Long lists of free ranges of one size, most of them merged again before they come up (the
// plan lists each freed range by its size and skips the stale ones when it gets to them): a
// deep model's pattern, where activations wait for their layer's backward and temporaries are
// freed at once, in bursts of frees that merge.
TEST_CASE("offsets: the same as a plain free list on long lists of one size") {
  std::mt19937 rng(5);
  for (int round = 0; round < 4; ++round) {
    const int32_t count = 1500;
    Graph g;
    std::vector<NodeId> schedule;
    std::vector<int32_t> last_use(size_t(count), 0), last;
    std::vector<size_t> bytes;
    for (int32_t k = 0; k < count; ++k) {
      const int64_t n = int64_t(rng() % 16 == 0 ? 32 : 16);
      schedule.push_back(g.parameter(DType::f32, {n}));
      // Kept ones (half) keep the holes of temporaries apart; every 100 steps a burst of frees.
      const int32_t burst = (k / 100 + 1) * 100;
      const uint32_t kind = rng() % 8;
      const int32_t end = kind < 4 ? count - 1 - k / 2 : kind < 7 ? k + 1 + int32_t(rng() % 6) : burst;
      last.push_back(std::min(count - 1, std::max(k + 1, end)));
      last_use[size_t(schedule.back())] = last.back();
      bytes.push_back(size_t(n) * 4);
    }
    MemoryPlan plan = plan_memory(g, schedule, std::vector<bool>(size_t(count), true), last_use);
    const std::vector<size_t> want = offsets_by_free_list(bytes, last);
    INFO("round " << round);
    REQUIRE(plan.buffers.size() == want.size());
    size_t differ = 0;
    for (size_t k = 0; k < want.size(); ++k) differ += plan.buffers[k].offset != want[k];
    CHECK(differ == 0);
  }
}

// An empty tensor takes no space: buffers of 0 bytes in between leave the others' offsets as
// they are (a free range of size 0 had made the ordered free list inconsistent).
TEST_CASE("offsets: empty buffers take no space") {
  std::mt19937 rng(3);
  Graph with, without;
  std::vector<NodeId> sched_with, sched_without;
  std::vector<int32_t> last_with(600, 0), last_without(300, 0);
  for (int32_t k = 0; k < 300; ++k) {
    const int64_t n = int64_t(16 * (1 + rng() % 4));
    const int32_t last = std::min(299, k + 1 + int32_t(rng() % 10));
    sched_without.push_back(without.parameter(DType::f32, {n}));
    last_without[size_t(sched_without.back())] = last;
    sched_with.push_back(with.parameter(DType::f32, {n}));
    last_with[size_t(sched_with.back())] = 2 * last;
    sched_with.push_back(with.parameter(DType::f32, {0, n}));  // freed with it or before
    last_with[size_t(sched_with.back())] = 2 * k + 1 + int32_t(rng() % 2) * 2 * (last - k);
  }
  const MemoryPlan a = plan_memory(with, sched_with, std::vector<bool>(600, true), last_with);
  const MemoryPlan b = plan_memory(without, sched_without, std::vector<bool>(300, true), last_without);
  REQUIRE(a.buffers.size() == 600);
  size_t differ = 0;
  for (size_t k = 0; k < 300; ++k) {
    differ += a.buffers[2 * k].offset != b.buffers[k].offset;
    CHECK(a.buffers[2 * k + 1].bytes == 0);
  }
  CHECK(differ == 0);
  CHECK(a.arena_bytes == b.arena_bytes);
}
