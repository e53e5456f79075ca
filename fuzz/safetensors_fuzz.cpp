// Fuzz target: a safetensors file (Hugging Face weights, PEFT adapters). The bytes are opened
// with the safetensors reader (header length, JSON header, dtypes, shapes, byte ranges), each
// accepted tensor touched at its first and last byte; then loaded as the weights of a PEFT
// adapter folder (adapter_model.safetensors beside a valid adapter_config.json that nightlora
// wrote for the real stories260K model), as `--adapter DIR` does.
#include <cstdint>
#include <string>

#include "fuzz_model.h"
#include "fuzz_util.h"
#include "touch.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/safetensors.h"

namespace {

// A PEFT folder written by save_adapter_peft (rank 2 on q and v); inputs replace its weights.
const std::string& peft_dir() {
  static const std::string dir = [] {
    const std::string d = (nlfuzz::scratch_dir() / "peft").string();
    nl::LoraConfig cfg;
    cfg.rank = 2;
    cfg.targets = nl::LoraConfig::parse_targets("q,v");
    nl::save_adapter_peft(nl::LoraAdapter::init(nlfuzz::stories260k().config, cfg), nlfuzz::stories260k(), d);
    return d;
  }();
  return dir;
}


}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)peft_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string path = nlfuzz::write_scratch("peft/adapter_model.safetensors", bytes);
  bool opened = false;
  nlfuzz::run_guarded([&] {
    auto f = nl::SafetensorsFile::open(path);
    opened = true;
    for (const auto& t : f->tensors()) nlfuzz::touch(t.data, t.nbytes);
    for (const auto& kv : f->metadata()) (void)kv;
  });
  if (opened) {
    nlfuzz::run_guarded([&] { (void)nl::load_adapter(peft_dir(), nlfuzz::stories260k()).n_params(); });
  }
  return 0;
}
