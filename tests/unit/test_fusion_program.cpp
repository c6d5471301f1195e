// Fusion programs (ops/fusion_program.h): a fused body evaluated chunk by chunk gives the bits
// of its ops run one by one on the fast kernels (unfused), for every op and broadcast it takes,
// at sizes with a partial last chunk, with NaNs, infinities and signed zeros in the operands
// (any NaN stands for any other);
// a body it does not take runs on the block evaluation with the same results.
#include <doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ops/fusion_jit.h"
#include "ops/fusion_program.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"

using namespace tpu;

namespace {

// Values of every kind: ordinary ones of both signs, zeros of both signs, NaN, infinities.
Tensor operand(const Shape& s, uint32_t seed) {
  Tensor t(DType::f32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-2, 2);
  const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 1e-40f};
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) p[i] = rng() % 17 == 0 ? special[rng() % 6] : unit(rng);
  return t;
}

struct Case {
  const char* name;
  bool programmed;  // the fused body is one the program takes
  // Builds the graph on parameters x, y [M, N], bias [N], row [M], scalar a, flag (bool scalar).
  std::function<NodeId(Graph&, NodeId x, NodeId y, NodeId bias, NodeId row, NodeId a, NodeId flag)> build;
};

std::vector<Case> cases() {
  using G = Graph&;
  return {
      {"arithmetic", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         NodeId s = g.binary(Op::add, g.binary(Op::mul, x, y), g.binary(Op::sub, x, y));
         return g.binary(Op::div, s, g.unary(Op::neg, y));
       }},
      {"max", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         return g.binary(Op::add, g.binary(Op::max, x, y), g.full(DType::f32, g.at(x).shape, 1));
       }},
      {"min", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         return g.binary(Op::add, g.binary(Op::min, x, y), g.full(DType::f32, g.at(x).shape, 1));
       }},
      {"abs_sqrt", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         return g.binary(Op::mul, g.unary(Op::sqrt, x), g.unary(Op::abs, y));
       }},
      {"compare_select_convert", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         NodeId gt = g.compare(Cmp::gt, x, y), ne = g.compare(Cmp::ne, x, y), le = g.compare(Cmp::le, y, x);
         NodeId s = g.select(gt, x, g.select(le, y, g.convert(ne, DType::f32)));
         return g.binary(Op::add, s, g.convert(g.compare(Cmp::eq, x, x), DType::f32));
       }},
      {"bool_result", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         return g.compare(Cmp::lt, g.binary(Op::add, x, y), g.binary(Op::mul, x, y));
       }},
      {"broadcasts", true, [](G g, NodeId x, NodeId, NodeId bias, NodeId row, NodeId a, NodeId flag) {
         const Shape& s = g.at(x).shape;
         NodeId t = g.binary(Op::mul, g.broadcast(bias, s, {1}), g.broadcast(row, s, {0}));
         NodeId u = g.binary(Op::sub, g.binary(Op::add, x, t), g.binary(Op::mul, g.broadcast(a, s, {}), x));
         return g.select(g.broadcast(flag, s, {}), g.binary(Op::add, u, g.full(DType::f32, s, 0.25)), x);
       }},
      {"adam_update", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId a, NodeId) {
         const Shape& s = g.at(x).shape;
         NodeId v = g.binary(Op::mul, y, y);
         NodeId step = g.binary(Op::div, g.binary(Op::mul, g.broadcast(a, s, {}), x),
                                g.binary(Op::add, g.unary(Op::sqrt, v), g.full(DType::f32, s, 1e-7)));
         return g.binary(Op::sub, x, step);
       }},
      // A swish and an exp: their element functions are the fast kernels' (kernels/exp_f32.h).
      {"swish_exp", true, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         return g.binary(Op::add, g.binary(Op::mul, x, g.unary(Op::sigmoid, x)), g.unary(Op::exp, y));
       }},
      {"not_taken_log", false, [](G g, NodeId x, NodeId y, NodeId, NodeId, NodeId, NodeId) {
         return g.binary(Op::add, g.unary(Op::log, x), y);
       }},
  };
}

// g compiled with the pipeline (fused) and without it (each op on its fast kernel), and how
// many of the fused graph's fusions run as programs.
struct Compiled {
  Executable fused, plain;
  size_t fusions = 0, programs = 0;
};
Compiled compile_both(const Graph& g) {
  CompileOptions unfused;
  unfused.optimize = false;
  Compiled c{Executable::compile(g), Executable::compile(g, unfused)};
  for (const Node& n : c.fused.graph().nodes)
    if (n.op == Op::fusion) ++c.fusions, c.programs += fusion_program(n) != nullptr;
  return c;
}

// Bit for bit, but any NaN for a NaN: IEEE leaves open which operand's NaN a sum of two NaNs
// passes on, and the compiler may swap a sum's operands.
void check_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  REQUIRE(got.same_type(want));
  const int64_t es = int64_t(size_of(got.dtype()));
  for (int64_t i = 0; i < got.size(); ++i) {
    const double u = got.get(i), v = want.get(i);
    if (std::memcmp(got.raw() + i * es, want.raw() + i * es, size_t(es)) != 0 && !(std::isnan(u) && std::isnan(v)))
      FAIL_CHECK(what << " element " << i << ": " << u << " vs " << v);
  }
}

}  // namespace

