// Safetensors reading and writing (engine/io/safetensors.h) and atomic files (io/atomic_file.h).
#include <doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;
using tpu::DType;
using tpu::Tensor;

namespace {

// A file: 8-byte little-endian length of `header`, the header, then `data`.
std::string file_bytes(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

tpu::TensorFile parse(const std::string& bytes) {
  return tpu::parse_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), "f.safetensors");
}

// The error parsing `bytes` gives ("" when it parses).
std::string parse_error(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const tpu::Error& e) {
    return e.what();
  }
  return "";
}

Tensor filled(DType t, tpu::Shape s) {
  Tensor x(t, std::move(s));
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, double(i % 7) - 2);
  if (t == DType::boolean)
    for (int64_t i = 0; i < x.size(); ++i) x.set(i, i % 2);
  return x;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.same_type(b) && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tpu_st_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

const std::string kOne = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

}  // namespace

TEST_CASE("safetensors: every dtype round-trips bit for bit, with metadata") {
  tpu::TensorFile f;
  f.tensors = {{"w.kernel", filled(DType::f32, {3, 4})}, {"h", filled(DType::bf16, {5})},
               {"ids", filled(DType::i32, {2, 2, 2})}, {"px", filled(DType::u8, {7})},
               {"mask", filled(DType::boolean, {3})}, {"scalar", filled(DType::f32, {})},
               {"empty", Tensor(DType::f32, {0, 3})}};
  f.metadata = {{"format", "test"}, {"note", "é ✓"}};
  std::string bytes = tpu::encode_safetensors(f);
  tpu::TensorFile g = parse(bytes);
  CHECK(g.metadata == f.metadata);
  REQUIRE(g.tensors.size() == f.tensors.size());
  for (const tpu::NamedTensor& t : f.tensors) {
    auto it = std::find_if(g.tensors.begin(), g.tensors.end(), [&](auto& u) { return u.name == t.name; });
    REQUIRE(it != g.tensors.end());
    CHECK_MESSAGE(same(it->tensor, t.tensor), t.name);
  }
}

TEST_CASE("safetensors: the layout follows the format") {
  tpu::TensorFile f;
  f.tensors = {{"b", filled(DType::u8, {3})}, {"a", filled(DType::f32, {2})}, {"c", filled(DType::bf16, {1})}};
  std::string bytes = tpu::encode_safetensors(f);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  CHECK(n % 8 == 0);
  CHECK(bytes[8] == '{');
  CHECK(bytes.size() == 8 + n + 8 + 2 + 3);
  // Largest elements first, then by name: a (f32) at 0, c (bf16) at 8, b (u8) at 10.
  std::string header = bytes.substr(8, n);
  CHECK(header.find(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})") != std::string::npos);
  CHECK(header.find(R"("c":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]})") != std::string::npos);
  CHECK(header.find(R"("b":{"dtype":"U8","shape":[3],"data_offsets":[10,13]})") != std::string::npos);
  CHECK(parse(file_bytes(kOne, std::string(8, '\0'))).tensors.size() == 1);
}

