// See command_program.h.
#include "command_program.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "nightlora/util/error.h"

namespace nlcli {
namespace {

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// The folder of the running executable, "" when /proc is not mounted.
std::string own_folder() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

}  // namespace

std::string find_command_program(const std::string& file, std::string* looked_in) {
  std::vector<std::string> path_dirs;
  const char* path_env = std::getenv("PATH");
  const std::string path_list = path_env ? path_env : "";
  for (size_t at = 0; at <= path_list.size();) {
    const size_t end = std::min(path_list.find(':', at), path_list.size());
    const std::string dir = path_list.substr(at, end - at);
    if (!dir.empty()) path_dirs.push_back(dir);  // an empty entry (the current folder) is not searched
    at = end + 1;
  }
  const std::string own = own_folder();
  std::vector<std::string> places;
  if (!own.empty()) places.push_back(own);
  places.insert(places.end(), path_dirs.begin(), path_dirs.end());
  for (const std::string& dir : places) {
    const std::string candidate = dir + "/" + file;
    if (is_executable_file(candidate)) return candidate;
  }
  if (looked_in) {
    std::string dirs;
    for (const std::string& d : path_dirs) dirs += (dirs.empty() ? "" : ":") + d;
    *looked_in = (own.empty() ? std::string("nowhere beside this nightlora (no /proc/self/exe)")
                              : own + " (beside this nightlora)") +
                 " and on PATH (" + (dirs.empty() ? std::string("empty") : dirs) + ")";
  }
  return "";
}

void exec_command_program(const Command& command, const std::vector<std::string>& args) {
  const CommandProgram& program = command.program;
  const std::string where = "nightlora " + command.name;
  if (!program.built)
    nl::fail(where, "this build of nightlora has no " + program.file, program.how_to_build);
  std::string looked_in;
  const std::string path = find_command_program(program.file, &looked_in);
  if (path.empty())
    nl::fail(where, "needs the executable " + program.file + ", which is not installed: looked in " + looked_in,
             program.how_to_build);
  std::vector<char*> argv;
  std::string argv0 = path;
  argv.push_back(argv0.data());
  std::vector<std::string> copies(args);
  for (std::string& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  const int err = errno;  // execv returns only on failure
  nl::fail(path, std::string("cannot be executed: ") + std::strerror(err),
           "check its permissions and that it was built for this machine; " + program.how_to_build);
}

}  // namespace nlcli
