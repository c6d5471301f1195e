#include "data/idx.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "data/byte_source.h"

namespace tpu {

namespace {

constexpr unsigned kMaxRank = 8;
constexpr uint64_t kMaxDim = INT32_MAX;
constexpr uint64_t kMaxBytes = uint64_t(1) << 40;  // 1 TiB: anything larger is a corrupt header
constexpr size_t kFirstChunk = size_t(1) << 20;    // gzip payloads grow from 1 MiB, doubling

// The element types of the format, one row each.
struct IdxType {
  uint8_t code;
  const char* name;
  size_t bytes;
  DType dtype;
};
constexpr std::array<IdxType, 6> kTypes{{
    {0x08, "u8", 1, DType::u8},
    {0x09, "i8", 1, DType::i32},
    {0x0B, "i16", 2, DType::i32},
    {0x0C, "i32", 4, DType::i32},
    {0x0D, "f32", 4, DType::f32},
    {0x0E, "f64", 8, DType::f32},
}};

std::string hex_byte(std::byte b) {
  char s[8];
  std::snprintf(s, sizeof s, "0x%02X", unsigned(b));
  return s;
}

// ---- header ----

struct Header {
  const IdxType* type;
  Shape shape;
  uint64_t data_bytes;
};

const IdxType& idx_type(uint8_t code, const std::string& path) {
  for (const IdxType& t : kTypes)
    if (t.code == code) return t;
  fail_file(path, "unknown IDX type code " + hex_byte(std::byte(code)) +
                      " (expected 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32 or 0x0E f64)");
}

std::string declared(const Header& h) {
  return std::string(h.type->name) + shape_str(h.shape);
}

Shape read_dims(ByteSource& src, unsigned rank, const std::string& path) {
  std::vector<std::byte> raw(4 * rank);
  if (src.read(raw) < raw.size())
    fail_file(path, "truncated IDX header: expected " + std::to_string(rank) + " dimension sizes");
  Shape shape(rank);
  for (unsigned i = 0; i < rank; ++i) {
    uint64_t d = load_uint(&raw[4 * i], 4, true);
    std::string which = "dimension " + std::to_string(i + 1) + " of " + std::to_string(rank);
    if (d == 0) fail_file(path, which + " is 0 (empty IDX arrays are not supported)");
    if (d > kMaxDim) fail_file(path, which + " is " + std::to_string(d) + ", too large");
    shape[i] = int64_t(d);
  }
  return shape;
}

uint64_t data_bytes(const Header& h, const std::string& path) {
  if (std::string fault = shape_fault(h.shape); !fault.empty())
    fail_file(path, "IDX header declares " + declared(h) + ", whose shape " + fault);
  uint64_t bytes = h.type->bytes;
  for (int64_t d : h.shape) {
    if (bytes > kMaxBytes / uint64_t(d))
      fail_file(path, "IDX header declares " + declared(h) + ", more than 1 TiB of data");
    bytes *= uint64_t(d);
  }
  return bytes;
}

Header read_header(ByteSource& src, const std::string& path) {
  std::array<std::byte, 4> magic{};
  size_t n = src.read(magic);
  if (n < magic.size())
    fail_file(path, "not an IDX file: only " + std::to_string(n) + " bytes long");
  if (magic[0] != std::byte{0} || magic[1] != std::byte{0})
    fail_file(path, "not an IDX file: starts with bytes " + hex_byte(magic[0]) + " " +
                        hex_byte(magic[1]) + " instead of 0x00 0x00");
  Header h{&idx_type(uint8_t(magic[2]), path), {}, 0};
  unsigned rank = unsigned(magic[3]);
  if (rank == 0 || rank > kMaxRank)
    fail_file(path, "unsupported IDX rank " + std::to_string(rank) + " (expected 1 to 8 dimensions)");
  h.shape = read_dims(src, rank, path);
  h.data_bytes = data_bytes(h, path);
  return h;
}

// ---- payload ----

[[noreturn]] void fail_truncated(const Header& h, uint64_t found, const std::string& path) {
  fail_file(path, "truncated IDX file: expected " + std::to_string(h.data_bytes) +
                      " bytes of data for " + declared(h) + ", found " + std::to_string(found));
}

[[noreturn]] void fail_trailing(const Header& h, std::string extra, const std::string& path) {
  fail_file(path, "trailing garbage: " + extra + " after the " + std::to_string(h.data_bytes) +
                      " bytes of data declared by the header (" + declared(h) + ")");
}

// Reads exactly the declared bytes. Sizes are checked before allocating when the source knows
// them; otherwise the buffer grows geometrically with what actually arrives, capped at the
// declared size, so a lying header cannot make us allocate more than twice the real data.
std::vector<std::byte> read_payload(ByteSource& src, const Header& h, const std::string& path) {
  std::optional<uint64_t> left = src.remaining();
  if (left && *left < h.data_bytes) fail_truncated(h, *left, path);
  if (left && *left > h.data_bytes)
    fail_trailing(h, std::to_string(*left - h.data_bytes) + " bytes", path);
  std::vector<std::byte> buf;
  size_t got = 0;
  size_t next = left ? size_t(h.data_bytes) : std::min<size_t>(h.data_bytes, kFirstChunk);
  while (got < h.data_bytes) {
    buf.resize(next);
    size_t n = src.read(std::span(buf).subspan(got));
    got += n;
    if (got < buf.size()) fail_truncated(h, got, path);
    next = std::min<size_t>(h.data_bytes, 2 * buf.size());
  }
  std::byte extra[1];
  if (src.read(extra) != 0) fail_trailing(h, "more bytes", path);
  return buf;
}

// out[i] = f(element i read big-endian), for every element.
template <class Out, class F>
void convert(Tensor& t, std::span<const std::byte> raw, size_t width, F f) {
  convert_elements<Out>(t, raw, width, true, [&](uint64_t v, size_t) { return f(v); });
}

Tensor decode(const Header& h, std::span<const std::byte> raw, const std::string& path) {
  Tensor t(h.type->dtype, h.shape);
  const size_t w = h.type->bytes;
  switch (h.type->code) {
    case 0x08: std::memcpy(t.raw(), raw.data(), raw.size()); break;
    case 0x09: convert<int32_t>(t, raw, w, [](uint64_t v) { return int32_t(int8_t(v)); }); break;
    case 0x0B: convert<int32_t>(t, raw, w, [](uint64_t v) { return int32_t(int16_t(v)); }); break;
    case 0x0C: convert<int32_t>(t, raw, w, [](uint64_t v) { return int32_t(v); }); break;
    case 0x0D: convert<float>(t, raw, w, [](uint64_t v) { return std::bit_cast<float>(uint32_t(v)); }); break;
    case 0x0E:
      convert_elements<float>(t, raw, w, true, [&](uint64_t v, size_t i) { return f64_element_as_f32(v, i, path); });
      break;
  }
  return t;
}

}  // namespace

Tensor read_idx(const std::string& path) {
  std::unique_ptr<ByteSource> src = open_file_source(path, "an IDX file");
  Header h = read_header(*src, path);
  std::vector<std::byte> raw = read_payload(*src, h, path);
  return decode(h, raw, path);
}

}  // namespace tpu
