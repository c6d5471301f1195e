#include "data/byte_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tpu {

void fail_file(const std::string& name, const std::string& what) { throw Error(name + ": " + what); }

FileSource::FileSource(const std::string& path, std::optional<uint64_t> size) : path_(path), left_(size) {
  file_.reset(std::fopen(path.c_str(), "rb"));
  if (!file_) fail_file(path, std::string("cannot open: ") + std::strerror(errno));
}

size_t FileSource::read(std::span<std::byte> out) {
  size_t n = std::fread(out.data(), 1, out.size(), file_.get());
  if (n < out.size() && std::ferror(file_.get()))
    fail_file(path_, std::string("read error: ") + std::strerror(errno));
  if (left_) *left_ -= std::min<uint64_t>(*left_, n);
  return n;
}

size_t MemorySource::read(std::span<std::byte> out) {
  size_t n = std::min(out.size(), bytes_.size());
  if (n == 0) return 0;  // an empty array's buffer may be null, which memcpy must not get
  std::memcpy(out.data(), bytes_.data(), n);
  bytes_.remove_prefix(n);
  return n;
}

uint64_t load_uint(const std::byte* p, size_t n, bool big_endian) {
  uint64_t v = 0;
  if (big_endian)
    for (size_t i = 0; i < n; ++i) v = (v << 8) | uint64_t(p[i]);
  else
    for (size_t i = n; i-- > 0;) v = (v << 8) | uint64_t(p[i]);
  return v;
}

}  // namespace tpu
