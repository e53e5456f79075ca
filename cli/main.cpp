// nightlora: fine-tune quantized LLMs with LoRA on the device.
// The commands register themselves (cli/cmd_*.cpp, command.h); command_line.cpp runs them.
// `serve` is an executable of its own, nightlora-serve (cli/serve/), so that no other
// command loads the HTTP stack (libcpp-httplib, OpenSSL, zlib, brotli: ~10 ms per start).
#include <string>

#include "command.h"
#include "nightlora/engine/frozen_engine.h"

namespace {

// What `nightlora --version` prints: the version, the commit the build was configured at,
// the engine backends built in and the cpu engine's kernel sets on this CPU.
std::string version_text() {
  std::string backends;
  for (const std::string& b : nl::engine_backends_built()) backends += (backends.empty() ? "" : ", ") + b;
  std::string kernels;
  try {
    kernels = nl::cpu_engine_isa();
  } catch (const std::exception& e) {  // an NL_ENGINE_ISA / NL_INT8_VNNI override this CPU cannot run
    kernels = std::string("none: ") + e.what();
  }
  return std::string("nightlora ") + NL_VERSION + " (commit " + NL_GIT_COMMIT + ")\n" +
         "engines: " + backends + "\n" + "cpu engine kernels on this CPU: " + kernels +
         " (f32 panels, int8 set; NL_ENGINE_ISA and NL_INT8_VNNI override)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nightlora: LoRA fine-tuning of quantized LLMs on the device itself"};
  app.set_version_flag("--version", version_text, "print the version, the engines and the kernel sets, and exit");
  return nlcli::run_command_line(app, argc, argv);
}
