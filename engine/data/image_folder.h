// Image folders (tpu.data.image_folder): the listing of a directory of class subdirectories, and
// the batches of decoded, resized images read from the files it lists.
//
//   tpu::ImageFolderListing l = tpu::list_image_folder("flowers", true);  // classes: sorted subdirectories
//   tpu::ImageBatchSpec spec{l.paths, l.labels, 64, 64, 3, true, tpu::LabelMode::integer, 5};
//   std::vector<tpu::Tensor> b = tpu::read_image_batch(spec, {4, 0, 9});  // f32[3,64,64,3], i32[3]
//
// Files are those ending in .jpg, .jpeg or .png (any case) anywhere below; the order is that of
// their directories' paths, then their names (byte order), so it does not depend on the file
// system. Listing errors and decoding errors name the directory or file.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tpu {

struct ImageFolderListing {
  std::vector<std::string> class_names;  // sorted subdirectories (empty when not by_class)
  std::vector<std::string> paths;
  std::vector<int32_t> labels;  // index into class_names (empty when not by_class)
};

// by_class: one class per subdirectory of `dir` (files directly in `dir` are not listed);
// otherwise every image file below `dir`.
ImageFolderListing list_image_folder(const std::string& dir, bool by_class);

enum class LabelMode { none, integer, categorical, binary };

struct ImageBatchSpec {
  std::vector<std::string> paths;
  std::vector<int32_t> labels;  // one per path unless label_mode is none
  int64_t height = 0, width = 0;
  int channels = 3;
  bool antialias = true;
  LabelMode label_mode = LabelMode::integer;
  int64_t num_classes = 0;
};

// The images at `indices` (0-based into spec.paths) as f32[n, height, width, channels], pixel
// values 0..255, then the labels: i32[n] (integer), f32[n, num_classes] (categorical, one-hot)
// or f32[n, 1] (binary); nothing more for LabelMode::none.
std::vector<Tensor> read_image_batch(const ImageBatchSpec& spec, std::span<const int64_t> indices);

}  // namespace tpu
