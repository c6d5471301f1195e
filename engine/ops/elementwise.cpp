// Elementwise rows: unary math, binary arithmetic, compare, select, convert.
#include <Eigen/Core>
#include <cmath>
#include <cstring>

#include "kernels/convert.h"
#include "kernels/erf_f32.h"
#include "kernels/exp_f32.h"
#include "kernels/tanh_f32.h"
#include "ops/elementwise.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

ConstArrayMap in_array(const Tensor* t) { return {t->data<float>(), t->size()}; }
ArrayMap out_array(Tensor& t) { return {t.data<float>(), t.size()}; }

// ---- shape rules ----
std::string shape_unary_float(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  if (!is_float(x.dtype))
    return std::string(op_name(n.op)) + " needs a floating-point operand, got " + type_of(g, n.in[0]);
  n.dtype = x.dtype;
  n.shape = x.shape;
  return "";
}

std::string shape_unary_numeric(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  if (x.dtype == DType::boolean) return std::string(op_name(n.op)) + " is not defined on bool";
  n.dtype = x.dtype;
  n.shape = x.shape;
  return "";
}

std::string same_operands(const Graph& g, const Node& n) {
  const Node& a = g.at(n.in.at(0));
  const Node& b = g.at(n.in.at(1));
  if (a.dtype != b.dtype || a.shape != b.shape)
    return std::string(op_name(n.op)) + " needs operands of one type, got " + operands_str(g, n);
  return "";
}

std::string shape_binary(const Graph& g, Node& n) {
  std::string e = same_operands(g, n);
  if (!e.empty()) return e;
  n.dtype = g.at(n.in[0]).dtype;
  n.shape = g.at(n.in[0]).shape;
  if (n.dtype == DType::boolean && n.op != Op::max && n.op != Op::min)
    return std::string(op_name(n.op)) + " is not defined on bool";
  return "";
}

std::string shape_binary_float(const Graph& g, Node& n) {
  std::string e = shape_binary(g, n);
  if (e.empty() && !is_float(n.dtype))
    return std::string(op_name(n.op)) + " needs floating-point operands, got " + operands_str(g, n);
  return e;
}

std::string shape_compare(const Graph& g, Node& n) {
  std::string e = same_operands(g, n);
  if (!e.empty()) return e;
  if (n.attrs.axis < 0 || n.attrs.axis > 5) return "compare: bad direction";
  n.dtype = DType::boolean;
  n.shape = g.at(n.in[0]).shape;
  return "";
}

std::string shape_select(const Graph& g, Node& n) {
  const Node& p = g.at(n.in.at(0));
  const Node& a = g.at(n.in.at(1));
  const Node& b = g.at(n.in.at(2));
  if (p.dtype != DType::boolean || p.shape != a.shape || a.shape != b.shape || a.dtype != b.dtype)
    return "select needs bool[S], T[S], T[S], got " + operands_str(g, n);
  n.dtype = a.dtype;
  n.shape = a.shape;
  return "";
}

std::string shape_convert(const Graph& g, Node& n) {
  n.dtype = n.attrs.to;
  n.shape = g.at(n.in.at(0)).shape;
  return "";
}

// ---- element functions: each op's semantics, for every dtype (ops/elementwise.h) ----
template <class T>
T int_floor_div(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>)
    if (b == -1) return T(0 - std::make_unsigned_t<T>(a));  // wraps at the minimum, where a / -1 traps
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

#define UNARY_FN(Name, expr) \
  struct Name {              \
    template <class T>       \
    auto operator()(T v) const { return expr; } \
  };
#define BINARY_FN(Name, expr) \
  struct Name {               \
    template <class T>        \
    auto operator()(T a, T b) const { return expr; } \
  };
UNARY_FN(Neg, -v)  // flips the sign bit, of zeros and NaNs too (Eigen's negation is 0 - x)
UNARY_FN(Exp, std::exp(v))
UNARY_FN(Log, std::log(v))
UNARY_FN(Sqrt, std::sqrt(v))  // correctly rounded (Eigen's vector sqrt is off by an ulp at times)
UNARY_FN(Rsqrt, 1 / std::sqrt(v))
UNARY_FN(Tanh, std::tanh(v))
UNARY_FN(Sigmoid, 1 / (1 + std::exp(-v)))
BINARY_FN(Add, a + b)
BINARY_FN(Sub, a - b)
BINARY_FN(Mul, a * b)
BINARY_FN(Max, a > b || a != a ? a : b)  // a NaN operand a wins
BINARY_FN(Min, a < b || a != a ? a : b)
BINARY_FN(Pow, std::pow(a, b))
#undef UNARY_FN
#undef BINARY_FN

