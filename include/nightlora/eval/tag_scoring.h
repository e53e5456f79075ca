// Answering a LaMP-2 prompt with a model: by scoring each candidate tag, or by greedy
// generation parsed to a tag.
//
// Scoring uses the tokenization the trainer uses for prompt/completion data (data/dataset.h):
// the text prompt + completion is encoded once (BOS prepended when the tokenizer asks for it
// and the text does not already start with it), and the completion's tokens are those after
// the longest common prefix with the encoded prompt alone. A completion's score is the sum
// of the log-probabilities (natural log, full softmax over the model's logits) of its tokens,
// each given every token before it. No EOS is scored. The highest score wins; ties go to the
// lower label index.
//
// The prompt is run once and the decoder's cache rewound to it for each candidate
// (Decoder::truncate), so scoring 15 tags costs one prompt plus 15 short continuations.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace nl {

class Decoder;
class Tokenizer;

struct CompletionScores {
  std::vector<double> logprob;     // one per completion, summed over its tokens
  std::vector<int> n_tokens;       // tokens scored per completion
  int best = -1;                   // argmax of logprob (lowest index among ties)
};

// Scores each completion after `prompt`. Throws nl::Error when a completion adds no token
// (empty) or the text does not fit the decoder's context.
CompletionScores score_completions(Decoder& decoder, const Tokenizer& tok, const std::string& prompt,
                                   const std::vector<std::string>& completions);

// The 15 LaMP-2 tags as completions (lamp2_completion(tag)), in label order: best is the
// predicted label index.
CompletionScores score_lamp2_tags(Decoder& decoder, const Tokenizer& tok, const std::string& prompt);

// Greedy generation (up to max_new_tokens, stopping on the tokenizer's stop ids) and its
// parse: the text up to the first newline, trimmed of whitespace, matched exactly against
// the tags (LaMP strips and exact-matches outputs; anything else is -1, i.e. wrong).
struct GeneratedTag {
  std::string text;  // the generated text as decoded
  int tag = -1;      // label index, -1 when unparseable
};
GeneratedTag generate_lamp2_tag(Decoder& decoder, const Tokenizer& tok, const std::string& prompt,
                                int max_new_tokens = 16);
int parse_lamp2_output(std::string_view text);

}  // namespace nl
