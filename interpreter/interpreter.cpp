// The Lua state: standard libraries, the `tpu` core module, the stdlib searcher (embedded or
// from TPUTRAIN_STDLIB), CLI options, and protected calls that report errors as file:line.
#include "interpreter.h"

#include <lua.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "host_allocator.h"
#include "lua_tensor.h"
#include "runtime/debug_level.h"
#include "runtime/thread_pool.h"
#include "stdlib_embedded.h"

namespace tpu {

int luaopen_tpu_core(lua_State* L);

namespace {

// Finds stdlib module `name` ("tpu.nn.Dense") in TPUTRAIN_STDLIB or the embedded copy.
bool find_stdlib(const std::string& name, std::string& source, std::string& path) {
  std::string rel = name;
  for (char& c : rel)
    if (c == '.') c = '/';
  if (const char* dir = std::getenv("TPUTRAIN_STDLIB"); dir && *dir) {
    for (const std::string& candidate : {rel + ".lua", rel + "/init.lua"}) {
      std::ifstream in(std::string(dir) + "/" + candidate);
      if (!in) continue;
      std::stringstream ss;
      ss << in.rdbuf();
      source = ss.str();
      path = candidate;
      return true;
    }
    return false;
  }
  for (const EmbeddedModule& m : embedded_stdlib())
    if (m.name == name) {
      source = std::string(m.source);
      path = std::string(m.path);
      return true;
    }
  return false;
}

// package.searchers entry for "tpu" and "tpu.*".
int stdlib_searcher(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  if (name != "tpu" && name.rfind("tpu.", 0) != 0) {
    lua_pushstring(L, "not a tpu module");
    return 1;
  }
  std::string source, path;
  if (!find_stdlib(name, source, path)) {
    lua_pushfstring(L, "no stdlib module '%s'", name.c_str());
    return 1;
  }
  // "@[tpu]/nn/Dense.lua": marks stdlib frames, so user errors skip them (see user_where).
  std::string chunk = "@[tpu]/" + (path.rfind("tpu/", 0) == 0 ? path.substr(4) : path);
  if (luaL_loadbuffer(L, source.data(), source.size(), chunk.c_str()) != LUA_OK) return lua_error(L);
  lua_pushstring(L, chunk.c_str() + 1);
  return 2;
}

}  // namespace

void install_stdlib(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "tpu.stdlib_searcher");
  const bool installed = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (installed) return;
  // The libraries the embedding contract names (docs/embedding.md): the stdlib loads through
  // package and computes with string, table and math; fit's progress, logs and files go
  // through io and os. Without one, a script would fail later with an error from inside tpu.
  for (const char* lib : {"package", "string", "table", "math", "io", "os"}) {
    const bool open = lua_getglobal(L, lib) == LUA_TTABLE;
    lua_pop(L, 1);
    if (!open) luaL_error(L, "tpu needs Lua's %s library (open it with luaL_openlibs)", lib);
  }
  lua_getglobal(L, "package");
  lua_pushboolean(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, "tpu.stdlib_searcher");
  lua_getfield(L, -1, "searchers");
  // Insert at position 2, after the preload searcher.
  for (lua_Integer i = luaL_len(L, -1); i >= 2; --i) {
    lua_geti(L, -1, i);
    lua_seti(L, -2, i + 1);
  }
  lua_pushcfunction(L, stdlib_searcher);
  lua_seti(L, -2, 2);
  lua_getfield(L, -2, "preload");
  lua_pushcfunction(L, luaopen_tpu_core);
  lua_setfield(L, -2, "tpu.core");
  lua_pop(L, 3);
}

namespace {

void set_options(lua_State* L, const Options& o) {
  lua_createtable(L, 0, 9);
  lua_pushinteger(L, o.cores);
  lua_setfield(L, -2, "cores");
  lua_pushstring(L, o.tpu_version.c_str());
  lua_setfield(L, -2, "tpu");
  lua_pushboolean(L, o.bf16);
  lua_setfield(L, -2, "bf16");
  lua_pushinteger(L, o.threads);
  lua_setfield(L, -2, "threads");
  lua_pushinteger(L, o.seed);
  lua_setfield(L, -2, "seed");
  lua_pushstring(L, o.dump_dir.c_str());
  lua_setfield(L, -2, "dump_graphs");
  lua_pushboolean(L, o.profile);
  lua_setfield(L, -2, "profile");
  lua_pushboolean(L, o.quiet);
  lua_setfield(L, -2, "quiet");
  lua_pushboolean(L, !o.no_opt);
  lua_setfield(L, -2, "optimize");
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "tpu.options");
  lua_pop(L, 3);
}

// Message handler: keeps the message; adds a traceback when TPUTRAIN_DEBUG is set.
int message_handler(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  if (debug_level() >= 1) luaL_traceback(L, L, msg, 1);
  else lua_pushstring(L, msg);
  return 1;
}

// 0 ok; 128 + the signal when the error came after SIGINT, SIGTERM or SIGHUP; 1 for any other error.
int exit_status(int lua_status) {
  if (lua_status == LUA_OK) return 0;
  return interrupted() ? interrupted_status() : 1;
}

// collectgarbage as in Lua; a full collection ("collect", the default) then also hands the
// heap's free memory back to the kernel. The process keeps freed memory for the step loop
// (main.cpp), so a script that drops a large working set (the temporaries of preparing a data
// set) gives it back this way instead of carrying it through training.
// The arguments are checked here, as Lua's collectgarbage checks them, so that a bad one is
// reported against this function (named `collectgarbage`): the wrapped original, called from C,
// has no name to report.
void check_collectgarbage_args(lua_State* L) {
  static const char* const options[] = {"stop",     "restart",      "collect",     "count",
                                        "step",     "setpause",     "setstepmul",  "isrunning",
                                        "generational", "incremental", nullptr};
  const int option = luaL_checkoption(L, 1, "collect", options);
  const int integer_args = option == 4 || option == 5 || option == 6 ? 1 : option == 8 ? 2 : option == 9 ? 3 : 0;
  for (int i = 0; i < integer_args; ++i) (void)luaL_optinteger(L, 2 + i, 0);
}