TEST_CASE("safetensors: corrupt headers are errors naming the file and the problem") {
  const std::string d8(8, '\0');
  struct Case {
    std::string bytes, error;
  };
  const Case cases[] = {
      {"", "f.safetensors: not a safetensors file: only 0 bytes long"},
      {std::string(5, 'x'), "only 5 bytes long"},
      {file_bytes(kOne).substr(0, 20), "declared header length 54 is larger than the rest of the file (12 bytes"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}", "is over the limit of 100000000 bytes"},
      {file_bytes("[1]"), "the JSON header must start with '{'"},
      {file_bytes("{\"a\":"), "not valid JSON"},
      {file_bytes("{} x"), "not valid JSON"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d8),
       "duplicate key 'a'"},
      {file_bytes(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d8), "duplicate key 'dtype'"},
      {file_bytes(R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", d8), "tensor 'a': unknown dtype 'F99'"},
      {file_bytes(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", d8), "tensor 'a': dtype F64 is not supported"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8), "shape must hold non-negative integers, got '-2'"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", d8), "shape must hold non-negative integers"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", d8), "nested deeper than the format allows"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8),
       "tensor 'a': F32[3] needs 12 bytes but data_offsets [0, 8] hold 8"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d8),
       "data_offsets [0, 16] go past the end of the data (8 bytes"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", d8), "end before they begin"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", d8), "data_offsets must be [begin, end]"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8),
       "tensor 'b': data overlaps tensor 'a'"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8), "tensor 'a': gap of 4 bytes before its data"},
      {file_bytes(kOne, d8 + "xy"), "2 bytes after the last tensor's data"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", d8), "tensor 'a': entry has no data_offsets"},
      {file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", d8), "unknown field 'x' in the entry"},
      {file_bytes(R"({"a":3})"), "tensor 'a': entry must be an object"},
      {file_bytes(R"({"__metadata__":{"k":1}})"), "__metadata__ value of 'k' is not a string"},
      {file_bytes(R"({"__metadata__":[]})"), "__metadata__ must be an object of strings"},
      {file_bytes(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"), "tensor 'm': BOOL data holds the byte 2"},
      {file_bytes(R"({"a\n":{"dtype":"F99","shape":[],"data_offsets":[0,0]}})"), "tensor 'a\\x0A': unknown dtype"},
      {file_bytes(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})"), "dimension 4294967296 is too large"},
      {file_bytes(R"({"a":{"dtype":"U8","shape":[2147483647,2147483647,2147483647,0],"data_offsets":[0,0]}})"),
       "U8[2147483647,2147483647,2147483647,0] is too large: its dimensions other than 0 multiply to 2^40 or more"},
  };
  for (const Case& c : cases) {
    std::string err = parse_error(c.bytes);
    CHECK_MESSAGE(err.find(c.error) != std::string::npos, "expected '", c.error, "', got '", err, "'");
    CHECK(err.starts_with("f.safetensors: "));
  }
}

// Each header is cut off before its end: the check must fail while parsing, before the JSON
// library has read (and built a tree of) the whole text, or the error would be "not valid JSON".
TEST_CASE("safetensors: over-long lists and objects fail as soon as they are read") {
  std::string zeros;
  for (int i = 0; i < 100; ++i) zeros += "0,";
  const std::string entry = R"({"a":{"dtype":"F32",)";
  struct Case {
    std::string header, error;
  };
  const Case cases[] = {
      {entry + R"("shape":[)" + zeros, "tensor 'a': shape has more than 32 dimensions"},
      {entry + R"("shape":[],"data_offsets":[0,4,4)", "tensor 'a': data_offsets must be [begin, end]"},
      {entry + R"("shape":[],"x":)", "tensor 'a': unknown field 'x' in the entry"},
      {R"({"a":[)" + zeros, "a list or object holds more than 32 items"},
      {R"({"__metadata__":{"k":[)" + zeros, "a list or object holds more than 32 items"},
      {R"({"__metadata__":{"k":{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0,"o":0,"p":0,)"
       R"("q":0,"r":0,"s":0,"t":0,"u":0,"v":0,"w":0,"x":0,"y":0,"z":0,"A":0,"B":0,"C":0,"D":0,"E":0,"F":0,"G":0,)",
       "a list or object holds more than 32 items"},
  };
  for (const Case& c : cases) {
    std::string err = parse_error(file_bytes(c.header));
    CHECK_MESSAGE(err.find(c.error) != std::string::npos, "expected '", c.error, "', got '", err, "'");
  }
  // A whole header with a 33-axis shape fails the same way.
  std::string shape33 = "[" + zeros.substr(0, 32 * 2) + "0]";
  CHECK(parse_error(file_bytes(R"({"a":{"dtype":"F32","shape":)" + shape33 + R"(,"data_offsets":[0,0]}})")) ==
        "f.safetensors: tensor 'a': shape has more than 32 dimensions");
}

TEST_CASE("safetensors: valid edge cases load") {
  CHECK(parse(file_bytes("{}")).tensors.empty());
  CHECK(parse(file_bytes("{}      ")).tensors.empty());  // padding spaces
  tpu::TensorFile f = parse(file_bytes(R"({"e":{"dtype":"I32","shape":[0],"data_offsets":[0,0]},"f":{"dtype":"U8","shape":[0,5],"data_offsets":[0,0]}})"));
  CHECK(f.tensors.size() == 2);
  tpu::TensorFile s = parse(file_bytes(R"({"s":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})", std::string("\x07\0\0\0", 4)));
  CHECK(s.tensors[0].tensor.data<int32_t>()[0] == 7);
}

TEST_CASE("safetensors: writing refuses what the format cannot hold") {
  tpu::TensorFile f;
  f.tensors = {{"a", filled(DType::f32, {1})}, {"a", filled(DType::f32, {1})}};
  CHECK_THROWS_WITH_AS(tpu::encode_safetensors(f, "x"), "x: two tensors are named 'a'", tpu::Error);
  f.tensors = {{"__metadata__", filled(DType::f32, {1})}};
  CHECK_THROWS_AS(tpu::encode_safetensors(f, "x"), tpu::Error);
  f.tensors = {{std::string("bad\xff"), filled(DType::f32, {1})}};
  CHECK_THROWS_WITH_AS(tpu::encode_safetensors(f, "x"), "x: tensor names and metadata must be valid UTF-8 text", tpu::Error);
  f.tensors.clear();  // more entries than the reader takes back
  for (int i = 0; i <= 1'000'000; ++i) f.metadata.emplace_hint(f.metadata.end(), std::to_string(1'000'000 + i), "");
  CHECK_THROWS_WITH_AS(tpu::encode_safetensors(f, "x"), "x: more than 1000000 metadata entries cannot be read back",
                       tpu::Error);
}

TEST_CASE("safetensors: files on disk") {
  TempDir dir;
  tpu::TensorFile f;
  f.tensors = {{"w", filled(DType::f32, {4, 4})}};
  tpu::write_safetensors(dir / "m.safetensors", f);
  tpu::TensorFile g = tpu::read_safetensors(dir / "m.safetensors");
  CHECK(same(g.tensors[0].tensor, f.tensors[0].tensor));
  CHECK(read_all(dir / "m.safetensors") == tpu::encode_safetensors(f));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temp left

  CHECK_THROWS_WITH_AS(tpu::read_safetensors(dir / "none"), (dir / "none: file not found").c_str(), tpu::Error);
  CHECK_THROWS_WITH_AS(tpu::read_safetensors(dir.path), (dir.path + ": is a directory, not a safetensors file").c_str(), tpu::Error);
  std::ofstream(dir / "short") << "abc";
  CHECK_THROWS_AS(tpu::read_safetensors(dir / "short"), tpu::Error);
  std::string bytes = tpu::encode_safetensors(f);
  std::ofstream(dir / "cut", std::ios::binary) << bytes.substr(0, bytes.size() - 1);
  CHECK_THROWS_WITH_AS(tpu::read_safetensors(dir / "cut"),
                       doctest::Contains("go past the end of the data (63 bytes; the file is truncated"), tpu::Error);
}

TEST_CASE("atomic file: the target changes only at commit") {
  TempDir dir;
  const std::string path = dir / "f.txt";
  tpu::write_file_atomic(path, "old");
  {
    tpu::AtomicFile f(path);
    f.write(std::string_view("new content"));
    CHECK(fs::exists(f.temp_path()));
    CHECK(fs::path(f.temp_path()).parent_path() == fs::path(dir.path));
    CHECK(read_all(path) == "old");
  }  // not committed: the temporary file goes, the target stays
  CHECK(read_all(path) == "old");
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  tpu::write_file_atomic(path, "new");
  CHECK(read_all(path) == "new");
  struct stat st {};
  ::stat(path.c_str(), &st);
  mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));
}

