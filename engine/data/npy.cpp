#include "data/npy.h"

#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "data/byte_source.h"

namespace tpu {

namespace {

constexpr uint64_t kMaxHeader = uint64_t(1) << 20;  // real headers are < 1 KiB
constexpr uint64_t kMaxBytes = uint64_t(1) << 40;   // 1 TiB: anything larger is a corrupt header
constexpr size_t kMaxRank = 8;

// The element types we read, one row each: the type code without its byte-order character.
struct NpyType {
  const char* code;
  size_t bytes;
  DType dtype;
};
constexpr std::array<NpyType, 12> kTypes{{
    {"f2", 2, DType::f32}, {"f4", 4, DType::f32}, {"f8", 8, DType::f32},
    {"i1", 1, DType::i32}, {"i2", 2, DType::i32}, {"i4", 4, DType::i32},
    {"i8", 8, DType::i32}, {"u1", 1, DType::u8},  {"u2", 2, DType::i32},
    {"u4", 4, DType::i32}, {"u8", 8, DType::i32}, {"b1", 1, DType::boolean},
}};
constexpr const char* kSupported = "<f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1 (or '>' order)";

// A regular file, its size known (data/byte_source.h).
FileSource open_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) fail_file(path, "file not found");
  if (ec) fail_file(path, "cannot access: " + ec.message());
  if (!fs::is_regular_file(st)) fail_file(path, "not a regular file");
  uint64_t size = fs::file_size(path, ec);
  if (ec) fail_file(path, "cannot access: " + ec.message());
  return FileSource(path, size);
}

// What is left of a file or of memory, which both know.
uint64_t remaining(const ByteSource& in) { return in.remaining().value_or(0); }

// ---- the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } ----

struct Header {
  std::string descr;
  std::optional<bool> fortran_order;
  std::optional<Shape> shape;
};

