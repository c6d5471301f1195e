// Runs an f32 kernel on bf16 operands the way the MXU does: bf16 inputs widened exactly to
// f32, f32 accumulation, the result rounded to bf16 once at the end.
#pragma once
#include <span>
#include <vector>

#include "core/tensor.h"
#include "ops/op_table.h"

namespace tpu {

inline Tensor widened(const Tensor& t) {
  if (t.dtype() != DType::bf16) return t;
  Tensor f(DType::f32, t.shape(), Tensor::Uninitialized{});
  const uint16_t* src = reinterpret_cast<const uint16_t*>(t.raw());
  for (int64_t i = 0; i < t.size(); ++i) f.data<float>()[i] = bf16_to_f32(src[i]);
  return f;
}

// f(in, out) with every bf16 input and a bf16 output seen as f32 tensors.
template <class F>
void compute_in_f32(std::span<const Tensor* const> in, Tensor& out, F f) {
  bool any = out.dtype() == DType::bf16;
  for (const Tensor* t : in) any = any || t->dtype() == DType::bf16;
  if (!any) return f(in, out);
  std::vector<Tensor> wide;
  for (const Tensor* t : in) wide.push_back(widened(*t));
  std::vector<const Tensor*> args;
  for (const Tensor& t : wide) args.push_back(&t);
  if (out.dtype() != DType::bf16) return f(args, out);
  Tensor r(DType::f32, out.shape(), Tensor::Uninitialized{});
  f(args, r);
  uint16_t* dst = reinterpret_cast<uint16_t*>(out.raw());
  for (int64_t i = 0; i < r.size(); ++i) dst[i] = f32_to_bf16(r.data<float>()[i]);
}

// The kernel K for any mix of f32 and bf16 operands.
template <Kernel K>
void in_f32(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  compute_in_f32(in, out, [&](std::span<const Tensor* const> args, Tensor& o) { K(n, args, o); });
}

}  // namespace tpu
