// Leaf and data-movement rows: parameter, constant, iota, broadcast, reshape, stop_gradient,
// transpose, slice, pad, concat, gather, scatter_add.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>


#include "kernels/transpose.h"
#include "ops/kernel_util.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

std::string dims_str(std::span<const int64_t> d) { return shape_str(d); }

// ---- leaves ----
std::string shape_parameter(const Graph&, Node& n) {
  for (int64_t d : n.shape)
    if (d < 0) return std::string(op_name(n.op)) + ": negative dimension in " + dims_str(n.shape);
  n.dtype = n.attrs.to;
  return "";
}
std::string shape_constant(const Graph&, Node& n) {
  if (!n.attrs.literal()) return "constant without a value";
  n.dtype = n.attrs.literal()->dtype();
  n.shape = n.attrs.literal()->shape();
  return "";
}
std::string shape_iota(const Graph& g, Node& n) {
  std::string e = shape_parameter(g, n);
  if (e.empty() && (n.attrs.axis < 0 || n.attrs.axis >= int64_t(n.shape.size())))
    return "iota: axis " + std::to_string(n.attrs.axis) + " out of range for " + dims_str(n.shape);
  return e;
}
void no_kernel(const Node& n, std::span<const Tensor* const>, Tensor&) {
  throw Error(std::string(op_name(n.op)) + " has no kernel: the executor binds it");
}
void ref_constant(const Node& n, std::span<const Tensor* const>, Tensor& out) {
  std::memcpy(out.raw(), n.attrs.literal()->raw(), out.bytes());
}
void ref_iota(const Node& n, std::span<const Tensor* const>, Tensor& out) {
  auto st = strides_of(n.shape);
  const int64_t axis = n.attrs.axis, len = n.shape[size_t(axis)], stride = st[size_t(axis)];
  for (int64_t i = 0, m = out.size(); i < m; ++i) out.set(i, double((i / stride) % len));
}
// Fills bytes [period, total) of base with copies of its first `period` bytes: doubled to a block
// of at least 256 KiB (whole periods), then that block copied across the pool.
void repeat_prefix(std::byte* base, int64_t period, int64_t total) {
  constexpr int64_t kBlock = int64_t(1) << 18;
  int64_t block = std::min(period, total);
  while (block < total && block < kBlock) {
    const int64_t add = std::min(block, total - block);
    std::memcpy(base + block, base, size_t(add));
    block += add;
  }
  if (block >= total) return;
  parallel_for((total - 1) / block, [&](int64_t t) {
    const int64_t at = (t + 1) * block;
    std::memcpy(base + at, base, size_t(std::min(block, total - at)));
  });
}