// A recursive-descent reader of the Python literal subset the format uses.
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  Header parse() {
    Header h;
    bool has_descr = false;
    expect('{');
    while (!peek('}')) {
      std::string key = string_literal();
      expect(':');
      // A key given twice contradicts itself: neither value can be trusted.
      if ((key == "descr" && has_descr) || (key == "fortran_order" && h.fortran_order) || (key == "shape" && h.shape))
        error("duplicate key '" + key + "'");
      if (key == "descr") {
        h.descr = descr();
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
      } else if (key == "shape") {
        h.shape = shape();
      } else {
        error("unknown key '" + key + "' (expected descr, fortran_order and shape)");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != s_.size()) error("unexpected text after the dict");
    if (!has_descr || !h.fortran_order || !h.shape)
      fail_file(name_, "malformed .npy header: it must give descr, fortran_order and shape");
    return h;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail_file(name_, "malformed .npy header at character " + std::to_string(pos_ + 1) + ": " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) error(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) error("expected a quoted string");
    char quote = s_[pos_++];
    size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) error("unterminated string");
    std::string v(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return v;
  }
  std::string descr() {
    if (peek('[')) error("structured dtypes (a list of fields) are not supported; save one array per field");
    return string_literal();
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (s_.substr(pos_).starts_with(word)) {
        pos_ += std::strlen(word);
        return value;
      }
    error("expected True or False");
  }
  int64_t dimension() {
    skip_space();
    int64_t v = -1;
    auto [end, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (ec != std::errc() || v < 0) error("expected a non-negative dimension size");
    pos_ = size_t(end - s_.data());
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // written by old writers
    return v;
  }
  Shape shape() {
    Shape dims;
    expect('(');
    while (!peek(')')) {
      dims.push_back(dimension());
      if (!peek(')')) expect(',');
    }
    expect(')');
    if (dims.size() > kMaxRank) error("rank " + std::to_string(dims.size()) + " is more than 8");
    return dims;
  }

  std::string_view s_;
  const std::string& name_;
  size_t pos_ = 0;
};

// ---- the preamble and the element type ----

void read_exact(ByteSource& in, std::span<std::byte> out, const std::string& name, const char* what) {
  size_t n = in.read(out);
  if (n < out.size())
    fail_file(name, std::string("truncated .npy file: it ends inside the ") + what + " (" +
                        std::to_string(n) + " of " + std::to_string(out.size()) + " bytes)");
}

// Reads the magic, the version and the header length; returns the header text.
std::string read_preamble(ByteSource& in, const std::string& name) {
  std::array<std::byte, 8> pre{};
  size_t n = in.read(pre);
  static constexpr char kMagic[] = "\x93NUMPY";
  if (n < 6 || std::memcmp(pre.data(), kMagic, 6) != 0)
    fail_file(name, "not a .npy file: it does not start with the magic bytes \\x93NUMPY");
  if (n < 8) fail_file(name, "truncated .npy file: it ends inside the version bytes");
  unsigned major = unsigned(pre[6]), minor = unsigned(pre[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail_file(name, "unsupported .npy format version " + std::to_string(major) + "." +
                        std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
  std::array<std::byte, 4> len_bytes{};
  size_t width = major == 1 ? 2 : 4;
  read_exact(in, std::span(len_bytes).first(width), name, "header length");
  uint64_t len = load_uint(len_bytes.data(), width, false);
  if (len > kMaxHeader || len > remaining(in))
    fail_file(name, "bad .npy header length " + std::to_string(len) + ": the file holds only " +
                        std::to_string(remaining(in)) + " more bytes");
  std::string text(len, '\0');
  read_exact(in, std::as_writable_bytes(std::span(text)), name, "header");
  return text;
}

struct ElementType {
  const NpyType* type;
  bool big_endian;
  std::string descr;
};

ElementType element_type(const std::string& descr, const std::string& name) {
  auto unsupported = [&](const std::string& why) -> ElementType {
    fail_file(name, "unsupported .npy dtype '" + descr + "'" + why + " (supported: " + kSupported + ")");
  };
  if (descr.size() != 3) return unsupported("");
  char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return unsupported("");
  for (const NpyType& t : kTypes)
    if (descr.compare(1, 2, t.code) == 0) {
      if (order == '|' && t.bytes > 1) return unsupported(": a multi-byte type needs '<' or '>'");
      return {&t, order == '>', descr};
    }
  return unsupported("");
}

// A shape as the header writes it: (3, 4), (5,), ().
std::string tuple_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The sizes other than 0 must multiply to a sane count even when a 0 makes the array empty:
// whatever uses the tensor multiplies them (strides), and (0, 2^40, 2^40) is no real array.
uint64_t data_bytes(const ElementType& et, const Shape& shape, const std::string& name) {
  if (std::string fault = shape_fault(shape); !fault.empty())
    fail_file(name, ".npy header declares shape " + tuple_str(shape) + ", which " + fault);
  uint64_t bytes = et.type->bytes;
  bool empty = false;
  for (int64_t d : shape) {
    const uint64_t u = std::max<uint64_t>(uint64_t(d), 1);
    if (bytes > kMaxBytes / u)
      fail_file(name, ".npy header declares shape " + tuple_str(shape) + ", more than 1 TiB of data");
    bytes *= u;
    empty = empty || d == 0;
  }
  return empty ? 0 : bytes;
}

// ---- the elements ----

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  float v = float(man) * (1.0f / 16777216.0f);  // subnormal: man * 2^-24
  return sign ? -v : v;
}

// A bool element (0 or 1), or an error naming it.
uint8_t check_bool(uint64_t v, size_t index, const std::string& name) {
  if (v > 1)
    fail_file(name, "element " + std::to_string(index) + " of a bool array is " + std::to_string(v) + ", not 0 or 1");
  return uint8_t(v);
}

// An element's value as an i32, or an error naming it when it does not fit.
int32_t to_i32(uint64_t raw, const ElementType& et, size_t index, const std::string& name) {
  const size_t bits = 8 * et.type->bytes;
  const bool is_signed = et.type->code[0] == 'i';
  int64_t v = int64_t(raw);
  if (is_signed && bits < 64) v = int64_t(raw << (64 - bits)) >> (64 - bits);
  bool fits = is_signed ? (v >= INT32_MIN && v <= INT32_MAX) : raw <= uint64_t(INT32_MAX);
  if (!fits)
    fail_file(name, "element " + std::to_string(index) + " is " +
                        (is_signed ? std::to_string(v) : std::to_string(raw)) +
                        ", outside the i32 range that integer data is read into");
  return int32_t(v);
}

// out[i] = f(element i, i) for every element.
template <class Out, class F>
void convert(Tensor& t, std::span<const std::byte> raw, const ElementType& et, F f) {
  convert_elements<Out>(t, raw, et.type->bytes, et.big_endian, f);
}

void decode_into(Tensor& t, std::span<const std::byte> raw, const ElementType& et, const std::string& name) {
  const std::string_view code = et.type->code;
  if (code == "f2") convert<float>(t, raw, et, [](uint64_t v, size_t) { return half_to_float(uint16_t(v)); });
  else if (code == "f4") convert<float>(t, raw, et, [](uint64_t v, size_t) { return std::bit_cast<float>(uint32_t(v)); });
  else if (code == "f8")
    convert<float>(t, raw, et, [&](uint64_t v, size_t i) { return f64_element_as_f32(v, i, name); });
  else if (code == "u1") std::memcpy(t.raw(), raw.data(), raw.size());  // not empty: see read_elements
  else if (code == "b1") convert<uint8_t>(t, raw, et, [&](uint64_t v, size_t i) { return check_bool(v, i, name); });
  else convert<int32_t>(t, raw, et, [&](uint64_t v, size_t i) { return to_i32(v, et, i, name); });
}

// Whether the file's bytes are already our tensor's bytes (little-endian f4, i4, u1, b1).
bool stored_as_ours(const ElementType& et) {
  const std::string_view code = et.type->code;
  return !et.big_endian && (code == "f4" || code == "i4" || code == "u1" || code == "b1");
}

Tensor read_elements(ByteSource& in, const ElementType& et, const Shape& shape, const std::string& name) {
  const uint64_t want = data_bytes(et, shape, name), have = remaining(in);
  const std::string declared = "'" + et.descr + "' " + tuple_str(shape);
  if (have < want)
    fail_file(name, "truncated .npy file: expected " + std::to_string(want) + " bytes of data for " + declared +
                        ", found " + std::to_string(have));
  if (have > want)
    fail_file(name, "trailing garbage: " + std::to_string(have - want) + " bytes after the " + std::to_string(want) +
                        " bytes of data declared by the header (" + declared + ")");
  Tensor t(et.type->dtype, shape, Tensor::Uninitialized{});
  if (want == 0) return t;  // nothing to read or convert (and no buffer to hand to memcpy)
  if (stored_as_ours(et)) {  // read straight into the tensor
    read_exact(in, {t.raw(), size_t(want)}, name, "data");
    if (t.dtype() == DType::boolean)
      for (size_t i = 0; i < want; ++i) check_bool(uint64_t(t.raw()[i]), i, name);
    return t;
  }
  std::vector<std::byte> raw(want);
  read_exact(in, raw, name, "data");
  decode_into(t, raw, et, name);
  return t;
}

Tensor read_from(ByteSource& in, const std::string& name) {
  Header h = DictParser(read_preamble(in, name), name).parse();
  ElementType et = element_type(h.descr, name);
  if (*h.fortran_order)
    fail_file(name, "Fortran-ordered (column-major) arrays are not supported; save a C-ordered copy instead");
  return read_elements(in, et, *h.shape, name);
}

}  // namespace

Tensor read_npy(const std::string& path) {
  FileSource in = open_file(path);
  return read_from(in, path);
}

Tensor parse_npy(std::string_view bytes, const std::string& name) {
  MemorySource in(bytes);
  return read_from(in, name);
}

}  // namespace tpu
