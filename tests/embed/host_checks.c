/* What luaopen_tpu refuses, and tputrain_catch_signals(NULL): each line printed is the result
 * of opening tpu in a fresh state (run.sh compares them with what the docs say). */
#include <stdio.h>
#include <lauxlib.h>
#include <lualib.h>
#include <tputrain.h>

/* Opens tpu in a state set up by `setup` (Lua code run first; NULL: only the base and package
 * libraries are open) and prints "ok" or the error. */
static void try_open(const char *setup) {
  lua_State *L = luaL_newstate();
  if (setup) {
    luaL_openlibs(L);
    if (luaL_dostring(L, setup) != LUA_OK) printf("setup: %s\n", lua_tostring(L, -1));
  } else {
    luaL_requiref(L, "_G", luaopen_base, 1);
    luaL_requiref(L, LUA_LOADLIBNAME, luaopen_package, 1);
  }
  lua_settop(L, 0);
  lua_pushcfunction(L, luaopen_tpu);
  printf("%s\n", lua_pcall(L, 0, 1, 0) == LUA_OK ? "ok" : lua_tostring(L, -1));
  lua_close(L);
}

int main(void) {
  tputrain_catch_signals(NULL);
  try_open(NULL);
  try_open("package.loaded['tpu.options'] = {cores = 'many'}");
  try_open("package.loaded['tpu.options'] = {cores = -3}");
  try_open("package.loaded['tpu.options'] = {cores = 100000}");
  try_open("package.loaded['tpu.options'] = {seed = 'abc'}");
  try_open("package.loaded['tpu.options'] = {bf16 = 'yes'}");
  try_open("package.loaded['tpu.options'] = {tpu = 'v9'}");
  try_open("package.loaded['tpu.options'] = {optimize = 0}");
  try_open("package.loaded['tpu.options'] = {dump_graphs = 1}");
  try_open("package.loaded['tpu.options'] = {threads = 2.5}");
  try_open("package.loaded['tpu.options'] = 'fast'");
  try_open("package.loaded['tpu.options'] = {cores = 2, tpu = 'v4', bf16 = true, seed = 7, profile = false,"
           " optimize = false, dump_graphs = '', threads = 2}");
  return 0;
}
