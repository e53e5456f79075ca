// Training data as mlx-lm style JSONL, one example per line, in one of three formats:
//   {"text": "..."}                                   plain text
//   {"prompt": "...", "completion": "..."}            prompt + completion, concatenated as text
//   {"messages": [{"role": "...", "content": "..."}]} a conversation, rendered with the
//                                                     model's chat template (render_chat)
// Lines may mix formats. Keys of no format (an "id", a "source", ... as data set exports carry)
// are ignored and counted (Dataset::ignored_keys) so the caller can say so once; a line with
// the keys of two formats is a bad line. A file may also hold one JSON array of such objects,
// and may start with a UTF-8 byte-order mark.
//
// Which tokens carry the loss:
//   TrainOn::Completion (default): text -> every token; prompt/completion -> the completion
//     and the appended EOS; messages -> the assistant turns (content + end-of-turn marker).
//   TrainOn::All: every token after the first.
// BOS is prepended when the tokenizer asks for it (add_bos_default) and the rendered text
// does not already start with it; EOS is appended after text and completions (a chat
// template ends each turn with its own marker).
//
// Long examples (max_tokens, `--seq-len`; LongExamples, `--long-examples`): truncate (the
// default, as mlx-lm and Hugging Face trainers do) keeps the FIRST max_tokens tokens; skip
// leaves the example out; error stops with file:line. A line so long that it must exceed the
// cap is cut before tokenizing (tokenizing what cannot be used would only cost time).
//
// Bad lines never stop a run by default (BadLines::Skip): malformed JSON, a line that is not
// an object, wrong value types, no known key, and examples with no token to train on (an
// empty completion, a chat without an assistant turn, a prompt that fills the whole cap) are
// left out and counted by reason with their first line numbers (Dataset::skipped).
// BadLines::Error makes each of them an error naming file:line. A data set with nothing left
// to train on is always an error.
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
enum class LongExamples { Truncate, Skip, Error };
LongExamples parse_long_examples(const std::string& s);  // "truncate" | "skip" | "error"; throws nl::Error
enum class BadLines { Skip, Error };
BadLines parse_bad_lines(const std::string& s);  // "skip" | "error"; throws nl::Error
const char* data_format_name(DataFormat f);  // "text", "prompt/completion", "messages"

// One tokenized example. supervised[t] != 0 means token t is a training target (predicted
// from the tokens before it); supervised[0] is always 0.
struct Example {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> supervised;
  int64_t line = 0;  // 1-based line in the source file (element of a JSON-array file)
  int64_t n_supervised() const;
};

struct DataOptions {
  TrainOn train_on = TrainOn::Completion;
  int64_t max_tokens = 512;  // the sequence-length cap (>= 2)
  // The chat format for "messages" data; when empty it is detected from the tokenizer's
  // chat template (a clear error when the model has none).
  std::optional<ChatFormat> chat_format;
  LongExamples long_examples = LongExamples::Truncate;
  BadLines bad_lines = BadLines::Skip;
};

// Lines left out for one reason: how many and the first few line numbers.
struct SkippedLines {
  std::string reason;
  int64_t count = 0;
  std::vector<int64_t> first_lines;  // at most kFirstLines
  static constexpr size_t kFirstLines = 5;
};

struct Dataset {
  std::string source;  // file name, for messages
  DataFormat format = DataFormat::Text;  // of the first example
  bool mixed_formats = false;            // other examples use other formats
  bool json_array = false;               // the file is one JSON array, not JSONL
  bool byte_order_mark = false;          // the file starts with a UTF-8 BOM (ignored)
  std::vector<Example> examples;
  std::vector<SkippedLines> skipped;                   // by reason, in order of first appearance
  std::vector<std::pair<std::string, int64_t>> ignored_keys;  // key, lines that had it
  int64_t n_skipped() const;
  // One line each for the skipped lines and the ignored keys ("" when none), for messages.
  std::string describe_skipped() const;
  std::string describe_ignored_keys() const;
  int64_t n_truncated = 0;       // examples cut to max_tokens
  int64_t n_dropped_tokens = 0;  // tokens dropped by the cut
  int64_t n_tokens() const;
  int64_t n_supervised() const;
};

// Parses JSONL text, or a JSON array (`source` names it in errors). Blank lines are skipped.
// Throws nl::Error naming source:line for a bad line when opt.bad_lines is Error, for an
// over-long example when opt.long_examples is Error, for messages data with no chat template,
// and when nothing is left to train on.
Dataset parse_jsonl_dataset(std::string_view text, const std::string& source, const Tokenizer& tok,
                            const DataOptions& opt);
// Reads the file and parses it.
Dataset load_jsonl_dataset(const std::string& path, const Tokenizer& tok, const DataOptions& opt);

}  // namespace nl
