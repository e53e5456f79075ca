// nightlora: fine-tune quantized LLMs with LoRA on the device.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "command.h"
#include "did_you_mean.h"
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

// The subcommand the user picked (the deepest, as in `nightly status`), or the app itself.
CLI::App* chosen(CLI::App& app) {
  CLI::App* at = &app;
  for (std::vector<CLI::App*> subs = at->get_subcommands(); !subs.empty(); subs = at->get_subcommands()) at = subs.front();
  return at;
}

// "Did you mean" lines for the options on the command line that `sub` does not have.
std::string unknown_option_hints(CLI::App& sub, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : sub.get_options())
    for (const std::string& n : opt->get_lnames()) names.push_back(n);
  std::string hints;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0 || arg.size() < 3) continue;
    const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    if (sub.get_option_no_throw("--" + name) != nullptr) continue;
    std::string command;
    for (const CLI::App* at = &sub; at->get_parent() != nullptr; at = at->get_parent()) command = " " + at->get_name() + command;
    hints += "nightlora" + command + ": unknown option --" + name + "." +
             nlcli::did_you_mean(name, names, "--") + "\n";
  }
  return hints;
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
  // A mistyped command: say which ones are close (CLI11 would only say one is required).
  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto& c : reg) names.push_back(c.name);
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::cerr << "nightlora: '" << argv[1] << "' is not a command." << nlcli::did_you_mean(argv[1], names)
                << "\nThe commands are listed by `nightlora --help`.\n";
      return nl::exit_code::kBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a wrong option is bad input.
    const int rc = app.exit(e) == 0 ? nl::exit_code::kFinished : nl::exit_code::kBadInput;
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) std::cerr << unknown_option_hints(*chosen(app), argc, argv);
    return rc;
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
