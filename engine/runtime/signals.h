// Where signal handlers run, and the stop request they leave for the engine.
//
// Handlers run on an alternate stack: oneDNN 2.6's JIT f32 GEMM (the one Debian 12 ships) points rsp
// into its heap workspace while it runs: a signal frame the kernel pushes there overwrites heap
// memory, and the process later dies in free(). So handlers run on an alternate stack, and
// only the main thread takes asynchronous signals (the threads we start block them).
#pragma once
#include <csignal>

namespace tpu {

// Installs handler for sig on the calling thread's alternate stack (made on first use), with
// SA_RESTART; returns the previous action for restore_signal_handler. Call it from the main
// thread: the alternate stack belongs to the thread that makes it.
struct sigaction install_signal_handler(int sig, void (*handler)(int));
void restore_signal_handler(int sig, const struct sigaction& previous);

// Blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPROF, SIGWINCH and
// SIGCHLD in the calling thread; every thread tputrain starts calls it first.
void block_async_signals();

// A stop request (SIGINT, SIGTERM or SIGHUP, DESIGN section 11): the interpreter's handler
// calls request_stop (async-signal-safe); the tracer and the compiler call poll_stop at safe
// points, which throws tpu::Error("interrupted (SIGTERM) while <doing>") once one was made.
// The first signal stays: the stop names it.
void request_stop(int sig);
int stop_signal();  // the first signal requested, 0 = none
void clear_stop_request();  // tests, and the REPL after an interrupted chunk
void poll_stop(const char* doing);
// The signal's name ("SIGINT", "SIGTERM", "SIGHUP"), else "a signal".
const char* signal_label(int sig);

}  // namespace tpu
