// .npy reader: every supported dtype, both byte orders, versions 1-3, and every defect the
// reader reports (never a crash: truncations and byte flips of a good file are tried too).
#include <doctest.h>
#include <unistd.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/npy.h"

namespace fs = std::filesystem;
using tpu::DType;
using tpu::Shape;

namespace {

// A .npy file: magic, version, header length, the dict padded to 64 bytes, then `payload`.
std::string npy(const std::string& dict, const std::string& payload, int version = 1) {
  const size_t pre = version == 1 ? 10 : 12;
  std::string header = dict;
  while ((pre + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(version);
  out += char(0);
  const size_t len = header.size();
  out += char(len & 0xFF);
  out += char((len >> 8) & 0xFF);
  if (version != 1) out += std::string{char((len >> 16) & 0xFF), char(len >> 24)};
  return out + header + payload;
}

std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
}

template <class T>
std::string le_bytes(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);  // the machine is little-endian
  return s;
}

std::string error_of(const std::string& bytes) {
  try {
    tpu::parse_npy(bytes, "x.npy");
  } catch (const tpu::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void check_error(const std::string& bytes, const std::string& part) {
  std::string msg = error_of(bytes);
  INFO(msg);
  CHECK(msg.starts_with("x.npy: "));
  CHECK(contains(msg, part));
}

template <class T>
std::vector<T> values(const tpu::Tensor& t) {
  return std::vector<T>(t.span<T>().begin(), t.span<T>().end());
}

}  // namespace

TEST_CASE("npy: floats of every width read as f32") {
  tpu::Tensor a = tpu::parse_npy(npy(dict("<f4", "(2, 3)"), le_bytes<float>({1, 2, 3, 4, 5, 6.5f})), "a");
  CHECK(a.dtype() == DType::f32);
  CHECK(a.shape() == Shape{2, 3});
  CHECK(values<float>(a) == std::vector<float>{1, 2, 3, 4, 5, 6.5f});
  tpu::Tensor b = tpu::parse_npy(npy(dict("<f8", "(2,)"), le_bytes<double>({0.25, -3})), "b");
  CHECK(values<float>(b) == std::vector<float>{0.25f, -3.0f});
  // float16: 1.0 = 0x3C00, -2.0 = 0xC000, 65504 = 0x7BFF, smallest subnormal 0x0001 = 2^-24
  tpu::Tensor c = tpu::parse_npy(npy(dict("<f2", "(4,)"), le_bytes<uint16_t>({0x3C00, 0xC000, 0x7BFF, 0x0001})), "c");
  CHECK(values<float>(c) == std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)});
  tpu::Tensor big = tpu::parse_npy(npy(dict(">f4", "(1,)"), std::string("\x3F\xC0\x00\x00", 4)), "d");
  CHECK(big.data<float>()[0] == 1.5f);
}

TEST_CASE("npy: integers read as i32, u8 stays u8, bool stays bool") {
  CHECK(values<int32_t>(tpu::parse_npy(npy(dict("|i1", "(3,)"), std::string("\x80\xFF\x7F", 3)), "a")) ==
        std::vector<int32_t>{-128, -1, 127});
  CHECK(values<int32_t>(tpu::parse_npy(npy(dict("<i2", "(2,)"), le_bytes<int16_t>({-32768, 258})), "a")) ==
        std::vector<int32_t>{-32768, 258});
  CHECK(values<int32_t>(tpu::parse_npy(npy(dict("<i4", "(2,)"), le_bytes<int32_t>({-2, 65536})), "a")) ==
        std::vector<int32_t>{-2, 65536});
  CHECK(values<int32_t>(tpu::parse_npy(npy(dict("<i8", "(2,)"), le_bytes<int64_t>({-5, 2147483647})), "a")) ==
        std::vector<int32_t>{-5, 2147483647});
  CHECK(values<int32_t>(tpu::parse_npy(npy(dict("<u2", "(1,)"), le_bytes<uint16_t>({65535})), "a")) ==
        std::vector<int32_t>{65535});
  CHECK(values<int32_t>(tpu::parse_npy(npy(dict("<u4", "(1,)"), le_bytes<uint32_t>({7})), "a")) == std::vector<int32_t>{7});
  CHECK(values<int32_t>(tpu::parse_npy(npy(dict(">i4", "(1,)"), std::string("\xFF\xFF\xFF\xFE", 4)), "a")) ==
        std::vector<int32_t>{-2});
  tpu::Tensor u = tpu::parse_npy(npy(dict("|u1", "(2, 2)"), "\x01\x02\x03\xFF"), "u");
  CHECK(u.dtype() == DType::u8);
  CHECK(u.get(3) == 255);
  tpu::Tensor b = tpu::parse_npy(npy(dict("|b1", "(3,)"), std::string("\x01\x00\x01", 3)), "b");
  CHECK(b.dtype() == DType::boolean);
  CHECK(b.get(0) == 1);
  CHECK(b.get(1) == 0);
}

