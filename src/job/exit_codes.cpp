#include "nightlora/job/exit_codes.h"

namespace nl::exit_code {

std::string table() {
  return "exit codes:\n"
         "  0    finished (the adapter is written; nightly: the night is done, see decision.json)\n"
         "  1    bad input: a file, the data or an option is wrong (the message says what and where)\n"
         "  2    internal error (a bug: please report it with the message)\n"
         "  3    diverged: non-finite or exploding training even after rollbacks; no adapter written from it\n"
         "  4    busy: another process holds the output folder (the message names its PID)\n"
         "  75   stopped, resumable: budget, time window, --max-steps, --max-wall or pause; run the same command "
         "again\n"
         "  128+N  stopped by signal N after saving (130 SIGINT, 129 SIGHUP, 143 SIGTERM); run the same command "
         "again\n";
}

}  // namespace nl::exit_code
