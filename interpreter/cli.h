// The commands main.cpp dispatches to besides running a script: the REPL and the golden runner.
//
//   tpu::Interpreter interp(options);
//   return tpu::run_repl(interp);                                  // `tputrain` on a terminal
//   return tpu::run_golden({"tests/golden"}, false, "/proc/self/exe");  // `tputrain test ...`
#pragma once
#include <string>
#include <vector>

namespace tpu {

class Interpreter;

// "0.1.0": the project version the binary was built with.
const char* version();

// Interactive loop on the terminal; returns the exit code (0 at end of input).
int run_repl(Interpreter& interp);

// `tputrain test PATH... [--update]` (DESIGN section 9). Each path is a .lua file or a directory
// of them; every script runs in a fresh `self_exe` process. Prints "ok NAME" or
// "FAIL NAME (reason)" per script and "N passed, N failed" at the end. Returns 0 when nothing
// failed, 1 otherwise, 2 when a path does not exist or is not a script.
int run_golden(const std::vector<std::string>& paths, bool update, const std::string& self_exe);

}  // namespace tpu
