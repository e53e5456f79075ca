// Fuzz target: a Hugging Face model folder's config.json (and tokenizer_config.json), loaded
// as `--model DIR` does. The folder holds the real tinystories-656k weights and tokenizer.json
// (../shared, linked) beside the fuzzed files, so the loader gets past its own checks into
// the shapes it derives from the configuration.
// Input: config.json, optionally followed by "\n----\n" and tokenizer_config.json.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "touch.h"
#include "nightlora/modelio/model.h"

namespace {

const std::string& model_dir() {
  static const std::string dir = [] {
    const auto src = nlfuzz::require_file(nlfuzz::shared_dir() / "models/tinystories-656k", "tinystories-656k");
    const auto d = nlfuzz::scratch_dir() / "hf";
    nlfuzz::fs::create_directories(d);
    for (const char* name : {"model.safetensors", "tokenizer.json"})
      nlfuzz::fs::create_symlink(nlfuzz::fs::absolute(src / name), d / name);
    return d.string();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)model_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = nlfuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 2);
  nlfuzz::write_scratch("hf/config.json", parts[0]);
  const auto tc = nlfuzz::fs::path(model_dir()) / "tokenizer_config.json";
  if (parts.size() > 1) {
    nlfuzz::write_scratch("hf/tokenizer_config.json", parts[1]);
  } else {
    std::error_code ec;
    nlfuzz::fs::remove(tc, ec);
  }
  nlfuzz::run_guarded([&] { nlfuzz::touch_weights(*nl::Model::load(model_dir())); });
  return 0;
}
