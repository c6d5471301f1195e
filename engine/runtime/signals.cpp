#include "runtime/signals.h"

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <string>

#include "core/error.h"

namespace tpu {

namespace {

std::atomic<int> requested_signal{0};

// One alternate stack, for the first thread that installs a handler (the main thread): static
// storage, so it outlives every handler call, during exit too.
void use_alternate_stack() {
  alignas(64) static std::array<std::byte, 256 * 1024> stack;  // far above an AVX-512 frame
  static const bool made = [] {
    stack_t ss{};
    ss.ss_sp = stack.data();
    ss.ss_size = stack.size();
    return sigaltstack(&ss, nullptr) == 0;
  }();
  (void)made;
}

}  // namespace

struct sigaction install_signal_handler(int sig, void (*handler)(int)) {
  use_alternate_stack();
  struct sigaction sa {}, previous {};
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART | SA_ONSTACK;  // a write in progress goes on
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, &previous);
  return previous;
}

void restore_signal_handler(int sig, const struct sigaction& previous) { sigaction(sig, &previous, nullptr); }

void block_async_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPROF, SIGWINCH, SIGCHLD})
    sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void request_stop(int sig) {
  int none = 0;
  requested_signal.compare_exchange_strong(none, sig);
}

int stop_signal() { return requested_signal.load(std::memory_order_relaxed); }

void clear_stop_request() { requested_signal = 0; }

void poll_stop(const char* doing) {
  if (int sig = stop_signal()) throw Error(std::string("interrupted (") + signal_label(sig) + ") while " + doing);
}

const char* signal_label(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

}  // namespace tpu
