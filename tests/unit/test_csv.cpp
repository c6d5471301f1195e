// CSV reader: columns by name and position, labels by number and by class name, RFC 4180
// quoting, and the file:line:column message of every malformed input.
#include <doctest.h>
#include <zlib.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/csv.h"

using tpu::CsvColumn;
using tpu::CsvOptions;
using tpu::DType;
using tpu::Shape;

namespace {

std::vector<double> values(const tpu::Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(t.get(i));
  return v;
}

std::string error_of(const std::string& text, const CsvOptions& o = {}) {
  try {
    tpu::parse_csv(text, "d.csv", o);
  } catch (const tpu::Error& e) {
    return e.what();
  }
  return "";
}

CsvOptions labelled(const std::string& label, std::vector<std::string> classes = {}) {
  CsvOptions o;
  o.label = CsvColumn{label};
  o.label_classes = std::move(classes);
  return o;
}

const char* kIris =
    "sepal_length,sepal_width,petal_length,petal_width,species\n"
    "5.1,3.5,1.4,0.2,setosa\n"
    "7.0,3.2,4.7,1.4,versicolor\n"
    "6.3,3.3,6.0,2.5,virginica\n";

}  // namespace

TEST_CASE("csv: features and a class-name label") {
  tpu::CsvData d = tpu::parse_csv(kIris, "iris.csv", labelled("species", {"setosa", "versicolor", "virginica"}));
  CHECK(d.features.dtype() == DType::f32);
  CHECK(d.features.shape() == Shape{3, 4});
  CHECK(values(d.features)[4] == doctest::Approx(7.0));
  REQUIRE(d.labels);
  CHECK(d.labels->dtype() == DType::i32);
  CHECK(values(*d.labels) == std::vector<double>{0, 1, 2});
  CHECK(d.feature_names == std::vector<std::string>{"sepal_length", "sepal_width", "petal_length", "petal_width"});
}

TEST_CASE("csv: column selection by name and position, numeric labels, dtypes") {
  CsvOptions o;
  o.features = {CsvColumn{"c"}, CsvColumn{"", 1}};
  o.label = CsvColumn{"", 2};
  tpu::CsvData d = tpu::parse_csv("a,b,c\n1,0,3\n4,1,6\n", "x", o);
  CHECK(d.features.shape() == Shape{2, 2});
  CHECK(values(d.features) == std::vector<double>{3, 1, 6, 4});
  CHECK(values(*d.labels) == std::vector<double>{0, 1});
  CHECK(d.feature_names == std::vector<std::string>{"c", "a"});
  o = {};
  o.feature_dtype = DType::i32;
  o.label = CsvColumn{"y"};
  o.label_dtype = DType::f32;
  d = tpu::parse_csv("x,y\n-7,0.5\n2147483647,2\n", "x", o);
  CHECK(d.features.dtype() == DType::i32);
  CHECK(values(d.features) == std::vector<double>{-7, 2147483647});
  CHECK(d.labels->dtype() == DType::f32);
  CHECK(values(*d.labels) == std::vector<double>{0.5, 2});
}

TEST_CASE("csv: quoting, line endings, BOM, blank lines, no header, delimiters") {
  tpu::CsvData d = tpu::parse_csv("\xEF\xBB\xBF\"a\",\"b \"\"q\"\", c\"\r\n\r\n\" 1 \",2\r\n3,\"4\"", "x", {});
  CHECK(d.feature_names == std::vector<std::string>{"a", "b \"q\", c"});
  CHECK(values(d.features) == std::vector<double>{1, 2, 3, 4});
  CsvOptions o;
  o.header = false;
  o.delimiter = '\t';
  d = tpu::parse_csv("1\t2\n3\t4\n", "x", o);
  CHECK(d.features.shape() == Shape{2, 2});
  CHECK(d.feature_names == std::vector<std::string>{"column 1", "column 2"});
  CHECK(tpu::parse_csv("a,b\n", "x", {}).features.shape() == Shape{0, 2});
  // A quoted field may hold a line break; later line numbers still count it.
  CHECK(error_of("a,b\n\"x\ny\",1\n1,z\n") == "d.csv:2:1: column 1 (\"a\"): expected a number, got \"x\\ny\"");
  CsvOptions second;
  second.features = {CsvColumn{"", 2}};
  CHECK(error_of("a,b\n\"x\ny\",1\n1,z\n", second) == "d.csv:4:3: column 2 (\"b\"): expected a number, got \"z\"");
}

