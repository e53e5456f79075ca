// Perplexity of raw text, as `llama-perplexity` and Hugging Face's strided evaluation measure
// it: the text is tokenized once (with BOS when the tokenizer adds one) and read in windows
// of seq_len tokens, each starting `stride` tokens after the previous one. A window scores
// only the tokens no earlier window scored, so every token counts once and, once the first
// window is past, is predicted from at least seq_len - stride tokens of context. The last
// window ends at the end of the text (it may be shorter). With stride == seq_len the windows
// do not overlap, and the first token of each window (which has no context in it) is not
// scored, as in Hugging Face's loop.
//
// The windows become an ordinary data set (one example per window, the scored tokens marked
// supervised), so `nightlora eval --text` runs the same scorer as `--data` (heldout_loss.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nightlora/data/dataset.h"

namespace nl {

class Tokenizer;

struct TextWindowOptions {
  int64_t seq_len = 512;  // tokens per window (>= 2)
  int64_t stride = 256;   // tokens between window starts (1..seq_len)
};

// The windows over `tokens` (at least 2). Throws nl::Error for options out of range.
Dataset text_windows(const std::vector<int32_t>& tokens, const TextWindowOptions& opt, const std::string& source);

// The tokens of a UTF-8 text (a leading byte-order mark dropped), BOS first when the
// tokenizer adds one; special-token text is plain text.
std::vector<int32_t> text_tokens(std::string text, const Tokenizer& tok);

// text_tokens of a file's text. Throws nl::Error naming the file when it cannot be read.
std::vector<int32_t> load_text_tokens(const std::string& path, const Tokenizer& tok);

}  // namespace nl
