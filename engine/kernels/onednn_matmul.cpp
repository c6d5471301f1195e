#include "kernels/onednn_matmul.h"

#ifdef TPU_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
// The OpenMP runtime oneDNN runs on (CMakeLists.txt links the same one): its C API.
extern "C" void omp_set_num_threads(int n);
#elif DNNL_CPU_THREADING_RUNTIME != DNNL_RUNTIME_SEQ
#error "tputrain needs oneDNN built with the OpenMP or the sequential CPU runtime"
#endif

namespace tpu {

namespace {

using dnnl::memory;

// Never destroyed: cached primitives and the threads' streams refer to it until the very end.
dnnl::engine& cpu_engine() {
  static dnnl::engine& e = *std::make_unique<dnnl::engine>(dnnl::engine::kind::cpu, 0).release();
  return e;
}

// oneDNN's OpenMP threads would come on top of ours: every thread that runs a primitive asks
// for one (the setting is per thread).
void run_single_threaded() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  thread_local bool set = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)set;
#endif
}

// A panel: C[M, w] (row stride N) = A[M, K] (strides per ta) x B[K, w] (strides per tb).
struct Key {
  MatmulInput in;
  int64_t m, k, w, n;
  bool ta, tb;
  auto operator<=>(const Key&) const = default;
};

struct Entry {
  bool ok = false;
  memory::desc a, b, c, scratch;
  dnnl::matmul prim;
};

size_t rejected = 0;  // primitives that failed their self-check; guarded by cache_mutex

// A thread's memory objects and argument list for one primitive, pointed at the operands of
// each call: a steady-state step allocates nothing here. The scratchpad is the thread's own
// (user mode), so no two threads ever share one whatever the library's build options.
struct Bound {
  memory a, b, c, scratch;
  std::unordered_map<int, memory> args;
};

std::byte* thread_scratch(size_t bytes) {
  thread_local std::vector<std::byte> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

Bound& bound_for(const Entry& e) {
  thread_local std::map<const Entry*, Bound> bound;  // entries live as long as the process
  auto it = bound.find(&e);
  if (it == bound.end()) {
    auto none = [](const memory::desc& d) { return memory(d, cpu_engine(), DNNL_MEMORY_NONE); };
    Bound b{none(e.a), none(e.b), none(e.c), none(e.scratch), {}};
    b.args = {{DNNL_ARG_SRC, b.a}, {DNNL_ARG_WEIGHTS, b.b}, {DNNL_ARG_DST, b.c}, {DNNL_ARG_SCRATCHPAD, b.scratch}};
    it = bound.emplace(&e, std::move(b)).first;
  }
  return it->second;
}

void execute(const Entry& e, const void* a, const void* b, float* c) {
  thread_local dnnl::stream stream(cpu_engine());
  Bound& m = bound_for(e);
  m.a.set_data_handle(const_cast<void*>(a));
  m.b.set_data_handle(const_cast<void*>(b));
  m.c.set_data_handle(c);
  m.scratch.set_data_handle(thread_scratch(e.scratch.get_size()));
  e.prim.execute(stream, m.args);
  stream.wait();
}

// Deterministic operand values in [-1, 1), exact in bf16.
float probe_value(uint32_t i) {
  uint32_t x = i * 2654435761u + 12345u;
  x ^= x >> 15;
  return float(int(x % 255u) - 127) / 128.0f;
}

// Runs a new primitive once on probe data and checks sampled rows against sums in double.
// Library implementations for some layouts and CPUs compute wrong results without any
// error; a primitive that fails here is not used (the caller falls back to f32 paths).
bool self_check(const Key& key, const Entry& e) {
  const int64_t lda = key.ta ? key.m : key.k, ldb = key.tb ? key.k : key.n;
  const int64_t a_len = key.m * key.k, b_len = key.k == 0 ? 0 : key.tb ? key.w * key.k : (key.k - 1) * key.n + key.w;
  const size_t es = key.in == MatmulInput::bf16 ? 2 : 4;
  std::vector<float> a(static_cast<size_t>(a_len)), b(static_cast<size_t>(b_len));
  for (int64_t i = 0; i < a_len; ++i) a[size_t(i)] = probe_value(uint32_t(i));
  for (int64_t i = 0; i < b_len; ++i) b[size_t(i)] = probe_value(uint32_t(i + a_len));
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
  std::vector<float> c(size_t((key.m - 1) * key.n + key.w), 0.0f);
  execute(e, a_in.data(), b_in.data(), c.data());
  const int64_t rows = std::min<int64_t>(key.m, 16);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = rows == 1 ? 0 : r * (key.m - 1) / (rows - 1);
    for (int64_t j = 0; j < key.w; ++j) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < key.k; ++p) {
        const double x = a[size_t(key.ta ? p * lda + i : i * lda + p)];
        const double y = b[size_t(key.tb ? j * ldb + p : p * ldb + j)];
        sum += x * y;
        mag += std::abs(x * y);
      }
      // f32 sums of k exact products are off by at most about k * 2^-24 of their magnitudes;
      // a wrong layout is off by the size of the values themselves.
      if (std::abs(c[size_t(i * key.n + j)] - sum) > double(key.k + 2) * 0x1p-23 * mag + 1e-30) return false;
    }
  }
  return true;
}

