// libtputrain.so's C API (tputrain.h): `luaopen_tpu` for hosts and for stock lua5.4, which
// loads this same library as lib/lua/5.4/tpu.so.
#include "tputrain.h"

#include <lauxlib.h>

#include <string_view>

#include "interpreter.h"
#include "runtime/thread_pool.h"

namespace {

// The values the command line can give each option (--cores, --threads: up to 4096 here;
// 0 = absent, as the binary passes them).
bool integer_in(lua_State* L, lua_Integer lo, lua_Integer hi) {
  return lua_isinteger(L, -1) && lua_tointeger(L, -1) >= lo && lua_tointeger(L, -1) <= hi;
}
bool core_count(lua_State* L) { return integer_in(L, 0, 4096); }
bool non_negative(lua_State* L) { return integer_in(L, 0, LUA_MAXINTEGER); }
bool boolean(lua_State* L) { return lua_type(L, -1) == LUA_TBOOLEAN; }
bool text(lua_State* L) { return lua_type(L, -1) == LUA_TSTRING; }
bool tpu_version(lua_State* L) {
  if (!text(L)) return false;
  const std::string_view v = lua_tostring(L, -1);
  return v == "v2" || v == "v3" || v == "v4";
}

struct OptionRule {
  const char* name;
  bool (*valid)(lua_State*);
  const char* expected;
};

constexpr OptionRule kOptionRules[] = {
    {"cores", core_count, "an integer from 0 to 4096"},  {"threads", core_count, "an integer from 0 to 4096"},
    {"seed", non_negative, "a non-negative integer"},    {"tpu", tpu_version, "\"v2\", \"v3\" or \"v4\""},
    {"bf16", boolean, "a boolean"},                      {"profile", boolean, "a boolean"},
    {"optimize", boolean, "a boolean"},                  {"quiet", boolean, "a boolean"},
    {"dump_graphs", text, "a directory path (a string)"},
};

// Checks package.loaded["tpu.options"] as the command line checks its options: a wrong value
// fails here, naming the option, rather than later inside the stdlib (a comparison of a string
// with a number) or silently (a seed that is not a number read as 0). Returns options.threads,
// 0 when absent; leaves the stack as it was.
lua_Integer checked_options(lua_State* L) {
  const int top = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  const int type = lua_getfield(L, -1, "tpu.options");
  if (type != LUA_TNIL && type != LUA_TTABLE) luaL_error(L, "tpu.options: expected a table, got a %s", lua_typename(L, type));
  lua_Integer threads = 0;
  for (const OptionRule& rule : kOptionRules) {
    if (type != LUA_TTABLE) break;
    const bool set = lua_getfield(L, -1, rule.name) != LUA_TNIL;
    if (set && !rule.valid(L)) luaL_error(L, "tpu.options.%s: expected %s", rule.name, rule.expected);
    if (set && std::string_view(rule.name) == "threads") threads = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  lua_settop(L, top);
  return threads;
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
  if (!set_threads(checked_options(L))) luaL_error(L, "tpu: cannot start the worker threads");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tpu");
  lua_call(L, 1, 1);
  return 1;
}

extern "C" const char* tputrain_version(void) { return TPUTRAIN_VERSION; }

// NULL: nothing (a host passing a state it failed to create gets no crash).
extern "C" void tputrain_catch_signals(lua_State* L) {
  if (L) tpu::install_interrupt_handler(L);
}