TEST_CASE("npy: versions, shapes, header spellings") {
  for (int version : {1, 2, 3}) {
    tpu::Tensor t = tpu::parse_npy(npy(dict("<i4", "(1, 1, 2)"), le_bytes<int32_t>({3, 4}), version), "v");
    CHECK(t.shape() == Shape{1, 1, 2});
  }
  CHECK(tpu::parse_npy(npy(dict("<f4", "()"), le_bytes<float>({2})), "s").shape() == Shape{});
  CHECK(tpu::parse_npy(npy(dict("<f4", "(0, 3)"), ""), "e").shape() == Shape{0, 3});
  // Empty arrays of types that are converted, not copied: no bytes to read into no buffer
  // (found by fuzzing: a null buffer reached memcpy, which the sanitizer build reports).
  for (const char* descr : {">f2", "<f8", "<i2", ">u4", ">u1", "|u1", "|b1"})
    CHECK(tpu::parse_npy(npy(dict(descr, "(0, 2)"), ""), "e").shape() == Shape{0, 2});
  // An empty array still needs sizes that multiply to a sane count (strides multiply them).
  CHECK_THROWS_WITH_AS(tpu::parse_npy(npy(dict("<f4", "(0, 1099511627776, 1099511627776)"), ""), "z"),
                       doctest::Contains("which is too large: its dimensions other than 0 multiply to 2^40"), tpu::Error);
  // Key order, double quotes, no trailing comma, old "L" suffixes.
  std::string other = "{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<i4\"}";
  CHECK(tpu::parse_npy(npy(other, le_bytes<int32_t>({1, 2})), "o").shape() == Shape{2});
}

