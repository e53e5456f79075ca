// nightlora: fine-tune quantized LLMs with LoRA on the device.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "command.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/job/exit_codes.h"

namespace nlcli {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace nlcli

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
  app.require_subcommand(1);
  std::map<CLI::App*, nlcli::Run> runs;
  auto& reg = nlcli::registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& c : reg) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runs[sub] = c.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a wrong option is bad input.
    return app.exit(e) == 0 ? nl::exit_code::kFinished : nl::exit_code::kBadInput;
  }
  try {
    for (auto& [sub, run] : runs)
      if (sub->parsed()) return run();
  } catch (...) {
    std::fflush(stdout);
    const nl::exit_code::ExceptionExit x = nl::exit_code::exit_for_exception(std::current_exception());
    std::cerr << x.message << "\n";
    return x.code;
  }
  return 0;
}
