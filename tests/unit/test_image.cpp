// Images: decoding and encoding (round trips, channel conversions, malformed files), the resize
// against a plain reference, and image folders (listing order, batches, label modes).
#include <doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/image.h"
#include "data/image_folder.h"

namespace fs = std::filesystem;
using tpu::Image;

namespace {

Image pattern(int64_t h, int64_t w, int64_t c) {
  Image im{h, w, c, std::vector<uint8_t>(size_t(h * w * c))};
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t((i * 37 + i / 7) % 256);
  return im;
}

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string error_of(std::span<const uint8_t> bytes) {
  try {
    tpu::decode_image(bytes, 3, "x.img");
  } catch (const tpu::Error& e) {
    return e.what();
  }
  return "";
}

// The resize weight of input j for output o, straight from the definition (triangle of
// half-width `scale` around the output's centre, normalised over the inputs).
std::vector<double> reference_matrix(int64_t in, int64_t out, bool antialias) {
  const double inv = double(in) / double(out), scale = antialias ? std::max(inv, 1.0) : 1.0;
  std::vector<double> m(size_t(in * out));
  for (int64_t o = 0; o < out; ++o) {
    double total = 0;
    for (int64_t j = 0; j < in; ++j) {
      const double wt = std::max(0.0, 1.0 - std::abs(j + 0.5 - (o + 0.5) * inv) / scale);
      m[size_t(o * in + j)] = wt;
      total += wt;
    }
    for (int64_t j = 0; j < in; ++j) m[size_t(o * in + j)] /= total;
  }
  return m;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tpu_image_test_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

void write_bytes(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("PNG keeps every pixel, in 1, 3 and 4 channels") {
  for (int c : {1, 3, 4}) {
    const Image im = pattern(5, 7, c);
    const std::string png = tpu::encode_png(im);
    const Image back = tpu::decode_image(bytes_of(png), c, "p.png");
    CHECK(back.height == 5);
    CHECK(back.width == 7);
    CHECK(back.pixels == im.pixels);
    const tpu::ImageHeader h = tpu::read_image_header(bytes_of(png), "p.png");
    CHECK(std::string(h.format) == "png");
    CHECK(h.width == 7);
  }
}

TEST_CASE("JPEG at quality 100 comes back within a few levels") {
  Image im{16, 16, 3, std::vector<uint8_t>(16 * 16 * 3)};
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t(((i / 3) % 16) * 8 + (i % 3) * 40);
  const Image back = tpu::decode_image(bytes_of(tpu::encode_jpeg(im, 100)), 3, "j.jpg");
  int worst = 0;
  for (size_t i = 0; i < im.pixels.size(); ++i)
    worst = std::max(worst, std::abs(int(back.pixels[i]) - int(im.pixels[i])));
  CHECK(worst <= 4);
  CHECK(std::string(tpu::read_image_header(bytes_of(tpu::encode_jpeg(im, 50)), "j.jpg").format) == "jpeg");
}

TEST_CASE("channels convert as documented: gray repeats, alpha drops or is 255, colour to luma") {
  const Image gray{1, 2, 1, {10, 200}};
  const Image rgb = tpu::decode_image(bytes_of(tpu::encode_png(gray)), 3, "g.png");
  CHECK(rgb.pixels == std::vector<uint8_t>{10, 10, 10, 200, 200, 200});
  const Image rgba = tpu::decode_image(bytes_of(tpu::encode_png(gray)), 4, "g.png");
  CHECK(rgba.pixels == std::vector<uint8_t>{10, 10, 10, 255, 200, 200, 200, 255});
  const Image colour{1, 1, 4, {100, 50, 200, 7}};
  const std::string png = tpu::encode_png(colour);
  CHECK(tpu::decode_image(bytes_of(png), 3, "c.png").pixels == std::vector<uint8_t>{100, 50, 200});
  const uint8_t luma = uint8_t(std::lround(0.2989 * 100 + 0.587 * 50 + 0.114 * 200));
  CHECK(tpu::decode_image(bytes_of(png), 1, "c.png").pixels == std::vector<uint8_t>{luma});
}

TEST_CASE("a file that does not decode is an error naming it") {
  CHECK(error_of(bytes_of("hello world")).find("x.img: not a JPEG or PNG image") == 0);
  CHECK(error_of({}).find("x.img: not a JPEG or PNG image") == 0);
  const std::string png = tpu::encode_png(pattern(20, 20, 3));
  CHECK(error_of(bytes_of(png.substr(0, png.size() / 2))).find("x.img: ") == 0);
  CHECK(error_of(bytes_of(png.substr(0, 12))).find("x.img: ") == 0);
  std::string corrupt = png;
  corrupt[png.size() / 2] = char(corrupt[png.size() / 2] ^ 0x55);  // the CRC no longer matches
  CHECK(error_of(bytes_of(corrupt)).find("x.img: ") == 0);
  const std::string jpeg = tpu::encode_jpeg(pattern(32, 32, 3), 90);
  CHECK(error_of(bytes_of(jpeg.substr(0, jpeg.size() / 2))).find("x.img: the JPEG data does not decode") == 0);
  CHECK(error_of(bytes_of(jpeg.substr(0, 4))).find("x.img: ") == 0);
  CHECK_THROWS_AS(tpu::decode_image(bytes_of(png), 2, "x.img"), tpu::Error);
  CHECK_THROWS_AS(tpu::encode_jpeg(pattern(2, 2, 3), 0), tpu::Error);
  CHECK_THROWS_AS(tpu::encode_png(Image{0, 3, 3, {}}), tpu::Error);
}

TEST_CASE("resize taps equal the triangle filter's definition, shrinking and growing") {
  const std::pair<int64_t, int64_t> sizes[] = {{28, 28}, {28, 14}, {28, 9}, {7, 20}, {100, 3}, {5, 1}, {1, 6}, {3, 8}};
  for (auto [in, out] : sizes) {
    for (bool antialias : {true, false}) {
      const std::vector<float> m = tpu::resize_matrix(tpu::resize_taps(in, out, antialias));
      const std::vector<double> ref = reference_matrix(in, out, antialias);
      double worst = 0;
      for (size_t i = 0; i < m.size(); ++i) worst = std::max(worst, std::abs(m[i] - ref[i]));
      CAPTURE(in);
      CAPTURE(out);
      CAPTURE(antialias);
      CHECK(worst < 1e-6);
    }
  }
}

TEST_CASE("growing is bilinear with half-pixel centres; shrinking 2x with antialias widens the filter") {
  const std::vector<float> up = tpu::resize_matrix(tpu::resize_taps(2, 4, true));
  CHECK(up == std::vector<float>{1, 0, 0.75f, 0.25f, 0.25f, 0.75f, 0, 1});
  // Output 0 sits at 1.0; the triangle of half-width 2 gives inputs 0..3 weights 3, 3, 1, 0 (/7).
  const std::vector<float> down = tpu::resize_matrix(tpu::resize_taps(4, 2, true));
  const std::vector<float> expected{3 / 7.f, 3 / 7.f, 1 / 7.f, 0, 0, 1 / 7.f, 3 / 7.f, 3 / 7.f};
  for (size_t i = 0; i < 8; ++i) CHECK(down[i] == doctest::Approx(expected[i]).epsilon(1e-6));
  const std::vector<float> plain = tpu::resize_matrix(tpu::resize_taps(4, 2, false));
  CHECK(plain == std::vector<float>{0.5f, 0.5f, 0, 0, 0, 0, 0.5f, 0.5f});
}

TEST_CASE("resize_image is the two matrix products") {
  const Image im = pattern(9, 6, 2);
  const tpu::ResizeTaps rows = tpu::resize_taps(9, 4, true), cols = tpu::resize_taps(6, 10, true);
  std::vector<float> out(4 * 10 * 2);
  tpu::resize_image(im, rows, cols, out);
  const std::vector<float> mr = tpu::resize_matrix(rows), mc = tpu::resize_matrix(cols);
  double worst = 0;
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t x = 0; x < 10; ++x)
      for (int64_t c = 0; c < 2; ++c) {
        double v = 0;
        for (int64_t i = 0; i < 9; ++i)
          for (int64_t j = 0; j < 6; ++j)
            v += mr[size_t(y * 9 + i)] * mc[size_t(x * 6 + j)] * im.pixels[size_t((i * 6 + j) * 2 + c)];
        worst = std::max(worst, std::abs(v - out[size_t((y * 10 + x) * 2 + c)]));
      }
  CHECK(worst < 1e-3);
}

TEST_CASE("an image folder lists classes and files in sorted order and reads batches") {
  TempDir dir;
  const Image a{2, 2, 1, {0, 50, 100, 150}}, b{4, 4, 3, std::vector<uint8_t>(48, 90)};
  write_bytes(dir.path / "dog" / "b.png", tpu::encode_png(a));
  write_bytes(dir.path / "dog" / "a.PNG", tpu::encode_png(a));
  write_bytes(dir.path / "dog" / "sub" / "c.png", tpu::encode_png(a));
  write_bytes(dir.path / "cat" / "z.jpg", tpu::encode_jpeg(b, 100));
  write_bytes(dir.path / "cat" / "notes.txt", "not listed");
  write_bytes(dir.path / "top.png", tpu::encode_png(a));
  const tpu::ImageFolderListing l = tpu::list_image_folder(dir.path.string(), true);
  CHECK(l.class_names == std::vector<std::string>{"cat", "dog"});
  REQUIRE(l.paths.size() == 4);
  CHECK(fs::path(l.paths[0]).filename() == "z.jpg");
  CHECK(fs::path(l.paths[1]).filename() == "a.PNG");
  CHECK(fs::path(l.paths[2]).filename() == "b.png");
  CHECK(fs::path(l.paths[3]).filename() == "c.png");
  CHECK(l.labels == std::vector<int32_t>{0, 1, 1, 1});
  CHECK(tpu::list_image_folder(dir.path.string(), false).paths.size() == 5);

  tpu::ImageBatchSpec spec{l.paths, l.labels, 2, 2, 1, true, tpu::LabelMode::categorical, 2};
  const std::vector<int64_t> idx{1, 0};
  std::vector<tpu::Tensor> batch = tpu::read_image_batch(spec, idx);
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].shape() == tpu::Shape{2, 2, 2, 1});
  CHECK(batch[0].data<float>()[1] == 50.0f);                   // the same size: the pixels as they are
  CHECK(std::abs(batch[0].data<float>()[4] - 90.0f) <= 4.0f);  // 4x4 of ~90 shrunk: ~90
  CHECK(batch[1].shape() == tpu::Shape{2, 2});
  CHECK(std::vector<float>(batch[1].data<float>(), batch[1].data<float>() + 4) == std::vector<float>{0, 1, 1, 0});
  spec.label_mode = tpu::LabelMode::none;
  CHECK(tpu::read_image_batch(spec, idx).size() == 1);
  const std::vector<int64_t> outside{9};
  CHECK_THROWS_AS(tpu::read_image_batch(spec, outside), tpu::Error);
  CHECK_THROWS_AS(tpu::list_image_folder((dir.path / "none").string(), true), tpu::Error);
}
