// core.read_idx(path) -> tensor. Engine errors become Lua errors that start with the user's
// file:line; no C++ object is alive when lua_error unwinds.
#include "lua_data.h"

#include <lua.hpp>

#include <exception>
#include <new>
#include <string>

#include "core/error.h"
#include "data/idx.h"
#include "lua_tensor.h"

namespace tpu {

namespace {

// Pushes the tensor read from `path`, or the error message; returns whether it succeeded.
bool push_idx(lua_State* L, const char* path) {
  try {
    push_tensor(L, read_idx(path));
    return true;
  } catch (const Error& e) {
    lua_pushstring(L, (user_where(L) + e.what()).c_str());
  } catch (const std::bad_alloc&) {
    lua_pushstring(L, (user_where(L) + path + ": out of memory reading the IDX file").c_str());
  }
  return false;
}

int l_read_idx(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  if (!push_idx(L, path)) return lua_error(L);
  return 1;
}

const luaL_Reg data_functions[] = {
    {"read_idx", l_read_idx},
    {nullptr, nullptr},
};

}  // namespace

void register_data_functions(lua_State* L, int core_table_index) {
  lua_pushvalue(L, core_table_index);
  luaL_setfuncs(L, data_functions, 0);
  lua_pop(L, 1);
}

}  // namespace tpu
