#include "core/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tpu {

namespace {
std::atomic<int64_t> live_bytes{0}, peak_bytes{0}, allocated_bytes{0};

std::shared_ptr<std::byte[]> allocate(size_t bytes, bool zero = true) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  if (zero) std::memset(p, 0, rounded);
  allocated_bytes += int64_t(rounded);
  int64_t now = live_bytes += int64_t(rounded);
  for (int64_t peak = peak_bytes; now > peak && !peak_bytes.compare_exchange_weak(peak, now);) {
  }
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), [rounded](std::byte* q) {
    live_bytes -= int64_t(rounded);
    std::free(q);
  });
}
}  // namespace

TensorMemory tensor_memory() { return {live_bytes.load(), peak_bytes.load(), allocated_bytes.load()}; }
void reset_peak_tensor_memory() { peak_bytes = live_bytes.load(); }

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), data_(allocate(bytes())) {}

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
    : dtype_(dtype), shape_(std::move(shape)), data_(allocate(bytes(), false)) {}

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
    case DType::i32: data<int32_t>()[i] = int32_t(v); break;
    case DType::u8: data<uint8_t>()[i] = uint8_t(v); break;
    case DType::boolean: data<uint8_t>()[i] = v != 0; break;
  }
}

std::string type_str(DType t, const Shape& s) {
  return std::string(name_of(t)) + shape_str(s);
}

}  // namespace tpu
