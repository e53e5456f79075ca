// The front end that nightlora (cli/main.cpp) and nightlora-serve (cli/serve/main.cpp)
// share: command.h's registry as CLI11 subcommands, the parse, "did you mean" for a mistyped
// command or option, and the exit code of an exception. One copy, so `nightlora serve` reads
// its command line and reports mistakes exactly as the other commands do.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "command.h"
#include "command_program.h"
#include "did_you_mean.h"
#include "nightlora/job/exit_codes.h"

namespace nlcli {

std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

namespace {

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

// An exception as its message on stderr; returns its exit code.
int report_exception() {
  std::fflush(stdout);
  const nl::exit_code::ExceptionExit x = nl::exit_code::exit_for_exception(std::current_exception());
  std::cerr << x.message << "\n";
  return x.code;
}

}  // namespace

int run_command_line(CLI::App& app, int argc, char** argv) {
  app.require_subcommand(1);
  auto& reg = registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  // A command that is its own executable: everything after its name is that program's, --help
  // included, so it is exec'd before anything here parses the line.
  if (argc >= 2)
    for (const Command& c : reg)
      if (!c.program.file.empty() && c.name == argv[1]) {
        try {
          exec_command_program(c, std::vector<std::string>(argv + 2, argv + argc));
        } catch (...) {
          return report_exception();
        }
      }
  // Only the command on the line gets its options: the others are listed by --help with
  // their one line, and building every command's CLI11 options at every start was ~4 M
  // instructions, most of `nightlora --version`'s own work (docs/performance/
  // startup-2026-12-06-zen5.md).
  std::map<CLI::App*, Run> runs;
  for (auto& c : reg) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);  // a program's command: listed by --help
    if (c.setup && argc >= 2 && c.name == argv[1]) runs[sub] = c.setup(*sub);
  }
  // A mistyped command: say which ones are close (CLI11 would only say one is required).
  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto& c : reg) names.push_back(c.name);
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::cerr << "nightlora: '" << argv[1] << "' is not a command." << did_you_mean(argv[1], names)
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
    return report_exception();
  }
  return 0;
}

}  // namespace nlcli
