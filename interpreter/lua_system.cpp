// Host facilities the stdlib needs and plain Lua lacks: a monotonic clock, terminal
// detection, directory listing, SIGINT / SIGTERM / SIGHUP.
#include <dirent.h>
#include <semaphore.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "interpreter.h"
#include "lua_internal.h"
#include "runtime/signals.h"

namespace tpu {

// ---- SIGINT, SIGTERM, SIGHUP (DESIGN section 11) ---------------------------------------------
//
// The first signal requests a stop (request_stop). Code that stops cleanly by itself (fit,
// between steps) polls it with core.interrupted() between core.defer_interrupts(true) and
// (false), and the tracer and compiler poll it too; elsewhere the running Lua code raises
// "interrupted (SIGTERM)" at its next instruction. The script then exits with 128 + the signal.
// A second signal ends the process at once with 128 + its number, but never in the middle of
// writing a file (InterruptShield): then as soon as the file is complete. That exit runs on a
// thread of its own, because flushing stdio buffers is not safe inside a handler.

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<int> signal_count{0};
std::atomic<int> second_signal{0};
std::atomic<int> deferring{0};
std::atomic<int> shielded{0};
// The state a first signal interrupts; cleared when it is closed (see install_interrupt_handler).
std::atomic<lua_State*> interrupt_state{nullptr};
sem_t exit_request;

// Raises "script.lua:12: interrupted (SIGTERM)" (no C++ object is alive when lua_error unwinds).
void raise_interrupt(lua_State* L, lua_Debug*) {
  lua_sethook(L, nullptr, 0, 0);
  {
    std::string message = user_where(L) + "interrupted (" + signal_label(stop_signal()) + ")";
    lua_pushlstring(L, message.data(), message.size());
  }
  lua_error(L);
}

// The exit thread: after a second signal and once no file is being written, flushes every
// stream (stdout, the logs' files), says why on stderr and exits.
void exit_on_second_signal() {
  while (sem_wait(&exit_request) != 0) {
  }
  while (shielded.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int sig = second_signal.load();
  std::fflush(nullptr);
  std::fprintf(stderr, "tputrain: interrupted again (%s), exiting at once\n", signal_label(sig));
  std::fflush(stderr);
  ::_exit(128 + sig);
}

void start_exit_thread() {
  sem_init(&exit_request, 0, 0);
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);  // the thread starts with every signal blocked
  std::thread(exit_on_second_signal).detach();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void on_signal(int sig) {
  if (signal_count.fetch_add(1) > 0) {
    int none = 0;
    if (second_signal.compare_exchange_strong(none, sig)) sem_post(&exit_request);
    return;
  }
  request_stop(sig);
  lua_State* L = interrupt_state.load();
  if (deferring.load() == 0 && L) lua_sethook(L, raise_interrupt, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

// core.interrupted() -> false, or true and the signal's name ("SIGINT", "SIGTERM", "SIGHUP")
int l_interrupted(lua_State* L) {
  const int sig = stop_signal();
  lua_pushboolean(L, sig != 0);
  if (sig == 0) return 1;
  lua_pushstring(L, signal_label(sig));
  return 2;
}

// core.defer_interrupts(on): calls nest. While deferred, a signal only sets the flag that
// core.interrupted() reads (tpu/interrupt.lua raises it when the deferral ends).
int l_defer_interrupts(lua_State* L) {
  if (lua_toboolean(L, 1)) deferring.fetch_add(1);
  else if (deferring.load() > 0) deferring.fetch_sub(1);
  return 0;
}

// __gc of a value in the interrupted state's registry: lua_close collects it, and a signal after
// that must not touch the closed state (an embedding host may close it and go on).
int forget_interrupted_state(lua_State* L) {
  lua_State* closing = static_cast<lua_State*>(lua_touserdata(L, lua_upvalueindex(1)));
  interrupt_state.compare_exchange_strong(closing, nullptr);
  return 0;
}

}  // namespace

namespace {

// Makes L the state a first signal interrupts, and starts the exit thread (once).
void watch_state(lua_State* L) {
  // One sentinel per state: replacing it would collect the first, which forgets L while open.
  if (lua_getfield(L, LUA_REGISTRYINDEX, "tpu.interrupted_state") == LUA_TNIL) {
    lua_newtable(L);  // the sentinel
    lua_newtable(L);  // its metatable
    lua_pushlightuserdata(L, L);
    lua_pushcclosure(L, forget_interrupted_state, 1);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "tpu.interrupted_state");
  }
  lua_pop(L, 1);
  interrupt_state = L;
  static const bool started = (start_exit_thread(), true);
  (void)started;
}

}  // namespace

void install_interrupt_handler(lua_State* L) {
  watch_state(L);
  for (int sig : kStopSignals) install_signal_handler(sig, on_signal);
}

struct sigaction catch_chunk_interrupt(lua_State* L) {
  watch_state(L);
  return install_signal_handler(SIGINT, on_signal);
}

void end_chunk_interrupt(lua_State* L, const struct sigaction& previous) {
  restore_signal_handler(SIGINT, previous);
  // A hook the signal set may not have fired yet: it must not interrupt the next chunk.
  if (stop_signal() != 0) lua_sethook(L, nullptr, 0, 0);
  clear_stop_request();
  signal_count = 0;
}

bool interrupted() { return stop_signal() != 0; }

int interrupted_status() { return 128 + stop_signal(); }

InterruptShield::InterruptShield() { shielded.fetch_add(1); }

InterruptShield::~InterruptShield() { shielded.fetch_sub(1); }

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

// core.terminal_columns() -> the width of the terminal on standard output, or nil (not a
// terminal, or one that does not say).
int l_terminal_columns(lua_State* L) {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 0;
  lua_pushinteger(L, ws.ws_col);
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

// core.memory() -> device bytes in use, device peak, host bytes (of live tensor buffers);
// core.reset_peak(); core.release_device_buffers() (tpu.reset); core.to_host(t) (data sets).
int l_memory(lua_State* L) {
  TensorMemory m = tensor_memory();
  lua_pushinteger(L, m.in_use);
  lua_pushinteger(L, m.peak);
  lua_pushinteger(L, m.host_in_use);
  return 3;
}
int l_reset_peak(lua_State*) {
  reset_peak_tensor_memory();
  return 0;
}
int l_release_device_buffers(lua_State*) {
  release_device_buffers();
  return 0;
}
int l_to_host(lua_State* L) {
  check_concrete(L, 1).move_to_host();
  lua_settop(L, 1);
  return 1;
}

const LuaFunction kFunctions[] = {fn<l_now>("now"),
                                  fn<l_isatty>("isatty"),
                                  fn<l_terminal_columns>("terminal_columns"),
                                  fn<l_list_dir>("list_dir"),
                                  fn<l_memory>("memory"),
                                  fn<l_reset_peak>("reset_peak"),
                                  fn<l_release_device_buffers>("release_device_buffers"),
                                  fn<l_to_host>("to_host"),
                                  fn<l_interrupted>("interrupted"),
                                  fn<l_defer_interrupts>("defer_interrupts")};

}  // namespace

void register_system_functions(lua_State* L, int core) {
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  lua_pop(L, 1);
}

}  // namespace tpu
