// Tokenizer::from_gguf: reads llama.cpp's tokenizer.ggml.* metadata.
//   "llama": SentencePiece-style BPE; merges by token score (or by tokenizer.ggml.merges when
//            present, as nightlora writes for tokenizers that came from tokenizer.json),
//            byte fallback, a "▁" prefix when add_space_prefix (default true).
//   "gpt2":  byte-level BPE with merges; tokenizer.ggml.pre picks the split regex
//            ("qwen2": Qwen2/3, NFC-normalized; "llama-bpe"/"llama3": Llama 3, ignore_merges).
// Control, user-defined and unknown tokens are matched literally in the text (llama.cpp does
// the same).
#include <algorithm>

#include "nightlora/modelio/gguf.h"
#include "nightlora/util/error.h"
#include "tokenizer/tokenizer_spec.h"

namespace nl {
namespace {

const std::string kSentencePieceSpace = "\xE2\x96\x81";

int32_t optional_id(const GgufFile& f, const std::string& key, size_t n_vocab) {
  const GgufValue* v = f.find(key);
  if (!v) return -1;
  if (v->is_array() || v->type == GgufType::STRING)
    fail(f.path(), "metadata " + key + " should be a token id, found " + gguf_type_name(v->type));
  const double id = v->as_number();
  if (id < 0 || id >= double(n_vocab))
    return -1;  // llama.cpp writes -1 / out-of-range ids for "none" in some files
  return int32_t(id);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  TokenizerSpec spec;
  spec.source = f.path();
  const std::string model = f.get_str("tokenizer.ggml.model", "");
  if (model.empty()) fail(f.path(), "no tokenizer in this GGUF (tokenizer.ggml.model is missing)");

  const GgufValue* toks = f.find("tokenizer.ggml.tokens");
  if (!toks || !toks->is_array() || toks->elem != GgufType::STRING || toks->arr_s.empty())
    fail(f.path(), "tokenizer.ggml.tokens is missing or not a non-empty string array");
  spec.tokens = toks->arr_s;
  const size_t n = spec.tokens.size();

  spec.types.assign(n, kTokNormal);
  if (const GgufValue* tt = f.find("tokenizer.ggml.token_type")) {
    if (!tt->is_array() || (tt->arr_i.size() != n && tt->arr_u.size() != n))
      fail(f.path(), "tokenizer.ggml.token_type should be an array of " + std::to_string(n) + " integers");
    for (size_t i = 0; i < n; ++i)
      spec.types[i] = int32_t(tt->arr_i.size() == n ? tt->arr_i[i] : int64_t(tt->arr_u[i]));
  }
  if (const GgufValue* sc = f.find("tokenizer.ggml.scores")) {
    if (!sc->is_array() || sc->array_size() != n || sc->arr_f.size() != n)
      fail(f.path(), "tokenizer.ggml.scores should be an array of " + std::to_string(n) + " floats");
    spec.scores.assign(sc->arr_f.begin(), sc->arr_f.end());
  }
  if (const GgufValue* mg = f.find("tokenizer.ggml.merges")) {
    if (!mg->is_array() || mg->elem != GgufType::STRING) fail(f.path(), "tokenizer.ggml.merges should be a string array");
    for (const std::string& m : mg->arr_s) {
      const size_t sp = m.find(' ', 1);  // a merge's left part is never empty
      if (sp == std::string::npos) fail(f.path(), "merge \"" + m + "\" in tokenizer.ggml.merges has no space");
      spec.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
  }

  spec.bos = optional_id(f, "tokenizer.ggml.bos_token_id", n);
  spec.eos = optional_id(f, "tokenizer.ggml.eos_token_id", n);
  spec.eot = optional_id(f, "tokenizer.ggml.eot_token_id", n);
  spec.unk = optional_id(f, "tokenizer.ggml.unknown_token_id", n);
  spec.chat_template = f.get_str("tokenizer.chat_template", "");
  spec.fuse_unk = f.get_bool("tokenizer.nightlora.fuse_unk", false);

  std::vector<int32_t> normalized_added;
  if (const GgufValue* na = f.find("tokenizer.nightlora.normalized_added_tokens"))
    for (int64_t id : na->arr_i) normalized_added.push_back(int32_t(id));

  if (model == "llama") {
    spec.kind = TokenizerKind::SentencePieceBpe;
    if (spec.merges.empty() && spec.scores.size() != n)
      fail(f.path(), "a \"llama\" tokenizer needs tokenizer.ggml.scores (or merges)");
    spec.byte_fallback = f.get_bool("tokenizer.nightlora.byte_fallback", true);
    const bool prefix = f.get_bool("tokenizer.ggml.add_space_prefix", true);
    if (prefix) spec.normalizer.push_back({NormalizerStep::Prepend, kSentencePieceSpace, ""});
    spec.normalizer.push_back({NormalizerStep::Replace, " ", kSentencePieceSpace});
    spec.strip_leading_space = prefix;
    spec.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", true);
    if (spec.unk < 0) {
      auto it = std::find(spec.types.begin(), spec.types.end(), int32_t(kTokUnknown));
      if (it != spec.types.end()) spec.unk = int32_t(it - spec.types.begin());
    }
  } else if (model == "gpt2") {
    spec.kind = TokenizerKind::ByteLevelBpe;
    if (spec.merges.empty()) fail(f.path(), "a \"gpt2\" tokenizer needs tokenizer.ggml.merges");
    const std::string pre = f.get_str("tokenizer.ggml.pre", "default");
    if (pre == "qwen2") {
      spec.pre_name = "qwen2";
      spec.pre_regex = kQwen2Regex;
      spec.normalizer.push_back({NormalizerStep::Nfc, "", ""});
    } else if (pre == "llama-bpe" || pre == "llama3") {
      spec.pre_name = "llama-bpe";
      spec.pre_regex = kLlama3Regex;
      spec.ignore_merges = true;
    } else if (pre == "gpt2" || pre == "default") {
      spec.pre_name = "gpt2";
      spec.pre_regex = kGpt2Regex;
    } else {
      fail(f.path(), "unknown tokenizer.ggml.pre \"" + pre + "\"", "supported: qwen2, llama-bpe (llama3), gpt2");
    }
    spec.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", spec.pre_name == "llama-bpe");
  } else {
    fail(f.path(), "unsupported tokenizer.ggml.model \"" + model + "\"", "supported: llama (SentencePiece BPE), gpt2 (byte-level BPE)");
  }
  if (spec.bos < 0) spec.add_bos = false;

  for (size_t i = 0; i < n; ++i) {
    const int32_t t = spec.types[i];
    if (t != kTokControl && t != kTokUserDefined && t != kTokUnknown) continue;
    AddedToken a;
    a.id = int32_t(i);
    a.content = spec.tokens[i];
    a.special = t != kTokUserDefined;
    a.normalized = std::find(normalized_added.begin(), normalized_added.end(), a.id) != normalized_added.end();
    spec.added.push_back(a);
  }
  collect_end_of_generation(spec);
  return make_pipeline_tokenizer(std::move(spec));
}

}  // namespace nl
