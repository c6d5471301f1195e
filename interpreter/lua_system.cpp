// Host facilities the stdlib needs and plain Lua lacks: a monotonic clock, terminal
// detection, directory listing.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "lua_internal.h"

namespace tpu {

namespace {

int l_now(lua_State* L) {
  using namespace std::chrono;
  lua_pushnumber(L, duration<double>(steady_clock::now().time_since_epoch()).count());
  return 1;
}

int l_isatty(lua_State* L) {
  lua_pushboolean(L, isatty(STDOUT_FILENO) == 1);
  return 1;
}

// core.list_dir(path) -> sorted list of entry names (without "." and ".."), or nil, message.
int l_list_dir(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  DIR* d = opendir(path);
  if (!d) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, std::strerror(errno));
    return 2;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  lua_createtable(L, int(names.size()), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lua_pushstring(L, names[i].c_str());
    lua_seti(L, -2, lua_Integer(i + 1));
  }
  return 1;
}

// core.memory() -> bytes in use, peak bytes (of live tensor buffers); core.reset_peak()
int l_memory(lua_State* L) {
  TensorMemory m = tensor_memory();
  lua_pushinteger(L, m.in_use);
  lua_pushinteger(L, m.peak);
  return 2;
}
int l_reset_peak(lua_State*) {
  reset_peak_tensor_memory();
  return 0;
}

const luaL_Reg kFunctions[] = {{"now", l_now},       {"isatty", l_isatty},         {"list_dir", l_list_dir},
                               {"memory", l_memory}, {"reset_peak", l_reset_peak}, {nullptr, nullptr}};

}  // namespace

void register_system_functions(lua_State* L, int core) {
  lua_pushvalue(L, core);
  luaL_setfuncs(L, kFunctions, 0);
  lua_pop(L, 1);
}

}  // namespace tpu
