// The complete description of a tokenizer, independent of the file it came from: both
// loaders (tokenizer.json, GGUF metadata) fill one of these and PipelineTokenizer runs it.
// Internal to the tokenizer module.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nightlora/tokenizer/tokenizer.h"

namespace nl {

// GGUF / llama.cpp token types.
enum TokenType : int32_t { kTokNormal = 1, kTokUnknown = 2, kTokControl = 3, kTokUserDefined = 4, kTokUnused = 5, kTokByte = 6 };

// A token matched literally in the input before the BPE model runs (special tokens such as
// <|im_start|>, and user-added tokens).
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = true;      // parse_special=false leaves special ones as plain text
  bool lstrip = false;      // absorbs whitespace on its left
  bool rstrip = false;      // absorbs whitespace on its right
  bool normalized = false;  // matched in the normalized text instead of the raw text
};

// One normalizer step, applied in order to each piece of text between added tokens.
struct NormalizerStep {
  enum Kind { Nfc, Prepend, Replace } kind = Nfc;
  std::string a, b;  // Prepend: a = prefix. Replace: a -> b (literal strings)
};

struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  std::string source;  // the file it came from, for messages

  std::vector<std::string> tokens;  // id -> text as stored in the vocabulary
  std::vector<float> scores;        // SentencePiece scores (merge priority when there are no merges)
  std::vector<int32_t> types;       // id -> TokenType
  std::vector<std::pair<std::string, std::string>> merges;  // rank order; empty: merge by score
  bool ignore_merges = false;       // a whole pre-token that is in the vocabulary is one token
  bool byte_fallback = false;       // unknown characters become <0xXX> tokens when present
  bool fuse_unk = false;            // consecutive unknown characters give one <unk>
  int32_t unk = -1;

  std::vector<NormalizerStep> normalizer;
  std::string pre_name;   // byte-level: "qwen2", "llama-bpe", "gpt2"
  std::string pre_regex;  // byte-level: the split regex (HF syntax)
  bool strip_leading_space = false;  // SentencePiece decoder drops the one space the normalizer prepended

  std::vector<AddedToken> added;

  int32_t bos = -1, eos = -1, eot = -1;
  std::vector<int32_t> eog;
  bool add_bos = false;
  std::string chat_template;
};

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(TokenizerSpec spec);

// The two byte-level pre-tokenizer regexes we know by name (HF syntax).
extern const char* const kQwen2Regex;
extern const char* const kLlama3Regex;
extern const char* const kGpt2Regex;

// Fills eog with eos, eot and the end-of-turn tokens the vocabulary has.
void collect_end_of_generation(TokenizerSpec& spec);

}  // namespace nl
