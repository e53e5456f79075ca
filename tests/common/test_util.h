// Helpers shared by all test programs: where the shared models are, how to run the CLI.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace nltest {

namespace fs = std::filesystem;

// The project's source folder.
fs::path source_dir();

// ../shared/models (or $NL_SHARED/models). Empty path when absent.
fs::path shared_models_dir();

// Skips the current test with a clear message when ../shared/models/<sub> is absent.
#define NL_REQUIRE_SHARED(sub, var)                                                         \
  fs::path var = nltest::shared_models_dir() / (sub);                                        \
  if (nltest::shared_models_dir().empty() || !fs::exists(var))                               \
    GTEST_SKIP() << "shared model data not present: " << (sub)                              \
                 << " (expected under ../shared/models; set NL_SHARED to its parent)";

// A fresh, empty temporary folder, removed when the object goes out of scope.
struct TempDir {
  TempDir();
  ~TempDir();
  fs::path path;
  fs::path operator/(const std::string& s) const { return path / s; }
};

struct CmdResult {
  int rc = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command line, capturing stdout and stderr; stdin from `input` when given.
CmdResult run_cmd(const std::string& cmdline, const std::string& input = "");

// Runs the nightlora CLI built with the tests, with the given arguments (already quoted).
CmdResult run_cli(const std::string& args, const std::string& input = "");

// Quotes a string for /bin/sh.
std::string shq(const std::string& s);

std::string read_text(const fs::path& p);
void write_text(const fs::path& p, const std::string& s);
// The rows of a JSONL file (a run's log.jsonl); with `type`, only the rows of that "type".
std::vector<nlohmann::json> read_jsonl(const fs::path& p, const std::string& type = "");

// Path to Debian's python3 (with torch) for reference implementations; empty if missing.
std::string python_with_torch();
// Path to node with tools/js/node_modules installed; empty if missing.
std::string node_with_oracles();

// n floats drawn from N(0, scale^2) by a seeded mt19937: the same values on every machine.
std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f);

}  // namespace nltest