TEST_CASE("csv: numbers with a '+' sign, and too small for f32, read as numpy reads them") {
  CsvOptions ints;
  ints.feature_dtype = DType::i32;
  CHECK(values(tpu::parse_csv("a,b\n+1.5,-2\n1e-50,-1e-50\n2,+0\n", "x", {}).features) ==
        std::vector<double>{1.5, -2, 0, -0.0, 2, 0});
  // A subnormal value stays one, or is 0 where subnormals are flushed to zero (the float mode).
  const double tiny = values(tpu::parse_csv("a\n1e-40\n", "x", {}).features)[0];
  CHECK((tiny == 0 || tiny == double(1e-40f)));
  CHECK(std::signbit(values(tpu::parse_csv("a\n-1e-50\n", "x", {}).features)[0]));
  CHECK(values(tpu::parse_csv("a\n+7\n", "x", ints).features) == std::vector<double>{7});
  CHECK(error_of("a\n+-1\n") == "d.csv:2:1: column 1 (\"a\"): expected a number, got \"+-1\"");
  CHECK(error_of("a\n++1\n") == "d.csv:2:1: column 1 (\"a\"): expected a number, got \"++1\"");
  CHECK(error_of("a\n+\n") == "d.csv:2:1: column 1 (\"a\"): expected a number, got \"+\"");
  CHECK(error_of("a\n-1e999\n") == "d.csv:2:1: column 1 (\"a\"): \"-1e999\" is out of the f32 range");
  CHECK(error_of("a\n1e-50x\n") == "d.csv:2:1: column 1 (\"a\"): expected a number, got \"1e-50x\"");
}

TEST_CASE("csv: malformed records name file:line:column") {
  CHECK(error_of("a,b\n1,2\n3\n") == "d.csv:3:2: expected 2 fields (as in the header), found 1");
  CHECK(error_of("a,b\n1,2,3\n") == "d.csv:2:5: expected 2 fields (as in the header), found 3");
  CHECK(error_of("a,b\n1,\n") == "d.csv:2:3: column 2 (\"b\"): empty field (expected a number)");
  CHECK(error_of("a,b\n1, x \n") == "d.csv:2:3: column 2 (\"b\"): expected a number, got \" x \"");
  CHECK(error_of("a,b\n1,1e999\n") == "d.csv:2:3: column 2 (\"b\"): \"1e999\" is out of the f32 range");
  CHECK(error_of("a,b\n1,inf\n") == "d.csv:2:3: column 2 (\"b\"): expected a number, got \"inf\"");
  CHECK(error_of("a,b\n1,0x10\n") == "d.csv:2:3: column 2 (\"b\"): expected a number, got \"0x10\"");
  CHECK(error_of("a,b\n1,\"2\n") == "d.csv:2:3: unterminated quoted field: the quote opened here is never closed");
  CHECK(error_of("a,b\n1,\"2\"x\n") == "d.csv:2:6: unexpected character \"x\" after the closing quote of a quoted field");
  CHECK(error_of("a,b\n1,2\"\n").starts_with("d.csv:2:4: a quote inside an unquoted field \"2\"\""));
  CHECK(error_of(std::string("a,b\n1,\0\n", 8)) == "d.csv:2:3: a NUL byte: this is binary data, not CSV text");
  CHECK(error_of("\xC3\xA9t\xC3\xA9,b\n\xC3\xA9,1\n") == "d.csv:2:1: column 1 (\"\xC3\xA9t\xC3\xA9\"): expected a number, got \"\xC3\xA9\"");
  CHECK(error_of("\xC3\xA9,b\n1,x\n") == "d.csv:2:3: column 2 (\"b\"): expected a number, got \"x\"");
  CsvOptions ints;
  ints.feature_dtype = DType::i32;
  CHECK(error_of("a\n2.5\n", ints) == "d.csv:2:1: column 1 (\"a\"): expected an integer, got \"2.5\"");
  CHECK(error_of("a\n3000000000\n", ints) == "d.csv:2:1: column 1 (\"a\"): \"3000000000\" is out of the i32 range");
  CHECK(error_of("a,l\n1,dog\n", labelled("l", {"cat", "cow"})) ==
        "d.csv:2:3: column 2 (\"l\"): \"dog\" is not one of the label_classes (\"cat\", \"cow\")");
  CHECK(error_of("a,l\n1,dog\n", labelled("l")) == "d.csv:2:3: column 2 (\"l\"): expected an integer, got \"dog\"");
  std::string long_field(100, 'z');
  std::string msg = error_of("a\n" + long_field + "x\n");
  INFO(msg);
  CHECK(msg.ends_with("got \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...\""));
}

