// Tokenizers that reproduce the reference implementations exactly:
//  - SentencePiece-style BPE with byte fallback (GGUF tokenizer.ggml.model = "llama",
//    or a tokenizer.json BPE model with byte_fallback and the "▁" normalizer);
//  - byte-level BPE (GGUF "gpt2", or tokenizer.json ByteLevel) with the pre-tokenizer
//    rules of Llama 3 ("llama-bpe") and Qwen2/3 ("qwen2").
// Loaded from GGUF metadata or from a Hugging Face tokenizer.json (+ tokenizer_config.json).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nl {

class GgufFile;
class GgufWriter;

enum class TokenizerKind { SentencePieceBpe, ByteLevelBpe };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);
  // `dir` holds tokenizer.json and, optionally, tokenizer_config.json.
  static std::unique_ptr<Tokenizer> from_hf_dir(const std::string& dir);
  // `path` is a GGUF file or a folder with tokenizer.json; needs no weights.
  static std::unique_ptr<Tokenizer> from_path(const std::string& path);

  // Encodes text. With parse_special, occurrences of special/added tokens in the text
  // become those tokens; otherwise they are encoded as plain text. add_bos prepends BOS
  // when the tokenizer has one.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = true) const = 0;
  // Decodes ids to text (special tokens rendered as their text unless skip_special).
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;

  virtual TokenizerKind kind() const = 0;
  // A short description for `info`: e.g. "llama (SentencePiece BPE, byte fallback)",
  // "gpt2/qwen2 (byte-level BPE)".
  virtual std::string describe() const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual std::string token_text(int32_t id) const = 0;  // the vocabulary entry as stored
  virtual int32_t token_id(const std::string& text) const = 0;  // -1 if absent
  virtual bool is_special(int32_t id) const = 0;

  int32_t bos() const { return bos_; }  // -1 when none
  int32_t eos() const { return eos_; }  // -1 when none
  // Extra ids that also end a generation (e.g. <|eot_id|>, <|im_end|>).
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  bool add_bos_default() const { return add_bos_; }
  // The Jinja chat template text from the file ("" when none).
  const std::string& chat_template() const { return chat_template_; }

  // Writes the tokenizer as GGUF metadata (tokenizer.ggml.*), for convert/synth-model.
  virtual void write_gguf(GgufWriter& w) const = 0;

 protected:
  int32_t bos_ = -1, eos_ = -1;
  std::vector<int32_t> eog_;
  bool add_bos_ = false;
  std::string chat_template_;
};

}  // namespace nl
