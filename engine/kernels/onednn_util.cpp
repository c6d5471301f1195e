#include "kernels/onednn_util.h"

#include "kernels/onednn.h"

#ifdef TPU_HAVE_ONEDNN

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <unordered_map>

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
// The OpenMP runtime oneDNN runs on (CMakeLists.txt links the same one): its C API.
extern "C" void omp_set_num_threads(int n);
#elif DNNL_CPU_THREADING_RUNTIME != DNNL_RUNTIME_SEQ
#error "tputrain needs oneDNN built with the OpenMP or the sequential CPU runtime"
#endif

namespace tpu {

namespace onednn {

namespace {

std::atomic<size_t> created{0}, rejected{0};

std::byte* thread_scratch(size_t bytes) {
  thread_local std::vector<std::byte> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

// A thread's memory objects and argument list for one call.
struct Bound {
  std::vector<memory> data;
  memory scratch;
  std::unordered_map<int, memory> args;
};

Bound& bound_for(const Call& c) {
  thread_local std::map<const Call*, Bound> bound;  // calls live as long as the process
  auto it = bound.find(&c);
  if (it == bound.end()) {
    Bound b;
    for (const auto& [arg, desc] : c.args) {
      b.data.push_back(memory(desc, cpu_engine(), DNNL_MEMORY_NONE));
      b.args.emplace(arg, b.data.back());
    }
    b.scratch = memory(c.scratch, cpu_engine(), DNNL_MEMORY_NONE);
    b.args.emplace(DNNL_ARG_SCRATCHPAD, b.scratch);
    it = bound.emplace(&c, std::move(b)).first;
  }
  return it->second;
}

}  // namespace

dnnl::engine& cpu_engine() {
  static dnnl::engine& e = *std::make_unique<dnnl::engine>(dnnl::engine::kind::cpu, 0).release();
  return e;
}

void run_single_threaded() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  thread_local bool set = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)set;
#endif
}

dnnl::primitive_attr primitive_attributes() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
  return attr;
}

void run(const Call& c, std::initializer_list<const void*> data) {
  thread_local dnnl::stream stream(cpu_engine());
  Bound& b = bound_for(c);
  size_t i = 0;
  for (const void* p : data) b.data[i++].set_data_handle(const_cast<void*>(p));
  b.scratch.set_data_handle(thread_scratch(c.scratch.get_size()));
  c.prim.execute(stream, b.args);
  stream.wait();
}

void count_primitive(bool was_rejected) {
  ++created;
  if (was_rejected) ++rejected;
}

}  // namespace onednn

bool onednn_available() { return true; }
size_t onednn_primitives_created() { return onednn::created.load(); }
size_t onednn_primitives_rejected() { return onednn::rejected.load(); }

bool onednn_avx512_kernels() {
  const unsigned avx512 = unsigned(dnnl::cpu_isa::avx512_core);
  return (unsigned(dnnl::get_effective_cpu_isa()) & avx512) == avx512;
}

bool onednn_native_bf16() {
  const unsigned bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
  return (unsigned(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

// With AMX tiles, and on AMD's AVX512_BF16 cores (Zen 4), whose bf16 dot products run at twice
// the f32 FMA rate. Intel cores with AVX512_BF16 but without AMX (none, or hidden by the
// hypervisor) run VDPBF16PS below the f32 FMA rate (bench/fma_peak.cpp measures both): there
// the f32 primitives on widened operands win, for the CNN's and the MLP's bf16 steps alike.
// The products are the same exact ones.
bool onednn_fast_bf16() {
  if (!onednn_native_bf16()) return false;
  const unsigned amx = unsigned(dnnl::cpu_isa::avx512_core_amx);
  if ((unsigned(dnnl::get_effective_cpu_isa()) & amx) == amx) return true;
  return !__builtin_cpu_is("intel");
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
         ", ISA " + isa + ", native bf16: " + (onednn_native_bf16() ? onednn_fast_bf16() ? "yes" : "yes (slower than f32)" : "no") +
         ", primitives failing their self-check: " + std::to_string(onednn_primitives_rejected());
}

}  // namespace tpu

#else  // no oneDNN in this build

namespace tpu {
bool onednn_available() { return false; }
bool onednn_avx512_kernels() { return false; }
bool onednn_native_bf16() { return false; }
bool onednn_fast_bf16() { return false; }
size_t onednn_primitives_created() { return 0; }
size_t onednn_primitives_rejected() { return 0; }
std::string onednn_report() { return "oneDNN: not in this build"; }
}  // namespace tpu

#endif
