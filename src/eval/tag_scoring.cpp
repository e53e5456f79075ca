#include "nightlora/eval/tag_scoring.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <span>

#include "nightlora/eval/lamp2.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/infer/sampler.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

// The trainer's BOS rule for prompt/completion text (data/dataset.cpp): BOS when the
// tokenizer asks for it, unless the text already starts with the BOS marker.
bool wants_bos(const Tokenizer& tok, const std::string& text) {
  if (!tok.add_bos_default() || tok.bos() < 0) return false;
  const std::string bos_text = tok.token_text(tok.bos());
  return bos_text.empty() || text.compare(0, bos_text.size(), bos_text) != 0;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// log softmax(logits)[id], in double, as logit - max - log(sum of exp(logit - max)). The
// max and the log-sum are made once per row of logits (one row serves every candidate whose
// token it predicts), and subtracted in this order, so the value is the same bits whichever
// candidate asks.
struct LogSoftmaxRow {
  std::span<const float> logits;
  double mx = 0, log_sum = 0;
  explicit LogSoftmaxRow(std::span<const float> l) : logits(l) {
    mx = -INFINITY;
    for (float v : logits) mx = std::max(mx, static_cast<double>(v));
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
    log_sum = std::log(sum);
  }
  double at(int32_t id) const { return static_cast<double>(logits[static_cast<size_t>(id)]) - mx - log_sum; }
};

}  // namespace

CompletionScorer::CompletionScorer(Decoder& decoder, const Tokenizer& tok) : decoder_(decoder), tok_(tok) { forget(); }

void CompletionScorer::forget() {
  decoder_.reset();
  cached_.clear();
}

CompletionScores CompletionScorer::score(const std::string& prompt, const std::vector<std::string>& completions) {
  struct Candidate {
    std::vector<int32_t> tokens;  // prompt + completion, as the trainer tokenizes it
    size_t start = 0;             // first completion token
  };
  std::vector<Candidate> cands;
  size_t shared = SIZE_MAX;  // tokens every candidate starts with (run once)
  // The prompt alone, encoded once per BOS choice (the choice depends on the text only
  // through its first characters, which every candidate shares, but is made per candidate
  // as the trainer makes it).
  std::vector<int32_t> prompt_ids[2];
  bool have_prompt_ids[2] = {false, false};
  for (size_t c = 0; c < completions.size(); ++c) {
    const std::string text = prompt + completions[c];
    const bool bos = wants_bos(tok_, text);
    if (!have_prompt_ids[bos]) {
      prompt_ids[bos] = tok_.encode(prompt, bos, true);
      have_prompt_ids[bos] = true;
    }
    Candidate cand;
    cand.tokens = tok_.encode(text, bos, true);
    cand.start = common_prefix(prompt_ids[bos], cand.tokens);
    if (cand.start >= cand.tokens.size())
      fail("tag scoring", "completion " + std::to_string(c) + " (\"" + completions[c] + "\") adds no token to the prompt");
    // A completion's first token needs the logits of the token before it, so at least one
    // token must come before the completion: with no BOS and an empty prompt there is none.
    if (cand.start == 0)
      fail("tag scoring", "the prompt has no token before the completion", "give a non-empty prompt");
    shared = std::min(shared, cand.start);
    if (c > 0) shared = std::min(shared, common_prefix(cand.tokens, cands[0].tokens));
    cands.push_back(std::move(cand));
  }
  CompletionScores out;
  if (cands.empty()) return out;

  // The shared prefix: what the cache already holds of it is kept, except its last token,
  // which runs again for the logits that score every candidate's first token.
  const std::vector<int32_t> prefix(cands[0].tokens.begin(), cands[0].tokens.begin() + static_cast<std::ptrdiff_t>(shared));
  const size_t keep = std::min(common_prefix(cached_, prefix), shared - 1);
  decoder_.truncate(static_cast<int64_t>(keep));
  cached_.resize(keep);
  const std::vector<float> prefix_logits =
      decoder_.forward(std::span<const int32_t>(prefix.data() + keep, prefix.size() - keep));
  cached_ = prefix;
  tokens_reused_ += static_cast<int64_t>(keep);
  tokens_run_ += static_cast<int64_t>(shared - keep);
  const LogSoftmaxRow prefix_row(prefix_logits);

  // The continuations (a candidate's tokens after the shared prefix, but its last, whose
  // logits nothing reads) form a tree: candidates that begin alike share their first tokens
  // (" dark comedy" and " dystopia" may share " d"), which are one node of it. The tree runs
  // as one Decoder::forward_tree after the shared prefix: each node attends to the prefix and
  // its ancestors, and its logits row predicts the token after it. The tree's tokens take
  // cache slots while it runs: when the context has no room for all of them, it runs in
  // parts of whole candidates (a part runs again the nodes it shares with an earlier one).
  auto run_part = [&](size_t c) {
    const Candidate& cand = cands[c];
    return std::span<const int32_t>(cand.tokens.data() + shared, cand.tokens.size() - shared - 1);
  };
  const size_t V = static_cast<size_t>(decoder_.model().config.vocab);
  const size_t room = static_cast<size_t>(decoder_.max_context()) - shared;
  out.logprob.assign(cands.size(), 0.0);
  out.n_tokens.assign(cands.size(), 0);
  for (size_t c0 = 0; c0 < cands.size();) {
    std::vector<int32_t> tree_tokens, tree_parent;
    std::map<std::pair<int32_t, int32_t>, int32_t> child;  // (parent node, token) -> node
    std::vector<std::vector<int32_t>> nodes;               // each candidate's run tokens' nodes
    size_t c1 = c0;
    for (; c1 < cands.size(); ++c1) {
      // The nodes this candidate adds; a part always takes its first candidate (which then
      // fails in forward_tree with the decoder's context error when even it does not fit).
      size_t added = 0;
      int32_t node = -1;
      for (const int32_t id : run_part(c1)) {
        const auto it = node == -2 ? child.end() : child.find({node, id});
        if (it == child.end()) ++added, node = -2;  // past the known nodes: every later one is new
        else node = it->second;
      }
      if (c1 > c0 && tree_tokens.size() + added > room) break;
      node = -1;
      nodes.emplace_back();
      for (const int32_t id : run_part(c1)) {
        const auto [it, is_new] = child.try_emplace({node, id}, static_cast<int32_t>(tree_tokens.size()));
        if (is_new) {
          tree_tokens.push_back(id);
          tree_parent.push_back(node);
        }
        node = it->second;
        nodes.back().push_back(node);
      }
    }
    std::vector<float> tree_logits;
    std::vector<LogSoftmaxRow> tree_rows;  // one per node
    if (!tree_tokens.empty()) {
      tree_logits = decoder_.forward_tree(tree_tokens, tree_parent);
      tokens_run_ += static_cast<int64_t>(tree_tokens.size());
      tree_rows.reserve(tree_tokens.size());
      for (size_t i = 0; i < tree_tokens.size(); ++i)
        tree_rows.emplace_back(std::span<const float>(tree_logits.data() + i * V, V));
    }
    for (size_t c = c0; c < c1; ++c) {
      const Candidate& cand = cands[c];
      const std::vector<int32_t>& path = nodes[c - c0];
      // Token t (t >= shared) is predicted by the prefix's logits for t == shared, else by the
      // row of the node of run token t-1-shared.
      double lp = 0;
      for (size_t t = cand.start; t < cand.tokens.size(); ++t)
        lp += t == shared ? prefix_row.at(cand.tokens[t]) : tree_rows[static_cast<size_t>(path[t - 1 - shared])].at(cand.tokens[t]);
      out.logprob[c] = lp;
      out.n_tokens[c] = static_cast<int>(cand.tokens.size() - cand.start);
    }
    c0 = c1;
  }
  out.best = 0;
  for (size_t c = 1; c < out.logprob.size(); ++c)
    if (out.logprob[c] > out.logprob[static_cast<size_t>(out.best)]) out.best = static_cast<int>(c);
  return out;
}

