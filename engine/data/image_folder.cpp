#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "data/byte_source.h"
#include "data/image.h"

namespace tpu {

namespace fs = std::filesystem;

namespace {

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

void check_directory(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found) fail_file(dir, "directory not found");
  if (ec) fail_file(dir, "cannot access: " + ec.message());
  if (!fs::is_directory(st)) fail_file(dir, "not a directory");
}

// The image files below `dir`, ordered by their directory's path, then by name.
std::vector<std::string> image_files_below(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> found;  // directory, name
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && is_image_name(it->path()))
      found.emplace_back(it->path().parent_path().string(), it->path().filename().string());
  }
  if (ec) fail_file(dir.string(), "cannot list the directory: " + ec.message());
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (const auto& [d, name] : found) paths.push_back((fs::path(d) / name).string());
  return paths;
}

std::vector<std::string> subdirectories(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) names.push_back(it->path().filename().string());
  }
  if (ec) fail_file(dir, "cannot list the directory: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// The pixels of one image as floats, resized unless it already has the batch's size.
void read_resized(const ImageBatchSpec& spec, const std::string& path, std::span<float> out) {
  const Image image = read_image(path, spec.channels);
  if (image.height == spec.height && image.width == spec.width) {
    std::transform(image.pixels.begin(), image.pixels.end(), out.begin(), [](uint8_t v) { return float(v); });
    return;
  }
  resize_image(image, resize_taps(image.height, spec.height, spec.antialias),
               resize_taps(image.width, spec.width, spec.antialias), out);
}

Tensor labels_of(const ImageBatchSpec& spec, std::span<const int64_t> indices) {
  const int64_t n = int64_t(indices.size());
  if (spec.label_mode == LabelMode::integer) {
    Tensor t(DType::i32, {n});
    for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = spec.labels[size_t(indices[size_t(i)])];
    return t;
  }
  const bool one_hot = spec.label_mode == LabelMode::categorical;
  Tensor t(DType::f32, {n, one_hot ? spec.num_classes : 1});
  float* y = t.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = spec.labels[size_t(indices[size_t(i)])];
    if (one_hot) y[i * spec.num_classes + label] = 1.0f;
    else y[i] = float(label);
  }
  return t;
}

}  // namespace

ImageFolderListing list_image_folder(const std::string& dir, bool by_class) {
  check_directory(dir);
  ImageFolderListing listing;
  if (!by_class) {
    listing.paths = image_files_below(dir);
    return listing;
  }
  listing.class_names = subdirectories(dir);
  for (size_t c = 0; c < listing.class_names.size(); ++c) {
    for (std::string& p : image_files_below(fs::path(dir) / listing.class_names[c])) {
      listing.paths.push_back(std::move(p));
      listing.labels.push_back(int32_t(c));
    }
  }
  return listing;
}

std::vector<Tensor> read_image_batch(const ImageBatchSpec& spec, std::span<const int64_t> indices) {
  const int64_t n = int64_t(indices.size()), per_image = spec.height * spec.width * spec.channels;
  for (int64_t i : indices)
    if (i < 0 || i >= int64_t(spec.paths.size()))
      throw Error("read_image_batch: index " + std::to_string(i) + " is outside 0.." +
                  std::to_string(spec.paths.size() - 1));
  Tensor images(DType::f32, {n, spec.height, spec.width, spec.channels}, Tensor::Uninitialized{});
  for (int64_t i = 0; i < n; ++i)
    read_resized(spec, spec.paths[size_t(indices[size_t(i)])],
                 images.span<float>().subspan(size_t(i * per_image), size_t(per_image)));
  std::vector<Tensor> batch{std::move(images)};
  if (spec.label_mode != LabelMode::none) batch.push_back(labels_of(spec, indices));
  return batch;
}

}  // namespace tpu
