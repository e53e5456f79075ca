// The CLI is a thin layer over the library: one file per command (cli/cmd_*.cpp), each
// registering itself here. A command's setup adds its options to its CLI11 subcommand and
// returns the function that runs it (returning the process exit code).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace nlcli {

using Run = std::function<int()>;
using Setup = std::function<Run(CLI::App& sub)>;

struct Command {
  std::string name;
  std::string help;
  Setup setup;
};

std::vector<Command>& registry();

struct Register {
  Register(std::string name, std::string help, Setup setup) {
    registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace nlcli
