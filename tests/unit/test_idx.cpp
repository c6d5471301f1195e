// IDX reader: every element type, plain and gzip files, and every defect the reader reports.
#include <doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/idx.h"

namespace fs = std::filesystem;
using tpu::DType;
using tpu::Shape;
using Bytes = std::vector<uint8_t>;

namespace {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() / ("tpu_idx_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

Bytes header(uint8_t code, std::vector<uint32_t> dims) {
  Bytes b{0, 0, code, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  return b;
}

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void write_plain(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

void write_gz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  if (!b.empty()) REQUIRE(gzwrite(f, b.data(), unsigned(b.size())) == int(b.size()));
  gzclose(f);
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// The message read_idx throws for `path`, or "" if it succeeds.
std::string error_of(const std::string& path) {
  try {
    tpu::read_idx(path);
  } catch (const tpu::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Writes `b` plainly and gzipped; both must fail with a message starting with the path and
// containing `part`.
void check_both_fail(const TempDir& t, const std::string& name, const Bytes& b, const std::string& part) {
  for (std::string path : {t.path(name), t.path(name + ".gz")}) {
    if (path.ends_with(".gz")) write_gz(path, b); else write_plain(path, b);
    std::string msg = error_of(path);
    INFO(path, " -> ", msg);
    CHECK(msg.starts_with(path + ": "));
    CHECK(contains(msg, part));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

const Bytes kU8Data = {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};

}  // namespace

TEST_CASE("idx: u8 tensor from a plain and a gzip file") {
  TempDir t;
  Bytes file = header(0x08, {2, 3, 2}) + kU8Data;
  write_plain(t.path("a.idx"), file);
  write_gz(t.path("a.idx.gz"), file);
  for (std::string path : {t.path("a.idx"), t.path("a.idx.gz")}) {
    tpu::Tensor x = tpu::read_idx(path);
    CHECK(x.dtype() == DType::u8);
    CHECK(x.shape() == Shape{2, 3, 2});
    for (size_t i = 0; i < kU8Data.size(); ++i) CHECK(x.get(int64_t(i)) == kU8Data[i]);
  }
}

TEST_CASE("idx: signed integer types widen to i32") {
  TempDir t;
  write_plain(t.path("i8"), header(0x09, {3}) + Bytes{0x80, 0xFF, 0x7F});
  write_plain(t.path("i16"), header(0x0B, {2}) + Bytes{0x80, 0x00, 0x01, 0x02});
  write_plain(t.path("i32"), header(0x0C, {2}) + Bytes{0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x01, 0x00, 0x00});
  tpu::Tensor a = tpu::read_idx(t.path("i8")), b = tpu::read_idx(t.path("i16")), c = tpu::read_idx(t.path("i32"));
  CHECK(a.dtype() == DType::i32);
  CHECK(b.dtype() == DType::i32);
  CHECK(c.dtype() == DType::i32);
  CHECK(std::vector<int32_t>(a.span<int32_t>().begin(), a.span<int32_t>().end()) == std::vector<int32_t>{-128, -1, 127});
  CHECK(std::vector<int32_t>(b.span<int32_t>().begin(), b.span<int32_t>().end()) == std::vector<int32_t>{-32768, 258});
  CHECK(std::vector<int32_t>(c.span<int32_t>().begin(), c.span<int32_t>().end()) == std::vector<int32_t>{-2, 65536});
}

TEST_CASE("idx: f32 and f64 read as f32") {
  TempDir t;
  // 1.5f = 0x3FC00000, -2.0f = 0xC0000000; 0.25 = 0x3FD0000000000000, -3.0 = 0xC008000000000000
  write_plain(t.path("f32"), header(0x0D, {2, 1}) + Bytes{0x3F, 0xC0, 0, 0, 0xC0, 0, 0, 0});
  write_gz(t.path("f64.gz"), header(0x0E, {2}) + Bytes{0x3F, 0xD0, 0, 0, 0, 0, 0, 0, 0xC0, 0x08, 0, 0, 0, 0, 0, 0});
  tpu::Tensor a = tpu::read_idx(t.path("f32")), b = tpu::read_idx(t.path("f64.gz"));
  CHECK(a.dtype() == DType::f32);
  CHECK(a.shape() == Shape{2, 1});
  CHECK(a.data<float>()[0] == 1.5f);
  CHECK(a.data<float>()[1] == -2.0f);
  CHECK(b.dtype() == DType::f32);
  CHECK(b.data<float>()[0] == 0.25f);
  CHECK(b.data<float>()[1] == -3.0f);
}

TEST_CASE("idx: a gzip payload larger than the first read chunk") {
  TempDir t;
  Bytes data(3u << 20);  // 3 MiB: grows the buffer twice
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7);
  write_gz(t.path("big.gz"), header(0x08, {3, 1024, 1024}) + data);
  tpu::Tensor x = tpu::read_idx(t.path("big.gz"));
  CHECK(x.shape() == Shape{3, 1024, 1024});
  CHECK(x.get(0) == 0);
  CHECK(x.get(int64_t(data.size()) - 1) == data.back());
}

TEST_CASE("idx: missing, directory and unreadable files") {
  TempDir t;
  CHECK(error_of(t.path("nope.idx")) == t.path("nope.idx") + ": file not found");
  CHECK(error_of(t.path("nope.idx.gz")) == t.path("nope.idx.gz") + ": file not found");
  CHECK(error_of(t.dir.string()) == t.dir.string() + ": is a directory, not an IDX file");
  if (::geteuid() != 0) {  // root reads anything
    write_plain(t.path("locked"), header(0x08, {1}) + Bytes{1});
    fs::permissions(t.path("locked"), fs::perms::none);
    CHECK(contains(error_of(t.path("locked")), "cannot open: Permission denied"));
  }
}

TEST_CASE("idx: bad headers") {
  TempDir t;
  check_both_fail(t, "empty", {}, "not an IDX file: only 0 bytes long");
  check_both_fail(t, "short", {0, 0}, "not an IDX file: only 2 bytes long");
  check_both_fail(t, "magic", Bytes{1, 0, 8, 1, 0, 0, 0, 1, 5}, "not an IDX file: starts with bytes 0x01 0x00");
  check_both_fail(t, "type", header(0x07, {1}) + Bytes{5}, "unknown IDX type code 0x07");
  check_both_fail(t, "rank0", Bytes{0, 0, 8, 0}, "unsupported IDX rank 0");
  check_both_fail(t, "rank9", header(0x08, {1, 1, 1, 1, 1, 1, 1, 1, 1}) + Bytes{7}, "unsupported IDX rank 9");
  check_both_fail(t, "dims", Bytes{0, 0, 8, 2, 0, 0, 0, 3}, "truncated IDX header: expected 2 dimension sizes");
  check_both_fail(t, "zero", header(0x08, {3, 0}), "dimension 2 of 2 is 0");
  check_both_fail(t, "huge", header(0x08, {0xFFFFFFFFu}), "dimension 1 of 1 is 4294967295, too large");
  check_both_fail(t, "overflow", header(0x0E, {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF}),
                  "IDX header declares f64[2147483647,2147483647,2147483647], whose shape is too large");
}

TEST_CASE("idx: truncated data and trailing garbage") {
  TempDir t;
  check_both_fail(t, "trunc", header(0x08, {2, 3, 2}) + Bytes{1, 2, 3},
                  "truncated IDX file: expected 12 bytes of data for u8[2,3,2], found 3");
  check_both_fail(t, "trunc32", header(0x0C, {1000, 1000}) + Bytes(1000),
                  "truncated IDX file: expected 4000000 bytes of data for i32[1000,1000], found 1000");
  check_both_fail(t, "extra", header(0x08, {2, 3, 2}) + kU8Data + Bytes{9, 9}, "trailing garbage");
  // 1e300 (0x7E37E43C8800759C) is finite but no f32: an error, as npy gives, not inf.
  check_both_fail(t, "f64big", header(0x0E, {2}) + Bytes{0x3F, 0xF0, 0, 0, 0, 0, 0, 0, 0x7E, 0x37, 0xE4, 0x3C, 0x88, 0, 0x75, 0x9C},
                  "element 1 is 1e+300, beyond the f32 range that float data is read into");
  write_plain(t.path("extra2"), header(0x08, {2, 3, 2}) + kU8Data + Bytes{9, 9});
  CHECK(contains(error_of(t.path("extra2")), "trailing garbage: 2 bytes after the 12 bytes of data"));
}

TEST_CASE("idx: corrupt and truncated gzip streams") {
  TempDir t;
  Bytes data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t((i * 2654435761u) >> 13);
  write_gz(t.path("good.gz"), header(0x08, {100, 1000}) + data);
  Bytes gz = read_bytes(t.path("good.gz"));
  REQUIRE(gz.size() > 1000);

  Bytes cut(gz.begin(), gz.begin() + gz.size() / 2);
  write_plain(t.path("cut.gz"), cut);
  std::string msg = error_of(t.path("cut.gz"));
  INFO(msg);
  CHECK(msg.starts_with(t.path("cut.gz") + ": "));
  CHECK(msg == t.path("cut.gz") + ": truncated gzip file: the compressed stream ends early");

  Bytes flipped = gz;
  for (size_t i = 200; i < 260; ++i) flipped[i] ^= 0x5A;
  write_plain(t.path("flipped.gz"), flipped);
  msg = error_of(t.path("flipped.gz"));
  INFO(msg);
  CHECK(msg.starts_with(t.path("flipped.gz") + ": corrupt gzip file: "));

  Bytes bad_crc = gz;
  bad_crc[gz.size() - 6] ^= 0xFF;  // the CRC-32 in the trailer
  write_plain(t.path("crc.gz"), bad_crc);
  msg = error_of(t.path("crc.gz"));
  INFO(msg);
  CHECK(msg.starts_with(t.path("crc.gz") + ": corrupt gzip file: "));
}

TEST_CASE("idx: Fashion-MNIST test labels, when the dataset is installed") {
  const std::string path = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(path)) return;
  tpu::Tensor y = tpu::read_idx(path);
  CHECK(y.dtype() == DType::u8);
  CHECK(y.shape() == Shape{10000});
  int max = 0;
  for (uint8_t v : y.span<uint8_t>()) max = std::max(max, int(v));
  CHECK(max == 9);
}
