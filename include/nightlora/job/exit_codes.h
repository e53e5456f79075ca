// The exit codes of the jobs (`train`, `nightly`), one table a scheduler can act on. The
// README and `train --help` print the same table (exit_code_table()).
//
//   0    finished: every step done and the adapter written (nightly: the night is done,
//        published or kept current; decision.json says which)
//   1    bad input: a file, the data or an option is wrong; the message says what, where and
//        what to do. Nothing was lost; fix it and run again.
//   2    internal error: a bug in nightlora; please report it with the message.
//   3    diverged: training kept producing non-finite values or exploding losses even after
//        rolling back with a smaller learning rate; no adapter was written from it.
//   4    busy: another process holds the output folder's lock (the message names its PID).
//   75   stopped, resumable: a budget, the time window, --max-steps, --max-wall, a pause; a
//        checkpoint was saved and the same command continues (EX_TEMPFAIL of sysexits.h).
//   128+N  stopped by signal N (130 SIGINT, 129 SIGHUP, 143 SIGTERM) after saving a
//        checkpoint; the same command continues.
#pragma once
#include <exception>
#include <string>

namespace nl::exit_code {

constexpr int kFinished = 0;
constexpr int kBadInput = 1;
constexpr int kInternal = 2;
constexpr int kDiverged = 3;
constexpr int kBusy = 4;
constexpr int kStopped = 75;
constexpr int signal_code(int sig) { return 128 + sig; }

// The table above as text for --help and messages (one row a line).
std::string table();

// What a command that ended with an exception exits with, and the line it prints: nl::Error
// is bad input (nl::FolderBusy: busy), running out of memory is bad input too (a smaller
// model, batch or --seq-len is the fix), anything else is an internal error.
struct ExceptionExit {
  int code = kInternal;
  std::string message;  // "nightlora: error: ..." or "nightlora: internal error: ..."
};
ExceptionExit exit_for_exception(std::exception_ptr e);

}  // namespace nl::exit_code
