// An elementwise op's semantics, written once as an element function F (a struct whose
// operator() takes one or two elements of any dtype), and everything made from it: the
// reference kernel (every dtype), the fast kernel (f32 loops) and the fusion program's chunk
// loop. The three compute each f32 element by the same expression, so a fused op gives the
// unfused kernel's bits.
//
//   struct Erf { template <class T> auto operator()(T v) const { return std::erf(v); } };
//   extern const OpInfo erf_row = {Op::erf, shape_unary_float, ref_unary<Erf>, fast_unary<Erf>,
//                                  grad_erf, cost_transcendental, kElementwise, fused_unary<Erf>()};
#pragma once
#include <span>
#include <type_traits>

#include "ops/kernel_util.h"

namespace tpu {

// Integer elements are computed in int64 and wrap to their type (-INT32_MIN is INT32_MIN,
// as in two's complement hardware); a float result for integer elements (pow) saturates.
// Neither is then undefined behaviour.
template <class T>
using Wide = std::conditional_t<std::is_integral_v<T>, int64_t, T>;

template <class T, class R>
T narrow(R r) {
  if constexpr (!std::is_integral_v<T>) {
    return T(r);
  } else if constexpr (std::is_floating_point_v<R>) {
    return saturate<T>(double(r));
  } else {
    return T(std::make_unsigned_t<T>(r));
  }
}

template <class F>
void map_unary(const Tensor& x, Tensor& out, F f) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* a = x.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0, n = x.size(); i < n; ++i) o[i] = narrow<T>(f(Wide<T>(a[i])));
  });
}

template <class F>
void map_binary(const Tensor& x, const Tensor& y, Tensor& out, F f) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0, n = x.size(); i < n; ++i) o[i] = narrow<T>(f(Wide<T>(a[i]), Wide<T>(b[i])));
  });
}

template <class F>
void ref_unary(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  map_unary(*in[0], out, F{});
}

template <class F>
void ref_binary(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  map_binary(*in[0], *in[1], out, F{});
}

// f32 loops of F (the compiler vectorises them); other dtypes take the reference.
template <class F>
void fast_unary(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (in[0]->dtype() != DType::f32) return ref_unary<F>(n, in, out);
  const float* a = in[0]->data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0, m = out.size(); i < m; ++i) o[i] = float(F{}(a[i]));
}

template <class F>
void fast_binary(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (in[0]->dtype() != DType::f32) return ref_binary<F>(n, in, out);
  const float* a = in[0]->data<float>();
  const float* b = in[1]->data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0, m = out.size(); i < m; ++i) o[i] = float(F{}(a[i], b[i]));
}

// The fusion program's chunk loops: a whole chunk (a constant count) compiles to straight
// vector code, the last one to a loop.
template <class F>
void chunk_unary(const float* a, float* d, int64_t n) {
  if (n == kFusionChunk) {
    for (int64_t l = 0; l < kFusionChunk; ++l) d[l] = float(F{}(a[l]));
    return;
  }
  for (int64_t l = 0; l < n; ++l) d[l] = float(F{}(a[l]));
}

template <class F>
void chunk_binary(const float* a, const float* b, float* d, int64_t n) {
  if (n == kFusionChunk) {
    for (int64_t l = 0; l < kFusionChunk; ++l) d[l] = float(F{}(a[l], b[l]));
    return;
  }
  for (int64_t l = 0; l < n; ++l) d[l] = float(F{}(a[l], b[l]));
}

template <class F>
constexpr FusedForm fused_unary() {
  return {FusedForm::Kind::unary, chunk_unary<F>, nullptr};
}

template <class F>
constexpr FusedForm fused_binary() {
  return {FusedForm::Kind::binary, nullptr, chunk_binary<F>};
}

}  // namespace tpu
