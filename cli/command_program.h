// `nightlora NAME ARGS...` for a command that is an executable of its own (command.h's
// CommandProgram; `serve` is nightlora-serve): nightlora replaces itself with
// `PROGRAM ARGS...` (execv, not a child process), so the pid, the signals, stdin, stdout,
// stderr and the exit code are the program's own, as if it had been started directly.
#pragma once
#include <string>
#include <vector>

#include "command.h"

namespace nlcli {

// The program's path: FILE in the folder of the running executable (/proc/self/exe, so a
// symlink to nightlora finds the program beside the real file), else the first executable
// FILE on PATH; "" when neither. `looked_in` (when given) gets the places tried, in words,
// for the error message.
std::string find_command_program(const std::string& file, std::string* looked_in = nullptr);

// Execs the command's program with `args` (what followed NAME on the command line). Returns
// only by throwing nl::Error: the build has no such program, it is not found (the error says
// where it looked and what to do), or it cannot be executed.
[[noreturn]] void exec_command_program(const Command& command, const std::vector<std::string>& args);

}  // namespace nlcli
