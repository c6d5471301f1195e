// tpu.core file functions: safetensors reading and writing, atomic text files (lua_io.h).
// Each runs behind the boundary: engine errors become Lua errors at the user's line.
#include "lua_io.h"

#include <bit>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "lua_internal.h"

namespace tpu {

namespace {

std::string key_text(lua_State* L, int index, const std::string& what) {
  if (lua_type(L, index) != LUA_TSTRING) throw Error(what + " names must be strings");
  size_t len = 0;
  const char* s = lua_tolstring(L, index, &len);
  return std::string(s, len);
}

// The concrete tensor at `index`, for a message naming `name` when it is not one.
const Tensor& saveable(lua_State* L, int index, const std::string& path, const std::string& name) {
  LuaTensor* t = test_tensor(L, index);
  std::string where = path + ": cannot save '" + name + "': ";
  if (!t) throw Error(where + "it is a " + luaL_typename(L, index) + ", not a tensor");
  if (t->donated_to) throw Error(where + "the tensor was donated to jit '" + *t->donated_to + "'");
  if (t->traced()) throw Error(where + "the tensor is traced (save outside tpu.jit)");
  return t->value();
}

TensorFile file_from_tables(lua_State* L, const std::string& path) {
  TensorFile f;
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {
    std::string name = key_text(L, -2, path + ": tensor");
    f.tensors.push_back({name, saveable(L, -1, path, name)});
    lua_pop(L, 1);
  }
  if (lua_istable(L, 3)) {
    lua_pushnil(L);
    while (lua_next(L, 3) != 0) {
      std::string key = key_text(L, -2, path + ": metadata");
      if (lua_type(L, -1) != LUA_TSTRING) throw Error(path + ": metadata value of '" + key + "' must be a string");
      f.metadata[key] = key_text(L, -1, path + ": metadata");
      lua_pop(L, 1);
    }
  }
  return f;
}

// core.save_safetensors(path, tensors[, metadata])
int l_save_safetensors(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  InterruptShield shield;
  write_safetensors(path, file_from_tables(L, path));
  return 0;
}

// core.load_safetensors(path) -> tensors, metadata, names (data order)
int l_load_safetensors(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  TensorFile f = read_safetensors(path);
  lua_createtable(L, 0, int(f.tensors.size()));
  lua_createtable(L, 0, int(f.metadata.size()));
  lua_createtable(L, int(f.tensors.size()), 0);
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const std::string& name = f.tensors[i].name;
    lua_pushlstring(L, name.data(), name.size());
    lua_rawseti(L, -2, lua_Integer(i + 1));
    lua_pushlstring(L, name.data(), name.size());
    push_tensor(L, std::move(f.tensors[i].tensor));
    lua_rawset(L, -5);
  }
  for (const auto& [key, value] : f.metadata) {
    lua_pushlstring(L, key.data(), key.size());
    lua_pushlstring(L, value.data(), value.size());
    lua_rawset(L, -4);
  }
  return 3;
}

// core.write_file_atomic(path, text)
int l_write_file_atomic(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  size_t len = 0;
  const char* text = luaL_checklstring(L, 2, &len);
  InterruptShield shield;
  write_file_atomic(path, std::string_view(text, len));
  return 0;
}

// core.f32_bytes(tensor) -> the elements of a concrete f32 tensor as little-endian bytes (the
// weights model:export writes into an ONNX file)
int l_f32_bytes(lua_State* L) {
  static_assert(std::endian::native == std::endian::little, "f32_bytes copies the host's floats as they are");
  LuaTensor* t = test_tensor(L, 1);
  if (!t || t->traced() || t->value().dtype() != DType::f32) throw ArgError(1, "a concrete f32 tensor");
  const auto values = t->value().span<const float>();
  lua_pushlstring(L, reinterpret_cast<const char*>(values.data()), values.size_bytes());
  return 1;
}

const LuaFunction io_functions[] = {fn<l_save_safetensors>("save_safetensors"),
                                    fn<l_load_safetensors>("load_safetensors"),
                                    fn<l_write_file_atomic>("write_file_atomic"),
                                    fn<l_f32_bytes>("f32_bytes")};

}  // namespace

void register_io_functions(lua_State* L, int core_table_index) {
  lua_pushvalue(L, core_table_index);
  set_functions(L, -1, io_functions);
  lua_pop(L, 1);
}

}  // namespace tpu
