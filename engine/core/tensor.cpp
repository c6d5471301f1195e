#include "core/tensor.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/bytes.h"
#include "core/error.h"

namespace tpu {

namespace {
// live: every buffer's bytes (paces Lua's collector); device/host: the same split by place.
std::atomic<int64_t> live_bytes{0}, allocated_bytes{0};
std::atomic<int64_t> device_bytes{0}, device_peak{0}, host_bytes{0};
// Device buffers are stamped with the epoch they were made in; tpu.reset() starts a new one.
std::atomic<uint32_t> device_epoch{1};
constexpr uint32_t kHostEpoch = 0;
thread_local bool allocate_on_host = false;

// Large buffers (a step's arena, a data set, a large activation) go on transparent huge pages:
// one fault and one TLB entry per 2 MiB of them. Smaller ones stay on the allocator's 4 KiB
// pages: huge pages under every small object left 2 MiB pages partly used, 16 MB more resident
// in a small model's run. A buffer's 2 MiB-aligned whole pages are marked (its tail is not), and
// unmarked when it is freed (BufferRelease).
constexpr size_t kHugePage = size_t(2) << 20;

void raise_peak(int64_t now) {
  for (int64_t peak = device_peak; now > peak && !device_peak.compare_exchange_weak(peak, now);) {
  }
}

// Where a buffer lives, kept in its shared_ptr's deleter so that views (rows, reshapes) share
// it: on the host (data sets read from files and their batches) or on the simulated device,
// where every computed value, parameter and arena lives. A device buffer of an older epoch
// was released by tpu.reset(): no longer counted, and a tensor over it must not be used.
struct BufferRelease {
  int64_t bytes;
  std::atomic<uint32_t> epoch;

  BufferRelease(int64_t b, uint32_t e) : bytes(b), epoch(e) {}
  BufferRelease(const BufferRelease& o) : bytes(o.bytes), epoch(o.epoch.load()) {}

  void operator()(std::byte* q) const {
    // A large buffer's huge-page mark goes with it: the allocator may reuse its pages for
    // small objects, which are to stay on 4 KiB pages.
    if (size_t(bytes) >= kHugePage) madvise(q, size_t(bytes) / kHugePage * kHugePage, MADV_NOHUGEPAGE);
    live_bytes -= bytes;
    const uint32_t e = epoch.load();
    if (e == kHostEpoch) host_bytes -= bytes;
    else if (e == device_epoch.load()) device_bytes -= bytes;
    std::free(q);
  }
};

// The host's RAM and swap. A buffer larger than that can never be filled, yet an allocator that
// counts on overcommit (jemalloc does) returns one, and the kernel kills the process once its
// pages are touched: such a request is refused here, as glibc's allocator refuses it.
size_t host_memory_bytes() {
  static const size_t bytes = [] {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return SIZE_MAX;
    return size_t(si.totalram + si.totalswap) * si.mem_unit;
  }();
  return bytes;
}

void* allocate_host(size_t rounded) {
  if (rounded < kHugePage) return std::aligned_alloc(64, rounded);
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, rounded) != 0) return nullptr;
  madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);  // a hint: a refusal is harmless
  return p;
}

std::shared_ptr<std::byte[]> allocate(DType dtype, const Shape& shape, bool zero = true) {
  check_shape(shape, "tensor");
  const size_t bytes = size_t(num_elements(shape)) * size_of(dtype);  // < 2^43: no overflow
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = rounded > host_memory_bytes() ? nullptr : allocate_host(rounded);
  if (!p) throw Error("out of host memory: a " + type_str(dtype, shape) + " tensor needs " + format_bytes(double(bytes)));
  if (zero) std::memset(p, 0, rounded);
  allocated_bytes += int64_t(rounded);
  live_bytes += int64_t(rounded);
  if (allocate_on_host) host_bytes += int64_t(rounded);
  else raise_peak(device_bytes += int64_t(rounded));
  const uint32_t epoch = allocate_on_host ? kHostEpoch : device_epoch.load();
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), BufferRelease(int64_t(rounded), epoch));
}
}  // namespace