// Floats clear the sign bit (of -0 and NaNs too).
struct Abs {
  template <class T>
  auto operator()(T v) const {
    if constexpr (std::is_integral_v<T>) return v < 0 ? -v : v;
    else return std::fabs(float(v));
  }
};

// The Gauss error function (exact GELU: x/2 (1 + erf(x/sqrt 2))).
struct Erf {
  template <class T>
  auto operator()(T v) const { return std::erf(v); }
};

// Integer division floors (like Lua's //); float division is IEEE.
struct Div {
  template <class T>
  auto operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return int_floor_div<T>(a, b);
    else return a / b;
  }
};

// Lua's float a % b (luai_nummod): fmod, exact whatever the quotient, moved into b's sign when
// it has the other one. b = 0 or an infinite a gives NaN; an infinite b gives a when a is zero
// or has b's sign, else b.
struct Mod {
  template <class T>
  auto operator()(T a, T b) const {
    const float x = float(a), y = float(b);
    float m = std::fmod(x, y);
    if (m != 0 && (m < 0) != (y < 0)) m += y;
    return m;
  }
};

// e^x, the logistic function, erf and tanh in float operations a lane computes as scalar code
// does (kernels/exp_f32.h, erf_f32.h, tanh_f32.h): the fast kernels' element functions, and the
// fusion program's.
struct ExpF32 {
  float operator()(float v) const { return exp_f32(v); }
};
struct SigmoidF32 {
  float operator()(float v) const { return sigmoid_f32(v); }
};
struct ErfF32 {
  float operator()(float v) const { return erf_f32(v); }
};
struct TanhF32 {
  float operator()(float v) const { return tanh_f32(v); }
};

// ---- kernels ----
// Eigen's vectorised transcendentals: within a few ulps of the reference, so the fusion
// program does not take these ops (a fused body runs them with these kernels).
#define UNARY_EIGEN(name, F, expr)                                                \
  void fast_##name(const Node& n, std::span<const Tensor* const> in, Tensor& o) { \
    if (in[0]->dtype() != DType::f32) return ref_unary<F>(n, in, o);               \
    auto x = in_array(in[0]);                                                     \
    out_array(o) = expr;                                                          \
  }
UNARY_EIGEN(log, Log, x.log())
UNARY_EIGEN(rsqrt, Rsqrt, x.rsqrt())
#undef UNARY_EIGEN

// d[i] = F(a[i]) in vectors of 16 where the machine has them: F's chain of about 20 operations
// runs 1.25x faster than in vectors of 8 (2.4M exps, one thread: 1.5 -> 1.2 ms). The same bits:
// a lane computes what scalar code does.
template <class F>
[[gnu::target("prefer-vector-width=512"), gnu::noinline]] void map_wide(const float* a, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = F{}(a[i]);
}

// Runs f(begin, end) over [0, n) in pieces across the pool (elementwise: any split gives the
// same bits).
template <class F>
void in_pieces(int64_t n, F f) {
  constexpr int64_t kPiece = int64_t(1) << 16;
  if (n < 2 * kPiece) return f(int64_t(0), n);
  parallel_for((n + kPiece - 1) / kPiece, [&](int64_t t) { f(t * kPiece, std::min(n, (t + 1) * kPiece)); });
}

// f32 through the vectorised element function F, large tensors on every thread (a tanh alone
// over 4M floats: 4.6 ms on one thread, 2.3 on two); other dtypes through the reference's Ref.
template <class F, class Ref>
void fast_unary_f32(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (in[0]->dtype() != DType::f32) return ref_unary<Ref>(n, in, out);
  const float* a = in[0]->data<float>();
  float* d = out.data<float>();
  in_pieces(out.size(), [&](int64_t b, int64_t e) { map_wide<F>(a + b, d + b, e - b); });
}

