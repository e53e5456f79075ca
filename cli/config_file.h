// `--config FILE` for `train` and `nightly`: a TOML file whose keys are the command's option
// names without the dashes (`rank = 16`, `lr = 2e-4`, `targets = "q,v"`, `background = true`;
// `train-args = ["--window", "23:00-07:00"]` for nightly's options after --). Options given on
// the command line win over the file. A key no option has, a value of the wrong type (a
// string for --rank, a number for --data) or one the option refuses is an nl::Error naming
// the file and line.
//
// TOML, read with toml11 (Debian's libtoml11-dev): header-only, so the static arm64 phone
// build links nothing more, and its parser gives each value's line. YAML (yaml-cpp) would
// need its library cross-built, and its implicit typing makes `no` a boolean and `1e-4` a
// string.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace nlcli {

// Adds `--config FILE` to a command; returns the option (for its value after parsing).
CLI::Option* add_config_option(CLI::App& sub, std::string& path);

// Sets, from the TOML file at `path`, every option of `sub` that the command line did not
// give, as if it had been given (validators included). Throws nl::Error on a bad file.
void apply_config_file(CLI::App& sub, const std::string& path);

// Every option of `sub` by name (as in a config file) with its value after the command line
// and the config file are merged: what the run was told, for run.json.
nlohmann::json merged_option_values(const CLI::App& sub);

}  // namespace nlcli
