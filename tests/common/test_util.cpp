#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace nltest {

namespace {
// `--precision auto` (train's default) reuses plans from a user cache (plan_cache.h). A test's
// outcome must not depend on what earlier runs left there, so every test process (and the CLI
// runs it starts, which inherit the environment) runs with the cache off unless the caller
// set NIGHTLORA_CACHE_DIR; the cache's own tests name a folder with --plan-cache.
const bool plan_cache_off_in_tests = setenv("NIGHTLORA_CACHE_DIR", "off", 0) == 0;
}  // namespace

fs::path source_dir() { return fs::path(NL_SOURCE_DIR); }

fs::path shared_models_dir() {
  if (const char* e = std::getenv("NL_SHARED")) {
    fs::path p = fs::path(e) / "models";
    return fs::exists(p) ? p : fs::path();
  }
  fs::path p = source_dir().parent_path() / "shared" / "models";
  return fs::exists(p) ? p : fs::path();
}

TempDir::TempDir() {
  std::random_device rd;
  for (;;) {
    path = fs::temp_directory_path() / ("nltest-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
    if (fs::create_directory(path)) break;
  }
}
TempDir::~TempDir() {
  std::error_code ec;
  if (!std::getenv("NL_KEEP_TMP")) fs::remove_all(path, ec);
}

std::string shq(const std::string& s) {
  std::string r = "'";
  for (char c : s) {
    if (c == '\'') r += "'\\''";
    else r += c;
  }
  return r + "'";
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p, const std::string& type) {
  std::vector<nlohmann::json> rows;
  std::istringstream in(read_text(p));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line);
    if (type.empty() || row.value("type", "") == type) rows.push_back(std::move(row));
  }
  return rows;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

CmdResult run_cmd(const std::string& cmdline, const std::string& input) {
  TempDir td;
  fs::path in = td / "in", out = td / "out", err = td / "err";
  write_text(in, input);
  std::string full = "(" + cmdline + ") <" + shq(in.string()) + " >" + shq(out.string()) + " 2>" + shq(err.string());
  int st = std::system(full.c_str());
  CmdResult r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

CmdResult run_cli(const std::string& args, const std::string& input) {
  return run_cmd(shq(NL_CLI_PATH) + " " + args, input);
}

std::string python_with_torch() {
  for (const char* p : {"/usr/bin/python3"}) {
    if (access(p, X_OK) == 0 && std::system((std::string(p) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0)
      return p;
  }
  return "";
}

std::string node_with_oracles() {
  if (!fs::exists(source_dir() / "tools/js/node_modules")) return "";
  if (std::system("node --version >/dev/null 2>&1") != 0) return "";
  return "node";
}

std::vector<float> random_vec(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng) * scale;
  return v;
}

}  // namespace nltest
