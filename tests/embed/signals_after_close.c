/* A host that catches signals for a state, closes it and goes on: a signal after lua_close
 * must not touch the closed state (its memory may be another state's by then). */
#include <signal.h>
#include <stdio.h>
#include <lauxlib.h>
#include <lualib.h>
#include <tputrain.h>

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "tpu", luaopen_tpu, 1);
  lua_pop(L, 1);
  tputrain_catch_signals(L);
  lua_close(L);
  lua_State *other = luaL_newstate();  /* may reuse the closed state's memory */
  luaL_openlibs(other);
  raise(SIGINT);
  if (luaL_dostring(other, "local s = 0; for i = 1, 100000 do s = s + i end; print('sum', s)") != LUA_OK) {
    printf("error: %s\n", lua_tostring(other, -1));
    return 1;
  }
  lua_close(other);
  return 0;
}
