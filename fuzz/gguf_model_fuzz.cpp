// Fuzz target: a GGUF model file (`nightlora info/generate/train --model x.gguf`).
// The bytes are written to a file and opened as the CLI does: the GGUF reader (header,
// metadata, tensor table), the rendering `info` prints, the tokenizer held in the metadata
// (which then encodes and decodes a few lines), and the model loader (configuration checks,
// every weight's shape and type). Every tensor the reader accepts is touched at its first and
// last byte, so a byte range that runs past the file is an ASan report.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "touch.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"

using nlfuzz::touch;
using nlfuzz::touch_weights;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      nlfuzz::write_scratch("model.gguf", std::string_view(reinterpret_cast<const char*>(data), size));
  bool opened = false;
  nlfuzz::run_guarded([&] {
    auto f = nl::GgufFile::open(path);
    opened = true;
    for (const auto& kv : f->metadata()) (void)kv.second.to_string();
    for (const auto& t : f->tensors()) touch(t.data, t.nbytes);
    nlfuzz::run_guarded([&] {
      auto tok = nl::Tokenizer::from_gguf(*f);
      for (const char* text : {"Hello world", " <s>once upon a time</s>\n\n", "\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80"}) {
        const auto ids = tok->encode(text, true, true);
        (void)tok->decode(ids);
      }
    });
  });
  // The model loader opens the file itself; only worth it when the reader accepted it.
  if (opened) {
    nlfuzz::run_guarded([&] {
      auto m = nl::Model::load(path);
      touch_weights(*m);
      if (m->tokenizer) (void)m->tokenizer->decode(m->tokenizer->encode("Once upon a time", true));
    });
  }
  return 0;
}