CompletionScores CompletionScorer::score_lamp2_tags(const std::string& prompt) {
  std::vector<std::string> completions;
  for (const std::string& tag : lamp2_tags()) completions.push_back(lamp2_completion(tag));
  return score(prompt, completions);
}

CompletionScores score_completions(Decoder& decoder, const Tokenizer& tok, const std::string& prompt,
                                   const std::vector<std::string>& completions) {
  return CompletionScorer(decoder, tok).score(prompt, completions);
}

CompletionScores score_lamp2_tags(Decoder& decoder, const Tokenizer& tok, const std::string& prompt) {
  return CompletionScorer(decoder, tok).score_lamp2_tags(prompt);
}

int parse_lamp2_output(std::string_view text) {
  const size_t nl_at = text.find('\n');
  if (nl_at != std::string_view::npos) text = text.substr(0, nl_at);
  const char* ws = " \t\n\r\f\v";
  const size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return -1;
  return lamp2_tag_index(text.substr(b, text.find_last_not_of(ws) - b + 1));
}

GeneratedTag generate_lamp2_tag(Decoder& decoder, const Tokenizer& tok, const std::string& prompt, int max_new_tokens) {
  const std::vector<int32_t> ids = tok.encode(prompt, wants_bos(tok, prompt), true);
  SamplerOptions sopt;
  sopt.temperature = 0;  // greedy
  Sampler sampler(sopt);
  GenerateOptions gopt;
  gopt.max_new_tokens = max_new_tokens;
  gopt.stop_ids = default_stop_ids(tok);
  gopt.vocab_limit = tok.vocab_size();
  TextStream stream(tok, ids);
  GeneratedTag out;
  generate(decoder, sampler, ids, gopt, [&](int32_t id, std::span<const float>) {
    out.text += stream.push(id);
    // A tag never spans lines: stop at the first newline instead of generating on.
    return out.text.find('\n') == std::string::npos;
  });
  out.text += stream.finish();
  out.tag = parse_lamp2_output(out.text);
  return out;
}

}  // namespace nl
