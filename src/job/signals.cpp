// Signal handlers that set a flag and nothing else (async-signal-safe).
#include "job/signals.hpp"

#include <csignal>

namespace trident {
namespace {

volatile std::sig_atomic_t received = 0;

// A second Ctrl-C means "now": the default action (signal() and raise() are async-signal-safe).
extern "C" void on_stop_signal(int signal) {
  if (signal == SIGINT && received != 0) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  received = signal;
}

}  // namespace

void install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls resume; the flag is read at the step boundary
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stop_signal() { return received; }

const char* stop_signal_name(int signal) {
  return signal == SIGUSR1 ? "SIGUSR1" : signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "a stop signal";
}

}  // namespace trident
