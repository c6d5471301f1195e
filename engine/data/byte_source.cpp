#include "data/byte_source.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>

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

namespace {

// A gzip stream read through zlib, its defects named as the other sources' are.
class GzipFile : public ByteSource {
 public:
  explicit GzipFile(const std::string& path) : path_(path) {
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_)
      fail_file(path, std::string("cannot open: ") + (errno ? std::strerror(errno) : "out of memory"));
  }
  size_t read(std::span<std::byte> out) override {
    size_t got = 0;
    while (got < out.size()) {
      unsigned want = unsigned(std::min<size_t>(out.size() - got, size_t(1) << 30));
      int n = gzread(file_.get(), out.data() + got, want);
      if (n < 0) fail_zlib();
      got += size_t(n);
      if (unsigned(n) < want) break;
    }
    if (got < out.size()) check_clean_end();
    return got;
  }
  std::optional<uint64_t> remaining() const override { return std::nullopt; }

 private:
  // A short read is the end of the stream or a defect zlib noticed (truncation, CRC, ...).
  void check_clean_end() {
    int err = Z_OK;
    gzerror(file_.get(), &err);
    if (err != Z_OK && err != Z_STREAM_END) fail_zlib();
  }
  [[noreturn]] void fail_zlib() {
    int err = Z_OK;
    const char* msg = gzerror(file_.get(), &err);
    if (err == Z_ERRNO) fail_file(path_, std::string("read error: ") + std::strerror(errno));
    if (err == Z_BUF_ERROR) fail_file(path_, "truncated gzip file: the compressed stream ends early");
    fail_file(path_, "corrupt gzip file: " + strip_path(msg ? msg : ""));
  }
  // zlib's messages start with "path: ".
  std::string strip_path(std::string msg) const {
    if (msg.starts_with(path_ + ": ")) msg.erase(0, path_.size() + 2);
    return msg.empty() ? "unknown zlib error" : msg;
  }
  struct Closer {
    void operator()(gzFile f) const { gzclose(f); }
  };
  std::string path_;
  std::unique_ptr<gzFile_s, Closer> file_;
};

bool ends_with_gz(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

}  // namespace

std::unique_ptr<ByteSource> open_file_source(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) fail_file(path, "file not found");
  if (ec) fail_file(path, "cannot access: " + ec.message());
  if (fs::is_directory(st)) fail_file(path, "is a directory, not " + what);
  if (ends_with_gz(path)) return std::make_unique<GzipFile>(path);
  std::optional<uint64_t> size;
  if (fs::is_regular_file(st)) {
    uint64_t s = fs::file_size(path, ec);
    if (!ec) size = s;
  }
  return std::make_unique<FileSource>(path, size);
}

// An f64 element as the f32 that float data is read into, or an error naming it when it is
// finite but beyond the f32 range (it would become inf). inf and NaN stay what they are.
float f64_element_as_f32(uint64_t raw, size_t index, const std::string& name) {
  const double d = std::bit_cast<double>(raw);
  const float f = float(d);
  if (std::isinf(f) && !std::isinf(d)) {
    char shown[32];
    const auto end = std::to_chars(shown, shown + sizeof shown, d).ptr;  // shortest exact form
    fail_file(name, "element " + std::to_string(index) + " is " + std::string(shown, end) +
                        ", beyond the f32 range that float data is read into (at most 3.4028235e+38 in magnitude)");
  }
  return f;
}

}  // namespace tpu
