// Fuzz target: the TOML file of `--config FILE` (`train` and `nightly`, cli/config_file.h):
// toml11's parser, then apply_config_file() setting a command's options from it (each value's
// type checked against its option's, the option's own validators run, a wrong one reported
// with its line) and merged_option_values() reading them back for run.json. The command is
// a stand-in built here with the kinds of options train and nightly have (flags, integers
// with ranges, unsigned seeds, numbers, strings with a fixed set of values, a list of strings
// after --), with their validators: the real commands' setup functions also build the whole
// training job, which this target does not need (and the fuzz build would then compile the
// engine). Input: the file's text.
#include <cstdint>
#include <string>
#include <vector>

#include "config_file.h"
#include "fuzz_util.h"

namespace {

// The options a fresh command has (each input gets its own: CLI11 options keep their results).
struct Command {
  CLI::App app{"nightlora"};
  CLI::App* sub = app.add_subcommand("train");
  std::string model, data, out, precision = "auto", schedule = "cosine", targets = "q,k,v,o", max_mem;
  int64_t iters = 0, batch = 4, save_every = 10, keep = 2;
  uint64_t seed = 0;
  double lr = 1e-4, alpha = 16, duty = 0;
  int rank = 8;
  bool background = false, quiet = false, resume = false;
  std::vector<std::string> train_args;
  std::string config;

  Command() {
    sub->add_option("-m,--model", model, "base model");
    sub->add_option("--data", data, "training data");
    sub->add_option("-o,--out", out, "output folder");
    sub->add_option("--iters", iters, "steps")->check(CLI::NonNegativeNumber);
    sub->add_option("--batch", batch, "batch")->check(CLI::PositiveNumber);
    sub->add_option("--rank", rank, "LoRA rank")->check(CLI::Range(1, 1024));
    sub->add_option("--alpha", alpha, "LoRA alpha");
    sub->add_option("--lr", lr, "learning rate")->check(CLI::PositiveNumber);
    sub->add_option("--seed", seed, "seed");
    sub->add_option("--save-every", save_every, "checkpoint every N steps")->check(CLI::NonNegativeNumber);
    sub->add_option("--keep", keep, "checkpoints kept")->check(CLI::Range(1, 1000));
    sub->add_option("--duty", duty, "pacing duty")->check(CLI::Range(0.0, 1.0));
    sub->add_option("--precision", precision, "precision")->check(CLI::IsMember({"auto", "f32", "f16", "int8"}));
    sub->add_option("--schedule", schedule, "schedule")->check(CLI::IsMember({"cosine", "linear", "constant"}));
    sub->add_option("--targets", targets, "LoRA targets");
    sub->add_option("--max-mem", max_mem, "memory budget (a size: 2GiB)");
    sub->add_flag("--background", background, "background job");
    sub->add_flag("-q,--quiet", quiet, "no step lines");
    sub->add_flag("--resume", resume, "resume");
    sub->add_option("train-args", train_args, "options passed on to train (after --)");
    nlcli::add_config_option(*sub, config);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = nlfuzz::write_scratch("config.toml", std::string_view(reinterpret_cast<const char*>(data), size));
  Command c;
  nlfuzz::run_guarded([&] {
    nlcli::apply_config_file(*c.sub, path);
    (void)nlcli::merged_option_values(*c.sub);
  });
  return 0;
}
