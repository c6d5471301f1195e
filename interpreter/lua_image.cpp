// The image functions of tpu.core (the C side of tpu.data.image_folder and tpu.image):
//
// core.list_image_folder(dir, by_class) -> class names, paths, labels (0-based; empty lists when
//   not by_class)
// core.image_batch_reader(paths, labels|nil, height, width, channels, antialias, label_mode,
//   num_classes) -> a reader: r:read(indices) -> {images f32[n,h,w,c], labels}; the batch
//   prefetcher takes one in place of tensors and decodes on its thread
// core.image_problem(path, decode) -> nil, or why the file is not an image ("<path>: <what>");
//   decode = false reads the header only
// core.read_image(path, channels) -> u8[h, w, channels]
// core.write_image(path, u8[h, w, c], "png"|"jpeg", quality): encoded, written atomically
// core.resize_matrix(in, out, antialias) -> f32[out, in], the linear map of one resized axis
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "core/error.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "io/atomic_file.h"
#include "lua_data.h"
#include "lua_internal.h"
#include "lua_tensor.h"

namespace tpu {

namespace {

constexpr const char* kReaderMeta = "tpu.ImageBatchReader";

struct LuaImageReader {
  std::shared_ptr<const ImageBatchSpec> spec;
};

std::vector<std::string> string_list(lua_State* L, int arg) {
  std::vector<std::string> out;
  for (lua_Integer i = 1; lua_geti(L, arg, i) != LUA_TNIL; ++i) {
    if (lua_type(L, -1) != LUA_TSTRING) throw ArgError(arg, "a list of file names");
    out.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return out;
}

std::vector<int32_t> label_list(lua_State* L, int arg, size_t n) {
  std::vector<int32_t> out;
  if (lua_isnil(L, arg)) return out;
  for (lua_Integer i = 1; lua_geti(L, arg, i) != LUA_TNIL; ++i) {
    if (!lua_isinteger(L, -1)) throw ArgError(arg, "a list of integer labels");
    out.push_back(int32_t(lua_tointeger(L, -1)));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (out.size() != n) throw ArgError(arg, "one label per file");
  return out;
}

void push_labels(lua_State* L, const std::vector<int32_t>& labels) {
  lua_createtable(L, int(labels.size()), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    lua_pushinteger(L, labels[i]);
    lua_seti(L, -2, lua_Integer(i + 1));
  }
}

int l_list_image_folder(lua_State* L) {
  const char* dir = luaL_checkstring(L, 1);
  const bool by_class = lua_toboolean(L, 2);
  const ImageFolderListing listing = list_image_folder(dir, by_class);
  push_strings(L, listing.class_names);
  push_strings(L, listing.paths);
  push_labels(L, listing.labels);
  return 3;
}

LabelMode label_mode_named(const std::string& name) {
  if (name == "int") return LabelMode::integer;
  if (name == "categorical") return LabelMode::categorical;
  if (name == "binary") return LabelMode::binary;
  if (name == "none") return LabelMode::none;
  throw Error("image_batch_reader: unknown label mode " + name);
}

int l_image_batch_reader(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const lua_Integer h = luaL_checkinteger(L, 3), w = luaL_checkinteger(L, 4), c = luaL_checkinteger(L, 5);
  const bool antialias = lua_toboolean(L, 6);
  const char* mode = luaL_checkstring(L, 7);
  const lua_Integer classes = luaL_optinteger(L, 8, 0);
  auto* r = static_cast<LuaImageReader*>(lua_newuserdatauv(L, sizeof(LuaImageReader), 0));
  new (r) LuaImageReader{};
  luaL_setmetatable(L, kReaderMeta);
  if (h < 1 || w < 1 || (c != 1 && c != 3 && c != 4)) throw Error("image_batch_reader: bad image size or channels");
  auto spec = std::make_shared<ImageBatchSpec>();
  spec->paths = string_list(L, 1);
  spec->label_mode = label_mode_named(mode);
  spec->labels = label_list(L, 2, spec->label_mode == LabelMode::none ? 0 : spec->paths.size());
  for (int32_t label : spec->labels)
    if (label < 0 || (spec->label_mode != LabelMode::integer && label >= classes))
      throw Error("image_batch_reader: label " + std::to_string(label) + " is outside the classes");
  spec->height = h, spec->width = w, spec->channels = int(c), spec->antialias = antialias;
  spec->num_classes = classes;
  r->spec = std::move(spec);
  return 1;
}

// r:read(indices) -> the batch, decoded on the caller's thread
int l_reader_read(lua_State* L) {
  auto* r = static_cast<LuaImageReader*>(luaL_checkudata(L, 1, kReaderMeta));
  const std::vector<int64_t> indices = row_indices(L, 2, "read");
  std::vector<Tensor> batch;
  {
    HostAllocationScope host;  // a data set's batches live on the host
    batch = read_image_batch(*r->spec, indices);
  }
  push_tensors(L, std::move(batch));
  return 1;
}

int l_reader_gc(lua_State* L) {
  static_cast<LuaImageReader*>(luaL_checkudata(L, 1, kReaderMeta))->~LuaImageReader();
  return 0;
}

int l_image_problem(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  const bool decode = lua_toboolean(L, 2);
  try {
    const std::vector<uint8_t> bytes = read_file_bytes(path);
    if (decode) decode_image(bytes, 3, path);
    else read_image_header(bytes, path);
  } catch (const Error& e) {
    lua_pushstring(L, e.what());
    return 1;
  }
  lua_pushnil(L);
  return 1;
}

int l_read_image(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  const lua_Integer channels = luaL_checkinteger(L, 2);
  Image image = read_image(path, int(channels));
  Tensor t(DType::u8, {image.height, image.width, image.channels}, Tensor::Uninitialized{});
  std::memcpy(t.data<uint8_t>(), image.pixels.data(), image.pixels.size());
  push_tensor(L, std::move(t));
  return 1;
}

int l_write_image(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  LuaTensor* t = test_tensor(L, 2);
  const char* format = luaL_checkstring(L, 3);
  const lua_Integer quality = luaL_optinteger(L, 4, 95);
  if (std::strcmp(format, "png") != 0 && std::strcmp(format, "jpeg") != 0) throw ArgError(3, "\"png\" or \"jpeg\"");
  if (!t || t->traced() || t->value().dtype() != DType::u8 || t->value().rank() != 3)
    throw ArgError(2, "a concrete u8 tensor [height, width, channels]");
  const Shape& s = t->value().shape();
  Image image{s[0], s[1], s[2], {}};
  const auto pixels = t->value().span<uint8_t>();
  image.pixels.assign(pixels.begin(), pixels.end());
  const std::string bytes = std::strcmp(format, "png") == 0 ? encode_png(image) : encode_jpeg(image, int(quality));
  write_file_atomic(path, bytes);
  return 0;
}

int l_resize_matrix(lua_State* L) {
  const lua_Integer in = luaL_checkinteger(L, 1), out = luaL_checkinteger(L, 2);
  const bool antialias = lua_toboolean(L, 3);
  const std::vector<float> m = resize_matrix(resize_taps(in, out, antialias));
  Tensor t(DType::f32, {out, in}, Tensor::Uninitialized{});
  std::memcpy(t.data<float>(), m.data(), m.size() * sizeof(float));
  push_tensor(L, std::move(t));
  return 1;
}

const LuaFunction kImageFunctions[] = {
    fn<l_list_image_folder>("list_image_folder"), fn<l_image_batch_reader>("image_batch_reader"),
    fn<l_image_problem>("image_problem"),         fn<l_read_image>("read_image"),
    fn<l_write_image>("write_image"),             fn<l_resize_matrix>("resize_matrix")};

const LuaFunction kReaderMethods[] = {fn<l_reader_read>("read")};

}  // namespace

std::shared_ptr<const ImageBatchSpec> test_image_reader(lua_State* L, int arg) {
  auto* r = static_cast<LuaImageReader*>(luaL_testudata(L, arg, kReaderMeta));
  return r ? r->spec : nullptr;
}

void register_image_functions(lua_State* L, int core_table_index) {
  const int core = lua_absindex(L, core_table_index);
  luaL_newmetatable(L, kReaderMeta);
  push_function<l_reader_gc>(L);
  lua_setfield(L, -2, "__gc");
  lua_newtable(L);
  set_functions(L, -1, kReaderMethods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  set_functions(L, core, kImageFunctions);
}

}  // namespace tpu
