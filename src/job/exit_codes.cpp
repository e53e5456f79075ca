#include "nightlora/job/exit_codes.h"

#include <new>

#include "nightlora/job/folder_lock.h"
#include "nightlora/util/error.h"

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

ExceptionExit exit_for_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const FolderBusy& x) {
    return {kBusy, std::string("nightlora: error: ") + x.what()};
  } catch (const Error& x) {
    return {kBadInput, std::string("nightlora: error: ") + x.what()};
  } catch (const std::bad_alloc&) {
    return {kBadInput, "nightlora: error: out of memory (try a smaller --seq-len, --batch or model)"};
  } catch (const std::exception& x) {
    return {kInternal, std::string("nightlora: internal error: ") + x.what()};
  } catch (...) {
    return {kInternal, "nightlora: internal error: an unknown exception"};
  }
}

}  // namespace nl::exit_code
