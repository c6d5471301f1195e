#include "kernels/onednn_matmul.h"

#ifdef TPU_HAVE_ONEDNN

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/onednn_util.h"
#include "kernels/product_check.h"

namespace tpu {

namespace {

using namespace onednn;

// A tile: C[M, w] (row stride N) = A[M, K] (strides per ta; a transposed A's row stride is
// lda, the whole product's M) x B[K, w] (strides per tb). With count > 1, `count` whole batch
// elements in one call (then w = N and lda = M: each element's operands are contiguous).
struct Key {
  MatmulInput in;
  int64_t m, k, w, n, lda, count;
  bool ta, tb;
  auto operator<=>(const Key&) const = default;
};

struct Entry {
  bool ok = false;
  Call call;  // src, weights, dst
  std::string impl;  // oneDNN's name for the implementation it chose
};

void execute(const Entry& e, const void* a, const void* b, float* c) { run(e.call, {a, b, c}); }

// Runs a new primitive once on probe data and checks sampled entries of each end element
// against sums in double (kernels/product_check.h); a primitive that fails is not used (the
// caller falls back to f32 paths).
bool self_check(const Key& key, const Entry& e) {
  const int64_t lda = key.ta ? key.lda : key.k, ldb = key.tb ? key.k : key.n;
  const int64_t a_len = key.k == 0 ? 0 : key.ta ? (key.k - 1) * lda + key.m : key.m * key.k;
  const int64_t b_len = key.k == 0 ? 0 : key.tb ? key.w * key.k : (key.k - 1) * key.n + key.w;
  const int64_t c_len = (key.m - 1) * key.n + key.w;  // per element, as a_len and b_len
  const size_t es = key.in == MatmulInput::bf16 ? 2 : 4;
  std::vector<float> a(static_cast<size_t>(key.count * a_len)), b(static_cast<size_t>(key.count * b_len));
  for (size_t i = 0; i < a.size(); ++i) a[i] = probe_value(uint32_t(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = probe_value(uint32_t(i + a.size()));
  std::vector<std::byte> a_in(a.size() * es), b_in(b.size() * es);
  auto store = [&](const std::vector<float>& from, std::vector<std::byte>& to) {
    for (size_t i = 0; i < from.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &from[i], 4);
      if (es == 2) std::memcpy(&to[i * 2], reinterpret_cast<const char*>(&bits) + 2, 2);  // exact: low half is zero
      else std::memcpy(&to[i * 4], &bits, 4);
    }
  };
  store(a, a_in);
  store(b, b_in);
  std::vector<float> c(size_t(key.count * c_len), 0.0f);
  execute(e, a_in.data(), b_in.data(), c.data());
  for (int64_t element : {int64_t(0), key.count - 1}) {
    const MatrixView ae{a.data() + element * a_len, key.ta ? 1 : lda, key.ta ? lda : 1};
    const MatrixView be{b.data() + element * b_len, key.tb ? 1 : ldb, key.tb ? ldb : 1};
    const MatrixView ce{c.data() + element * c_len, key.n, 1};
    if (!product_matches_at_samples(ae, be, ce, key.m, key.k, key.w, Operands::probe)) return false;
  }
  return true;
}

std::shared_ptr<const Entry> make_entry(const Key& key) {
  auto e = std::make_shared<Entry>();
  const auto dt = key.in == MatmulInput::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  // Strides of the logical [M,K] / [K,w] views of the stored row-major operands, after the
  // elements' own stride when there are several.
  memory::dims a_dims{key.m, key.k}, b_dims{key.k, key.w}, c_dims{key.m, key.w};
  memory::dims a_strides = key.ta ? memory::dims{1, key.lda} : memory::dims{key.k, 1};
  memory::dims b_strides = key.tb ? memory::dims{1, key.k} : memory::dims{key.n, 1};
  memory::dims c_strides{key.n, 1};
  if (key.count > 1) {
    a_dims.insert(a_dims.begin(), key.count), a_strides.insert(a_strides.begin(), key.m * key.k);
    b_dims.insert(b_dims.begin(), key.count), b_strides.insert(b_strides.begin(), key.k * key.n);
    c_dims.insert(c_dims.begin(), key.count), c_strides.insert(c_strides.begin(), key.m * key.n);
  }
  const memory::desc a(a_dims, dt, a_strides), b(b_dims, dt, b_strides);
  const memory::desc c(c_dims, memory::data_type::f32, c_strides);
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), primitive_attributes(), cpu_engine());
    e->call = {dnnl::matmul(pd), {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}}, pd.scratchpad_desc()};
    e->impl = pd.impl_info_str();
  } catch (const dnnl::error&) {
    count_primitive(false);
    return e;  // no implementation for this shape
  }
  e->ok = self_check(key, *e);
  count_primitive(!e->ok);
  return e;
}

