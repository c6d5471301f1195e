/* tputrain as a Lua library: the `tpu` module for a program that embeds Lua 5.4 (DESIGN
 * section 10, docs/embedding.md).
 *
 *   #include <lauxlib.h>
 *   #include <lualib.h>
 *   #include <tputrain.h>
 *
 *   lua_State *L = luaL_newstate();
 *   luaL_openlibs(L);                          // tpu needs at least base, package, string, table, math, io, os
 *   luaL_requiref(L, "tpu", luaopen_tpu, 1);   // global `tpu`; `require "tpu"` returns it too
 *   lua_pop(L, 1);
 *   if (luaL_loadbuffer(L, code, len, "@train.lua") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
 *     fprintf(stderr, "%s\n", lua_tostring(L, -1));   // "train.lua:12: ..."
 *
 * Build:  cc host.c $(pkg-config --cflags --libs tputrain)       (links liblua5.4 as well)
 * CMake:  find_package(tputrain REQUIRED)
 *         target_link_libraries(host PRIVATE tputrain::tputrain)
 * Stock Lua loads the same library as a C module: `lua5.4 -e 'local tpu = require "tpu"'`
 * finds PREFIX/lib/lua/5.4/tpu.so on package.cpath.
 *
 * What luaopen_tpu does to the state:
 *   - adds an entry to package.searchers (second, after the preload one) that loads `tpu` and
 *     `tpu.*` from the Lua stdlib built into the library, or from the directory in the
 *     environment variable TPUTRAIN_STDLIB when it is set, and preloads `tpu.core`;
 *   - runs the stdlib's `tpu` module and returns its table (what `require "tpu"` returns in
 *     the `tputrain` binary). A host may set package.loaded["tpu.options"] to a table before
 *     that, with the fields the command line's options fill: cores, tpu ("v2", "v3", "v4"),
 *     bf16, threads, seed, dump_graphs, profile, optimize (false: --no-opt); absent fields
 *     keep the defaults. The TPUTRAIN_CORES and TPUTRAIN_BF16 variables are the binary's.
 * Errors: every tpu function reports a failure as a Lua error whose message starts with the
 *   calling script's "file:line: " (name chunks "@file.lua" for that); no C++ exception leaves
 *   the library and nothing aborts. Catch them with lua_pcall as any Lua error.
 * What the library leaves to the host (the `tputrain` binary does these itself):
 *   - signals: none is installed. tputrain_catch_signals() installs the binary's handling;
 *   - the allocator: the host's malloc (the binary links jemalloc);
 *   - the host thread's floating-point mode: the library flushes subnormal floats to zero (as a
 *     TPU does) only inside its own calls and on its own threads, and restores the mode after;
 *   - collectgarbage is Lua's own (the binary's also returns free memory to the kernel).
 * What it starts: worker threads for the simulated cores (as many as the machine's cores, or
 *   options.threads) on first use, with every asynchronous signal blocked; they stay until the
 *   process exits, and so does the library once loaded (lua_close does not unload it). MPI
 *   starts only when a script calls tpu.strategy.multi_worker{} and ends at exit.
 * Threads: use tpu from one thread at a time (one lua_State at a time).
 */
#ifndef TPUTRAIN_H
#define TPUTRAIN_H

#include <lua.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The `tpu` module's opener, for luaL_requiref or package.preload: leaves the tpu table on
 * the stack and returns 1. Raises a Lua error when one of the package, string, table, math, io
 * and os libraries is not open, or when package.loaded["tpu.options"] holds a wrong value. */
int luaopen_tpu(lua_State *L);

/* The library's version, "MAJOR.MINOR.PATCH" (the same as `tputrain --version`). */
const char *tputrain_version(void);

/* Opt-in: SIGINT, SIGTERM and SIGHUP as in the `tputrain` binary. The first one interrupts the
 * Lua code running in L (model:fit first finishes its current step): the running lua_pcall
 * returns the error "file:line: interrupted (SIGINT)". A second one ends the process at once
 * with status 128 + the signal (after any file being written is complete). Replaces the
 * host's handlers for these three signals. Once L is closed, a signal interrupts no state.
 * As in the binary, an interrupt is for the rest of the process: it is not cleared, so later
 * compiles and model:fit calls fail the same way and the next signal ends the process.
 * With L NULL it does nothing. */
void tputrain_catch_signals(lua_State *L);

#ifdef __cplusplus
}
#endif

#endif
