// Native renderings of the chat templates we support, equal (character for character) to
// what the models' Jinja templates render for conversations of system/user/assistant turns.
// The reference templates are quoted in comments next to the code that follows them.
#include "nightlora/tokenizer/chat_template.h"

#include "nightlora/util/error.h"
#include "tokenizer/unicode_text.h"

namespace nl {
namespace {

const char* const kQwen2System = "You are a helpful assistant.";
const char* const kQwen25System = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
const char* const kLlama31Date = "26 Jul 2024";

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Jinja's `trim` (Python str.strip / JS trim): Unicode whitespace on both ends.
std::string trim(const std::string& s) {
  std::vector<char32_t> cps = unicode::decode_utf8(s);
  size_t b = 0, e = cps.size();
  while (b < e && unicode::is_white_space(cps[b])) ++b;
  while (e > b && unicode::is_white_space(cps[e - 1])) --e;
  return unicode::encode_utf8(std::vector<char32_t>(cps.begin() + long(b), cps.begin() + long(e)));
}
std::string lstrip_newlines(const std::string& s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string::npos ? "" : s.substr(b);
}
std::string rstrip_newlines(const std::string& s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}

class Pieces {
 public:
  void add(const std::string& text, bool trainable) {
    if (text.empty()) return;
    if (!out_.empty() && out_.back().trainable == trainable) out_.back().text += text;
    else out_.push_back({text, trainable});
  }
  std::vector<ChatPiece> take() { return std::move(out_); }

 private:
  std::vector<ChatPiece> out_;
};

void check_roles(const std::vector<ChatMessage>& messages, ChatFormat f) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant")
      fail(std::string("chat template ") + chat_format_name(f),
           "message " + std::to_string(i + 1) + " has role \"" + r + "\"",
           "supported roles: system, user, assistant");
  }
}

// ChatML as Qwen2/Qwen2.5 render it (the non-tool branch):
//   {%- if messages[0]['role'] == 'system' %} '<|im_start|>system\n' + content + '<|im_end|>\n'
//   {%- else %} '<|im_start|>system\n<DEFAULT><|im_end|>\n'   (Qwen2/2.5 only)
//   then for each user/assistant/later-system message:
//   '<|im_start|>' + role + '\n' + content + '<|im_end|>' + '\n'
void render_chatml(const std::vector<ChatMessage>& m, const char* default_system, Pieces& p) {
  if (default_system && (m.empty() || m[0].role != "system"))
    p.add(std::string("<|im_start|>system\n") + default_system + "<|im_end|>\n", false);
  for (const ChatMessage& msg : m) {
    p.add("<|im_start|>" + msg.role + "\n", false);
    const bool learn = msg.role == "assistant";
    p.add(msg.content + "<|im_end|>", learn);
    p.add("\n", false);
  }
}

// Qwen3: assistant turns after the last user query carry a <think> block; the last one
// always does (empty when there is no reasoning). Reasoning may come inside the content as
// "<think>...</think>", which the template splits out:
//   content = message.content.split('</think>')[-1].lstrip('\n')
//   reasoning = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
//   '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n')
void render_qwen3(const std::vector<ChatMessage>& m, Pieces& p) {
  size_t last_query = m.empty() ? 0 : m.size() - 1;
  for (size_t k = m.size(); k-- > 0;) {
    const std::string& c = m[k].content;
    const bool tool_response = c.rfind("<tool_response>", 0) == 0 && c.size() >= 16 &&
                               c.compare(c.size() - 16, 16, "</tool_response>") == 0;
    if (m[k].role == "user" && !tool_response) { last_query = k; break; }
  }
  for (size_t i = 0; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role != "assistant") {
      p.add("<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n", false);
      continue;
    }
    std::string content = msg.content, reasoning;
    const size_t close = content.find("</think>");
    if (close != std::string::npos) {
      const size_t last_close = content.rfind("</think>");
      std::string before = rstrip_newlines(content.substr(0, close));
      const size_t open = before.rfind("<think>");
      reasoning = lstrip_newlines(open == std::string::npos ? before : before.substr(open + 7));
      content = lstrip_newlines(content.substr(last_close + 8));
    }
    p.add("<|im_start|>assistant\n", false);
    if (i > last_query && (i + 1 == m.size() || !reasoning.empty()))
      p.add("<think>\n" + rstrip_newlines(lstrip_newlines(reasoning)) + "\n</think>\n\n" + lstrip_newlines(content), true);
    else
      p.add(content, true);
    p.add("<|im_end|>", true);
    p.add("\n", false);
  }
}

