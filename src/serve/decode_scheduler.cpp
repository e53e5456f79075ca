#include "serve/decode_scheduler.h"

#include <algorithm>
#include <utility>

#include "nightlora/engine/engine_turns.h"

namespace nl::serve {

std::optional<int32_t> TokenStream::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ids_.empty() || ended_; });
  if (!ids_.empty()) {
    const int32_t id = ids_.front();
    ids_.pop_front();
    return id;
  }
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

void TokenStream::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
}

bool TokenStream::stopped_on_token() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_on_token_;
}

// A completion in the loop. Only the loop's thread touches the decoder, sampler and logits.
struct DecodeScheduler::Sequence {
  std::unique_ptr<Decoder> decoder;
  Sampler sampler;
  std::vector<float> logits;  // of the last token fed: the next one is sampled from them
  GenerateOptions opt;
  int64_t generated = 0;
  std::shared_ptr<TokenStream> stream;
};

DecodeScheduler::DecodeScheduler(FrozenEngine& engine, EngineTurns& turns, int threads)
    : turns_(turns), batch_(engine, threads), thread_([this] { loop(); }) {}

DecodeScheduler::~DecodeScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<TokenStream> DecodeScheduler::join(std::unique_ptr<Decoder> decoder, Sampler sampler,
                                                   std::vector<float> logits, const GenerateOptions& opt) {
  auto seq = std::make_unique<Sequence>(Sequence{std::move(decoder), std::move(sampler), std::move(logits), opt, 0,
                                                 std::make_shared<TokenStream>()});
  std::shared_ptr<TokenStream> stream = seq->stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    joining_.push_back(std::move(seq));
  }
  cv_.notify_all();
  return stream;
}

int64_t DecodeScheduler::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_;
}
int64_t DecodeScheduler::tokens_advanced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return advanced_;
}

void DecodeScheduler::end(Sequence& seq, bool stopped_on_token, std::exception_ptr error) {
  TokenStream& s = *seq.stream;
  {
    std::lock_guard<std::mutex> lock(s.mu_);
    s.ended_ = true;
    s.stopped_on_token_ = stopped_on_token;
    s.error_ = std::move(error);
  }
  s.cv_.notify_all();
}

std::optional<int32_t> DecodeScheduler::sample_next(Sequence& seq) {
  TokenStream& s = *seq.stream;
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(s.mu_);
    cancelled = s.cancelled_;
  }
  if (cancelled) {  // the reader wants no more: the sequence leaves (a later next() sees the end)
    end(seq, false);
    return std::nullopt;
  }
  if (seq.generated >= seq.opt.max_new_tokens) {
    end(seq, false);
    return std::nullopt;
  }
  // As generate_continued: the choice; a stop id ends it (not emitted); else the token is
  // kept and, unless it was the last one allowed or the context is full, fed next.
  std::span<const float> choices(seq.logits);
  if (seq.opt.vocab_limit > 0 && static_cast<size_t>(seq.opt.vocab_limit) < choices.size())
    choices = choices.first(static_cast<size_t>(seq.opt.vocab_limit));
  const int32_t id = seq.sampler.sample(choices);
  if (std::find(seq.opt.stop_ids.begin(), seq.opt.stop_ids.end(), id) != seq.opt.stop_ids.end()) {
    end(seq, true);
    return std::nullopt;
  }
  seq.sampler.accept(id);
  ++seq.generated;
  {
    std::lock_guard<std::mutex> lock(s.mu_);
    s.ids_.push_back(id);
  }
  s.cv_.notify_all();
  if (seq.generated >= seq.opt.max_new_tokens || seq.decoder->n_past() >= seq.decoder->max_context()) {
    end(seq, false);
    return std::nullopt;
  }
  return id;
}

void DecodeScheduler::loop() {
  std::vector<std::unique_ptr<Sequence>> running;
  std::vector<Decoder*> decoders;
  std::vector<int32_t> ids;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !joining_.empty() || !running.empty(); });
      if (stop_) break;
      for (auto& s : joining_) running.push_back(std::move(s));
      joining_.clear();
    }
    // Each sequence's next token; the ones that go on are fed theirs in one step. The others
    // leave (their decoders, KV caches and all, are freed here).
    decoders.clear();
    ids.clear();
    size_t kept = 0;
    for (size_t i = 0; i < running.size(); ++i) {
      int32_t id = -1;  // (a plain int, not the optional: GCC 12 saw its payload as uninitialized)
      try {
        if (const std::optional<int32_t> next = sample_next(*running[i])) id = *next;
      } catch (...) {  // (sampling throws on nothing it is given today; a failure ends only this one)
        end(*running[i], false, std::current_exception());
      }
      if (id < 0) continue;
      decoders.push_back(running[i]->decoder.get());
      ids.push_back(id);
      running[kept++] = std::move(running[i]);
    }
    running.resize(kept);
    if (running.empty()) continue;
    try {
      std::vector<float> logits;
      {
        const EngineTurns::Turn turn = turns_.serve();
        logits = batch_.step(decoders, ids);
      }
      const size_t vocab = logits.size() / running.size();
      for (size_t i = 0; i < running.size(); ++i)
        running[i]->logits.assign(logits.begin() + static_cast<long>(i * vocab),
                                  logits.begin() + static_cast<long>((i + 1) * vocab));
      std::lock_guard<std::mutex> lock(mu_);
      ++steps_;
      advanced_ += static_cast<int64_t>(running.size());
    } catch (...) {  // the step failed: every sequence in it ends with the error
      for (auto& s : running) end(*s, false, std::current_exception());
      running.clear();
    }
  }
  for (auto& s : running) end(*s, false);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : joining_) end(*s, false);
  joining_.clear();
}

}  // namespace nl::serve
