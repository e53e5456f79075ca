// Fuzz target: a LoRA adapter in GGUF (`--adapter x.gguf`, llama.cpp's adapter format), loaded
// against the real stories260K model: the GGUF reader, then the adapter loader's checks of
// architecture, layer numbers, tensor names, shapes, types and the alpha value.
#include <cstdint>
#include <string>

#include "fuzz_model.h"
#include "fuzz_util.h"
#include "nightlora/host/adapter_io.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)nlfuzz::stories260k();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      nlfuzz::write_scratch("adapter.gguf", std::string_view(reinterpret_cast<const char*>(data), size));
  nlfuzz::run_guarded([&] {
    const nl::LoraAdapter a = nl::load_adapter(path, nlfuzz::stories260k());
    (void)a.n_params();
    (void)a.all_finite();
  });
  return 0;
}
