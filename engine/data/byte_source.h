// The byte layer the data-file readers share (IDX, .npy): where the bytes come from, how a
// defect is reported, and how elements are read out of them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace tpu {

// Every reader's defects read "<file>: <what>", one line.
[[noreturn]] void fail_file(const std::string& name, const std::string& what);

// An f64 element (its bits) as the f32 that float data is read into, or an error naming it and
// its index when it is finite but beyond the f32 range (it would become inf).
float f64_element_as_f32(uint64_t raw, size_t index, const std::string& name);

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Fills `out` completely unless the input ends first; returns the count read.
  virtual size_t read(std::span<std::byte> out) = 0;
  // Bytes not yet read, when the source can tell (memory, regular files).
  virtual std::optional<uint64_t> remaining() const = 0;
};

// An open file read front to back; `size` is its length when known (a regular file's).
class FileSource : public ByteSource {
 public:
  FileSource(const std::string& path, std::optional<uint64_t> size);
  size_t read(std::span<std::byte> out) override;
  std::optional<uint64_t> remaining() const override { return left_; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::optional<uint64_t> left_;
  std::unique_ptr<std::FILE, Closer> file_;
};

// Bytes already in memory (the caller keeps them alive).
class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  size_t read(std::span<std::byte> out) override;
  std::optional<uint64_t> remaining() const override { return bytes_.size(); }

 private:
  std::string_view bytes_;
};

// The file at `path` read front to back, decompressed when its name ends in ".gz". A missing
// file, a directory ("is a directory, not <what>") or a corrupt or truncated gzip stream is an
// Error naming the file.
std::unique_ptr<ByteSource> open_file_source(const std::string& path, const std::string& what);

// The unsigned integer in the n (1 to 8) bytes at p, in either byte order.
uint64_t load_uint(const std::byte* p, size_t n, bool big_endian);

// out[i] = f(element i as load_uint reads it, i) for every element of t, which `raw` holds
// packed at `width` bytes each.
template <class Out, class F>
void convert_elements(Tensor& t, std::span<const std::byte> raw, size_t width, bool big_endian, F f) {
  Out* out = t.data<Out>();
  for (size_t i = 0; i < size_t(t.size()); ++i) out[i] = f(load_uint(raw.data() + i * width, width, big_endian), i);
}

}  // namespace tpu