TEST_CASE("csv: bad column choices and options") {
  CHECK(error_of("", {}) == "d.csv: empty CSV file (no header row)");
  CHECK(error_of("\n\n", {}) == "d.csv: empty CSV file (no header row)");
  CHECK(error_of("a,b\n1,2\n", labelled("c")) == "d.csv: no column named \"c\" in the header (columns: \"a\", \"b\")");
  CHECK(error_of("a,a\n1,2\n", labelled("a")) == "d.csv: the header names column \"a\" twice (columns 1 and 2)");
  CsvOptions o;
  o.features = {CsvColumn{"", 3}};
  CHECK(error_of("a,b\n1,2\n", o) == "d.csv: there is no column 3; the file has 2 columns (numbered from 1)");
  o.features = {CsvColumn{"", 0}};
  CHECK(error_of("a,b\n1,2\n", o) == "d.csv: there is no column 0; the file has 2 columns (numbered from 1)");
  o = labelled("b");
  o.features = {CsvColumn{"b"}};
  CHECK(error_of("a,b\n1,2\n", o) == "d.csv: column 2 (\"b\") is both a feature and the label");
  o = labelled("b");
  o.header = false;
  CHECK(error_of("1,2\n", o) == "d.csv: column \"b\" is chosen by name, but the file has no header row");
  o = {};
  o.feature_dtype = DType::u8;
  CHECK(error_of("a\n1\n", o) == "d.csv: CSV features are read as f32 or i32, not u8");
  o = {};
  o.delimiter = '"';
  CHECK(error_of("a\n1\n", o) == "d.csv: the delimiter cannot be a quote or a line break");
}

TEST_CASE("csv: files") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("tpu_csv_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "a.csv").string();
  std::ofstream(path) << "x,y\n1,2\n";
  CHECK(tpu::read_csv(path, {}).features.shape() == Shape{1, 2});
  CHECK_THROWS_WITH(tpu::read_csv((dir / "no.csv").string(), {}), ((dir / "no.csv").string() + ": file not found").c_str());
  CHECK_THROWS_WITH(tpu::read_csv(dir.string(), {}), (dir.string() + ": is a directory, not a CSV file").c_str());
  fs::remove_all(dir);
}

TEST_CASE("csv: gzip-compressed files read as the plain ones, and their defects are errors") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("tpu_csv_gz_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string text = "x,y\n";
  for (int i = 0; i < 20000; ++i) text += std::to_string(i) + "," + std::to_string(i % 7) + "\n";  // > 64 KiB
  const std::string path = (dir / "a.csv.gz").string();
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), unsigned(text.size())) == int(text.size()));
  gzclose(f);
  tpu::CsvData plain = tpu::parse_csv(text, "a.csv", {}), packed = tpu::read_csv(path, {});
  REQUIRE(packed.features.shape() == Shape{20000, 2});
  CHECK(std::memcmp(packed.features.raw(), plain.features.raw(), size_t(plain.features.bytes())) == 0);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream((dir / "cut.csv.gz").string(), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_WITH(tpu::read_csv((dir / "cut.csv.gz").string(), {}),
                    ((dir / "cut.csv.gz").string() + ": truncated gzip file: the compressed stream ends early").c_str());
  fs::remove_all(dir);
}

TEST_CASE("csv: truncations and byte flips fail cleanly") {
  const std::string good = "a,\"b\"\n1,\"2\"\n3,4\n";
  for (size_t n = 0; n <= good.size(); ++n) {
    try {
      tpu::parse_csv(good.substr(0, n), "g", {});
    } catch (const tpu::Error&) {
    }
  }
  uint32_t state = 99;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    state = state * 1664525u + 1013904223u;
    bad[(state >> 8) % bad.size()] = char(state >> 24);
    try {
      tpu::parse_csv(bad, "g", {});
    } catch (const tpu::Error&) {
    }
  }
}
