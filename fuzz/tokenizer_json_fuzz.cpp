// Fuzz target: a tokenizer.json (Hugging Face tokenizers' format), optionally with a
// tokenizer_config.json, loaded as `--model DIR` / `nightlora tokenize` do; a tokenizer that
// loads then encodes and decodes a few lines (plain text, special-token markers, CJK, emoji)
// and lists its vocabulary, as `tokenize` and the data loader would.
// Input: tokenizer.json, optionally followed by "\n----\n" and tokenizer_config.json.
#include <cstdint>
#include <algorithm>
#include <string>

#include "fuzz_util.h"
#include "nightlora/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = nlfuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 2);
  const std::string dir = (nlfuzz::scratch_dir() / "tok").string();
  nlfuzz::write_scratch("tok/tokenizer.json", parts[0]);
  std::error_code ec;
  if (parts.size() > 1)
    nlfuzz::write_scratch("tok/tokenizer_config.json", parts[1]);
  else
    nlfuzz::fs::remove(nlfuzz::fs::path(dir) / "tokenizer_config.json", ec);
  nlfuzz::run_guarded([&] {
    auto tok = nl::Tokenizer::from_hf_dir(dir);
    for (const char* text : {"Hello world, it's 2026!", "<s>[INST] hi [/INST]</s><|im_start|>user\n",
                             "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\n\n  \t x",
                             "caf\xc3\xa9 e\xcc\x81 \xff\xfe broken utf8"}) {
      for (bool special : {false, true}) {
        const auto ids = tok->encode(text, true, special);
        for (int32_t id : ids)
          if (id < 0 || id >= tok->vocab_size()) {
            std::fprintf(stderr, "nlfuzz: FINDING: encode gave id %d outside the vocabulary (%d)\n", id, tok->vocab_size());
            std::abort();
          }
        (void)tok->decode(ids, false);
        (void)tok->decode(ids, true);
      }
    }
    const int32_t n = std::min(tok->vocab_size(), 4096);
    for (int32_t id = 0; id < n; ++id) {
      (void)tok->token_id(tok->token_text(id));
      (void)tok->is_special(id);
    }
    (void)tok->describe();
  });
  return 0;
}
