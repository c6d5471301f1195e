// Images: JPEG (libjpeg-turbo) and PNG (libpng) decoded to 8-bit pixels and encoded back, and
// the resize that image_folder and tpu.image.resize share.
//
//   tpu::Image im = tpu::read_image("cats/001.jpg", 3);        // height x width x 3, row-major
//   tpu::ResizeTaps rows = tpu::resize_taps(im.height, 224, true);
//   std::string png = tpu::encode_png(im);
//
// Channels: 1 (grayscale), 3 (RGB) or 4 (RGBA), whatever the file holds: gray is repeated into
// RGB, alpha is dropped (or 255 when added), and colour becomes gray with the luma weights
// 0.2989 R + 0.587 G + 0.114 B. A file that does not decode exactly (truncated, corrupt, not an
// image) throws tpu::Error "<name>: <what>": libjpeg's warnings about corrupt data, which it
// would otherwise paper over with gray, are errors too.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tpu {

struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels, row-major (HWC)
};

// The file's format ("jpeg" or "png") and size, read from its header only.
struct ImageHeader {
  const char* format = "";
  int64_t height = 0, width = 0;
};

ImageHeader read_image_header(std::span<const uint8_t> bytes, const std::string& name);
Image decode_image(std::span<const uint8_t> bytes, int channels, const std::string& name);

// The whole file (an Error naming it when it is missing, a directory or unreadable).
std::vector<uint8_t> read_file_bytes(const std::string& path);
Image read_image(const std::string& path, int channels);

// The encoded file; quality 1..100 for JPEG. An image of 2 channels or an empty one is an Error.
std::string encode_png(const Image& image);
std::string encode_jpeg(const Image& image, int quality);

// The linear map that resizes one axis from `in` to `out` samples: output o reads
// weights[o * width + k] times input start[o] + k. Bilinear with half-pixel centres (output o
// sits at (o + 0.5) * in / out); with antialias, when shrinking, the triangle widens by in / out
// so each output averages every input it covers. Each output's weights sum to 1.
struct ResizeTaps {
  int64_t in = 0, out = 0, width = 0;
  std::vector<int64_t> start;
  std::vector<float> weights;
};

ResizeTaps resize_taps(int64_t in, int64_t out, bool antialias);

// The dense [out, in] matrix of the taps (for the traced resize: two matrix products).
std::vector<float> resize_matrix(const ResizeTaps& taps);

// Resizes an 8-bit image to `rows.out` x `cols.out` float pixels (same channels) into `out`.
void resize_image(const Image& image, const ResizeTaps& rows, const ResizeTaps& cols, std::span<float> out);

}  // namespace tpu
