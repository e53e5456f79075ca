#include "nightlora/job/stop_signals.h"

#include <signal.h>

#include <atomic>

#include "nightlora/util/error.h"

namespace nl {

namespace {
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_stop_installed{false};
struct sigaction g_old_int, g_old_term, g_old_hup;

extern "C" void on_stop_signal(int sig) {
  // A second Ctrl-C: restore the default action and deliver it again, ending the process.
  if (sig == SIGINT && g_stop_signal.load() != 0) {
    ::signal(SIGINT, SIG_DFL);
    ::raise(SIGINT);
    return;
  }
  g_stop_signal.store(sig);
}
}  // namespace

StopSignals::StopSignals() {
  bool expected = false;
  if (!g_stop_installed.compare_exchange_strong(expected, true))
    fail("stop signals", "SIGINT/SIGTERM/SIGHUP handlers are already installed by another job in this process");
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGHUP, &sa, &g_old_hup);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGHUP, &g_old_hup, nullptr);
  g_stop_installed = false;
}

bool StopSignals::requested() const { return g_stop_signal.load() != 0; }
int StopSignals::signal() const { return g_stop_signal.load(); }

}  // namespace nl
