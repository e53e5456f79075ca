// SIGINT, SIGTERM and SIGHUP (a closed terminal) ask a running job to stop at the next step
// boundary (after writing a checkpoint) instead of dying mid-step. A second SIGINT stops it
// at once: the user pressing Ctrl-C twice means it, and the last checkpoint is on disk anyway.
#pragma once

namespace nl {

class StopSignals {
 public:
  // Installs the handlers; only one StopSignals may exist at a time. The previous handlers
  // come back when it is destroyed.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const;
  int signal() const;  // the signal that asked (SIGINT, SIGTERM or SIGHUP), 0 when none
};

}  // namespace nl