TEST_CASE("atomic file: a symbolic link stays a link to the new content, the mode stays") {
  TempDir dir;
  fs::create_directory(dir / "real");
  tpu::write_file_atomic(dir / "real/f", "old");
  ::chmod((dir / "real/f").c_str(), 0600);
  fs::create_symlink("real/f", dir / "link");
  tpu::write_file_atomic(dir / "link", "new");
  CHECK(fs::is_symlink(dir / "link"));
  CHECK(read_all(dir / "real/f") == "new");
  struct stat st {};
  ::stat((dir / "real/f").c_str(), &st);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 2);  // no temp left
  CHECK(std::distance(fs::directory_iterator(dir / "real"), fs::directory_iterator()) == 1);
  fs::create_symlink("real/g", dir / "dangling");  // a link to a file not yet there creates it
  tpu::write_file_atomic(dir / "dangling", "g");
  CHECK(fs::is_symlink(dir / "dangling"));
  CHECK(read_all(dir / "real/g") == "g");
  ::chmod((dir / "real/g").c_str(), 0640);
  tpu::write_file_atomic(dir / "real/g", "h");
  ::stat((dir / "real/g").c_str(), &st);
  CHECK((st.st_mode & 0777) == 0640);
  fs::create_symlink("b", dir / "a");  // a cycle of links is an error, and stays as it was
  fs::create_symlink("a", dir / "b");
  CHECK_THROWS_WITH_AS(tpu::write_file_atomic(dir / "a", "x"),
                       doctest::Contains("its symbolic links form a cycle"), tpu::Error);
  CHECK(fs::is_symlink(dir / "a"));
}

TEST_CASE("atomic file: errors name the path and the reason") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(tpu::write_file_atomic(dir / "no/such/f", "x"),
                       (("cannot write " + (dir / "no/such/f")) + ": the directory " + (dir / "no/such") + " does not exist").c_str(),
                       tpu::Error);
  CHECK_THROWS_WITH_AS(tpu::write_file_atomic(dir.path, "x"), ("cannot write " + dir.path + ": it is a directory").c_str(), tpu::Error);
  if (::geteuid() != 0) {  // root writes anywhere
    fs::create_directory(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_WITH_AS(tpu::write_file_atomic(dir / "ro/f", "x"), doctest::Contains("Permission denied"), tpu::Error);
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
}
