// Fuzz target: chat-template rendering of arbitrary messages (`messages` training data, the
// prompts of `generate --chat`), in each of the six formats, and the detection of a format
// from an arbitrary template text (the Jinja text a model file carries).
// Input (FuzzedDataProvider): the format, add_generation_prompt, then messages (a role from
// the usual three or arbitrary bytes, arbitrary content), the rest a template text.
// The pieces render_chat returns must add up to render_chat_text's text.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "nightlora/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  static constexpr nl::ChatFormat kFormats[] = {nl::ChatFormat::ChatML, nl::ChatFormat::Llama3, nl::ChatFormat::Qwen2,
                                                nl::ChatFormat::Qwen25, nl::ChatFormat::Qwen3, nl::ChatFormat::Llama31};
  const nl::ChatFormat format = kFormats[in.ConsumeIntegralInRange<size_t>(0, 5)];
  const bool gen = in.ConsumeBool();
  std::vector<nl::ChatMessage> messages(in.ConsumeIntegralInRange<size_t>(0, 8));
  for (auto& m : messages) {
    static const char* kRoles[] = {"system", "user", "assistant"};
    const size_t r = in.ConsumeIntegralInRange<size_t>(0, 3);
    m.role = r < 3 ? kRoles[r] : in.ConsumeRandomLengthString(16);
    m.content = in.ConsumeRandomLengthString(256);
  }
  nlfuzz::run_guarded([&] {
    const auto pieces = nl::render_chat(format, messages, gen);
    std::string joined;
    for (const auto& p : pieces) joined += p.text;
    if (joined != nl::render_chat_text(format, messages, gen)) {
      std::fprintf(stderr, "nlfuzz: FINDING: render_chat pieces differ from render_chat_text\n");
      std::abort();
    }
  });
  const std::string template_text = in.ConsumeRemainingBytesAsString();
  nlfuzz::run_guarded([&] { (void)nl::chat_format_name(nl::detect_chat_format(template_text, "fuzz")); });
  nlfuzz::run_guarded([&] { (void)nl::parse_chat_format(template_text); });
  return 0;
}
