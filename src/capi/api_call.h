// How every C API function runs (src/capi/): the thread's last error, exceptions turned
// into status codes, and the registries that tell a live handle from anything else.
//
// No exception leaves the library: each nl_* function runs its body in api_call(), which
// clears the thread's last error, and on an exception sets it to the message the CLI prints
// (nl::exit_code::exit_for_exception) and returns the matching status.
#pragma once
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "nightlora.h"

namespace nl::capi {

// A caller's mistake the C API itself finds: a NULL pointer, a handle that is not one, an
// unknown struct_size (NL_ERR_INVALID_ARGUMENT), or a call that does not fit an object's state
// (NL_ERR_STATE). The message is "<function>: <what>".
class ApiMisuse : public std::runtime_error {
 public:
  ApiMisuse(nl_status status, const std::string& msg) : std::runtime_error(msg), status_(status) {}
  nl_status status() const { return status_; }

 private:
  nl_status status_;
};
[[noreturn]] void misuse(const char* function, const std::string& what);        // NL_ERR_INVALID_ARGUMENT
[[noreturn]] void wrong_state(const char* function, const std::string& what);   // NL_ERR_STATE

// The status and message (as the CLI prints it) of the exception being handled.
nl_status status_of_current_exception();
void set_last_error(const std::string& message);
void clear_last_error();

// Runs body() and returns NL_OK, or the status of what it threw (with the thread's last error
// set). Never throws.
template <class Body>
nl_status api_call(Body&& body) noexcept {
  try {
    clear_last_error();
    body();
    return NL_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

// Throws ApiMisuse (NL_ERR_INVALID_ARGUMENT) when p is NULL: "<function>: <name> is NULL".
template <class T>
void require(const T* p, const char* function, const char* name) {
  if (!p) misuse(function, std::string(name) + " is NULL");
}

// The live handles of one kind. A handle is the address of its object, which the registry
// owns through a shared_ptr: a call holds the object for its duration, so freeing a handle
// while another thread still uses it is safe (the object goes when the last user is done),
// and a freed, foreign or wrong-kind pointer is refused without being read.
template <class T>
class Registry {
 public:
  explicit Registry(const char* kind) : kind_(kind) {}
  T* add(std::shared_ptr<T> obj) {
    T* h = obj.get();
    std::lock_guard<std::mutex> lock(mu_);
    live_[h] = std::move(obj);
    return h;
  }
  // The object behind handle h; throws ApiMisuse when h is not a live handle of this kind.
  std::shared_ptr<T> get(const T* h, const char* function) const {
    if (!h) misuse(function, std::string(kind_) + " handle is NULL");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(h);
    if (it == live_.end())
      misuse(function, std::string("not a live ") + kind_ + " handle (freed already, or another kind of handle)");
    return it->second;
  }
  // Removes h and returns its object (the last reference, unless a call is using it).
  std::shared_ptr<T> remove(const T* h, const char* function) {
    std::shared_ptr<T> obj = get(h, function);
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(h);
    return obj;
  }

 private:
  const char* kind_;
  mutable std::mutex mu_;
  std::unordered_map<const T*, std::shared_ptr<T>> live_;
};

// An options struct as the caller gave it: defaults (from init) overwritten by the caller's
// first struct_size bytes, so a caller built against an older, shorter struct still works.
// NULL gives the defaults. Throws ApiMisuse for a struct_size smaller than the first version's
// or larger than the library knows.
template <class S>
S options_or_defaults(const S* given, void (*init)(S*), size_t first_version_size, const char* function) {
  S o;
  init(&o);
  if (!given) return o;
  const size_t n = given->struct_size;
  if (n < first_version_size || n > sizeof(S))
    misuse(function, "struct_size " + std::to_string(n) + " is not one this library knows (" +
                         std::to_string(first_version_size) + ".." + std::to_string(sizeof(S)) +
                         "): fill the struct with its _init function");
  std::memcpy(static_cast<void*>(&o), static_cast<const void*>(given), n);
  return o;
}

}  // namespace nl::capi
