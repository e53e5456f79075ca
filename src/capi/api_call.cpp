#include "capi/api_call.h"

#include <exception>
#include <new>

#include "nightlora/job/exit_codes.h"

namespace nl::capi {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string& message) { t_last_error = message; }
void clear_last_error() { t_last_error.clear(); }
const std::string& last_error() { return t_last_error; }

void misuse(const char* function, const std::string& what) {
  throw ApiMisuse(NL_ERR_INVALID_ARGUMENT, std::string(function) + ": " + what);
}
void wrong_state(const char* function, const std::string& what) {
  throw ApiMisuse(NL_ERR_STATE, std::string(function) + ": " + what);
}

nl_status status_of_current_exception() {
  // Setting the message may itself run out of memory: then the status alone.
  try {
    try {
      throw;
    } catch (const ApiMisuse& e) {
      set_last_error(std::string("nightlora: error: ") + e.what());
      return e.status();
    } catch (...) {
      // The CLI's own mapping: nl::Error is bad input, FolderBusy busy, bad_alloc bad input.
      const exit_code::ExceptionExit x = exit_code::exit_for_exception(std::current_exception());
      set_last_error(x.message);
      switch (x.code) {
        case exit_code::kBadInput: return NL_ERR_BAD_INPUT;
        case exit_code::kBusy: return NL_ERR_BUSY;
        default: return NL_ERR_INTERNAL;
      }
    }
  } catch (...) {
    return NL_ERR_INTERNAL;
  }
}

}  // namespace nl::capi

extern "C" {

NL_API const char* nl_last_error(void) { return nl::capi::t_last_error.c_str(); }

NL_API const char* nl_status_name(nl_status status) {
  switch (status) {
    case NL_OK: return "ok";
    case NL_ERR_BAD_INPUT: return "bad input";
    case NL_ERR_INTERNAL: return "internal error";
    case NL_ERR_BUSY: return "busy";
    case NL_ERR_INVALID_ARGUMENT: return "invalid argument";
    case NL_ERR_STATE: return "wrong state";
  }
  return "unknown status";
}

NL_API const char* nl_version(void) { return NL_PROJECT_VERSION; }
NL_API int nl_api_version(void) { return NL_API_VERSION; }

}  // extern "C"
