// Chat templates we render natively: ChatML (Qwen) and Llama 3. The model's Jinja template
// (from GGUF `tokenizer.chat_template` or tokenizer_config.json) is recognised by its
// markers; an unknown template is a clear error, never a silent guess.
#pragma once
#include <string>
#include <vector>

namespace nl {

// ChatML: plain ChatML with no default system prompt. Qwen2 / Qwen25: ChatML that inserts
// the template's default system prompt when the conversation has none ("You are a helpful
// assistant." / "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.").
// Qwen3: ChatML with Qwen3's <think> block on assistant turns after the last user turn.
// Llama3: Llama 3.0 headers. Llama31: Llama 3.1/3.2, which always opens with a system header
// holding "Cutting Knowledge Date: December 2023" and "Today Date: 26 Jul 2024" (the
// templates' fixed fallback date: a training example must not change with the calendar).
enum class ChatFormat { ChatML, Llama3, Qwen2, Qwen25, Qwen3, Llama31 };

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

// A rendered conversation as pieces of text; `trainable` marks the assistant's content
// and its end-of-turn marker (what a model learns to produce), so training can mask the rest.
struct ChatPiece {
  std::string text;
  bool trainable = false;
};

// Detects the format from a template text. Throws nl::Error for an empty or unknown
// template, naming what was found and what to do (`hint`, e.g. pass --chat-format).
ChatFormat detect_chat_format(const std::string& template_text, const std::string& where);
ChatFormat parse_chat_format(const std::string& name);  // "chatml" "qwen2" "qwen2.5" "qwen3" "llama3" "llama3.1"
const char* chat_format_name(ChatFormat f);

// Renders messages as the reference template would (including the default system prompt
// where the template inserts one), optionally followed by the assistant header.
std::vector<ChatPiece> render_chat(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt);
std::string render_chat_text(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace nl
