// nightlora-serve: the executable that runs `nightlora serve` (nightlora execs it with the
// arguments after `serve`: cli/cmd_serve.cpp). Only this program links the serve module and
// its HTTP stack. Its one command is cli/serve/cmd_serve.cpp's, read by the same front end as
// nightlora's commands (cli/command_line.cpp): the line is read as `nightlora serve ARGS...`,
// so --help, the errors and "did you mean" name `nightlora serve`, as the user typed it.
#include <string>
#include <vector>

#include "command.h"

int main(int argc, char** argv) {
  std::vector<std::string> words = {"nightlora", "serve"};
  words.insert(words.end(), argv + (argc > 0 ? 1 : 0), argv + argc);
  std::vector<char*> line;
  for (std::string& w : words) line.push_back(w.data());
  line.push_back(nullptr);
  CLI::App app{"nightlora-serve: `nightlora serve`, the OpenAI API over one resident model"};
  return nlcli::run_command_line(app, static_cast<int>(words.size()), line.data());
}
