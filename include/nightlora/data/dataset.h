// Training data as mlx-lm style JSONL, one example per line, in one of three formats:
//   {"text": "..."}                                   plain text
//   {"prompt": "...", "completion": "..."}            prompt + completion, concatenated as text
//   {"messages": [{"role": "...", "content": "..."}]} a conversation, rendered with the
//                                                     model's chat template (render_chat)
// A file uses exactly one format; other keys are an error (so a typo never silently drops
// a field).
//
// Which tokens carry the loss:
//   TrainOn::Completion (default): text -> every token; prompt/completion -> the completion
//     and the appended EOS; messages -> the assistant turns (content + end-of-turn marker).
//   TrainOn::All: every token after the first.
// BOS is prepended when the tokenizer asks for it (add_bos_default) and the rendered text
// does not already start with it; EOS is appended after text and completions (a chat
// template ends each turn with its own marker).
//
// Sequence-length cap (max_tokens): an example longer than the cap keeps its FIRST
// max_tokens tokens and drops the rest; the number of truncated examples and dropped tokens
// is reported (Dataset::n_truncated, n_dropped_tokens) so the caller can warn.
//
// An example with no supervised token (an empty completion, a chat without an assistant
// turn, or one whose supervised part was cut off by the cap) is an ERROR naming file:line,
// not a silent skip: it means the data or --seq-len is not what the user thinks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nightlora/tokenizer/chat_template.h"

namespace nl {

class Tokenizer;

enum class TrainOn { Completion, All };
TrainOn parse_train_on(const std::string& s);  // "completion" | "all"; throws nl::Error

enum class DataFormat { Text, PromptCompletion, Messages };
const char* data_format_name(DataFormat f);  // "text", "prompt/completion", "messages"

// One tokenized example. supervised[t] != 0 means token t is a training target (predicted
// from the tokens before it); supervised[0] is always 0.
struct Example {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> supervised;
  int64_t line = 0;  // 1-based line in the source file
  int64_t n_supervised() const;
};

struct DataOptions {
  TrainOn train_on = TrainOn::Completion;
  int64_t max_tokens = 512;  // the sequence-length cap (>= 2)
  // The chat format for "messages" data; when empty it is detected from the tokenizer's
  // chat template (a clear error when the model has none).
  std::optional<ChatFormat> chat_format;
};

struct Dataset {
  std::string source;  // file name, for messages
  DataFormat format = DataFormat::Text;
  std::vector<Example> examples;
  int64_t n_truncated = 0;       // examples cut to max_tokens
  int64_t n_dropped_tokens = 0;  // tokens dropped by the cut
  int64_t n_tokens() const;
  int64_t n_supervised() const;
};

// Parses JSONL text (`source` names it in errors). Blank lines are skipped. Throws nl::Error
// naming source:line for malformed JSON, a non-object line, wrong value types, unknown keys,
// a format different from the first line's, an example without supervised tokens, and for
// an empty data set.
Dataset parse_jsonl_dataset(std::string_view text, const std::string& source, const Tokenizer& tok,
                            const DataOptions& opt);
// Reads the file and parses it.
Dataset load_jsonl_dataset(const std::string& path, const Tokenizer& tok, const DataOptions& opt);

}  // namespace nl
