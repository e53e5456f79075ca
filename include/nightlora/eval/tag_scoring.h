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
// The prompt is run once, then every candidate's continuation in one
// Decoder::forward_tree: the candidates' tokens after the prompt (but their last, whose
// logits nothing reads) as a tree, tags that begin with the same tokens sharing them, each
// token attending to the prompt's cache and its ancestors. So scoring 15 tags costs one
// prompt plus one block of the tree's tokens (one engine product per projection), where a
// forward per tag read every weight 15 times. A tag's first token is scored from the
// prompt's own logits. A CompletionScorer also keeps the cache between prompts: LaMP-2
// prompts without retrieval share the instruction (about 200 tokens), which is then run
// once for all questions. Neither changes a number where the engine's products give a row
// the same bits whatever rows run with it (the f32 mode; int8 on Q4_0/Q8_0): every
// position's logits are those of one forward of prompt + completion (tested); in the int8
// mode on other types a tag's log-probability moves by the int8 rounding of its block
// (docs/ARCHITECTURE.md, Inference).
#pragma once
#include <cstdint>
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

// Scores completions with one decoder, remembering which tokens its KV cache holds, so the
// part of the next prompt it already ran (from the first token on) is not run again. While
// the scorer lives nothing else may run or rewind the decoder, nor change its adapter
// (call forget() after doing so).
class CompletionScorer {
 public:
  CompletionScorer(Decoder& decoder, const Tokenizer& tok);

  // Scores each completion after `prompt`. Throws nl::Error when a completion adds no token
  // (empty) or the text does not fit the decoder's context.
  CompletionScores score(const std::string& prompt, const std::vector<std::string>& completions);
  // The 15 LaMP-2 tags as completions (lamp2_completion(tag)), in label order.
  CompletionScores score_lamp2_tags(const std::string& prompt);

  // Drops what the cache holds: the next prompt runs from its first token.
  void forget();
  // Tokens run through the decoder so far, and prompt tokens taken from the cache instead.
  int64_t tokens_run() const { return tokens_run_; }
  int64_t tokens_reused() const { return tokens_reused_; }

 private:
  Decoder& decoder_;
  const Tokenizer& tok_;
  std::vector<int32_t> cached_;  // the tokens the decoder's cache holds, in order
  int64_t tokens_run_ = 0, tokens_reused_ = 0;
};

// One-shot forms (a fresh scorer: the prompt runs from its first token).
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
