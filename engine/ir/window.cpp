#include "ir/window.h"

namespace tpu {

int64_t Window2D::output_size(int i, int64_t in) const {
  const int64_t dilated = in > 0 ? (in - 1) * lhs_dilation[i] + 1 : 0;
  const int64_t padded = dilated + pad_lo[i] + pad_hi[i];
  const int64_t span = (size[i] - 1) * rhs_dilation[i] + 1;
  return padded >= span ? (padded - span) / stride[i] + 1 : 0;
}

int64_t Window2D::source(int i, int64_t o, int64_t k, int64_t in) const {
  const int64_t p = o * stride[i] + k * rhs_dilation[i] - pad_lo[i];
  if (p < 0 || p % lhs_dilation[i] != 0) return -1;
  const int64_t s = p / lhs_dilation[i];
  return s < in ? s : -1;
}

Window2D input_grad_window(const Window2D& w, std::array<int64_t, 2> in, std::array<int64_t, 2> out) {
  Window2D t;
  for (int i = 0; i < 2; ++i) {
    t.size[i] = w.size[i];
    t.stride[i] = w.lhs_dilation[i];
    t.lhs_dilation[i] = w.stride[i];
    t.rhs_dilation[i] = w.rhs_dilation[i];
    t.pad_lo[i] = (w.size[i] - 1) * w.rhs_dilation[i] - w.pad_lo[i];
    t.pad_hi[i] = (in[i] - 1) * w.lhs_dilation[i] - (out[i] - 1) * w.stride[i] + w.pad_lo[i];
  }
  return t;
}

void set_window(Attrs& a, const Window2D& w) {
  a.dims = {w.size[0], w.size[1], w.stride[0], w.stride[1],
            w.lhs_dilation[0], w.lhs_dilation[1], w.rhs_dilation[0], w.rhs_dilation[1]};
  a.set_dims2({w.pad_lo[0], w.pad_hi[0], w.pad_lo[1], w.pad_hi[1]});
}

bool window_ok(const Attrs& a) {
  if (a.dims.size() != 8 || a.dims2().size() != 4) return false;
  for (int64_t d : a.dims)
    if (d < 1 || d > kMaxWindowAttr) return false;
  for (int64_t d : a.dims2())
    if (d < -kMaxWindowAttr || d > kMaxWindowAttr) return false;
  return true;
}

Window2D window_of(const Attrs& a) {
  Window2D w;
  for (int i = 0; i < 2; ++i) {
    w.size[i] = a.dims[size_t(i)];
    w.stride[i] = a.dims[size_t(2 + i)];
    w.lhs_dilation[i] = a.dims[size_t(4 + i)];
    w.rhs_dilation[i] = a.dims[size_t(6 + i)];
    w.pad_lo[i] = a.dims2()[size_t(2 * i)];
    w.pad_hi[i] = a.dims2()[size_t(2 * i + 1)];
  }
  return w;
}

}  // namespace tpu
