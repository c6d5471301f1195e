/* A C program that embeds Lua 5.4 with the tpu module (docs/embedding.md):
 * trains a tiny model from a script held in a string, reads its final loss back through the
 * Lua stack, then runs a script with a mistake and shows the Lua error it raises.
 *
 *   cc examples/embed_host.c -o embed_host $(pkg-config --cflags --libs tputrain)
 *   ./embed_host          # exit status 0 when both went as expected
 */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>
#include <tputrain.h>

/* Fits y = 2x + 1 with a Dense layer and returns the last epoch's loss. */
static const char *train_script =
    "local tpu = require 'tpu'\n"
    "local x = tpu.tensor {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}\n"
    "local y = x * 2 + 1\n"
    "local model = tpu.nn.Sequential {tpu.nn.Dense(1)}\n"
    "model:compile {optimizer = tpu.optim.Adam {learning_rate = 0.1}, loss = 'mse'}\n"
    "local history = model:fit(x, y, {epochs = 200, batch_size = 8, verbose = 0})\n"
    "return history.history.loss[200]\n";

/* Line 2 adds tensors whose shapes do not broadcast. */
static const char *bad_script =
    "local a, b = tpu.ones {2}, tpu.ones {3}\n"
    "return a + b\n";

/* Runs `code` as chunk `name` ("@file.lua": errors then read "file.lua:LINE: ...") with
 * `nresults` results left on the stack; on an error, leaves the message there instead. */
static int run(lua_State *L, const char *code, const char *name, int nresults) {
  if (luaL_loadbuffer(L, code, strlen(code), name) != LUA_OK) return 0;
  return lua_pcall(L, 0, nresults, 0) == LUA_OK;
}

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "tpu", luaopen_tpu, 1); /* also sets the global `tpu` */
  lua_pop(L, 1);
  printf("tputrain %s\n", tputrain_version());

  int ok = run(L, train_script, "@train.lua", 1);
  if (!ok || !lua_isnumber(L, -1)) {
    fprintf(stderr, "training failed: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  double loss = lua_tonumber(L, -1);
  lua_pop(L, 1);
  printf("final loss %.4f\n", loss);

  ok = run(L, bad_script, "@bad.lua", 1);
  const char *message = ok ? "" : lua_tostring(L, -1);
  printf("error: %s\n", message);
  int as_expected = !ok && strncmp(message, "bad.lua:2: ", 11) == 0;
  lua_pop(L, 1);
  lua_close(L);
  return as_expected && loss < 1.0 ? 0 : 1;
}
