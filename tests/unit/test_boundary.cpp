// Every C function the Lua binding hands to Lua runs behind the boundary (lua_internal.h), so
// an error inside one is a Lua error at the user's line, never an exception escaping through
// Lua's C frames (which aborts the process).
#include <doctest.h>

#include <set>
#include <string>
#include <vector>

#include "lua_internal.h"

namespace tpu {
int luaopen_tpu_core(lua_State* L);
}

namespace {

// Names of the C functions reachable from the table at `index` that are not behind the boundary.
void unguarded(lua_State* L, int index, const std::string& path, std::set<const void*>& seen,
               std::vector<std::string>& out) {
  index = lua_absindex(L, index);
  if (!seen.insert(lua_topointer(L, index)).second) return;
  lua_pushnil(L);
  while (lua_next(L, index)) {
    const std::string name = path + "." + (lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?");
    if (lua_iscfunction(L, -1) && !tpu::boundary_functions().contains(lua_tocfunction(L, -1))) out.push_back(name);
    if (lua_istable(L, -1)) unguarded(L, -1, name, seen, out);
    lua_pop(L, 1);
  }
}

}  // namespace

TEST_CASE("boundary: every function of tpu.core, its methods and metamethods is guarded") {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "tpu.core", tpu::luaopen_tpu_core, 0);
  std::set<const void*> seen;
  std::vector<std::string> out;
  unguarded(L, -1, "core", seen, out);
  lua_pushnil(L);  // the metatables: tpu.Tensor, tpu.Executable, tpu.BatchPrefetcher, ...
  while (lua_next(L, LUA_REGISTRYINDEX)) {
    if (lua_type(L, -2) == LUA_TSTRING && std::string(lua_tostring(L, -2)).starts_with("tpu.") && lua_istable(L, -1))
      unguarded(L, -1, lua_tostring(L, -2), seen, out);
    lua_pop(L, 1);
  }
  std::string names;
  for (const std::string& n : out) names += n + " ";
  CHECK_MESSAGE(out.empty(), "not behind the boundary: " << names);
  CHECK(seen.size() >= 5);  // core, methods, and the metatables were walked
  lua_close(L);
}
