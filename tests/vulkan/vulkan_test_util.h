// Helpers of the Vulkan backend's tests: an engine on the Vulkan device, or a skip that says
// why there is none (a build without the backend, or a machine without a Vulkan device).
#pragma once
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/tokenizer/tokenizer.h"  // nl::Model owns one
#include "nightlora/util/error.h"

// The vulkan engine for `model`, or nullptr with `why` set when this build or machine has
// no Vulkan (other errors propagate: they are failures).
inline std::unique_ptr<nl::FrozenEngine> try_vulkan_engine(const nl::Model& model, std::string& why) {
#ifndef NL_HAVE_VULKAN
  (void)model;
  why = "this build has no Vulkan backend (install libvulkan-dev and glslc, reconfigure)";
  return nullptr;
#else
  nl::EngineOptions o;
  o.backend = "vulkan";
  try {
    return nl::make_engine(model, o);
  } catch (const nl::Error& e) {
    const std::string msg = e.what();
    if (msg.find("no Vulkan device") != std::string::npos || msg.find("cannot create a Vulkan instance") != std::string::npos) {
      why = "no Vulkan device on this machine (install mesa-vulkan-drivers for lavapipe): " + msg;
      return nullptr;
    }
    throw;
  }
#endif
}

// Declares `var`, the vulkan engine for `model`, or skips the test saying why there is none.
#define NL_VULKAN_ENGINE_OR_SKIP(var, model)                  \
  std::unique_ptr<nl::FrozenEngine> var;                      \
  {                                                           \
    std::string why_no_vulkan;                                \
    var = try_vulkan_engine((model), why_no_vulkan);          \
    if (!var) GTEST_SKIP() << why_no_vulkan;                  \
  }

// True when this build has the backend and the machine a Vulkan device (for CLI tests).
inline bool vulkan_available(std::string& why) {
  nl::Model m;
  m.config.n_layer = 0;
  static float w[32] = {};
  m.weights.output.name = "probe";
  m.weights.output.type = nl::QType::F32;
  m.weights.output.ne = {32, 1};
  m.weights.output.data = reinterpret_cast<const uint8_t*>(w);
  m.weights.output.nbytes = sizeof(w);
  return try_vulkan_engine(m, why) != nullptr;
}

// Sets an environment variable for the scope, restoring the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};
