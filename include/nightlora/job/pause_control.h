// Pause and resume requests for a running job, honoured at the next step boundary:
//  - signals: SIGUSR1 pauses, SIGUSR2 resumes (`kill -USR1 <pid>`);
//  - a control file (e.g. RUN_DIR/control) holding the word "pause" or "resume", for
//    environments where sending signals is awkward (an Android app, a remote shell).
// Requests are events and the latest one wins: a control file that still says "pause" does
// not undo a later SIGUSR2; the file counts again only when its content or time changes.
// A control file that already says "pause" when the job starts pauses it.
#pragma once
#include <filesystem>
#include <string>

namespace nl {

class PauseControl {
 public:
  // `control_file` may be empty (no file). With `handle_signals`, installs the SIGUSR1/SIGUSR2
  // handlers (only one PauseControl may do so at a time; the previous handlers come back
  // when it is destroyed).
  explicit PauseControl(std::string control_file = "", bool handle_signals = true);
  ~PauseControl();
  PauseControl(const PauseControl&) = delete;
  PauseControl& operator=(const PauseControl&) = delete;

  // Applies pending signals and control-file changes, then answers whether the job is paused.
  bool paused();
  // What last changed the state, e.g. "SIGUSR1 (pause)" or "control file .../control: pause".
  const std::string& why() const { return why_; }
  // A note about the control file that was ignored (unknown word), or empty.
  const std::string& warning() const { return warning_; }

  void request_pause(const std::string& why = "requested");
  void request_resume(const std::string& why = "requested");

 private:
  void poll_file();

  std::string file_;
  bool signals_ = false;
  bool paused_ = false;
  std::string why_;
  std::string warning_;
  std::string last_content_;
  std::filesystem::file_time_type last_mtime_{};
  bool seen_file_ = false;
};

}  // namespace nl