// The reference's values, written as copies: along the axis value a fills its `inner` elements
// (one set, then repeated), and that first slice is repeated over the others. The
// reference converts and divides per element (a sparse cross-entropy's one-hot iota over a
// GPT-2's [32, 128, 1000] logits took 35 ms a step).
void fast_iota(const Node& n, std::span<const Tensor* const>, Tensor& out) {
  const size_t axis = size_t(n.attrs.axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= n.shape[d];
  for (size_t d = axis + 1; d < n.shape.size(); ++d) inner *= n.shape[d];
  const int64_t len = n.shape[axis], es = int64_t(size_of(out.dtype())), slice = len * inner * es;
  if (slice == 0 || outer == 0) return;
  std::byte* base = out.raw();
  for (int64_t a = 0; a < len; ++a) {
    out.set(a * inner, double(a));
    repeat_prefix(base + a * inner * es, es, inner * es);
  }
  repeat_prefix(base, slice, outer * slice);
}
Cost cost_free(const Graph&, const Node&) { return {}; }

// ---- broadcast: operand dim i becomes output dim dims[i]; other output dims repeat ----
std::string shape_broadcast(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  const auto& dims = n.attrs.dims();
  const Shape& to = n.broadcast_shape();
  bool ok = dims.size() == x.shape.size() && valid_axes(dims, to.size());
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = x.shape[i] == to[size_t(dims[i])];
  if (!ok) return "cannot broadcast " + type_of(g, n.in[0]) + " to " + dims_str(to) + " along " + dims_str(dims);
  n.dtype = x.dtype;
  return "";
}
void ref_broadcast(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  auto xs = strides_of(in[0]->shape());
  std::vector<int64_t> src(n.shape.size(), 0);
  const Dims& dims = n.attrs.dims();
  for (size_t i = 0; i < dims.size(); ++i) src[size_t(dims[i])] = xs[i];
  auto dst = strides_of(n.shape);
  dispatch(out.dtype(), [&]<class T>() { copy_strided(out.data<T>(), dst, in[0]->data<T>(), src, n.shape); });
}
// A scalar's broadcast (the zeros a gather's gradient scatters into) as repeated copies of its
// bytes; any other through the reference's strided copy.
void fast_broadcast(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (in[0]->size() != 1 || out.size() == 0) return ref_broadcast(n, in, out);
  std::memcpy(out.raw(), in[0]->raw(), size_of(out.dtype()));
  repeat_prefix(out.raw(), int64_t(size_of(out.dtype())), int64_t(out.bytes()));
}
void grad_broadcast(GradContext& c) {
  const Node& n = c.n();
  std::vector<int64_t> axes;
  const Dims& dims = n.attrs.dims();
  for (int64_t d = 0; d < int64_t(n.shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) axes.push_back(d);
  c.give(0, c.g.reduce(c.out_grad, axes, ReduceKind::sum));
}

// ---- reshape ----
std::string shape_reshape(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  // shape_problem first: it rules out negative dims and products that overflow.
  if (!shape_problem(n.shape).empty() || num_elements(x.shape) != num_elements(n.shape))
    return "cannot reshape " + type_of(g, n.in[0]) + " (" + std::to_string(num_elements(x.shape)) +
           " elements) to " + dims_str(n.shape);
  n.dtype = x.dtype;
  return "";
}
void ref_copy(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  std::memcpy(out.raw(), in[0]->raw(), out.bytes());
}
void grad_reshape(GradContext& c) { c.give(0, c.g.reshape(c.out_grad, c.g.at(c.in(0)).shape)); }

// ---- stop_gradient: the operand, copied; no gradient rule, so autodiff stops here ----
std::string shape_stop_gradient(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  n.dtype = x.dtype;
  n.shape = x.shape;
  return "";
}

// ---- transpose: output dim i is operand dim perm[i] ----
std::string shape_transpose(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  auto sorted = n.attrs.dims();
  std::sort(sorted.begin(), sorted.end());
  bool ok = sorted.size() == x.shape.size();
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == int64_t(i);
  if (!ok) return "transpose: " + dims_str(n.attrs.dims()) + " is not a permutation of the dims of " + type_of(g, n.in[0]);
  n.dtype = x.dtype;
  for (int64_t p : n.attrs.dims()) n.shape.push_back(x.shape[size_t(p)]);
  return "";
}
// The operand's strides in the result's dim order: result dim i steps operand dim perm[i].
std::vector<int64_t> permuted_strides(const Node& n, const Tensor& x) {
  const auto xs = strides_of(x.shape());
  std::vector<int64_t> src;
  for (int64_t p : n.attrs.dims()) src.push_back(xs[size_t(p)]);
  return src;
}
void ref_transpose(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const auto src = permuted_strides(n, *in[0]), dst = strides_of(n.shape);
  dispatch(out.dtype(), [&]<class T>() { copy_strided(out.data<T>(), dst, in[0]->data<T>(), src, n.shape); });
}
// Swapping the last two dims (the transposed weights of passes/dot_layout.cpp) runs
// transpose_last_two (kernels/transpose.h); other permutations copy rows (copy_rows_parallel).

// Copies x, read with strides `src`, to out, written with strides `dst`, over the index space
// `shape`: a fixed number of tasks, each over a run of rows of its last dim, whole rows copied
// where both sides keep that dim contiguous. The transposes that keep the last dim (attention's
// head split and merge, [B,S,H,D] <-> [B,H,S,D]; one thread walking them took 0.6 ms per 4 MB
// in a transformer) and a pad's placing of its operand (ResNet50's input pad: 4.7 ms) use it.
constexpr int64_t kRowTasks = 64;

template <class T>
void copy_rows_parallel(const T* x, std::span<const int64_t> src, T* out, std::span<const int64_t> dst,
                        const Shape& shape) {
  const size_t outer = shape.size() - 1;
  const int64_t inner = shape[outer], rows = num_elements(shape) / inner;
  const bool contiguous = src[outer] == 1 && dst[outer] == 1;
  const int64_t tasks = std::min(rows, kRowTasks);
  parallel_for(tasks, [&](int64_t t) {
    int64_t row = rows * t / tasks, from = 0, to = 0;
    const int64_t end = rows * (t + 1) / tasks;
    std::vector<int64_t> idx(outer);  // the index of `row`, but for the last dim
    for (size_t d = outer, q = size_t(row); d-- > 0; q /= size_t(shape[d])) {
      idx[d] = int64_t(q % size_t(shape[d]));
      from += idx[d] * src[d];
      to += idx[d] * dst[d];
    }
    for (; row < end; ++row) {
      if (contiguous) std::copy_n(x + from, inner, out + to);
      else
        for (int64_t i = 0; i < inner; ++i) out[to + i * dst[outer]] = x[from + i * src[outer]];
      for (size_t d = outer; d-- > 0;) {  // the next row's places
        from += src[d], to += dst[d];
        if (++idx[d] < shape[d]) break;
        from -= src[d] * shape[d], to -= dst[d] * shape[d];
        idx[d] = 0;
      }
    }
  });
}

void fast_transpose(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const auto& perm = n.attrs.dims();
  const size_t r = perm.size();
  bool swaps_last_two = r >= 2 && perm[r - 1] == int64_t(r - 2) && perm[r - 2] == int64_t(r - 1);
  for (size_t i = 0; swaps_last_two && i + 2 < r; ++i) swaps_last_two = perm[i] == int64_t(i);
  if (!swaps_last_two) {
    if (r < 2 || out.size() == 0) return ref_transpose(n, in, out);
    const auto src = permuted_strides(n, *in[0]), dst = strides_of(n.shape);
    return dispatch(out.dtype(),
                    [&]<class T>() { copy_rows_parallel<T>(in[0]->data<T>(), src, out.data<T>(), dst, n.shape); });
  }
  const Shape& xs = in[0]->shape();
  const int64_t rows = xs[r - 2], cols = xs[r - 1], batch = rows * cols > 0 ? in[0]->size() / (rows * cols) : 0;
  dispatch(out.dtype(), [&]<class T>() { transpose_last_two(in[0]->data<T>(), out.data<T>(), batch, rows, cols); });
}

void grad_transpose(GradContext& c) {
  const auto& perm = c.n().attrs.dims();
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  c.give(0, c.g.transpose(c.out_grad, inverse));
}

// ---- slice [start, limit) per dim ----
std::string shape_slice(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  const auto& lo = n.slice_start();
  const auto& hi = n.slice_limit();
  bool ok = lo.size() == x.shape.size() && hi.size() == x.shape.size();
  for (size_t i = 0; ok && i < lo.size(); ++i) ok = 0 <= lo[i] && lo[i] <= hi[i] && hi[i] <= x.shape[i];
  if (!ok) return "slice " + dims_str(lo) + ".." + dims_str(hi) + " out of range for " + type_of(g, n.in[0]);
  n.dtype = x.dtype;
  for (size_t i = 0; i < lo.size(); ++i) n.shape.push_back(hi[i] - lo[i]);
  return "";
}
// The element of the operand (strides xs) where the slice starts.
int64_t slice_offset(const Node& n, std::span<const int64_t> xs) {
  int64_t offset = 0;
  for (size_t i = 0; i < xs.size(); ++i) offset += n.slice_start()[i] * xs[i];
  return offset;
}
void ref_slice(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  auto xs = strides_of(in[0]->shape());
  const int64_t offset = slice_offset(n, xs);
  auto dst = strides_of(n.shape);
  dispatch(out.dtype(), [&]<class T>() {
    copy_strided(out.data<T>(), dst, in[0]->data<T>() + offset, xs, n.shape);
  });
}
// The same rows copied across the pool (copy_rows_parallel): MobileNetV2's pad gradients, slices
// of [64,33,33,96] tensors, took 4 ms each on one thread walking elements.
void fast_slice(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (n.shape.empty() || out.size() == 0) return ref_slice(n, in, out);
  const auto xs = strides_of(in[0]->shape());
  const int64_t offset = slice_offset(n, xs);
  const auto dst = strides_of(n.shape);
  dispatch(out.dtype(), [&]<class T>() { copy_rows_parallel<T>(in[0]->data<T>() + offset, xs, out.data<T>(), dst, n.shape); });
}
void grad_slice(GradContext& c) {
  const Node& n = c.n();
  const Shape& xs = c.g.at(c.in(0)).shape;
  Dims hi;
  for (size_t i = 0; i < xs.size(); ++i) hi.push_back(xs[i] - n.slice_limit()[i]);
  c.give(0, c.g.pad(c.out_grad, n.slice_start(), hi, 0));
}

// ---- pad with a constant: lo/hi elements before/after each dim ----
std::string shape_pad(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  const auto& lo = n.pad_lo();
  const auto& hi = n.pad_hi();
  bool ok = lo.size() == x.shape.size() && hi.size() == x.shape.size();
  // Bounded so that the padded size cannot overflow (the result is checked by Graph::add).
  for (size_t i = 0; ok && i < lo.size(); ++i) ok = 0 <= lo[i] && lo[i] <= kMaxElements && 0 <= hi[i] && hi[i] <= kMaxElements;
  if (!ok) return "pad " + dims_str(lo) + "/" + dims_str(hi) + " does not fit " + type_of(g, n.in[0]);
  n.dtype = x.dtype;
  for (size_t i = 0; i < lo.size(); ++i) n.shape.push_back(x.shape[i] + lo[i] + hi[i]);
  return "";
}
// Where the operand's first element goes in the padded result (row-major strides `dst`).
int64_t padded_offset(const Node& n, std::span<const int64_t> dst) {
  int64_t offset = 0;
  for (size_t i = 0; i < dst.size(); ++i) offset += n.pad_lo()[i] * dst[i];
  return offset;
}
// The input copied into its place in the padded result (the reference fills the rest first).
void place_padded(const Node& n, const Tensor& x, Tensor& out) {
  const auto dst = strides_of(n.shape), src = strides_of(x.shape());
  const int64_t offset = padded_offset(n, dst);
  dispatch(out.dtype(), [&]<class T>() { copy_strided(out.data<T>() + offset, dst, x.data<T>(), src, x.shape()); });
}
void ref_pad(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  for (int64_t i = 0, m = out.size(); i < m; ++i) out.set(i, n.attrs.value());
  place_padded(n, *in[0], out);
}
// The same, filling by type instead of element by element through doubles, in chunks and rows
// across the pool.
void fast_pad(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  if (n.shape.empty() || x.size() == 0) return ref_pad(n, in, out);
  constexpr int64_t kChunk = int64_t(1) << 16;
  const auto src = strides_of(x.shape()), dst = strides_of(n.shape);
  const int64_t offset = padded_offset(n, dst);
  dispatch(out.dtype(), [&]<class T>() {
    T* o = out.data<T>();
    const int64_t total = out.size();
    parallel_for((total + kChunk - 1) / kChunk, [&](int64_t t) {
      std::fill(o + t * kChunk, o + std::min(total, (t + 1) * kChunk), T(n.attrs.value()));
    });
    copy_rows_parallel<T>(x.data<T>(), src, o + offset, dst, x.shape());
  });
}
void grad_pad(GradContext& c) {
  const Node& n = c.n();
  const Shape& xs = c.g.at(c.in(0)).shape;
  Dims hi;
  for (size_t i = 0; i < xs.size(); ++i) hi.push_back(n.pad_lo()[i] + xs[i]);
  c.give(0, c.g.slice(c.out_grad, n.pad_lo(), hi));
}

// ---- concat along axis ----
std::string shape_concat(const Graph& g, Node& n) {
  if (n.in.empty()) return "concat of nothing";
  const Node& first = g.at(n.in[0]);
  const int64_t axis = n.attrs.axis;
  if (axis < 0 || axis >= int64_t(first.shape.size())) return "concat: axis out of range for " + operands_str(g, n);
  n.dtype = first.dtype;
  n.shape = first.shape;
  n.shape[size_t(axis)] = 0;
  for (NodeId i : n.in) {
    const Node& x = g.at(i);
    Shape a = x.shape, b = first.shape;
    if (a.size() == b.size()) a[size_t(axis)] = b[size_t(axis)] = 0;
    if (x.dtype != first.dtype || a != b) return "concat needs operands that agree except on the axis, got " + operands_str(g, n);
    n.shape[size_t(axis)] += x.shape[size_t(axis)];
    // Stopped here: a sum past the limit, however many operands follow, is refused by
    // Graph::add, and so the sum never overflows.
    if (n.shape[size_t(axis)] >= kMaxElements) return "";
  }
  return "";
}
void ref_concat(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  auto dst = strides_of(n.shape);
  int64_t offset = 0;
  const size_t axis = size_t(n.attrs.axis);
  for (const Tensor* x : in) {
    auto src = strides_of(x->shape());
    dispatch(out.dtype(), [&]<class T>() {
      copy_strided(out.data<T>() + offset * dst[axis], dst, x->data<T>(), src, x->shape());
    });
    offset += x->shape()[axis];
  }
}
// Each operand's rows copied into place across the pool.
void fast_concat(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  if (out.size() == 0) return;
  const auto dst = strides_of(n.shape);
  int64_t offset = 0;
  const size_t axis = size_t(n.attrs.axis);
  for (const Tensor* x : in) {
    if (x->size() > 0) {
      const auto src = strides_of(x->shape());
      dispatch(out.dtype(), [&]<class T>() {
        copy_rows_parallel<T>(x->data<T>(), src, out.data<T>() + offset * dst[axis], dst, x->shape());
      });
    }
    offset += x->shape()[axis];
  }
}
void grad_concat(GradContext& c) {
  const Node& n = c.n();
  int64_t offset = 0;
  const size_t axis = size_t(n.attrs.axis);
  for (size_t i = 0; i < n.in.size(); ++i) {
    Shape xs = c.g.at(n.in[i]).shape;
    Dims lo(xs.size(), 0), hi = n.shape;
    lo[axis] = offset;
    hi[axis] = offset + xs[axis];
    offset = hi[axis];
    if (c.needs(i)) c.give(i, c.g.slice(c.out_grad, lo, hi));
  }
}

// ---- gather rows: x[N, R...], idx[I...] -> [I..., R...] ----
// Elements of one row: the product of the dims after the first (not the count divided by the
// first dim, which may be 0).
int64_t row_size(const Shape& s) {
  int64_t n = 1;
  for (size_t i = 1; i < s.size(); ++i) n *= s[i];
  return n;
}

std::string shape_gather(const Graph& g, Node& n) {
  const Node& x = g.at(n.in.at(0));
  const Node& idx = g.at(n.in.at(1));
  if (x.shape.empty() || !is_integer(idx.dtype))
    return "gather needs an operand of rank >= 1 and integer indices, got " + operands_str(g, n);
  n.dtype = x.dtype;
  n.shape = idx.shape;
  n.shape.insert(n.shape.end(), x.shape.begin() + 1, x.shape.end());
  return "";
}
int64_t checked_index(const Tensor& idx, int64_t i, int64_t rows) {
  int64_t r = int64_t(idx.get(i));
  if (r < 0 || r >= rows)
    throw Error("index " + std::to_string(r) + " out of range for a dimension of size " + std::to_string(rows));
  return r;
}
void ref_gather(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const size_t row = size_t(row_size(x.shape())) * size_of(x.dtype());
  for (int64_t i = 0, m = in[1]->size(); i < m; ++i) {
    int64_t r = checked_index(*in[1], i, x.shape()[0]);
    std::memcpy(out.raw() + size_t(i) * row, x.raw() + size_t(r) * row, row);
  }
}
// The indices checked first, then the rows copied in pieces of 64 KiB across the pool: a conv's
// input gradient gathers its filter's taps reversed, 9 rows of up to 1 MiB each (ResNet50).
void fast_gather(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& x = *in[0];
  const int64_t count = in[1]->size();
  const int64_t row = row_size(x.shape()) * int64_t(size_of(x.dtype())), total = count * row;
  if (total < (int64_t(1) << 16)) return ref_gather(n, in, out);
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) rows[size_t(i)] = checked_index(*in[1], i, x.shape()[0]);
  constexpr int64_t kPiece = int64_t(1) << 16;
  parallel_for((total + kPiece - 1) / kPiece, [&](int64_t t) {
    for (int64_t at = t * kPiece, end = std::min(total, at + kPiece); at < end;) {
      const int64_t i = at / row, within = at % row, bytes = std::min(end - at, row - within);
      std::memcpy(out.raw() + at, x.raw() + rows[size_t(i)] * row + within, size_t(bytes));
      at += bytes;
    }
  });
}
void grad_gather(GradContext& c) {
  const Node& x = c.g.at(c.in(0));
  NodeId zeros = c.g.full(x.dtype, x.shape, 0);
  c.give(0, c.g.scatter_add(zeros, c.in(1), c.out_grad));
}

// ---- scatter_add: base[N, R...] + rows of upd[I..., R...] at idx[I...] ----
std::string shape_scatter_add(const Graph& g, Node& n) {
  const Node& base = g.at(n.in.at(0));
  const Node& idx = g.at(n.in.at(1));
  const Node& upd = g.at(n.in.at(2));
  Shape want = idx.shape;
  if (!base.shape.empty()) want.insert(want.end(), base.shape.begin() + 1, base.shape.end());
  if (base.shape.empty() || !is_integer(idx.dtype) || upd.dtype != base.dtype || upd.shape != want)
    return "scatter_add needs base[N,R...], integer idx[I...], updates[I...,R...], got " + operands_str(g, n);
  n.dtype = base.dtype;
  n.shape = base.shape;
  return "";
}
// The result may be the base's own storage (the memory plan's writes_over): then the rows are
// added in place.
void ref_scatter_add(const Node&, std::span<const Tensor* const> in, Tensor& out) {
  if (out.raw() != in[0]->raw()) std::memcpy(out.raw(), in[0]->raw(), out.bytes());
  const int64_t row = row_size(out.shape());
  dispatch(out.dtype(), [&]<class T>() {
    T* o = out.data<T>();
    const T* u = in[2]->data<T>();
    for (int64_t i = 0, m = in[1]->size(); i < m; ++i) {
      int64_t r = checked_index(*in[1], i, out.shape()[0]);
      for (int64_t j = 0; j < row; ++j) {
        T& at = o[r * row + j];
        if constexpr (std::is_integral_v<T>)  // wraps, like i32 add (elementwise.cpp)
          at = T(std::make_unsigned_t<T>(int64_t(at) + int64_t(u[i * row + j])));
        else
          at = T(at + u[i * row + j]);
      }
    }
  });
}
void grad_scatter_add(GradContext& c) {
  c.give(0, c.out_grad);
  if (c.needs(2)) c.give(2, c.g.gather(c.out_grad, c.in(1)));
}

}  // namespace