int l_collectgarbage(lua_State* L) {
  check_collectgarbage_args(L);
  const bool full =
      lua_isnoneornil(L, 1) || (lua_type(L, 1) == LUA_TSTRING && std::strcmp(lua_tostring(L, 1), "collect") == 0);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  if (full) release_free_host_memory();
  return lua_gettop(L);
}

void wrap_collectgarbage(lua_State* L) {
  lua_getglobal(L, "collectgarbage");
  lua_pushcclosure(L, l_collectgarbage, 1);
  lua_setglobal(L, "collectgarbage");
}

}  // namespace

void print_error(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
}

Interpreter::Interpreter(const Options& options) : options_(options) {
  if (options.threads > 0) set_num_threads(options.threads);
  L_ = luaL_newstate();
  luaL_openlibs(L_);
  wrap_collectgarbage(L_);
  install_stdlib(L_);
  set_options(L_, options);
  lua_getglobal(L_, "require");
  lua_pushstring(L_, "tpu");
  if (call_protected(1, 1) == LUA_OK) lua_setglobal(L_, "tpu");
}

Interpreter::~Interpreter() {
  if (L_) lua_close(L_);
}

int Interpreter::call_protected(int nargs, int nresults) {
  int base = lua_gettop(L_) - nargs;
  lua_pushcfunction(L_, message_handler);
  lua_insert(L_, base);
  int status = lua_pcall(L_, nargs, nresults, base);
  lua_remove(L_, base);
  if (status != LUA_OK) {
    print_error(lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "(error)");
    lua_pop(L_, 1);
  }
  return status;
}

int Interpreter::run_file(const std::string& path, const std::vector<std::string>& args) {
  lua_createtable(L_, int(args.size()), 2);
  lua_pushstring(L_, path.c_str());
  lua_seti(L_, -2, 0);
  // arg[-1] is the interpreter, as with lua (tests start it again, e.g. under mpirun).
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  lua_pushstring(L_, ec ? "tputrain" : self.c_str());
  lua_seti(L_, -2, -1);
  for (size_t i = 0; i < args.size(); ++i) {
    lua_pushstring(L_, args[i].c_str());
    lua_seti(L_, -2, lua_Integer(i + 1));
  }
  lua_setglobal(L_, "arg");
  if (luaL_loadfile(L_, path.c_str()) != LUA_OK) {
    std::string msg = lua_tostring(L_, -1);
    lua_pop(L_, 1);
    // A missing file reads "tputrain: cannot open ..."; syntax errors already read
    // "file:line: ...".
    if (msg.rfind("cannot open ", 0) == 0) msg = "tputrain: " + msg;
    print_error(msg);
    return 1;
  }
  for (const std::string& a : args) lua_pushstring(L_, a.c_str());
  return exit_status(call_protected(int(args.size()), 0));
}

int Interpreter::run_string(const std::string& code, const std::string& chunkname, const std::vector<std::string>& args) {
  if (luaL_loadbuffer(L_, code.data(), code.size(), chunkname.c_str()) != LUA_OK) {
    print_error(lua_tostring(L_, -1));
    lua_pop(L_, 1);
    return 1;
  }
  for (const std::string& a : args) lua_pushstring(L_, a.c_str());
  return exit_status(call_protected(int(args.size()), 0));
}

Interpreter::Eval Interpreter::eval_repl(const std::string& code) {
  std::string as_expr = "return " + code;
  int top = lua_gettop(L_);
  if (luaL_loadbuffer(L_, as_expr.data(), as_expr.size(), "=stdin") != LUA_OK) {
    lua_pop(L_, 1);
    std::string stmt = code.size() > 0 && code[0] == '=' ? "return " + code.substr(1) : code;
    if (luaL_loadbuffer(L_, stmt.data(), stmt.size(), "=stdin") != LUA_OK) {
      std::string msg = lua_tostring(L_, -1);
      lua_pop(L_, 1);
      if (msg.size() >= 5 && msg.compare(msg.size() - 5, 5, "<eof>") == 0) return Eval::incomplete;
      print_error(msg);
      return Eval::error;
    }
  }
  if (call_protected(0, LUA_MULTRET) != LUA_OK) return Eval::error;
  int n = lua_gettop(L_) - top;
  if (n > 0) {  // print the values tab-separated, tables as constructors (tpu/repl.lua)
    lua_getglobal(L_, "require");
    lua_pushstring(L_, "tpu.repl");
    if (call_protected(1, 1) != LUA_OK) return Eval::error;
    lua_getfield(L_, -1, "print");
    lua_remove(L_, -2);
    lua_insert(L_, top + 1);
    if (call_protected(n, 0) != LUA_OK) return Eval::error;
  }
  lua_settop(L_, top);
  return Eval::ok;
}

void Interpreter::finish() {
  lua_getglobal(L_, "tpu");
  if (lua_istable(L_, -1)) {
    lua_getfield(L_, -1, "_finish");
    if (lua_isfunction(L_, -1)) {
      call_protected(0, 0);
    } else {
      lua_pop(L_, 1);
    }
  }
  lua_pop(L_, 1);
  std::fflush(stdout);
}

}  // namespace tpu
