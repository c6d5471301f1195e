#include "data/image.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include <jpeglib.h>
#include <png.h>

#include "core/error.h"
#include "data/byte_source.h"

namespace tpu {

namespace {

// Larger images are refused before any allocation (2^28 pixels is a 16384 x 16384 picture).
constexpr int64_t kMaxPixels = int64_t(1) << 28;

bool is_jpeg(std::span<const uint8_t> b) { return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }

bool is_png(std::span<const uint8_t> b) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), kSignature, 8) == 0;
}

void check_size(int64_t h, int64_t w, const std::string& name) {
  if (h <= 0 || w <= 0) fail_file(name, "the image is empty");
  if (h * w > kMaxPixels)
    fail_file(name, "the image is " + std::to_string(w) + "x" + std::to_string(h) + ", more than 2^28 pixels");
}

// ---- JPEG: libjpeg reports errors through a callback that must not return, so it jumps back
// to the decoding function, whose frame holds nothing with a destructor between the setjmp and
// the jump.

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  cinfo->err->format_message(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Level -1 is a warning about corrupt data (libjpeg would go on with gray pixels).
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);
}

struct JpegResult {
  bool ok = false;
  int64_t height = 0, width = 0, channels = 0;
};

// Decodes into `pixels` (sized here) unless header_only; on failure errors.message says why.
JpegResult decode_jpeg(std::span<const uint8_t> bytes, bool header_only, std::vector<uint8_t>& pixels,
                       JpegErrors& errors) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_fail;
  errors.mgr.emit_message = jpeg_message;
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return {};
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  JpegResult r{true, cinfo.image_height, cinfo.image_width, cinfo.num_components == 1 ? 1 : 3};
  if (header_only || r.height * r.width > kMaxPixels) {
    jpeg_destroy_decompress(&cinfo);
    return r;
  }
  cinfo.out_color_space = r.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  pixels.resize(size_t(r.height * r.width * r.channels));
  jpeg_start_decompress(&cinfo);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels.data() + size_t(cinfo.output_scanline) * size_t(r.width * r.channels);
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return r;
}

// ---- PNG, through libpng's low-level reader. Samples come back as the file stores them: no
// gamma, sRGB or ICC handling (as TF's decode_png), 16-bit samples keep their high byte, and
// palettes, gray below 8 bits and tRNS transparency expand to 8-bit gray, gray + alpha, RGB or
// RGBA. libpng reports errors through a callback that must not return: it jumps back to
// png_start or png_finish, C-style functions with no locals that have destructors. The reader
// itself lives in the caller's frame, which no jump crosses.

struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::span<const uint8_t> bytes;
  size_t at = 0;
  char message[256] = "out of memory";

  explicit PngReader(std::span<const uint8_t> b) : bytes(b) {}
  ~PngReader() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;
};

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof r->message, "%s", message);
  png_longjmp(png, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

void png_read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->bytes.size() - r->at) png_error(png, "the file ends early");
  std::memcpy(out, r->bytes.data() + r->at, n);
  r->at += n;
}

// Reads the chunks before the pixels and sets up the 8-bit expansion; false (r.message saying
// why) when they do not read.
bool png_start(PngReader& r) {
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, png_fail, png_ignore_warning);
  if (!r.png) return false;
  if (setjmp(png_jmpbuf(r.png))) return false;
  r.info = png_create_info_struct(r.png);
  if (!r.info) png_error(r.png, "out of memory");
  png_set_read_fn(r.png, &r, png_read_bytes);
  png_read_info(r.png, r.info);
  png_set_expand(r.png);    // palette to RGB, gray 1/2/4 bits to 8, tRNS to an alpha channel
  png_set_strip_16(r.png);  // the high byte of 16-bit samples
  png_set_interlace_handling(r.png);
  png_read_update_info(r.png, r.info);
  return true;
}

// Reads the pixels into `rows` (one pointer a row) and the chunks after them.
bool png_finish(PngReader& r, png_bytepp rows) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  png_read_image(r.png, rows);
  png_read_end(r.png, nullptr);
  return true;
}

// The reader after png_start, or an error naming the file.
void start_png(PngReader& r, const std::string& name) {
  if (!png_start(r)) fail_file(name, std::string("not a valid PNG file (") + r.message + ")");
  check_size(png_get_image_height(r.png, r.info), png_get_image_width(r.png, r.info), name);
}

// ---- channels

uint8_t luma(const uint8_t* p) { return uint8_t(std::lround(0.2989 * p[0] + 0.587 * p[1] + 0.114 * p[2])); }

// One pixel of `from` channels (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) as `to` channels.
void convert_pixel(const uint8_t* p, int from, uint8_t* q, int to) {
  const bool colour = from >= 3, alpha = from == 2 || from == 4;
  const uint8_t a = alpha ? p[from - 1] : 255;
  if (to == 1) {
    q[0] = colour ? luma(p) : p[0];
    return;
  }
  for (int c = 0; c < 3; ++c) q[c] = colour ? p[c] : p[0];
  if (to == 4) q[3] = a;
}

