#include "nightlora/job/pause_control.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <fstream>
#include <sstream>

#include "nightlora/util/error.h"

namespace nl {

namespace {

// Written by the signal handler, taken at step boundaries. 0: nothing pending, 1: pause,
// 2: resume (the latest signal wins, as for control-file requests). A lock-free atomic is
// safe in a signal handler, and exchange() cannot lose a signal arriving while it is taken.
std::atomic<int> g_pending{0};
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<bool> g_installed{false};
struct sigaction g_old_usr1, g_old_usr2;

extern "C" void on_pause_signal(int sig) { g_pending = sig == SIGUSR1 ? 1 : 2; }

std::string trimmed_lower(std::string s) {
  auto sp = [](unsigned char c) { return std::isspace(c); };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), sp));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), sp).base(), s.end());
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

PauseControl::PauseControl(std::string control_file, bool handle_signals) : file_(std::move(control_file)) {
  if (handle_signals) {
    bool expected = false;
    if (!g_installed.compare_exchange_strong(expected, true))
      fail("pause control", "signal handlers for SIGUSR1/SIGUSR2 are already installed by another job in this process");
    g_pending = 0;
    struct sigaction sa {};
    sa.sa_handler = on_pause_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a step's blocking calls should not fail with EINTR
    sigaction(SIGUSR1, &sa, &g_old_usr1);
    sigaction(SIGUSR2, &sa, &g_old_usr2);
    signals_ = true;
  }
}

PauseControl::~PauseControl() {
  if (signals_) {
    sigaction(SIGUSR1, &g_old_usr1, nullptr);
    sigaction(SIGUSR2, &g_old_usr2, nullptr);
    g_installed = false;
  }
}

void PauseControl::request_pause(const std::string& why) {
  paused_ = true;
  why_ = why;
}

void PauseControl::request_resume(const std::string& why) {
  paused_ = false;
  why_ = why;
}

void PauseControl::poll_file() {
  if (file_.empty()) return;
  std::error_code ec;
  auto mtime = std::filesystem::last_write_time(file_, ec);
  if (ec) return;  // no file: no request
  std::ifstream f(file_);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string content = trimmed_lower(ss.str());
  if (seen_file_ && content == last_content_ && mtime == last_mtime_) return;
  seen_file_ = true;
  last_content_ = content;
  last_mtime_ = mtime;
  warning_.clear();
  if (content == "pause") request_pause("control file " + file_ + ": pause");
  else if (content == "resume" || content == "run") request_resume("control file " + file_ + ": resume");
  else if (!content.empty())
    warning_ = "control file " + file_ + " holds \"" + content.substr(0, 40) + "\"; expected \"pause\" or \"resume\": ignored";
}

bool PauseControl::paused() {
  if (signals_) {
    // Signals and file are polled in this order; a signal and a file change arriving within
    // one step are a race the user cannot observe anyway, so the file, read last, wins.
    int p = g_pending.exchange(0);
    if (p == 1) request_pause("SIGUSR1 (pause)");
    if (p == 2) request_resume("SIGUSR2 (resume)");
  }
  poll_file();
  return paused_;
}

}  // namespace nl
