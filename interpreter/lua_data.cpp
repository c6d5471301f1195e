// The data functions of tpu.core: file readers, the padded stack, directory listing. Each runs
// behind the boundary: engine errors become Lua errors that start with the user's file:line.
#include "lua_data.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include "core/error.h"
#include "data/batching.h"
#include "data/csv.h"
#include "data/idx.h"
#include "data/npy.h"
#include "data/shuffle.h"
#include "lua_internal.h"

namespace tpu {

namespace {

// Allocation failures while reading name what failed.
template <class F>
int reading(F body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    throw Error("out of memory while reading data");
  }
}

// The data read and batched here is a data set's: it stays on the host, outside the HBM count.
// (The scope never spans a Lua call, which may leave by longjmp.)
template <class F>
Tensor on_host(F make) {
  HostAllocationScope host;
  return make();
}

// ---- readers ----

int l_read_idx(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  return reading([&] { push_tensor(L, on_host([&] { return read_idx(path); })); return 1; });
}

int l_read_npy(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  return reading([&] { push_tensor(L, on_host([&] { return read_npy(path); })); return 1; });
}

// Options are checked by the stdlib (tpu.data.csv); these readers only refuse what they cannot use.
std::string string_field(lua_State* L, int t, const char* key, const char* def) {
  lua_getfield(L, t, key);
  std::string v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : def;
  lua_pop(L, 1);
  return v;
}

CsvColumn column_at(lua_State* L, int index) {
  CsvColumn c;
  if (lua_type(L, index) == LUA_TSTRING) c.name = lua_tostring(L, index);
  else if (lua_isinteger(L, index)) c.position = lua_tointeger(L, index);
  else throw Error("read_csv: a column must be a name or a number");
  return c;
}

std::vector<CsvColumn> column_list(lua_State* L, int t, const char* key) {
  std::vector<CsvColumn> cols;
  lua_getfield(L, t, key);
  const bool list = lua_istable(L, -1);
  if (list) {
    for (lua_Integer i = 1; lua_geti(L, -1, i) != LUA_TNIL; ++i) {
      cols.push_back(column_at(L, -1));
      lua_pop(L, 1);
    }
  }
  lua_pop(L, list ? 2 : 1);
  return cols;
}

std::vector<std::string> string_list(lua_State* L, int t, const char* key) {
  std::vector<std::string> v;
  lua_getfield(L, t, key);
  const bool list = lua_istable(L, -1);
  if (list) {
    for (lua_Integer i = 1; lua_geti(L, -1, i) == LUA_TSTRING; ++i) {
      v.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  lua_pop(L, list ? 2 : 1);
  return v;
}

DType csv_dtype(const std::string& name) {
  std::optional<DType> t = parse_dtype(name);
  if (!t) throw Error("read_csv: unknown dtype \"" + name + "\"");
  return *t;
}

CsvOptions csv_options(lua_State* L, int t) {
  CsvOptions o;
  if (!lua_istable(L, t)) return o;
  std::string delim = string_field(L, t, "delimiter", ",");
  if (delim.size() != 1) throw Error("read_csv: the delimiter must be one character");
  o.delimiter = delim[0];
  lua_getfield(L, t, "header");
  o.header = lua_isnil(L, -1) || lua_toboolean(L, -1);
  lua_getfield(L, t, "label");
  if (!lua_isnil(L, -1)) o.label = column_at(L, -1);
  lua_pop(L, 2);
  o.features = column_list(L, t, "features");
  o.feature_dtype = csv_dtype(string_field(L, t, "feature_dtype", "f32"));
  o.label_dtype = csv_dtype(string_field(L, t, "label_dtype", "i32"));
  o.label_classes = string_list(L, t, "label_classes");
  return o;
}

// core.read_csv(path, opts) -> features, labels or nil, feature names
int l_read_csv(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  return reading([&] {
    const CsvOptions options = csv_options(L, 2);
    CsvData d = [&] { HostAllocationScope host; return read_csv(path, options); }();
    push_tensor(L, std::move(d.features));
    if (d.labels) push_tensor(L, std::move(*d.labels));
    else lua_pushnil(L);
    push_strings(L, d.feature_names);
    return 3;
  });
}

// ---- row indices ----

}  // namespace

void push_tensors(lua_State* L, std::vector<Tensor> tensors) {
  lua_createtable(L, int(tensors.size()), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    push_tensor(L, std::move(tensors[i]));
    lua_seti(L, -2, lua_Integer(i + 1));
  }
}

void push_strings(lua_State* L, const std::vector<std::string>& v) {
  lua_createtable(L, int(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushstring(L, v[i].c_str());
    lua_seti(L, -2, lua_Integer(i + 1));
  }
}


std::vector<int64_t> row_indices(lua_State* L, int arg, const char* what) {
  if (LuaTensor* t = test_tensor(L, arg)) {  // an i32 vector (core.buffer_shuffle's rows)
    if (t->traced() || t->dtype() != DType::i32 || t->shape().size() != 1)
      throw Error(std::string(what) + ": indices must be a list or a concrete i32 vector, got " +
                  type_str(t->dtype(), t->shape()));
    const int32_t* p = t->value().data<int32_t>();
    return std::vector<int64_t>(p, p + t->value().size());
  }
  luaL_checktype(L, arg, LUA_TTABLE);
  const lua_Integer n = luaL_len(L, arg);
  for (lua_Integer i = 1; i <= n; ++i) {  // checked first: a huge list of non-integers allocates nothing
    if (lua_geti(L, arg, i) != LUA_TNUMBER || !lua_isinteger(L, -1))
      throw Error(std::string(what) + ": index " + std::to_string(i) + " is not an integer");
    lua_pop(L, 1);
  }
  std::vector<int64_t> indices(static_cast<size_t>(n));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, arg, i);
    indices[size_t(i - 1)] = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  return indices;
}

namespace {

// ---- padded stack ----

std::vector<Tensor> tensor_list(lua_State* L, int t) {
  std::vector<Tensor> items;
  for (lua_Integer i = 1; lua_geti(L, t, i) != LUA_TNIL; ++i) {
    LuaTensor* x = test_tensor(L, -1);
    if (!x || x->traced()) throw Error("pad_stack: item " + std::to_string(i) + " is not a concrete tensor");
    items.push_back(x->value());
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return items;
}

Shape int_list(lua_State* L, int t) {
  Shape s;
  for (lua_Integer i = 1; lua_geti(L, t, i) != LUA_TNIL; ++i) {
    if (!lua_isinteger(L, -1)) throw Error("pad_stack: the shape must be a list of integers");
    s.push_back(lua_tointeger(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return s;
}

// core.pad_stack(tensors, shape, value) -> tensor [#tensors, shape...]
int l_pad_stack(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  const double value = luaL_optnumber(L, 3, 0);
  return reading([&] {
    std::vector<Tensor> items = tensor_list(L, 1);
    const Shape shape = int_list(L, 2);
    push_tensor(L, on_host([&] { return pad_stack(items, shape, value); }));
    return 1;
  });
}

// core.gather_rows(tensor, indices) -> tensor [#indices, ...]: the rows at the 0-based
// indices, copied in one pass (a batch of an in-memory data set, without an op call).
int l_gather_rows(lua_State* L) {
  LuaTensor* t = test_tensor(L, 1);
  if (!t || t->traced()) throw ArgError(1, "a concrete tensor");
  return reading([&] {
    const std::vector<int64_t> indices = row_indices(L, 2, "gather_rows");
    push_tensor(L, on_host([&] { return gather_rows(t->value(), indices); }));
    return 1;
  });
}

// core.row_range(tensor, first, count) -> tensor [count, ...]: rows first .. first + count - 1
// (0-based), a view of the tensor's buffer (an unshuffled batch, without an index list).
int l_row_range(lua_State* L) {
  LuaTensor* t = test_tensor(L, 1);
  if (!t || t->traced() || t->value().rank() == 0) throw ArgError(1, "a concrete tensor with rows");
  const lua_Integer first = luaL_checkinteger(L, 2), count = luaL_checkinteger(L, 3);
  if (first < 0 || count < 0 || first + count > t->value().shape()[0])
    throw Error("row_range: rows " + std::to_string(first) + " to " + std::to_string(first + count - 1) +
                " are out of range for " + std::to_string(t->value().shape()[0]) + " rows");
  push_tensor(L, t->value().rows(first, count));
  return 1;
}

// ---- shuffling (data/shuffle.h) ----

int l_below(lua_State* L) {
  auto* s = static_cast<IndexStream*>(lua_touserdata(L, lua_upvalueindex(1)));
  const lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 1 || n >= (lua_Integer(1) << 53)) throw ArgError(1, "an integer in [1, 2^53)");
  lua_pushinteger(L, s->below(n));
  return 1;
}

// core.index_stream(seed, epoch) -> below(n): the data pipeline's random stream of (seed, epoch)
int l_index_stream(lua_State* L) {
  const lua_Integer seed = luaL_checkinteger(L, 1), epoch = luaL_checkinteger(L, 2);
  new (lua_newuserdatauv(L, sizeof(IndexStream), 0)) IndexStream(seed, epoch);  // trivially destructible
  boundary_functions().insert(boundary<l_below>);
  lua_pushcclosure(L, boundary<l_below>, 1);
  return 1;
}

// core.buffer_shuffle(first, count, buffer, seed, epoch) -> i32[count]: the order in which
// shuffle(buffer) with that stream passes on rows first .. first + count - 1
int l_buffer_shuffle(lua_State* L) {
  const lua_Integer first = luaL_checkinteger(L, 1), count = luaL_checkinteger(L, 2),
                    buffer = luaL_checkinteger(L, 3), seed = luaL_checkinteger(L, 4), epoch = luaL_checkinteger(L, 5);
  if (first < 0 || count < 0 || first + count > INT32_MAX) throw Error("buffer_shuffle: rows out of the i32 range");
  IndexStream stream(seed, epoch);
  const std::vector<int64_t> order = buffer_shuffle(first, count, buffer, stream);
  push_tensor(L, on_host([&] {
    Tensor t(DType::i32, {count}, Tensor::Uninitialized{});
    std::copy(order.begin(), order.end(), t.data<int32_t>());
    return t;
  }));
  return 1;
}

// ---- files ----

// core.regular_files(dir) -> sorted names of the regular files in dir (not symbolic links,
// not directories)
int l_regular_files(lua_State* L) {
  const char* dir = luaL_checkstring(L, 1);
  return reading([&] {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && !e.is_symlink()) names.push_back(e.path().filename().string());
    if (ec) throw Error(std::string(dir) + ": cannot list the directory: " + ec.message());
    std::sort(names.begin(), names.end());
    push_strings(L, names);
    return 1;
  });
}

const LuaFunction data_functions[] = {
    fn<l_read_idx>("read_idx"),   fn<l_read_npy>("read_npy"),         fn<l_read_csv>("read_csv"),
    fn<l_pad_stack>("pad_stack"), fn<l_gather_rows>("gather_rows"), fn<l_row_range>("row_range"),
    fn<l_regular_files>("regular_files"), fn<l_index_stream>("index_stream"), fn<l_buffer_shuffle>("buffer_shuffle")};

}  // namespace

void register_data_functions(lua_State* L, int core_table_index) {
  lua_pushvalue(L, core_table_index);
  set_functions(L, -1, data_functions);
  register_prefetcher(L, -1);
  register_image_functions(L, -1);
  lua_pop(L, 1);
}

}  // namespace tpu
