// Fuzz target: the state files `nightlora nightly status OUT` reads (eval/nightly_status.h):
// a sealed run's decision.json, an abandoned run's abandoned.json and the unfinished run's
// failures.json (written by the job itself, but a status command must not fall over a file
// damaged or edited by hand). The status is made as the command makes it, then rendered as
// text. Input: decision.json "\n----\n" abandoned.json "\n----\n" failures.json (an absent
// part: no such file).
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "nightlora/eval/nightly_status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = nlfuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 3);
  const nlfuzz::fs::path out = nlfuzz::scratch_dir() / "job";
  const char* files[] = {"runs/0001/decision.json", "runs/0002/abandoned.json", "runs/0003/failures.json"};
  for (size_t i = 0; i < 3; ++i) {
    std::error_code ec;
    nlfuzz::fs::remove(out / files[i], ec);
    nlfuzz::fs::create_directories((out / files[i]).parent_path(), ec);
    if (i < parts.size()) nlfuzz::write_scratch(std::string("job/") + files[i], parts[i]);
  }
  nlfuzz::run_guarded([&] { (void)nl::nightly_status_text(nl::nightly_status(out.string(), 5)); });
  return 0;
}