HostAllocationScope::HostAllocationScope() : ScopedFlag(allocate_on_host) {}

TensorMemory tensor_memory() {
  return {device_bytes.load(), device_peak.load(), host_bytes.load(), live_bytes.load(), allocated_bytes.load()};
}
void reset_peak_tensor_memory() { device_peak = device_bytes.load(); }

void release_device_buffers() {
  ++device_epoch;
  device_bytes = 0;
  device_peak = 0;
}

bool Tensor::released() const {
  const BufferRelease* r = std::get_deleter<BufferRelease>(data_);
  if (!r) return false;
  const uint32_t e = r->epoch.load();
  return e != kHostEpoch && e != device_epoch.load();
}

void Tensor::move_to_host() const {
  BufferRelease* r = std::get_deleter<BufferRelease>(data_);
  if (!r) return;
  uint32_t e = device_epoch.load();
  if (!r->epoch.compare_exchange_strong(e, kHostEpoch)) return;  // on the host, or released
  device_bytes -= r->bytes;
  host_bytes += r->bytes;
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), data_(allocate(dtype_, shape_)) {}

Tensor Tensor::reshaped(Shape s) const {
  Tensor t = *this;
  t.shape_ = std::move(s);
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, std::byte* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = std::shared_ptr<std::byte[]>(std::shared_ptr<std::byte[]>(), data);  // aliasing, no owner
  return t;
}

void Tensor::rebind(std::byte* data) { data_ = std::shared_ptr<std::byte[]>(std::shared_ptr<std::byte[]>(), data); }

Tensor Tensor::rows(int64_t first, int64_t count) const {
  if (shape_.empty() || first < 0 || count < 0 || first + count > shape_[0])
    throw std::logic_error("tensor rows out of range");
  Tensor t = *this;
  t.shape_[0] = count;
  const int64_t row_bytes = shape_[0] ? int64_t(bytes()) / shape_[0] : 0;
  t.data_ = std::shared_ptr<std::byte[]>(data_, data_.get() + first * row_bytes);
  return t;
}

Tensor Tensor::copy() const {
  Tensor c(dtype_, shape_, Uninitialized{});
  if (bytes()) std::memcpy(c.raw(), raw(), bytes());
  return c;
}

Tensor Tensor::view(DType t, Shape s) const {
  Tensor v = *this;
  v.dtype_ = t;
  v.shape_ = std::move(s);
  if (v.bytes() > bytes()) throw std::logic_error("tensor view larger than its buffer");
  return v;
}

Tensor::Tensor(DType dtype, Shape shape, Uninitialized)
    : dtype_(dtype), shape_(std::move(shape)), data_(allocate(dtype_, shape_, false)) {}

double Tensor::get(int64_t i) const {
  switch (dtype_) {
    case DType::f32: return data<float>()[i];
    case DType::bf16: return bf16_to_f32(data<uint16_t>()[i]);
    case DType::i32: return data<int32_t>()[i];
    case DType::u8: return data<uint8_t>()[i];
    case DType::boolean: return data<uint8_t>()[i] ? 1.0 : 0.0;
  }
  return 0;
}

void Tensor::set(int64_t i, double v) {
  switch (dtype_) {
    case DType::f32: data<float>()[i] = float(v); break;
    case DType::bf16: data<uint16_t>()[i] = f32_to_bf16(float(v)); break;
    case DType::i32: data<int32_t>()[i] = saturate<int32_t>(v); break;
    case DType::u8: data<uint8_t>()[i] = saturate<uint8_t>(v); break;
    case DType::boolean: data<uint8_t>()[i] = v != 0; break;
  }
}

std::string type_str(DType t, const Shape& s) {
  return std::string(name_of(t)) + shape_str(s);
}

}  // namespace tpu