OnceCache<Key, Entry> cache;  // primitives, each made and checked once

std::shared_ptr<const Entry> lookup(const Key& key) { return cache.get(key, make_entry); }

// The keys of tiles of h rows and w columns of s, and of groups of `count` whole elements.
Key tile_key(MatmulInput in, const GemmShape& s, int64_t h, int64_t w) { return {in, h, s.k, w, s.n, s.m, 1, s.ta, s.tb}; }
Key group_key(MatmulInput in, const GemmShape& s, int64_t count) {
  return {in, s.m, s.k, s.n, s.n, s.m, count, s.ta, s.tb};
}

}  // namespace

bool onednn_matmul_supported(MatmulInput in, const GemmShape& s, int64_t h, int64_t w) {
  run_single_threaded();  // before a primitive is made: it keeps the thread count it sees
  return lookup(tile_key(in, s, h, w))->ok;
}

bool onednn_matmul_group_supported(MatmulInput in, const GemmShape& s, int64_t count) {
  run_single_threaded();
  return lookup(group_key(in, s, count))->ok;
}

std::string onednn_matmul_impl(MatmulInput in, const GemmShape& s, int64_t h, int64_t w) {
  run_single_threaded();
  return lookup(tile_key(in, s, h, w))->impl;
}

std::string onednn_matmul_group_impl(MatmulInput in, const GemmShape& s, int64_t count) {
  run_single_threaded();
  return lookup(group_key(in, s, count))->impl;
}

bool onednn_matmul_tile(MatmulInput in, const GemmShape& s, const void* a, const void* b, float* c, int64_t h,
                        int64_t j0, int64_t w) {
  run_single_threaded();
  std::shared_ptr<const Entry> e = lookup(tile_key(in, s, h, w));
  if (!e->ok) return false;
  const size_t es = in == MatmulInput::bf16 ? 2 : 4;
  execute(*e, a, static_cast<const std::byte*>(b) + size_t(j0 * (s.tb ? s.k : 1)) * es, c + j0);
  return true;
}

bool onednn_matmul_group(MatmulInput in, const GemmShape& s, int64_t count, const void* a, const void* b, float* c) {
  run_single_threaded();
  std::shared_ptr<const Entry> e = lookup(group_key(in, s, count));
  if (!e->ok) return false;
  execute(*e, a, b, c);
  return true;
}

}  // namespace tpu

#else  // no oneDNN in this build

namespace tpu {
bool onednn_matmul_supported(MatmulInput, const GemmShape&, int64_t, int64_t) { return false; }
std::string onednn_matmul_impl(MatmulInput, const GemmShape&, int64_t, int64_t) { return ""; }
bool onednn_matmul_group_supported(MatmulInput, const GemmShape&, int64_t) { return false; }
std::string onednn_matmul_group_impl(MatmulInput, const GemmShape&, int64_t) { return ""; }
bool onednn_matmul_group(MatmulInput, const GemmShape&, int64_t, const void*, const void*, float*) { return false; }
bool onednn_matmul_tile(MatmulInput, const GemmShape&, const void*, const void*, float*, int64_t, int64_t, int64_t) {
  return false;
}
}  // namespace tpu

#endif