extern const OpInfo parameter_row = {Op::parameter, shape_parameter, no_kernel, nullptr, nullptr, cost_free};
extern const OpInfo constant_row = {Op::constant, shape_constant, ref_constant, nullptr, nullptr, cost_free};
extern const OpInfo iota_row = {Op::iota, shape_iota, ref_iota, fast_iota, nullptr, movement_cost};
extern const OpInfo broadcast_row = {Op::broadcast, shape_broadcast, ref_broadcast, fast_broadcast, grad_broadcast, movement_cost, kFoldedForm};
extern const OpInfo reshape_row = {Op::reshape, shape_reshape, ref_copy, nullptr, grad_reshape, cost_free};
extern const OpInfo stop_gradient_row = {Op::stop_gradient, shape_stop_gradient, ref_copy, nullptr, nullptr, cost_free};
extern const OpInfo transpose_row = {Op::transpose, shape_transpose, ref_transpose, fast_transpose, grad_transpose, movement_cost};
extern const OpInfo slice_row = {Op::slice, shape_slice, ref_slice, fast_slice, grad_slice, movement_cost};
extern const OpInfo pad_row = {Op::pad, shape_pad, ref_pad, fast_pad, grad_pad, movement_cost};
extern const OpInfo concat_row = {Op::concat, shape_concat, ref_concat, fast_concat, grad_concat, movement_cost};
extern const OpInfo gather_row = {Op::gather, shape_gather, ref_gather, fast_gather, grad_gather, movement_cost};
extern const OpInfo scatter_add_row = {Op::scatter_add, shape_scatter_add, ref_scatter_add, nullptr, grad_scatter_add, movement_cost};

}  // namespace tpu
