#include "kernels/onednn_matmul.h"

#ifdef TPU_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>

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
  memory::desc a, b, c;
  dnnl::matmul prim;
};

std::shared_ptr<const Entry> make_entry(const Key& key) {
  auto e = std::make_shared<Entry>();
  const auto dt = key.in == MatmulInput::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  // Strides of the logical [M,K] / [K,w] views of the stored row-major operands.
  e->a = memory::desc({key.m, key.k}, dt, key.ta ? memory::dims{1, key.m} : memory::dims{key.k, 1});
  e->b = memory::desc({key.k, key.w}, dt, key.tb ? memory::dims{1, key.k} : memory::dims{key.n, 1});
  e->c = memory::desc({key.m, key.w}, memory::data_type::f32, memory::dims{key.n, 1});
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e->a, e->b, e->c), cpu_engine());
    e->prim = dnnl::matmul(pd);
    e->ok = true;
  } catch (const dnnl::error&) {
    e->ok = false;
  }
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
         ", ISA " + isa + ", native bf16: " + (onednn_native_bf16() ? "yes" : "no");
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
  thread_local dnnl::stream stream(cpu_engine());
  const size_t es = in == MatmulInput::bf16 ? 2 : 4;
  const auto* b_panel = static_cast<const std::byte*>(b) + size_t(j0 * (s.tb ? s.k : 1)) * es;
  auto mem = [](const memory::desc& d, const void* p) { return memory(d, cpu_engine(), const_cast<void*>(p)); };
  e->prim.execute(stream, {{DNNL_ARG_SRC, mem(e->a, a)}, {DNNL_ARG_WEIGHTS, mem(e->b, b_panel)}, {DNNL_ARG_DST, mem(e->c, c + j0)}});
  stream.wait();
  return true;
}

}  // namespace tpu

#else  // no oneDNN in this build

namespace tpu {
bool onednn_available() { return false; }
bool onednn_native_bf16() { return false; }
size_t onednn_primitives_created() { return 0; }
std::string onednn_report() { return "oneDNN: not in this build"; }
bool onednn_matmul_supported(MatmulInput, const GemmShape&, int64_t) { return false; }
bool onednn_matmul_panel(MatmulInput, const GemmShape&, const void*, const void*, float*, int64_t, int64_t) { return false; }
}  // namespace tpu

#endif
