// serve's decode loop: the completions running at once advance together, one token each per
// step, through one nl::DecodeBatch step (infer/decoder.h): every weight is read once per
// step for all of them instead of once per completion.
//
// A completion's request thread runs its prompt alone (its own decoder, under a serving
// turn), then joins the loop with its decoder, sampler and the prompt's logits. The loop's
// thread, per step: samples each sequence's next token from its logits (as
// nl::generate_continued does: stop ids end it, max_new_tokens and a full context end it
// after the token), hands the token to the sequence's stream, and runs one batch step, under
// one serving turn (engine/engine_turns.h), for the sequences that go on. A sequence that
// joins while a step runs is in the next one. The request thread reads its stream, turns
// tokens into text and sends it; when its client goes away or a stop string appears it
// cancels the stream, and the loop drops the sequence before its next step.
//
// Adapters: each sequence keeps its own (none, or any served adapter): the base products
// are shared by the whole batch, the LoRA branch runs per sequence on its own row. Each
// sequence's logits are the bits its decoder would give alone (DecodeBatch), so answers do
// not depend on what else runs.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/infer/sampler.h"

namespace nl {
class EngineTurns;
}

namespace nl::serve {

// One completion's generated tokens, from the loop to its request thread.
class TokenStream {
 public:
  // Blocks until the next token, or the end (std::nullopt). Throws what ended the
  // generation when that was an error.
  std::optional<int32_t> next();
  // The reader wants no more tokens: the loop drops the sequence at its next step.
  void cancel();
  // The generation ended on a stop id (valid once next() has returned the end).
  bool stopped_on_token() const;

 private:
  friend class DecodeScheduler;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int32_t> ids_;
  bool ended_ = false, stopped_on_token_ = false, cancelled_ = false;
  std::exception_ptr error_;
};

class DecodeScheduler {
 public:
  // Steps run on `engine` under serving turns of `turns`; the batch's host ops on
  // `threads` threads (0: the engine's).
  DecodeScheduler(FrozenEngine& engine, EngineTurns& turns, int threads);
  // Ends the loop: sequences still running end (their streams report the end).
  ~DecodeScheduler();
  DecodeScheduler(const DecodeScheduler&) = delete;
  DecodeScheduler& operator=(const DecodeScheduler&) = delete;

  // A completion whose prompt has run in `decoder`: `logits` are its last prompt token's,
  // `sampler`'s history holds the prompt. Generates as opt says (max_new_tokens, stop_ids,
  // vocab_limit); the tokens come out of the returned stream.
  std::shared_ptr<TokenStream> join(std::unique_ptr<Decoder> decoder, Sampler sampler, std::vector<float> logits,
                                    const GenerateOptions& opt);

  // Steps run so far, and the sequences they advanced in all (for the log and the tests:
  // advanced / steps is the mean batch size).
  int64_t steps() const;
  int64_t tokens_advanced() const;

 private:
  struct Sequence;
  void loop();
  // Samples seq's next token and hands it to its stream; returns it when it is to be fed,
  // nothing when the sequence has ended.
  static std::optional<int32_t> sample_next(Sequence& seq);
  static void end(Sequence& seq, bool stopped_on_token, std::exception_ptr error = nullptr);

  EngineTurns& turns_;
  DecodeBatch batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Sequence>> joining_;  // joined since the loop last looked
  bool stop_ = false;
  int64_t steps_ = 0, advanced_ = 0;
  std::thread thread_;  // last: started once everything above is made
};

}  // namespace nl::serve