// Llama 3.0:
//   {% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] +
//   '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}
//   {% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}
void render_llama3(const std::vector<ChatMessage>& m, Pieces& p) {
  for (size_t i = 0; i < m.size(); ++i) {
    const bool learn = m[i].role == "assistant";
    p.add(std::string(i == 0 ? "<|begin_of_text|>" : "") + "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n", false);
    p.add(trim(m[i].content) + "<|eot_id|>", learn);
  }
}

// Llama 3.1 / 3.2 (no tools): bos_token, then always a system header:
//   "<|start_header_id|>system<|end_header_id|>\n\n" "Cutting Knowledge Date: December 2023\n"
//   "Today Date: " + date_string + "\n\n" + system_message (the first message's content|trim, if
//   it is a system message) + "<|eot_id|>", then the other messages as in Llama 3.0.
void render_llama31(const std::vector<ChatMessage>& m, Pieces& p) {
  size_t first = 0;
  std::string system;
  if (!m.empty() && m[0].role == "system") {
    system = trim(m[0].content);
    first = 1;
  }
  p.add(std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                    "Cutting Knowledge Date: December 2023\nToday Date: ") +
            kLlama31Date + "\n\n" + system + "<|eot_id|>",
        false);
  for (size_t i = first; i < m.size(); ++i) {
    const bool learn = m[i].role == "assistant";
    p.add("<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n", false);
    p.add(trim(m[i].content) + "<|eot_id|>", learn);
  }
}

}  // namespace

ChatFormat detect_chat_format(const std::string& t, const std::string& where) {
  if (t.empty())
    fail(where, "the model has no chat template", "pass --chat-format (chatml, qwen2, qwen2.5, qwen3, llama3, llama3.1)");
  if (contains(t, "<|im_start|>")) {
    if (contains(t, "<think>") || contains(t, "reasoning_content")) return ChatFormat::Qwen3;
    if (contains(t, kQwen25System)) return ChatFormat::Qwen25;
    if (contains(t, kQwen2System)) return ChatFormat::Qwen2;
    return ChatFormat::ChatML;
  }
  if (contains(t, "<|start_header_id|>") && contains(t, "<|eot_id|>")) {
    if (contains(t, "Cutting Knowledge Date")) return ChatFormat::Llama31;
    return ChatFormat::Llama3;
  }
  fail(where, "unknown chat template (neither ChatML's <|im_start|> nor Llama 3's <|start_header_id|>): \"" +
                  t.substr(0, 80) + (t.size() > 80 ? "...\"" : "\""),
       "pass --chat-format (chatml, qwen2, qwen2.5, qwen3, llama3, llama3.1) if the model uses one of these");
}

ChatFormat parse_chat_format(const std::string& name) {
  if (name == "chatml") return ChatFormat::ChatML;
  if (name == "qwen2") return ChatFormat::Qwen2;
  if (name == "qwen2.5" || name == "qwen25") return ChatFormat::Qwen25;
  if (name == "qwen3") return ChatFormat::Qwen3;
  if (name == "llama3") return ChatFormat::Llama3;
  if (name == "llama3.1" || name == "llama3.2" || name == "llama31") return ChatFormat::Llama31;
  fail("--chat-format", "unknown chat format \"" + name + "\"", "use one of: chatml, qwen2, qwen2.5, qwen3, llama3, llama3.1");
}

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Qwen2: return "qwen2";
    case ChatFormat::Qwen25: return "qwen2.5";
    case ChatFormat::Qwen3: return "qwen3";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Llama31: return "llama3.1";
  }
  return "?";
}

std::vector<ChatPiece> render_chat(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  check_roles(messages, f);
  Pieces p;
  const bool llama = f == ChatFormat::Llama3 || f == ChatFormat::Llama31;
  switch (f) {
    case ChatFormat::ChatML: render_chatml(messages, nullptr, p); break;
    case ChatFormat::Qwen2: render_chatml(messages, kQwen2System, p); break;
    case ChatFormat::Qwen25: render_chatml(messages, kQwen25System, p); break;
    case ChatFormat::Qwen3: render_qwen3(messages, p); break;
    case ChatFormat::Llama3: render_llama3(messages, p); break;
    case ChatFormat::Llama31: render_llama31(messages, p); break;
  }
  if (add_generation_prompt)
    p.add(llama ? "<|start_header_id|>assistant<|end_header_id|>\n\n" : "<|im_start|>assistant\n", false);
  return p.take();
}

std::string render_chat_text(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatPiece& piece : render_chat(f, messages, add_generation_prompt)) out += piece.text;
  return out;
}

}  // namespace nl
