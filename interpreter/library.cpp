// libtputrain.so's C API (tputrain.h): `luaopen_tpu` for hosts and for stock lua5.4, which
// loads this same library as lib/lua/5.4/tpu.so.
#include "tputrain.h"

#include <lauxlib.h>

#include "interpreter.h"
#include "runtime/thread_pool.h"

namespace {

// options.threads from package.loaded["tpu.options"], as --threads sets it for the binary:
// 0 when absent. Leaves the stack as it was.
lua_Integer thread_option(lua_State* L) {
  const int top = lua_gettop(L);
  lua_Integer n = 0;
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "tpu.options") == LUA_TTABLE && lua_getfield(L, -1, "threads") != LUA_TNIL) {
    n = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
  }
  lua_settop(L, top);
  if (n < 0 || n > 4096) luaL_error(L, "tpu.options.threads: expected an integer from 0 to 4096");
  return n;
}

// Resizes the worker pool; false when the threads could not be started.
bool set_threads(lua_Integer n) {
  try {
    if (n > 0) tpu::set_num_threads(int(n));
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

// No C++ object is alive here: a Lua error raised by require longjmps through this frame.
extern "C" int luaopen_tpu(lua_State* L) {
  tpu::install_stdlib(L);
  if (!set_threads(thread_option(L))) luaL_error(L, "tpu: cannot start the worker threads");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tpu");
  lua_call(L, 1, 1);
  return 1;
}

extern "C" const char* tputrain_version(void) { return TPUTRAIN_VERSION; }

extern "C" void tputrain_catch_signals(lua_State* L) { tpu::install_interrupt_handler(L); }