void ref_compare(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const Tensor& y = *in[1];
  Cmp c = n.direction();
  dispatch(x.dtype(), [&]<class T>() {
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    uint8_t* o = out.data<uint8_t>();
    for (int64_t i = 0, m = x.size(); i < m; ++i) {
      switch (c) {
        case Cmp::lt: o[i] = a[i] < b[i]; break;
        case Cmp::le: o[i] = a[i] <= b[i]; break;
        case Cmp::gt: o[i] = a[i] > b[i]; break;
        case Cmp::ge: o[i] = a[i] >= b[i]; break;
        case Cmp::eq: o[i] = a[i] == b[i]; break;
        case Cmp::ne: o[i] = a[i] != b[i]; break;
      }
    }
  });
}

// f32 comparisons with the kind chosen once, outside the loop, so the loop vectorizes.
template <class F>
void compare_f32(const Tensor& x, const Tensor& y, Tensor& out, F f) {
  const float* a = x.data<float>();
  const float* b = y.data<float>();
  uint8_t* o = out.data<uint8_t>();
  for (int64_t i = 0, m = x.size(); i < m; ++i) o[i] = f(a[i], b[i]);
}

void fast_compare(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (in[0]->dtype() != DType::f32) return ref_compare(n, in, out);
  const Tensor &x = *in[0], &y = *in[1];
  switch (n.direction()) {
    case Cmp::lt: return compare_f32(x, y, out, [](float a, float b) { return a < b; });
    case Cmp::le: return compare_f32(x, y, out, [](float a, float b) { return a <= b; });
    case Cmp::gt: return compare_f32(x, y, out, [](float a, float b) { return a > b; });
    case Cmp::ge: return compare_f32(x, y, out, [](float a, float b) { return a >= b; });
    case Cmp::eq: return compare_f32(x, y, out, [](float a, float b) { return a == b; });
    case Cmp::ne: return compare_f32(x, y, out, [](float a, float b) { return a != b; });
  }
}

void ref_select(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  const uint8_t* p = in[0]->data<uint8_t>();
  dispatch(out.dtype(), [&]<class T>() {
    const T* a = in[1]->data<T>();
    const T* b = in[2]->data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0, m = out.size(); i < m; ++i) o[i] = p[i] ? a[i] : b[i];
  });
}

// Reads both branches unconditionally so the loop vectorizes into blends (the reference reads
// only the chosen one); same results.
void fast_select(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  const uint8_t* p = in[0]->data<uint8_t>();
  dispatch(out.dtype(), [&]<class T>() {
    const T* a = in[1]->data<T>();
    const T* b = in[2]->data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0, m = out.size(); i < m; ++i) {
      const T x = a[i], y = b[i];
      o[i] = p[i] ? x : y;
    }
  });
}

