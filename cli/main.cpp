// nightlora: fine-tune quantized LLMs with LoRA on the device.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "command.h"
#include "nightlora/job/exit_codes.h"

namespace nlcli {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace nlcli

int main(int argc, char** argv) {
  CLI::App app{"nightlora: LoRA fine-tuning of quantized LLMs on the device itself"};
  app.require_subcommand(1);
  std::map<CLI::App*, nlcli::Run> runs;
  auto& reg = nlcli::registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& c : reg) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runs[sub] = c.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a wrong option is bad input.
    return app.exit(e) == 0 ? nl::exit_code::kFinished : nl::exit_code::kBadInput;
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