Image with_channels(int64_t h, int64_t w, int from, std::vector<uint8_t> pixels, int to) {
  Image out{h, w, to, {}};
  if (from == to) {
    out.pixels = std::move(pixels);
    return out;
  }
  out.pixels.resize(size_t(h * w * to));
  for (int64_t i = 0; i < h * w; ++i) convert_pixel(&pixels[size_t(i * from)], from, &out.pixels[size_t(i * to)], to);
  return out;
}

void check_channels(int channels) {
  if (channels != 1 && channels != 3 && channels != 4)
    throw Error("images have 1, 3 or 4 channels, not " + std::to_string(channels));
}

Image decode_png(std::span<const uint8_t> bytes, int channels, const std::string& name) {
  PngReader r(bytes);
  start_png(r, name);
  const int64_t h = png_get_image_height(r.png, r.info), w = png_get_image_width(r.png, r.info);
  const int from = png_get_channels(r.png, r.info);
  if (png_get_bit_depth(r.png, r.info) != 8 || from < 1 || from > 4 ||
      png_get_rowbytes(r.png, r.info) != size_t(w * from))
    fail_file(name, "the PNG data does not decode (an unsupported sample layout)");
  std::vector<uint8_t> pixels(size_t(h * w * from));
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  for (int64_t y = 0; y < h; ++y) rows[size_t(y)] = pixels.data() + size_t(y * w * from);
  if (!png_finish(r, rows.data())) fail_file(name, std::string("the PNG data does not decode (") + r.message + ")");
  return with_channels(h, w, from, std::move(pixels), channels);
}

Image decode_jpeg_file(std::span<const uint8_t> bytes, int channels, const std::string& name) {
  std::vector<uint8_t> pixels;
  auto errors = std::make_unique<JpegErrors>();
  const JpegResult r = decode_jpeg(bytes, false, pixels, *errors);
  if (!r.ok) fail_file(name, std::string("the JPEG data does not decode (") + errors->message + ")");
  check_size(r.height, r.width, name);
  return with_channels(r.height, r.width, int(r.channels), std::move(pixels), channels);
}

[[noreturn]] void not_an_image(const std::string& name) {
  fail_file(name, "not a JPEG or PNG image (its first bytes are neither format's signature)");
}

}  // namespace

ImageHeader read_image_header(std::span<const uint8_t> bytes, const std::string& name) {
  if (is_png(bytes)) {
    PngReader r(bytes);
    start_png(r, name);
    return {"png", png_get_image_height(r.png, r.info), png_get_image_width(r.png, r.info)};
  }
  if (!is_jpeg(bytes)) not_an_image(name);
  std::vector<uint8_t> none;
  auto errors = std::make_unique<JpegErrors>();
  const JpegResult r = decode_jpeg(bytes, true, none, *errors);
  if (!r.ok) fail_file(name, std::string("not a valid JPEG file (") + errors->message + ")");
  check_size(r.height, r.width, name);
  return {"jpeg", r.height, r.width};
}

Image decode_image(std::span<const uint8_t> bytes, int channels, const std::string& name) {
  check_channels(channels);
  if (is_png(bytes)) return decode_png(bytes, channels, name);
  if (is_jpeg(bytes)) return decode_jpeg_file(bytes, channels, name);
  not_an_image(name);
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::unique_ptr<ByteSource> source = open_file_source(path, "an image");
  std::vector<uint8_t> bytes;
  std::byte chunk[65536];
  while (size_t n = source->read(chunk)) {
    const auto* p = reinterpret_cast<const uint8_t*>(chunk);
    bytes.insert(bytes.end(), p, p + n);
    if (n < sizeof chunk) break;
  }
  return bytes;
}

Image read_image(const std::string& path, int channels) { return decode_image(read_file_bytes(path), channels, path); }

// ---- encoding

namespace {

void check_encodable(const Image& image, const char* format) {
  if (image.channels != 1 && image.channels != 3 && image.channels != 4)
    throw Error(std::string(format) + ": images have 1, 3 or 4 channels, not " + std::to_string(image.channels));
  if (image.height <= 0 || image.width <= 0 || image.height > 65500 || image.width > 65500)
    throw Error(std::string(format) + ": cannot encode a " + std::to_string(image.height) + "x" +
                std::to_string(image.width) + " image (each side 1 to 65500 pixels)");
  if (image.pixels.size() != size_t(image.height * image.width * image.channels))
    throw Error(std::string(format) + ": the pixel buffer does not match the image size");
}

struct JpegOutput {
  unsigned char* data = nullptr;
  unsigned long size = 0;
  ~JpegOutput() { std::free(data); }  // libjpeg allocates the buffer with malloc
};

bool encode_jpeg_into(const Image& image, int quality, JpegOutput& output, JpegErrors& errors) {
  jpeg_compress_struct cinfo;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_fail;
  if (setjmp(errors.jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &output.data, &output.size);
  cinfo.image_width = JDIMENSION(image.width);
  cinfo.image_height = JDIMENSION(image.height);
  cinfo.input_components = int(image.channels);
  cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : image.channels == 3 ? JCS_RGB : JCS_EXT_RGBA;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    const size_t offset = size_t(cinfo.next_scanline) * size_t(image.width * image.channels);
    auto* row = const_cast<JSAMPROW>(image.pixels.data() + offset);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

// PNG files are written through libpng's simplified API (no jumps).
struct PngImage {
  png_image image{};
  PngImage() { image.version = PNG_IMAGE_VERSION; }
  ~PngImage() { png_image_free(&image); }
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;
};

}  // namespace

std::string encode_png(const Image& image) {
  check_encodable(image, "write_png");
  PngImage png;
  png.image.width = png_uint_32(image.width);
  png.image.height = png_uint_32(image.height);
  png.image.format = image.channels == 1 ? PNG_FORMAT_GRAY : image.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png.image, nullptr, &size, 0, image.pixels.data(), 0, nullptr))
    throw Error(std::string("write_png: ") + png.image.message);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&png.image, out.data(), &size, 0, image.pixels.data(), 0, nullptr))
    throw Error(std::string("write_png: ") + png.image.message);
  out.resize(size);
  return out;
}

