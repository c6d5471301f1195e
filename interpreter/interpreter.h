// A Lua 5.4 state with the tpu library and stdlib loaded, plus the CLI options.
//
//   tpu::Options opt;            // filled from the command line by main.cpp
//   tpu::Interpreter interp(opt);
//   int rc = interp.run_file("script.lua", {"a", "b"});  // 0 ok, 1 error printed on stderr
#pragma once
#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

struct lua_State;

namespace tpu {

struct Options {
  int cores = 0;             // 0 = not given
  std::string tpu_version;   // "" = default (v3)
  bool bf16 = false;
  int threads = 0;           // 0 = all cores
  int64_t seed = -1;         // -1 = not given
  std::string dump_dir;
  bool profile = false;
  bool quiet = false;
  bool no_opt = false;       // compile without the pass pipeline
};

class Interpreter {
 public:
  explicit Interpreter(const Options& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  lua_State* state() { return L_; }
  const Options& options() const { return options_; }

  // Runs a script with `arg` set as Lua does (arg[0] = path). Returns the exit code:
  // 0 ok, 1 error (printed on stderr as "file:line: message").
  int run_file(const std::string& path, const std::vector<std::string>& args);
  // Runs a chunk (for -e: chunkname "=(command line)").
  // args: the chunk's `...` (a script read from standard input gets its arguments there too).
  int run_string(const std::string& code, const std::string& chunkname, const std::vector<std::string>& args = {});

  // REPL support: evaluates one chunk, first as "return <code>" (an expression), then as
  // statements; prints returned values with the stdlib's pretty printer.
  enum class Eval { ok, incomplete, error };
  Eval eval_repl(const std::string& code);

  // Called at exit: prints the --profile report if asked for.
  void finish();

 private:
  int call_protected(int nargs, int nresults);  // runs the function on the stack with traceback
  Options options_;
  lua_State* L_ = nullptr;
};

// Makes `require "tpu"` and `require "tpu.*"` load the stdlib (TPUTRAIN_STDLIB or the embedded
// copy) and `require "tpu.core"` the C++ binding: a package.searchers entry and a preload.
// Once per state (later calls do nothing). Raises a Lua error without the package library.
void install_stdlib(lua_State* L);

// SIGINT, SIGTERM and SIGHUP while a script runs (lua_system.cpp): the first one interrupts the
// Lua code (or, where the stdlib polls core.interrupted(), ends it at the next safe point);
// run_file and run_string then return interrupted_status(), 128 + the signal. A second one
// exits at once with 128 + its number (stdout and every open file flushed), except while a
// file is being written: then once it is complete.
void install_interrupt_handler(lua_State* L);
bool interrupted();
int interrupted_status();
// The REPL's chunks: SIGINT (Ctrl-C) while one runs stops it as it stops a script (fit after
// its step), and the session goes on: end_chunk_interrupt restores the previous action and
// forgets the signal.
struct sigaction catch_chunk_interrupt(lua_State* L);
void end_chunk_interrupt(lua_State* L, const struct sigaction& previous);

// Prints "message" on stderr the way the CLI reports errors (one paragraph, no traceback
// unless TPUTRAIN_DEBUG is set).
void print_error(const std::string& message);

// Under multi_worker{}: tells the other ranks this one's script ended with `exit_status`, waits
// for theirs and ends MPI (lua_mpi.cpp). Returns the process's exit status: 1 when another rank
// failed, else exit_status. Called once the script is done.
int end_workers(int exit_status);

}  // namespace tpu
