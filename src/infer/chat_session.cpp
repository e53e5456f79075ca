#include "nightlora/infer/chat_session.h"

#include <algorithm>

#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

std::vector<int32_t> encode_chat_text(const Tokenizer& tok, const std::string& text) {
  bool add_bos = tok.add_bos_default();
  if (add_bos && tok.bos() >= 0 && text.rfind(tok.token_text(tok.bos()), 0) == 0) add_bos = false;
  return tok.encode(text, add_bos, /*parse_special=*/true);
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = byte(i);
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode table 3-7)
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    }
    // The valid part of the sequence starting here; a bad or cut sequence becomes one U+FFFD
    // (its maximal valid prefix, as Python and the W3C encoding standard replace).
    size_t len = 1;
    bool ok = need > 0;
    for (size_t k = 1; ok && k <= need; ++k) {
      if (i + k >= s.size()) {
        ok = false;
        break;
      }
      const unsigned char b = byte(i + k);
      const bool in_range = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!in_range) {
        ok = false;
        break;
      }
      ++len;
    }
    if (ok) {
      out.append(s, i, need + 1);
      i += need + 1;
    } else {
      out += "\xEF\xBF\xBD";
      i += len;
    }
  }
  return out;
}

ChatSession::ChatSession(Decoder& decoder, const Tokenizer& tok, ChatFormat format, ChatOptions opt)
    : decoder_(decoder), tok_(tok), format_(format), opt_(std::move(opt)) {
  if (opt_.generate.stop_ids.empty()) opt_.generate.stop_ids = default_stop_ids(tok_);
  if (opt_.generate.vocab_limit == 0) opt_.generate.vocab_limit = tok_.vocab_size();
  decoder_.reset();
}

void ChatSession::reset() { messages_.clear(); }

ChatTurn ChatSession::send(const std::string& user_text, Sampler& sampler,
                           const std::function<bool(const std::string& piece)>& on_text) {
  std::vector<ChatMessage> conversation;
  if (!opt_.system.empty()) conversation.push_back({"system", opt_.system});
  conversation.insert(conversation.end(), messages_.begin(), messages_.end());
  conversation.push_back({"user", user_text});

  ChatTurn turn;
  turn.prompt_text = render_chat_text(format_, conversation, /*add_generation_prompt=*/true);
  const std::vector<int32_t> prompt = encode_chat_text(tok_, turn.prompt_text);
  turn.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (turn.prompt_tokens >= decoder_.max_context())
    fail("chat", "the conversation (" + std::to_string(turn.prompt_tokens) + " tokens) no longer fits the context of " +
                     std::to_string(decoder_.max_context()) + " tokens",
         "start over with /reset (or give a larger --ctx-size)");

  // Keep what the cache shares with this rendering; at least the last prompt token is fed
  // again (its logits choose the first token of the reply).
  size_t keep = 0;
  while (keep < cached_.size() && keep < prompt.size() && cached_[keep] == prompt[keep]) ++keep;
  keep = std::min(keep, prompt.size() - 1);
  decoder_.truncate(static_cast<int64_t>(keep));
  cached_.resize(keep);
  turn.reused_tokens = static_cast<int64_t>(keep);
  turn.prefilled_tokens = turn.prompt_tokens - turn.reused_tokens;

  sampler.clear_history();
  sampler.accept(prompt);
  // The stream decodes the reply in the context of the prompt's last tokens (enough for
  // SentencePiece's leading-space rule and a character split across the boundary), not the
  // whole conversation, so each token's decoding does not grow with the chat.
  constexpr size_t kStreamContext = 16;
  const size_t context_from = prompt.size() > kStreamContext ? prompt.size() - kStreamContext : 0;
  TextStream stream(tok_, std::vector<int32_t>(prompt.begin() + static_cast<std::ptrdiff_t>(context_from), prompt.end()),
                    opt_.stop_strings);
  bool keep_going = true;
  auto on_token = [&](int32_t id, std::span<const float>) {
    const std::string piece = stream.push(id);
    if (!piece.empty() && on_text) keep_going = on_text(piece);
    return keep_going && !stream.stopped();
  };
  const std::span<const int32_t> fresh(prompt.data() + keep, prompt.size() - keep);
  turn.generation = generate_continued(decoder_, sampler, fresh, opt_.generate, on_token);
  if (!stream.stopped()) {
    const std::string rest = stream.finish();
    if (!rest.empty() && on_text && keep_going) on_text(rest);
  }
  turn.stopped_on_string = stream.stopped();
  turn.reply = valid_utf8(stream.text());

  // The cache now holds the prompt and the generated tokens that were fed back.
  cached_ = prompt;
  cached_.insert(cached_.end(), turn.generation.ids.begin(), turn.generation.ids.end());
  cached_.resize(static_cast<size_t>(decoder_.n_past()));
  messages_.push_back({"user", user_text});
  messages_.push_back({"assistant", turn.reply});
  return turn;
}

}  // namespace nl