TEST_CASE("fusion programs give the bits of the unfused fast kernels") {
  for (const Shape& s : {Shape{37, 61}, Shape{300, 130}, Shape{1, 64}, Shape{3, 5}, Shape{50, 32}}) {
    for (const Case& c : cases()) {
      Graph g;
      NodeId x = g.parameter(DType::f32, s), y = g.parameter(DType::f32, s);
      NodeId bias = g.parameter(DType::f32, {s[1]}), row = g.parameter(DType::f32, {s[0]});
      NodeId a = g.parameter(DType::f32, {}), flag = g.parameter(DType::boolean, {});
      g.outputs = {c.build(g, x, y, bias, row, a, flag)};
      Compiled both = compile_both(g);
      REQUIRE(both.fusions == 1);
      CHECK(both.programs == (c.programmed ? 1u : 0u));
      Tensor flag_on(DType::boolean, {});
      flag_on.set(0, 1);
      Tensor scale(DType::f32, {});
      scale.set(0, 0.75);
      const std::vector<Tensor> args = {operand(s, 1), operand(s, 2), operand({s[1]}, 3), operand({s[0]}, 4), scale, flag_on};
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        check_same_bits(both.fused.run(args)[0], both.plain.run(args)[0], std::string(c.name) + " on " + shape_str(s));
      }
      set_num_threads(0);
    }
  }
}

TEST_CASE("fusion programs convert to and from bf16 with the kernels' rounding") {
  for (const Shape& s : {Shape{37, 61}, Shape{300, 130}}) {
    Graph g;
    NodeId x = g.parameter(DType::f32, s), h = g.parameter(DType::bf16, s);
    NodeId wide = g.convert(h, DType::f32);
    // f32 -> bf16 -> f32 (a rounding), arithmetic on the widened bf16, a bf16 result.
    NodeId rounded = g.convert(g.convert(g.binary(Op::mul, x, wide), DType::bf16), DType::f32);
    g.outputs = {g.convert(g.binary(Op::add, rounded, x), DType::bf16)};
    Compiled both = compile_both(g);
    CHECK(both.programs == 1);
    Tensor hb(DType::bf16, s);
    const Tensor hf = operand(s, 9);
    for (int64_t i = 0; i < hb.size(); ++i) hb.data<uint16_t>()[i] = f32_to_bf16(hf.data<float>()[i]);
    const std::vector<Tensor> args = {operand(s, 8), hb};
    check_same_bits(both.fused.run(args)[0], both.plain.run(args)[0], shape_str(s));
  }
}

// A data set's map: image bytes to floats in [0, 1] (every byte value, partial last chunks).
TEST_CASE("fusion programs read u8 operands as the convert kernel widens them") {
  for (const Shape& s : {Shape{37, 61}, Shape{256, 784}, Shape{3, 5}}) {
    Graph g;
    NodeId pixels = g.parameter(DType::u8, s), x = g.parameter(DType::f32, s);
    NodeId wide = g.convert(pixels, DType::f32);
    g.outputs = {g.binary(Op::add, g.binary(Op::div, wide, g.full(DType::f32, s, 255)), x)};
    Compiled both = compile_both(g);
    CHECK(both.programs == 1);
    Tensor bytes(DType::u8, s);
    for (int64_t i = 0; i < bytes.size(); ++i) bytes.data<uint8_t>()[i] = uint8_t(i * 7 + i / 256);
    const std::vector<Tensor> args = {bytes, operand(s, 10)};
    check_same_bits(both.fused.run(args)[0], both.plain.run(args)[0], shape_str(s));
  }
}

TEST_CASE("fusion programs read broadcasts along any dims, chunks crossing rows included") {
  for (const Shape& s : {Shape{6, 128, 64}, Shape{5, 7, 30}, Shape{3, 40, 1}}) {
    Graph g;
    NodeId x = g.parameter(DType::f32, s);
    NodeId outer_inner = g.parameter(DType::f32, {s[0], s[2]}), middle = g.parameter(DType::f32, {s[1]});
    NodeId t = g.binary(Op::mul, x, g.broadcast(outer_inner, s, {0, 2}));
    g.outputs = {g.binary(Op::sub, t, g.broadcast(middle, s, {1}))};
    Compiled both = compile_both(g);
    CHECK(both.programs == 1);
    const std::vector<Tensor> args = {operand(s, 11), operand({s[0], s[2]}, 12), operand({s[1]}, 13)};
    check_same_bits(both.fused.run(args)[0], both.plain.run(args)[0], shape_str(s));
  }
}

// A per-channel operand repeats every C elements; chunks that wrap around its period read its
// values laid out once per run (C up to 1024), or element by element (longer ones). A period
// that divides the chunk is laid out once per run as a whole chunk; one that is a multiple of
// the chunk is read in place. With native code and without (the chunk loops read them too).
TEST_CASE("fusion programs read per-channel operands whose period wraps around chunks") {
  const FusionJit::Isa isa = FusionJit::isa();
  for (FusionJit::Isa with : {isa, FusionJit::Isa::none})
    for (int64_t c : {64, 96, 144, 512, 768, 1000, 1024, 1500, 2048}) {
      FusionJit::set_isa(with);
      const Shape s{7, 9, c};
      Graph g;
      NodeId x = g.parameter(DType::f32, s);
      NodeId scale = g.parameter(DType::f32, {c}), shift = g.parameter(DType::f32, {c});
      NodeId t = g.binary(Op::mul, x, g.broadcast(scale, s, {2}));
      g.outputs = {g.binary(Op::add, t, g.broadcast(shift, s, {2}))};
      Compiled both = compile_both(g);
      FusionJit::set_isa(isa);
      CHECK(both.programs == 1);
      const std::vector<Tensor> args = {operand(s, 21), operand({c}, 22), operand({c}, 23)};
      check_same_bits(both.fused.run(args)[0], both.plain.run(args)[0], shape_str(s));
    }
}