// One element from type From to type To (bf16 goes through float).
template <class From, class To>
To convert_value(From v) {
  if constexpr (std::is_same_v<From, bf16_t>) {
    return convert_value<float, To>(float(v));
  } else if constexpr (std::is_same_v<To, bf16_t>) {
    return To(float(v));
  } else if constexpr (std::is_floating_point_v<From> && !std::is_floating_point_v<To>) {
    // Float to integer truncates toward zero and saturates (NaN -> 0), never UB.
    if (v != v) return To(0);
    double d = std::trunc(double(v));
    if (d <= double(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (d >= double(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return To(d);
  } else {
    return To(v);
  }
}

void ref_convert(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  if (out.dtype() == DType::boolean) {
    for (int64_t i = 0; i < x.size(); ++i) out.data<uint8_t>()[i] = x.get(i) != 0;
    return;
  }
  dispatch(x.dtype(), [&]<class From>() {
    dispatch(out.dtype(), [&]<class To>() {
      const From* a = x.data<From>();
      To* o = out.data<To>();
      for (int64_t i = 0, m = x.size(); i < m; ++i) o[i] = convert_value<From, To>(a[i]);
    });
  });
}

// f32 <-> bf16 (the casts mixed precision puts around every matmul) in SIMD loops, large ones
// on every thread (a batch and the weights each step).
void fast_convert(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const DType from = in[0]->dtype(), to = out.dtype();
  if (from == DType::f32 && to == DType::bf16) {
    const float* a = in[0]->data<float>();
    uint16_t* o = out.data<uint16_t>();
    return in_pieces(out.size(), [&](int64_t b, int64_t e) { round_to_bf16(a + b, o + b, e - b); });
  }
  if (from == DType::bf16 && to == DType::f32) {
    const uint16_t* a = in[0]->data<uint16_t>();
    float* o = out.data<float>();
    return in_pieces(out.size(), [&](int64_t b, int64_t e) { widen_bf16(a + b, o + b, e - b); });
  }
  if (from == to) return (void)std::memcpy(out.raw(), in[0]->raw(), out.bytes());
  ref_convert(n, in, out);
}

// ---- gradients ----
NodeId y_of(GradContext& c) { return c.node; }
NodeId full_like(GradContext& c, NodeId like, double v) {
  const Node& n = c.g.at(like);
  return c.g.full(n.dtype, n.shape, v);
}

void grad_neg(GradContext& c) { c.give(0, c.g.unary(Op::neg, c.out_grad)); }
void grad_exp(GradContext& c) { c.give(0, c.g.binary(Op::mul, c.out_grad, y_of(c))); }
void grad_log(GradContext& c) { c.give(0, c.g.binary(Op::div, c.out_grad, c.in(0))); }
void grad_sqrt(GradContext& c) {
  NodeId two_y = c.g.binary(Op::add, y_of(c), y_of(c));
  c.give(0, c.g.binary(Op::div, c.out_grad, two_y));
}
void grad_rsqrt(GradContext& c) {
  auto& g = c.g;
  NodeId y3 = g.binary(Op::mul, y_of(c), g.binary(Op::mul, y_of(c), y_of(c)));
  NodeId half = full_like(c, c.node, -0.5);
  c.give(0, g.binary(Op::mul, c.out_grad, g.binary(Op::mul, half, y3)));
}
void grad_tanh(GradContext& c) {
  auto& g = c.g;
  NodeId one_minus = g.binary(Op::sub, full_like(c, c.node, 1), g.binary(Op::mul, y_of(c), y_of(c)));
  c.give(0, g.binary(Op::mul, c.out_grad, one_minus));
}
void grad_sigmoid(GradContext& c) {
  auto& g = c.g;
  NodeId one_minus = g.binary(Op::sub, full_like(c, c.node, 1), y_of(c));
  c.give(0, g.binary(Op::mul, c.out_grad, g.binary(Op::mul, y_of(c), one_minus)));
}
void grad_abs(GradContext& c) {
  auto& g = c.g;
  NodeId nonneg = g.compare(Cmp::ge, c.in(0), full_like(c, c.in(0), 0));
  c.give(0, g.select(nonneg, c.out_grad, g.unary(Op::neg, c.out_grad)));
}
// d/dx erf(x) = 2/sqrt(pi) exp(-x^2)
void grad_erf(GradContext& c) {
  auto& g = c.g;
  NodeId gauss = g.unary(Op::exp, g.unary(Op::neg, g.binary(Op::mul, c.in(0), c.in(0))));
  NodeId scale = full_like(c, c.node, 2 / std::sqrt(3.14159265358979323846));
  c.give(0, g.binary(Op::mul, c.out_grad, g.binary(Op::mul, scale, gauss)));
}
void grad_add(GradContext& c) {
  c.give(0, c.out_grad);
  c.give(1, c.out_grad);
}
void grad_sub(GradContext& c) {
  c.give(0, c.out_grad);
  if (c.needs(1)) c.give(1, c.g.unary(Op::neg, c.out_grad));
}
void grad_mul(GradContext& c) {
  if (c.in(0) == c.in(1)) {  // x * x (a squared error): both operands get one product, made once
    const NodeId product = c.g.binary(Op::mul, c.out_grad, c.in(0));
    c.give(0, product);
    c.give(1, product);
    return;
  }
  if (c.needs(0)) c.give(0, c.g.binary(Op::mul, c.out_grad, c.in(1)));
  if (c.needs(1)) c.give(1, c.g.binary(Op::mul, c.out_grad, c.in(0)));
}
void grad_div(GradContext& c) {
  auto& g = c.g;
  if (c.needs(0)) c.give(0, g.binary(Op::div, c.out_grad, c.in(1)));
  if (c.needs(1)) {
    NodeId t = g.binary(Op::div, g.binary(Op::mul, c.out_grad, y_of(c)), c.in(1));
    c.give(1, g.unary(Op::neg, t));
  }
}
// A rank-0 constant, or a broadcast of one.
bool is_scalar_constant(const Graph& g, NodeId id) {
  const Node& n = g.at(id);
  if (n.op == Op::broadcast) return is_scalar_constant(g, n.in[0]);
  return n.op == Op::constant && n.shape.empty();
}

// Ties send the gradient to the first operand, as a subgradient must pick one side. Against a
// constant c (relu's max(x, 0), relu6's min(.., 6)) x's gradient flows where the result is past
// c, strictly, as TF's, PyTorch's and JAX's relu gradients (0 at 0): the rule then reads the
// result, which the forward pass keeps for what reads it, not x, so x (a BatchNorm's output
// under a relu) need not be stored: it fuses into the pass that makes the relu.
void grad_minmax(GradContext& c, Cmp first_wins, Cmp past) {
  auto& g = c.g;
  NodeId zero = full_like(c, c.node, 0);
  for (size_t x : {0, 1}) {
    const size_t other = 1 - x;
    if (c.needs(other) || !is_scalar_constant(g, c.in(other))) continue;
    c.give(x, g.select(g.compare(past, y_of(c), c.in(other)), c.out_grad, zero));
    return;
  }
  NodeId pick_a = g.compare(first_wins, c.in(0), c.in(1));
  if (c.needs(0)) c.give(0, g.select(pick_a, c.out_grad, zero));
  if (c.needs(1)) c.give(1, g.select(pick_a, zero, c.out_grad));
}
void grad_max(GradContext& c) { grad_minmax(c, Cmp::ge, Cmp::gt); }
void grad_min(GradContext& c) { grad_minmax(c, Cmp::le, Cmp::lt); }
// As JAX: d/dx x^y = y x^(y-1), 0 where y = 0 (not 0 * inf at x = 0); d/dy x^y = x^y log x
// with log 1 for x = 0, so 0 where x^y is 0 (not -inf * 0).
void grad_pow(GradContext& c) {
  auto& g = c.g;
  const NodeId x = c.in(0), y = c.in(1);
  if (c.needs(0)) {
    NodeId bm1 = g.binary(Op::sub, y, full_like(c, y, 1));
    NodeId d = g.binary(Op::mul, y, g.binary(Op::pow, x, bm1));
    NodeId zero = full_like(c, y, 0);
    c.give(0, g.binary(Op::mul, c.out_grad, g.select(g.compare(Cmp::eq, y, zero), zero, d)));
  }
  if (c.needs(1)) {
    NodeId x_or_1 = g.select(g.compare(Cmp::eq, x, full_like(c, x, 0)), full_like(c, x, 1), x);
    NodeId d = g.binary(Op::mul, g.unary(Op::log, x_or_1), y_of(c));
    c.give(1, g.binary(Op::mul, c.out_grad, d));
  }
}
// a % b = a - floor(a/b) b: d/da = 1, d/db = -floor(a/b) (away from the jumps).
void grad_mod(GradContext& c) {
  auto& g = c.g;
  c.give(0, c.out_grad);
  if (c.needs(1)) {
    NodeId q = g.floor(g.binary(Op::div, c.in(0), c.in(1)));
    c.give(1, g.unary(Op::neg, g.binary(Op::mul, c.out_grad, q)));
  }
}
void grad_select(GradContext& c) {
  auto& g = c.g;
  NodeId zero = full_like(c, c.node, 0);
  if (c.needs(1)) c.give(1, g.select(c.in(0), c.out_grad, zero));
  if (c.needs(2)) c.give(2, g.select(c.in(0), zero, c.out_grad));
}
void grad_convert(GradContext& c) {
  DType from = c.g.at(c.in(0)).dtype;
  if (is_float(from)) c.give(0, c.g.convert(c.out_grad, from));
}

Cost cost_ew(const Graph& g, const Node& n) { return elementwise_cost(g, n, 1); }
Cost cost_transcendental(const Graph& g, const Node& n) { return elementwise_cost(g, n, 4); }

}  // namespace

constexpr uint8_t kEw = kElementwise, kEwCheap = kElementwise | kCheap;
constexpr FusedForm kCompareForm{FusedForm::Kind::compare}, kSelectForm{FusedForm::Kind::select}, kConvertForm{FusedForm::Kind::convert};

extern const OpInfo neg_row = {Op::neg, shape_unary_numeric, ref_unary<Neg>, fast_unary<Neg>, grad_neg, cost_ew, kEwCheap, fused_unary<Neg>()};
extern const OpInfo exp_row = {Op::exp, shape_unary_float, ref_unary<Exp>, fast_unary_f32<ExpF32, Exp>, grad_exp, cost_transcendental, kEw, FusedForm{FusedForm::Kind::unary, map_wide<ExpF32>, nullptr}};
extern const OpInfo log_row = {Op::log, shape_unary_float, ref_unary<Log>, fast_log, grad_log, cost_transcendental, kEw};
extern const OpInfo sqrt_row = {Op::sqrt, shape_unary_float, ref_unary<Sqrt>, fast_unary<Sqrt>, grad_sqrt, cost_transcendental, kEw, fused_unary<Sqrt>()};
extern const OpInfo rsqrt_row = {Op::rsqrt, shape_unary_float, ref_unary<Rsqrt>, fast_rsqrt, grad_rsqrt, cost_transcendental, kEw};
extern const OpInfo tanh_row = {Op::tanh, shape_unary_float, ref_unary<Tanh>, fast_unary_f32<TanhF32, Tanh>, grad_tanh, cost_transcendental, kEw, FusedForm{FusedForm::Kind::unary, map_wide<TanhF32>, nullptr}};
extern const OpInfo sigmoid_row = {Op::sigmoid, shape_unary_float, ref_unary<Sigmoid>, fast_unary_f32<SigmoidF32, Sigmoid>, grad_sigmoid, cost_transcendental, kEwCheap, FusedForm{FusedForm::Kind::unary, map_wide<SigmoidF32>, nullptr}};
extern const OpInfo abs_row = {Op::abs, shape_unary_numeric, ref_unary<Abs>, fast_unary<Abs>, grad_abs, cost_ew, kEwCheap, fused_unary<Abs>()};
extern const OpInfo erf_row = {Op::erf, shape_unary_float, ref_unary<Erf>, fast_unary_f32<ErfF32, Erf>, grad_erf, cost_transcendental, kEw, FusedForm{FusedForm::Kind::unary, map_wide<ErfF32>, nullptr}};
extern const OpInfo add_row = {Op::add, shape_binary, ref_binary<Add>, fast_binary<Add>, grad_add, cost_ew, kEwCheap, fused_binary<Add>()};
extern const OpInfo sub_row = {Op::sub, shape_binary, ref_binary<Sub>, fast_binary<Sub>, grad_sub, cost_ew, kEwCheap, fused_binary<Sub>()};
extern const OpInfo mul_row = {Op::mul, shape_binary, ref_binary<Mul>, fast_binary<Mul>, grad_mul, cost_ew, kEwCheap, fused_binary<Mul>()};
// A division counts as cheap: a softmax's probabilities e / sum(e), read by the dropout after
// them and by the gradient's sum, are recomputed in both from e (which the gradient keeps
// anyway) instead of written once and read twice, a [batch, heads, T, S] tensor in attention.
extern const OpInfo div_row = {Op::div, shape_binary, ref_binary<Div>, fast_binary<Div>, grad_div, cost_ew, kEwCheap, fused_binary<Div>()};
extern const OpInfo max_row = {Op::max, shape_binary, ref_binary<Max>, fast_binary<Max>, grad_max, cost_ew, kEwCheap, fused_binary<Max>()};
extern const OpInfo min_row = {Op::min, shape_binary, ref_binary<Min>, fast_binary<Min>, grad_min, cost_ew, kEwCheap, fused_binary<Min>()};
extern const OpInfo pow_row = {Op::pow, shape_binary_float, ref_binary<Pow>, nullptr, grad_pow, cost_transcendental, kEw};
extern const OpInfo mod_row = {Op::mod, shape_binary_float, ref_binary<Mod>, fast_binary<Mod>, grad_mod, cost_transcendental, kEw, fused_binary<Mod>()};
extern const OpInfo compare_row = {Op::compare, shape_compare, ref_compare, fast_compare, nullptr, cost_ew, kEwCheap, kCompareForm};
extern const OpInfo select_row = {Op::select, shape_select, ref_select, fast_select, grad_select, cost_ew, kEwCheap, kSelectForm};
extern const OpInfo convert_row = {Op::convert, shape_convert, ref_convert, fast_convert, grad_convert, cost_ew, kEwCheap, kConvertForm};

}  // namespace tpu
