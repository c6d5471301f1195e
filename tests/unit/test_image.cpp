// Images: decoding and encoding (round trips, channel conversions, malformed files), the resize
// against a plain reference, and image folders (listing order, batches, label modes).
#include <doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <zlib.h>

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


// ---- PNG files made by hand: chunks with their CRCs, rows with filter 0, one zlib stream.

std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

std::string png_chunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const auto crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size())));
  return be32(uint32_t(data.size())) + body + be32(crc);
}

// `samples` are the rows' samples in order (big-endian pairs of bytes at depth 16); `extra` are
// chunks placed between IHDR and IDAT (gAMA, PLTE, tRNS).
std::string hand_png(uint32_t w, uint32_t h, int depth, int colour_type, const std::vector<uint32_t>& samples,
                     const std::string& extra = "") {
  std::string raw;
  const size_t per_row = samples.size() / h;
  for (size_t y = 0; y < h; ++y) {
    raw += '\0';
    for (size_t i = 0; i < per_row; ++i) {
      const uint32_t v = samples[y * per_row + i];
      if (depth == 16) raw += {char(v >> 8), char(v & 0xFF)};
      else raw += char(v);
    }
  }
  std::string z(compressBound(uLong(raw.size())), '\0');
  uLongf zsize = uLongf(z.size());
  REQUIRE(compress(reinterpret_cast<Bytef*>(z.data()), &zsize, reinterpret_cast<const Bytef*>(raw.data()),
                   uLong(raw.size())) == Z_OK);
  z.resize(zsize);
  const std::string ihdr = be32(w) + be32(h) + std::string{char(depth), char(colour_type), 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + extra + png_chunk("IDAT", z) +
         png_chunk("IEND", "");
}

// TF's decode_png at dtype uint8 keeps a 16-bit sample's high byte.
uint8_t high_byte(uint32_t v) { return uint8_t(v >> 8); }

std::vector<uint8_t> decoded(const std::string& png, int channels) {
  return tpu::decode_image(bytes_of(png), channels, "h.png").pixels;
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

TEST_CASE("a 16-bit gray ramp comes back as value * 255 / 65535, with no gamma curve") {
  std::vector<uint32_t> ramp;
  std::vector<uint8_t> expected;
  for (uint32_t k = 0; k < 16; ++k) {
    ramp.push_back(k * 65535 / 15);
    expected.push_back(uint8_t(std::lround(k * 65535 / 15 * 255.0 / 65535)));  // 0, 17, 34, ..., 255
  }
  const std::string png = hand_png(16, 1, 16, 0, ramp);
  CHECK(decoded(png, 1) == expected);
  std::vector<uint8_t> rgb;
  for (uint8_t v : expected) rgb.insert(rgb.end(), {v, v, v});
  CHECK(decoded(png, 3) == rgb);
  const tpu::ImageHeader h = tpu::read_image_header(bytes_of(png), "h.png");
  CHECK(h.width == 16);
  CHECK(h.height == 1);
}

TEST_CASE("16-bit RGB, RGBA and gray + alpha keep each sample's high byte") {
  const std::vector<uint32_t> rgb{0x0000, 0x1234, 0xFFFF, 0x80FF, 0x7F80, 0x00FF, 0xFF00, 0x0101, 0xFEFF};
  std::vector<uint8_t> expected;
  for (uint32_t v : rgb) {
    expected.push_back(high_byte(v));
    CHECK(std::abs(int(high_byte(v)) - v * 255.0 / 65535) < 1.0);  // within a level of the exact scale
  }
  CHECK(decoded(hand_png(3, 1, 16, 2, rgb), 3) == expected);
  const std::vector<uint32_t> rgba{0x1234, 0x5678, 0x9ABC, 0x8000, 0xFFFF, 0x0000, 0x4000, 0x00FF};
  std::vector<uint8_t> rgba8;
  for (uint32_t v : rgba) rgba8.push_back(high_byte(v));
  const std::string rgba_png = hand_png(2, 1, 16, 6, rgba);
  CHECK(decoded(rgba_png, 4) == rgba8);
  CHECK(decoded(rgba_png, 3) == std::vector<uint8_t>{rgba8[0], rgba8[1], rgba8[2], rgba8[4], rgba8[5], rgba8[6]});
  const std::string gray_alpha = hand_png(2, 1, 16, 4, {0x3000, 0x8000, 0xC0FF, 0xFFFF});
  CHECK(decoded(gray_alpha, 4) == std::vector<uint8_t>{0x30, 0x30, 0x30, 0x80, 0xC0, 0xC0, 0xC0, 0xFF});
  CHECK(decoded(gray_alpha, 1) == std::vector<uint8_t>{0x30, 0xC0});
}

TEST_CASE("a gAMA chunk is ignored: 8-bit samples come back exactly") {
  const std::string gamma_1 = png_chunk("gAMA", be32(100000));  // a linear file
  const std::vector<uint32_t> rgb{0, 10, 64, 128, 200, 255};
  const std::vector<uint8_t> rgb8(rgb.begin(), rgb.end());
  CHECK(decoded(hand_png(2, 1, 8, 2, rgb, gamma_1), 3) == rgb8);
  CHECK(decoded(hand_png(6, 1, 8, 0, rgb, gamma_1), 1) == rgb8);
  CHECK(decoded(hand_png(6, 1, 8, 0, rgb, png_chunk("gAMA", be32(20000))), 1) == rgb8);
  const std::vector<uint32_t> rgba{30, 60, 90, 100, 250, 5, 128, 255};
  CHECK(decoded(hand_png(2, 1, 8, 6, rgba, gamma_1), 4) == std::vector<uint8_t>(rgba.begin(), rgba.end()));
}

TEST_CASE("palettes expand to RGB, with tRNS alpha as RGBA; low bit depths expand to 8 bits") {
  const std::string plte = png_chunk("PLTE", std::string{10, 20, 30, char(200), char(150), 100, 0, 0, char(255)});
  const std::string trns = png_chunk("tRNS", std::string{char(255), 0});  // the third entry stays opaque
  const std::vector<uint32_t> indices{2, 0, 1, 1};
  const std::string with_alpha = hand_png(2, 2, 8, 3, indices, plte + trns);
  CHECK(decoded(with_alpha, 4) ==
        std::vector<uint8_t>{0, 0, 255, 255, 10, 20, 30, 255, 200, 150, 100, 0, 200, 150, 100, 0});
  CHECK(decoded(with_alpha, 3) == std::vector<uint8_t>{0, 0, 255, 10, 20, 30, 200, 150, 100, 200, 150, 100});
  CHECK(decoded(hand_png(2, 2, 8, 3, indices, plte), 4) ==
        std::vector<uint8_t>{0, 0, 255, 255, 10, 20, 30, 255, 200, 150, 100, 255, 200, 150, 100, 255});
  // Four 2-bit indices packed in one byte (2, 0, 1, 1 -> 0b10000101).
  CHECK(decoded(hand_png(4, 1, 2, 3, {0x85}, plte + trns), 3) ==
        std::vector<uint8_t>{0, 0, 255, 10, 20, 30, 200, 150, 100, 200, 150, 100});
  // 2-bit gray: levels 0..3 are 0, 85, 170, 255; a gray tRNS makes level 1 transparent.
  const std::string gray2 = hand_png(4, 1, 2, 0, {0x1B});  // 0, 1, 2, 3
  CHECK(decoded(gray2, 1) == std::vector<uint8_t>{0, 85, 170, 255});
  const std::string gray_trns = hand_png(4, 1, 2, 0, {0x1B}, png_chunk("tRNS", std::string{0, 1}));
  CHECK(decoded(gray_trns, 4) == std::vector<uint8_t>{0, 0, 0, 255, 85, 85, 85, 0, 170, 170, 170, 255, 255, 255, 255, 255});
}

TEST_CASE("a hand-made PNG that breaks the format is an error naming the file") {
  const std::string good = hand_png(2, 1, 8, 0, {1, 2});
  CHECK(decoded(good, 1) == std::vector<uint8_t>{1, 2});
  // A palette image without its PLTE chunk.
  CHECK(error_of(bytes_of(hand_png(2, 1, 8, 3, {0, 0}))).find("x.img: ") == 0);
  // Bit depth 16 with a palette is not a PNG combination.
  CHECK(error_of(bytes_of(hand_png(2, 1, 16, 3, {0, 0}))).find("x.img: not a valid PNG file") == 0);
  // A header that promises three rows before the data of two.
  const std::string two_rows = hand_png(2, 2, 8, 0, {1, 2, 3, 4});
  const std::string ihdr = png_chunk("IHDR", be32(2) + be32(3) + std::string{8, 0, 0, 0, 0});
  const std::string short_data = two_rows.substr(0, 8) + ihdr + two_rows.substr(8 + ihdr.size());
  CHECK(error_of(bytes_of(short_data)).find("x.img: the PNG data does not decode") == 0);
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
