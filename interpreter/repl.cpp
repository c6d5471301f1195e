// The interactive loop: line editing and history through libedit, multi-line chunks, and tab
// completion of names reachable from the globals (`tpu.nn.De<TAB>` -> `tpu.nn.Dense`).
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <editline/readline.h>

#include <lua.hpp>

#include "cli.h"
#include "interpreter.h"

#ifndef TPUTRAIN_VERSION
#error "TPUTRAIN_VERSION must be defined by the build"
#endif

namespace tpu {

const char* version() { return TPUTRAIN_VERSION; }

namespace {

// ---- completion ---------------------------------------------------------------------------

lua_State* completion_state = nullptr;  // readline's callbacks take no context

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return !s.starts_with("__");  // metamethods and private fields
}

// Adds to the table at `out` the keys of the value on top of the stack that start with
// `prefix`, following __index tables (class hierarchies, userdata methods). Pops the value.
void add_keys(lua_State* L, int out, std::string_view prefix) {
  for (int depth = 0; depth < 16 && !lua_isnil(L, -1); ++depth) {
    if (lua_istable(L, -1)) {
      lua_pushnil(L);
      while (lua_next(L, -2)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) continue;
        size_t n = 0;
        const char* key = lua_tolstring(L, -1, &n);
        std::string_view k(key, n);
        if (k.starts_with(prefix) && is_identifier(k)) {
          lua_pushvalue(L, -1);
          lua_pushboolean(L, 1);
          lua_rawset(L, out);
        }
      }
    }
    if (!lua_getmetatable(L, -1)) break;
    lua_getfield(L, -1, "__index");
    lua_replace(L, -3);  // the __index value replaces the value we walked
    lua_pop(L, 1);       // the metatable
    if (!lua_istable(L, -1)) break;
  }
  lua_pop(L, 1);
}

// lua_CFunction(path, prefix) -> set of matching keys: follows the dotted `path` from the
// globals (may trigger __index, hence run protected) and collects keys starting with `prefix`.
int collect_completions(lua_State* L) {
  std::string_view path = luaL_checkstring(L, 1);
  std::string_view prefix = luaL_checkstring(L, 2);
  lua_newtable(L);
  int out = lua_gettop(L);
  lua_pushglobaltable(L);
  while (!path.empty()) {
    size_t dot = path.find_first_of(".:");
    std::string name(path.substr(0, dot));
    path = dot == std::string_view::npos ? "" : path.substr(dot + 1);
    if (lua_type(L, -1) != LUA_TTABLE && lua_type(L, -1) != LUA_TUSERDATA) return 1;
    lua_getfield(L, -1, name.c_str());
    lua_remove(L, -2);
  }
  add_keys(L, out, prefix);
  return 1;
}

// Full completions for `text` ("tpu.nn.De"): base path + separator + matching key, sorted.
std::vector<std::string> completions(lua_State* L, std::string_view text) {
  size_t sep = text.find_last_of(".:");
  if (sep == 0) return {};  // ".x" or ":x" follows an expression we do not evaluate
  std::string base(sep == std::string_view::npos ? "" : text.substr(0, sep + 1));
  std::string prefix(text.substr(base.size()));
  std::vector<std::string> out;
  int top = lua_gettop(L);
  lua_pushcfunction(L, collect_completions);
  lua_pushlstring(L, base.data(), base.empty() ? 0 : base.size() - 1);
  lua_pushstring(L, prefix.c_str());
  if (lua_pcall(L, 2, 1, 0) == LUA_OK) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pop(L, 1);
      out.push_back(base + lua_tostring(L, -1));
    }
  }
  lua_settop(L, top);
  std::sort(out.begin(), out.end());
  return out;
}

char* completion_generator(const char* text, int state) {
  static std::vector<std::string> matches;
  static size_t next = 0;
  if (state == 0) {
    matches = completions(completion_state, text);
    next = 0;
  }
  return next < matches.size() ? strdup(matches[next++].c_str()) : nullptr;  // freed by libedit
}

char** attempt_completion(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // no file-name completion
  return rl_completion_matches(text, completion_generator);
}

// ---- history ------------------------------------------------------------------------------

std::string history_file() {
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.tputrain_history" : "";
}

void load_history(const std::string& path) {
  using_history();
  stifle_history(1000);
  if (!path.empty()) read_history(path.c_str());  // a missing file is fine
}

// Adds a finished entry (unless it repeats the one before) and saves the history right away,
// ignoring errors.
void remember(const std::string& entry, const std::string& path) {
  static std::string last;
  if (entry == last) return;
  last = entry;
  add_history(entry.c_str());
  if (!path.empty()) write_history(path.c_str());
}

void setup_line_editing(lua_State* L) {
  completion_state = L;
  rl_readline_name = "tputrain";
  rl_attempted_completion_function = attempt_completion;
  rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,)}[]+-*/%^~#";
  rl_completion_append_character = '\0';
}

// ---- Ctrl-C while a chunk runs ------------------------------------------------------------

// Ctrl-C stops the chunk as SIGINT stops a script (lua_system.cpp): a Lua loop at its next
// instruction, fit after the step in progress, never between a step's weights and its
// optimizer state. A second Ctrl-C ends the program.
Interpreter::Eval eval_interruptible(Interpreter& interp, const std::string& chunk) {
  const struct sigaction previous = catch_chunk_interrupt(interp.state());
  Interpreter::Eval result = interp.eval_repl(chunk);
  end_chunk_interrupt(interp.state(), previous);
  return result;
}

// ---- Ctrl-C at the prompt -------------------------------------------------------------------

// Ctrl-C at the prompt drops the line being typed (and an unfinished chunk) and prompts again,
// as a shell does; it ended the process, and the session's models with it. The read is not
// restarted, so readline returns and the loop sees the flag.
volatile std::sig_atomic_t prompt_interrupted = 0;

void on_prompt_interrupt(int) { prompt_interrupted = 1; }

char* read_line(const char* prompt) {
  struct sigaction sa {}, previous {};
  sa.sa_handler = on_prompt_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &previous);
  char* line = readline(prompt);
  sigaction(SIGINT, &previous, nullptr);
  return line;
}

// ---- the loop -----------------------------------------------------------------------------

// Makes the `tpu` module a global, as the banner promises; false (error printed) if it fails.
bool load_tpu(Interpreter& interp) {
  return interp.run_string("tpu = tpu or require 'tpu'", "=(repl)") == 0;
}

}  // namespace

int run_repl(Interpreter& interp) {
  bool loaded = load_tpu(interp);
  std::printf("tputrain %s \u2014 Lua 5.4%s\n", version(), loaded ? "; tpu is loaded" : "");
  std::fflush(stdout);
  std::string history = history_file();
  load_history(history);
  setup_line_editing(interp.state());
  std::string pending;  // lines of an unfinished chunk
  for (;;) {
    prompt_interrupted = 0;
    char* line = read_line(pending.empty() ? "> " : ">> ");
    if (prompt_interrupted) {
      std::free(line);
      std::printf("\n");
      pending.clear();
      continue;
    }
    if (!line) break;
    std::string text = pending.empty() ? std::string(line) : pending + "\n" + line;
    std::free(line);
    if (text.find_first_not_of(" \t") == std::string::npos) {
      pending.clear();
      continue;
    }
    if (eval_interruptible(interp, text) == Interpreter::Eval::incomplete) {
      pending = text;
      continue;
    }
    pending.clear();
    remember(text, history);
  }
  std::printf("\n");  // Ctrl-D leaves the cursor after the prompt
  return 0;
}

}  // namespace tpu
