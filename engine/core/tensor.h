// A host tensor: dtype, shape and a shared, immutable-by-convention, 64-byte aligned buffer.
#pragma once
#include <cstring>
#include <memory>
#include <span>

#include "core/dtype.h"
#include "core/scoped_flag.h"
#include "core/shape.h"

namespace tpu {

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  struct Uninitialized {};
  Tensor(DType dtype, Shape shape, Uninitialized);  // for kernels that write every element

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return int64_t(shape_.size()); }
  int64_t size() const { return num_elements(shape_); }
  size_t bytes() const { return size_t(size()) * size_of(dtype_); }

  std::byte* raw() { return data_.get(); }
  const std::byte* raw() const { return data_.get(); }
  template <class T> T* data() { return reinterpret_cast<T*>(data_.get()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(data_.get()); }
  template <class T> std::span<T> span() { return {data<T>(), size_t(size())}; }
  template <class T> std::span<const T> span() const { return {data<T>(), size_t(size())}; }

  // Same buffer, new shape (sizes must agree).
  Tensor reshaped(Shape s) const;
  // A tensor over memory it does not own (the owner must outlive it).
  static Tensor borrow(DType dtype, Shape shape, std::byte* data);
  // Points this tensor at other memory it does not own, keeping dtype and shape: a borrowed
  // view that walks a buffer (fusion blocks) without allocating a shape each time.
  void rebind(std::byte* data);
  // Rows [first, first + count) of the leading dimension, sharing this tensor's buffer.
  Tensor rows(int64_t first, int64_t count) const;
  // Same buffer seen with another type; the view must fit in this tensor's bytes.
  Tensor view(DType t, Shape s) const;
  bool same_type(const Tensor& o) const { return dtype_ == o.dtype_ && shape_ == o.shape_; }
  // The same values in a buffer of its own.
  Tensor copy() const;
  // How many tensors hold this buffer or a view of it (rows, reshapes, this one included).
  long buffer_holders() const { return data_.use_count(); }

  // Buffers live on the simulated device unless moved to the host (data sets and their
  // batches), which does not count as HBM in use. A device buffer is released by
  // release_device_buffers() (tpu.reset()); a tensor over a released buffer must not be used.
  void move_to_host() const;
  bool released() const;

  // Scalar reading and writing in any dtype, through double (reference kernels and tests).
  double get(int64_t i) const;
  void set(int64_t i, double v);

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::shared_ptr<std::byte[]> data_;
};

// bf16 <-> f32 by truncation of the low mantissa bits with round-to-nearest-even.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::string type_str(DType t, const Shape& s);  // "f32[8,10]"

// Bytes held by live tensor buffers: on the simulated device (arenas included; what TPU memory
// holds), on the host, and in all.
struct TensorMemory {
  int64_t in_use;       // device
  int64_t peak;         // device, since the last reset_peak_tensor_memory()
  int64_t host_in_use;  // data sets on the host
  int64_t live;         // every buffer, wherever it is
  int64_t allocated;    // every buffer's bytes since start, freed ones included
};
TensorMemory tensor_memory();
void reset_peak_tensor_memory();
// Releases every device buffer (tpu.reset()): none counts as in use any more, and tensors over
// them report released(). Their host memory is freed when their last holder goes.
void release_device_buffers();

// While one lives, the calling thread's new buffers are made on the host: data readers, the
// input pipeline's batches.
class HostAllocationScope : ScopedFlag {
 public:
  HostAllocationScope();
};

}  // namespace tpu
