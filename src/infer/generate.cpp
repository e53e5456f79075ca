#include "nightlora/infer/generate.h"

#include <algorithm>
#include <chrono>

#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

GenerateResult generate(Decoder& decoder, Sampler& sampler, const std::vector<int32_t>& prompt,
                        const GenerateOptions& opt, const OnToken& on_token) {
  if (prompt.empty()) fail("generate", "the prompt has no tokens", "give a prompt, or a model with a BOS token");
  decoder.reset();
  sampler.clear_history();
  sampler.accept(prompt);
  return generate_continued(decoder, sampler, prompt, opt, on_token);
}

GenerateResult generate_continued(Decoder& decoder, Sampler& sampler, std::span<const int32_t> new_tokens,
                                  const GenerateOptions& opt, const OnToken& on_token) {
  if (new_tokens.empty()) fail("generate", "no new tokens to feed", "give a prompt, or a model with a BOS token");
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  GenerateResult res;
  const Clock::time_point t_prompt = Clock::now();
  std::vector<float> logits = decoder.forward(new_tokens);
  res.prompt_tokens = static_cast<int64_t>(new_tokens.size());
  res.prompt_s = seconds_since(t_prompt);
  const Clock::time_point t_decode = Clock::now();
  for (int64_t i = 0; i < opt.max_new_tokens; ++i) {
    std::span<const float> choices(logits);
    if (opt.vocab_limit > 0 && static_cast<size_t>(opt.vocab_limit) < choices.size())
      choices = choices.first(static_cast<size_t>(opt.vocab_limit));
    const int32_t id = sampler.sample(choices);
    if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), id) != opt.stop_ids.end()) {
      res.stopped_on_token = true;
      break;
    }
    res.ids.push_back(id);
    sampler.accept(id);
    if (on_token && !on_token(id, logits)) break;
    if (i + 1 == opt.max_new_tokens) break;  // no forward for a token nobody will sample after
    if (decoder.n_past() >= decoder.max_context()) break;
    const int32_t one[1] = {id};
    logits = decoder.forward(one);
    ++res.decoded_tokens;
  }
  res.decode_s = seconds_since(t_decode);
  return res;
}

std::vector<int32_t> default_stop_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id : {tok.eos(), tok.bos()})
    if (id >= 0) ids.push_back(id);
  for (int32_t id : tok.eog_ids())
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

namespace {

// Bytes at the end of `s` that may still change as more tokens arrive: an incomplete UTF-8
// sequence, or U+FFFD replacement characters a decoder may have put for one.
size_t unstable_tail(const std::string& s) {
  size_t end = s.size();
  static const std::string kReplacement = "\xEF\xBF\xBD";
  while (end >= 3 && s.compare(end - 3, 3, kReplacement) == 0) end -= 3;
  // Walk back over at most 3 continuation bytes to the lead byte of the last character.
  size_t i = end, back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i > 0) {
    const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
    const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (need > 1 && back + 1 < need) end = i - 1;
  }
  return s.size() - end;
}

}  // namespace

size_t find_stop_string(const std::string& text, const std::vector<std::string>& stop_strings, size_t from) {
  size_t best = std::string::npos;
  for (const std::string& stop : stop_strings) {
    if (stop.empty()) continue;
    const size_t at = text.find(stop, from);
    if (at < best) best = at;
  }
  return best;
}

size_t partial_stop_suffix(const std::string& text, const std::vector<std::string>& stop_strings) {
  size_t longest = 0;
  for (const std::string& stop : stop_strings)
    for (size_t n = std::min(stop.size() - (stop.empty() ? 0 : 1), text.size()); n > longest; --n)
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        longest = n;
        break;
      }
  return longest;
}

TextStream::TextStream(const Tokenizer& tok, std::vector<int32_t> prompt, std::vector<std::string> stop_strings)
    : tok_(tok),
      prompt_(std::move(prompt)),
      stop_strings_(std::move(stop_strings)),
      prompt_text_(tok.decode(prompt_, /*skip_special=*/true)) {}

std::string TextStream::generated_text() const {
  std::vector<int32_t> all = prompt_;
  all.insert(all.end(), generated_.begin(), generated_.end());
  std::string full = tok_.decode(all, /*skip_special=*/true);
  if (full.compare(0, prompt_text_.size(), prompt_text_) == 0) return full.substr(prompt_text_.size());
  // Decoding in context changed the prompt's own text (e.g. it ended inside a character):
  // decode the new tokens on their own instead.
  return tok_.decode(generated_, /*skip_special=*/true);
}

std::string TextStream::release_up_to(const std::string& text, size_t end) {
  if (end <= emitted_) return {};
  std::string out = text.substr(emitted_, end - emitted_);
  emitted_ = end;
  released_ += out;
  return out;
}

std::string TextStream::push(int32_t id) {
  if (stopped_) return {};
  generated_.push_back(id);
  const std::string text = generated_text();
  // Released text never holds the start of a stop string, so a match starts at or after
  // emitted_ (the clamp guards a decoding that shortened the text).
  const size_t stop = find_stop_string(text, stop_strings_, std::min(emitted_, text.size()));
  if (stop != std::string::npos) {
    stopped_ = true;
    return release_up_to(text, stop);
  }
  size_t stable = text.size() - unstable_tail(text);
  stable -= partial_stop_suffix(text.substr(0, stable), stop_strings_);
  return release_up_to(text, stable);
}

std::string TextStream::finish() {
  if (stopped_) return {};
  const std::string text = generated_text();
  return release_up_to(text, text.size());
}

}  // namespace nl
