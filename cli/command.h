// The CLI is a thin layer over the library: one file per command (cli/cmd_*.cpp), each
// registering itself here. A command's setup adds its options to its CLI11 subcommand and
// returns the function that runs it (returning the process exit code).
//
// A command may instead live in an executable of its own (`serve` is nightlora-serve, so
// that only the server loads its HTTP stack: cli/serve/): its entry here names that program,
// and `nightlora NAME ARGS...` replaces itself with `PROGRAM ARGS...` (command_program.h).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace nlcli {

using Run = std::function<int()>;
using Setup = std::function<Run(CLI::App& sub)>;

// The executable that runs a command, for `nightlora NAME` (command_program.cpp finds it).
struct CommandProgram {
  std::string file;          // its file name ("nightlora-serve"): beside nightlora, else on PATH
  bool built = true;         // false: this build has none (it needs a library it was built without)
  std::string how_to_build;  // what to do when it is missing or not built
};

struct Command {
  std::string name;
  std::string help;
  Setup setup;             // the options and the run function (empty for a program's command)
  CommandProgram program;  // the executable that runs it, when program.file is not empty
};

std::vector<Command>& registry();

struct Register {
  Register(std::string name, std::string help, Setup setup) {
    registry().push_back({std::move(name), std::move(help), std::move(setup), {}});
  }
  Register(std::string name, std::string help, CommandProgram program) {
    registry().push_back({std::move(name), std::move(help), {}, std::move(program)});
  }
};

// The front end of nightlora and nightlora-serve: the registered commands as subcommands of
// `app`, argv parsed (a mistyped command or option gets "did you mean"), the chosen command
// run; an exception becomes its message on stderr and its exit code (nl::exit_code).
int run_command_line(CLI::App& app, int argc, char** argv);

}  // namespace nlcli