std::string encode_jpeg(const Image& image, int quality) {
  check_encodable(image, "write_jpeg");
  if (quality < 1 || quality > 100) throw Error("write_jpeg: quality must be 1 to 100, got " + std::to_string(quality));
  JpegOutput output;
  auto errors = std::make_unique<JpegErrors>();
  if (!encode_jpeg_into(image, quality, output, *errors)) throw Error(std::string("write_jpeg: ") + errors->message);
  return std::string(reinterpret_cast<const char*>(output.data), output.size);
}

// ---- resize

ResizeTaps resize_taps(int64_t in, int64_t out, bool antialias) {
  if (in < 1 || out < 1)
    throw Error("resize: sizes must be positive, got " + std::to_string(in) + " -> " + std::to_string(out));
  const double inv_scale = double(in) / double(out);
  const double kernel_scale = antialias ? std::max(inv_scale, 1.0) : 1.0;
  ResizeTaps taps{in, out, std::min<int64_t>(in, int64_t(std::ceil(2 * kernel_scale)) + 1), {}, {}};
  taps.start.resize(size_t(out));
  taps.weights.assign(size_t(out * taps.width), 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    const double centre = (double(o) + 0.5) * inv_scale;  // in input pixels; input j sits at j + 0.5
    const int64_t first = std::clamp<int64_t>(int64_t(std::ceil(centre - kernel_scale - 0.5)), 0, in - taps.width);
    std::span<float> w(&taps.weights[size_t(o * taps.width)], size_t(taps.width));
    double total = 0;
    for (int64_t k = 0; k < taps.width; ++k) {
      const double d = std::abs(double(first + k) + 0.5 - centre) / kernel_scale;
      w[size_t(k)] = float(std::max(0.0, 1.0 - d));
      total += w[size_t(k)];
    }
    taps.start[size_t(o)] = first;
    if (total == 0) {  // between two inputs exactly at the kernel's edge: take the nearest
      w[size_t(std::clamp<int64_t>(int64_t(centre) - first, 0, taps.width - 1))] = 1;
      continue;
    }
    for (float& x : w) x = float(x / total);
  }
  return taps;
}

std::vector<float> resize_matrix(const ResizeTaps& taps) {
  std::vector<float> m(size_t(taps.out * taps.in), 0.0f);
  for (int64_t o = 0; o < taps.out; ++o)
    for (int64_t k = 0; k < taps.width; ++k)
      m[size_t(o * taps.in + taps.start[size_t(o)] + k)] += taps.weights[size_t(o * taps.width + k)];
  return m;
}

void resize_image(const Image& image, const ResizeTaps& rows, const ResizeTaps& cols, std::span<float> out) {
  const int64_t c = image.channels, w = image.width;
  if (rows.in != image.height || cols.in != w || out.size() != size_t(rows.out * cols.out * c))
    throw Error("resize_image: the taps do not match the image");
  // Columns first (each input row once), then rows: every output reads `width` rows of `tmp`.
  std::vector<float> tmp(size_t(image.height * cols.out * c));
  for (int64_t y = 0; y < image.height; ++y) {
    const uint8_t* src = &image.pixels[size_t(y * w * c)];
    for (int64_t x = 0; x < cols.out; ++x) {
      float* dst = &tmp[size_t((y * cols.out + x) * c)];
      for (int64_t k = 0; k < cols.width; ++k) {
        const float wt = cols.weights[size_t(x * cols.width + k)];
        const uint8_t* p = src + (cols.start[size_t(x)] + k) * c;
        for (int64_t ch = 0; ch < c; ++ch) dst[ch] += wt * float(p[ch]);
      }
    }
  }
  const size_t row = size_t(cols.out * c);
  std::fill(out.begin(), out.end(), 0.0f);
  for (int64_t y = 0; y < rows.out; ++y) {
    float* dst = &out[size_t(y) * row];
    for (int64_t k = 0; k < rows.width; ++k) {
      const float wt = rows.weights[size_t(y * rows.width + k)];
      const float* src = &tmp[size_t(rows.start[size_t(y)] + k) * row];
      for (size_t i = 0; i < row; ++i) dst[i] += wt * src[i];
    }
  }
}

}  // namespace tpu
