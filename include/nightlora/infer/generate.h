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
// max_new_tokens tokens. The sampler's history (repetition penalty) starts as the prompt.
GenerateResult generate(Decoder& decoder, Sampler& sampler, const std::vector<int32_t>& prompt,
                        const GenerateOptions& opt, const OnToken& on_token = {});

// Continues the decoder's cached context: feeds `new_tokens` (at least one) at n_past() and
// samples as generate() does. The sampler's history is the caller's: accept the cached
// context and new_tokens into it first. The tokens in the cache afterwards are the context,
// new_tokens and the generated ids up to decoder.n_past() (the last generated id is not fed
// back when generation ended on the length limit, the callback or a full context).
GenerateResult generate_continued(Decoder& decoder, Sampler& sampler, std::span<const int32_t> new_tokens,
                                  const GenerateOptions& opt, const OnToken& on_token = {});

// The ids a generation with this tokenizer should stop on: EOS, the end-of-generation ids,
// and BOS (a model that starts a new document has finished this one; llama2.c's run.c
// stops on BOS the same way).
std::vector<int32_t> default_stop_ids(const Tokenizer& tok);

// Turns generated ids into text incrementally. Text is decoded in context (prompt + new
// tokens, so SentencePiece's leading-space rule applies as it would to the whole text) and
// only complete UTF-8 characters are released: a character split over several byte tokens
// (shown meanwhile as an incomplete sequence or U+FFFD) is printed once it is whole.
//
// Stop strings (llama.cpp's --reverse-prompt / "stop", HF's stop_strings) are matched on the
// text, whatever tokens spell them: the text before the first one is released, the stop
// string and anything after it never are, and stopped() turns true (the caller ends the
// generation). Text that could be the start of a stop string is held back until the next
// tokens decide.
class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<int32_t> prompt, std::vector<std::string> stop_strings = {});
  // The text that became printable with this token (possibly empty; always empty once
  // stopped).
  std::string push(int32_t id);
  // Whatever is still held back (an incomplete UTF-8 tail, the start of a stop string that
  // never completed) at the end.
  std::string finish();
  // A stop string appeared in the text.
  bool stopped() const { return stopped_; }
  // Everything released so far (by push and finish).
  const std::string& text() const { return released_; }

 private:
  std::string generated_text() const;
  std::string release_up_to(const std::string& text, size_t end);
  const Tokenizer& tok_;
  std::vector<int32_t> prompt_, generated_;
  std::vector<std::string> stop_strings_;
  std::string prompt_text_;  // the decoded prompt
  size_t emitted_ = 0;       // bytes of the generated text released so far
  std::string released_;
  bool stopped_ = false;
};

// Where the first of `stop_strings` starts in `text` at or after `from` (npos: none).
size_t find_stop_string(const std::string& text, const std::vector<std::string>& stop_strings, size_t from = 0);
// Length of the longest suffix of `text` that is a proper prefix of one of `stop_strings`:
// the bytes a stream must hold back because the next token may complete a stop string.
size_t partial_stop_suffix(const std::string& text, const std::vector<std::string>& stop_strings);

}  // namespace nl