TEST_CASE("npy: a file on disk") {
  fs::path dir = fs::temp_directory_path() / ("tpu_npy_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "a.npy").string();
  std::ofstream(path, std::ios::binary) << npy(dict("<f4", "(2,)"), le_bytes<float>({1, 2}));
  CHECK(values<float>(tpu::read_npy(path)) == std::vector<float>{1, 2});
  CHECK_THROWS_WITH(tpu::read_npy((dir / "nope.npy").string()), ((dir / "nope.npy").string() + ": file not found").c_str());
  CHECK_THROWS_WITH(tpu::read_npy(dir.string()), (dir.string() + ": not a regular file").c_str());
  fs::remove_all(dir);
}

TEST_CASE("npy: bad magic, version and header length") {
  check_error("", "not a .npy file: it does not start with the magic bytes");
  check_error("\x93NUMP", "not a .npy file");
  check_error("PK\x03\x04 a zip file", "not a .npy file");
  check_error("\x93NUMPY", "truncated .npy file: it ends inside the version bytes");
  check_error(std::string("\x93NUMPY\x04\x00", 8), "unsupported .npy format version 4.0 (expected 1.0, 2.0 or 3.0)");
  check_error(std::string("\x93NUMPY\x01\x01", 8), "unsupported .npy format version 1.1");
  check_error(std::string("\x93NUMPY\x01\x00\x05", 9), "truncated .npy file: it ends inside the header length (1 of 2 bytes)");
  check_error(std::string("\x93NUMPY\x01\x00\x50\x00{'descr'", 17), "bad .npy header length 80: the file holds only 7 more bytes");
  check_error(std::string("\x93NUMPY\x02\x00\xFF\xFF\xFF\x7F", 12), "bad .npy header length 2147483647");
}

TEST_CASE("npy: malformed header dicts") {
  check_error(npy("['descr', 1]", ""), "malformed .npy header at character 1: expected '{'");
  check_error(npy("{'descr': '<f4', 'shape': (2,), }", ""), "it must give descr, fortran_order and shape");
  check_error(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", ""), "expected True or False");
  check_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", ""), "expected a non-negative dimension size");
  check_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", ""), "unknown key 'extra'");
  check_error(npy("{'descr: '<f4'}", ""), "expected ':'");
  check_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (1,), }", ""),
              "duplicate key 'shape'");
  check_error(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", ""), "duplicate key 'descr'");
  check_error(npy("{'descr': '<f4', 'fortran_order': False, 'fortran_order': True, 'shape': (2,), }", ""),
              "duplicate key 'fortran_order'");
  check_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing", ""), "unexpected text after the dict");
  check_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", ""), "rank 9 is more than 8");
  check_error(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", ""), "structured dtypes");
}

TEST_CASE("npy: unsupported dtypes and Fortran order") {
  for (const char* d : {"<U8", "|O", "<c8", "<M8", "|S3", "<f16", "|f4", "|i2", "?f4"}) {
    INFO(d);
    check_error(npy(dict(d, "(1,)"), "abcdefgh"), std::string("unsupported .npy dtype '") + d + "'");
  }
  check_error(npy(dict("<f4", "(2, 2)", true), std::string(16, '\0')), "Fortran-ordered (column-major) arrays are not supported");
}

TEST_CASE("npy: data that disagrees with the shape, values out of range") {
  check_error(npy(dict("<f4", "(2, 2)"), std::string(12, '\0')),
              "truncated .npy file: expected 16 bytes of data for '<f4' (2, 2), found 12");
  check_error(npy(dict("<f4", "(2,)"), std::string(9, '\0')), "trailing garbage: 1 bytes after the 8 bytes of data declared by the header ('<f4' (2,))");
  check_error(npy(dict("<f8", "(2147483647, 2147483647, 2147483647)"), ""), "which is too large: a tensor has fewer than 2^40 elements");
  check_error(npy(dict("<i8", "(2,)"), le_bytes<int64_t>({1, int64_t(1) << 40})), "element 1 is 1099511627776, outside the i32 range");
  check_error(npy(dict("<u4", "(1,)"), le_bytes<uint32_t>({4000000000u})), "element 0 is 4000000000, outside the i32 range");
  check_error(npy(dict("|b1", "(2,)"), std::string("\x01\x02", 2)), "element 1 of a bool array is 2, not 0 or 1");
  // f64 beyond the f32 range would be inf: an error. inf, NaN and the largest f32 read as they are.
  check_error(npy(dict("<f8", "(3,)"), le_bytes<double>({1, 2, -1e300})), "element 2 is -1e+300, beyond the f32 range");
  check_error(npy(dict(">f8", "(1,)"), std::string("\x47\xf0\0\0\0\0\0\0", 8)), "element 0 is 3.402823669209385e+38, beyond");
  const double inf = HUGE_VAL, max = 3.4028234663852886e38;
  tpu::Tensor t = tpu::parse_npy(npy(dict("<f8", "(4,)"), le_bytes<double>({inf, -inf, NAN, -max})), "ok");
  CHECK(values<float>(t)[0] == HUGE_VALF);
  CHECK(values<float>(t)[1] == -HUGE_VALF);
  CHECK(std::isnan(values<float>(t)[2]));
  CHECK(values<float>(t)[3] == -FLT_MAX);
}

TEST_CASE("npy: every truncation and many byte flips of a good file fail cleanly") {
  const std::string good = npy(dict("<i4", "(3, 2)"), le_bytes<int32_t>({1, 2, 3, 4, 5, 6}));
  REQUIRE(tpu::parse_npy(good, "g").size() == 6);
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("prefix of ", n, " bytes");
    CHECK_THROWS_AS(tpu::parse_npy(good.substr(0, n), "g"), tpu::Error);
  }
  uint32_t state = 12345;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) {
      state = state * 1664525u + 1013904223u;
      bad[(state >> 8) % bad.size()] = char(state >> 24);
    }
    try {
      tpu::parse_npy(bad, "g");  // a flip in the data is still a valid file
    } catch (const tpu::Error&) {
    }
  }
}
