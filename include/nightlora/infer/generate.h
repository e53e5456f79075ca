// The generation loop (prompt -> new tokens until a stop token or a length limit) and the
// incremental detokenizer that turns the stream of ids into text as it is produced.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nightlora/infer/decoder.h"
#include "nightlora/infer/sampler.h"

namespace nl {

class Tokenizer;

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  // Generation ends, without emitting it, when one of these is produced.
  std::vector<int32_t> stop_ids;
  // Only ids below this are ever chosen (0: any). Models often pad their embedding beyond
  // the tokenizer's vocabulary; those rows are not tokens and must never be sampled.
  int32_t vocab_limit = 0;
};

struct GenerateResult {
  std::vector<int32_t> ids;      // the new tokens (no prompt, no stop token)
  bool stopped_on_token = false; // ended by a stop id rather than the length limit
  // Timings (wall clock), as llama.cpp reports them: the prompt's forward pass, and the
  // one-token forward passes after it (each with the sampling and callback before it).
  int64_t prompt_tokens = 0;
  double prompt_s = 0;
  int64_t decoded_tokens = 0;  // one-token forward passes run
  double decode_s = 0;
};

// Called for each new token with the logits it was chosen from; return false to stop.
using OnToken = std::function<bool(int32_t id, std::span<const float> logits)>;

// Feeds `prompt` (at least one token) to a freshly reset decoder and then samples up to
// max_new_tokens tokens.
GenerateResult generate(Decoder& decoder, Sampler& sampler, const std::vector<int32_t>& prompt,
                        const GenerateOptions& opt, const OnToken& on_token = {});

// The ids a generation with this tokenizer should stop on: EOS, the end-of-generation ids,
// and BOS (a model that starts a new document has finished this one; llama2.c's run.c
// stops on BOS the same way).
std::vector<int32_t> default_stop_ids(const Tokenizer& tok);

// Turns generated ids into text incrementally. Text is decoded in context (prompt + new
// tokens, so SentencePiece's leading-space rule applies as it would to the whole text) and
// only complete UTF-8 characters are released: a character split over several byte tokens
// (shown meanwhile as an incomplete sequence or U+FFFD) is printed once it is whole.
class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<int32_t> prompt);
  // The text that became printable with this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is still held back (an incomplete UTF-8 tail) at the end.
  std::string finish();

 private:
  std::string generated_text() const;
  const Tokenizer& tok_;
  std::vector<int32_t> prompt_, generated_;
  std::string prompt_text_;  // the decoded prompt
  size_t emitted_ = 0;       // bytes of the generated text released so far
};

}  // namespace nl