std::shared_ptr<const Entry> make_entry(const Key& key) {
  auto e = std::make_shared<Entry>();
  const auto dt = key.in == MatmulInput::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  // Strides of the logical [M,K] / [K,w] views of the stored row-major operands.
  e->a = memory::desc({key.m, key.k}, dt, key.ta ? memory::dims{1, key.m} : memory::dims{key.k, 1});
  e->b = memory::desc({key.k, key.w}, dt, key.tb ? memory::dims{1, key.k} : memory::dims{key.n, 1});
  e->c = memory::desc({key.m, key.w}, memory::data_type::f32, memory::dims{key.n, 1});
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e->a, e->b, e->c), attr, cpu_engine());
    e->scratch = pd.scratchpad_desc();
    e->prim = dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    return e;  // no implementation for this shape
  }
  e->ok = self_check(key, *e);
  if (!e->ok) ++rejected;
  return e;
}

std::mutex cache_mutex;
std::map<Key, std::shared_ptr<const Entry>> cache;  // guarded by cache_mutex

std::shared_ptr<const Entry> lookup(const Key& key) {
  std::lock_guard lock(cache_mutex);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_entry(key)).first;
  return it->second;
}

}  // namespace

bool onednn_available() { return true; }

size_t onednn_primitives_created() {
  std::lock_guard lock(cache_mutex);
  return cache.size();
}

size_t onednn_primitives_rejected() {
  std::lock_guard lock(cache_mutex);
  return rejected;
}

bool onednn_native_bf16() {
  const unsigned bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
  return (unsigned(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

std::string onednn_report() {
  const dnnl_version_t* v = dnnl_version();
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    default: isa = "other"; break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         ", ISA " + isa + ", native bf16: " + (onednn_native_bf16() ? "yes" : "no") +
         ", primitives failing their self-check: " + std::to_string(onednn_primitives_rejected());
}

bool onednn_matmul_supported(MatmulInput in, const GemmShape& s, int64_t w) {
  run_single_threaded();  // before a primitive is made: it keeps the thread count it sees
  return lookup({in, s.m, s.k, w, s.n, s.ta, s.tb})->ok;
}

bool onednn_matmul_panel(MatmulInput in, const GemmShape& s, const void* a, const void* b, float* c, int64_t j0,
                         int64_t w) {
  run_single_threaded();
  std::shared_ptr<const Entry> e = lookup({in, s.m, s.k, w, s.n, s.ta, s.tb});
  if (!e->ok) return false;
  const size_t es = in == MatmulInput::bf16 ? 2 : 4;
  execute(*e, a, static_cast<const std::byte*>(b) + size_t(j0 * (s.tb ? s.k : 1)) * es, c + j0);
  return true;
}

}  // namespace tpu

#else  // no oneDNN in this build

namespace tpu {
bool onednn_available() { return false; }
bool onednn_native_bf16() { return false; }
size_t onednn_primitives_created() { return 0; }
size_t onednn_primitives_rejected() { return 0; }
std::string onednn_report() { return "oneDNN: not in this build"; }
bool onednn_matmul_supported(MatmulInput, const GemmShape&, int64_t) { return false; }
bool onednn_matmul_panel(MatmulInput, const GemmShape&, const void*, const void*, float*, int64_t, int64_t) { return false; }
}  // namespace tpu

#endif
