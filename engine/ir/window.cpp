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

bool window_ok(const Attrs& a) {
  const Window2D* w = a.window();
  if (!w) return false;
  auto in = [](int64_t d, int64_t lo) { return d >= lo && d <= kMaxWindowAttr; };
  for (int i = 0; i < 2; ++i)
    if (!in(w->size[i], 1) || !in(w->stride[i], 1) || !in(w->lhs_dilation[i], 1) || !in(w->rhs_dilation[i], 1) ||
        !in(w->pad_lo[i], -kMaxWindowAttr) || !in(w->pad_hi[i], -kMaxWindowAttr))
      return false;
  return true;
}

namespace {
std::string pair_text(const std::array<int64_t, 2>& v) { return std::to_string(v[0]) + "x" + std::to_string(v[1]); }
}  // namespace

std::string window_text(const Window2D& w) {
  std::string s = "size=" + pair_text(w.size) + " stride=" + pair_text(w.stride) + " pad=";
  s += std::to_string(w.pad_lo[0]) + "_" + std::to_string(w.pad_hi[0]) + "x" + std::to_string(w.pad_lo[1]) + "_" +
       std::to_string(w.pad_hi[1]);
  const std::array<int64_t, 2> one{1, 1};
  if (w.lhs_dilation != one) s += " lhs_dilation=" + pair_text(w.lhs_dilation);
  if (w.rhs_dilation != one) s += " rhs_dilation=" + pair_text(w.rhs_dilation);
  return s;
}

Window2D window_of(const Attrs& a) { return a.window() ? *a.window() : Window2D{}; }

}  // namespace tpu
