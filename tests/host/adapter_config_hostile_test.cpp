// Adapter files with fields of the wrong type or out of range: PEFT's adapter_config.json (r as a
// string, lora_alpha = 1e506, target_modules = 5...), tensor names whose layer number overflows,
// and a GGUF LoRA with a wrong-typed alpha. Each is an nl::Error naming the file and the field,
// never a parser's or a conversion's exception. (Also run under ASan/UBSan.)
#include <nlohmann/json.hpp>

#include "input_error.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/modelio/safetensors.h"
#include "test_util.h"

namespace {

using nltest::expect_mentions;
using nltest::input_error_of;
using nltest::TempDir;

// A two-layer model's configuration (no weights: loading an adapter only checks shapes).
std::unique_ptr<nl::Model> small_model() {
  auto m = std::make_unique<nl::Model>();
  nl::ModelConfig& c = m->config;
  c.arch = nl::Arch::Llama;
  c.n_layer = 2;
  c.d_model = 16;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.head_dim = 4;
  c.d_ff = 24;
  c.vocab = 50;
  c.rope_style = nl::RopeStyle::Adjacent;
  m->source_path = "/models/small.gguf";
  return m;
}

// A PEFT folder as nightlora writes it, then adapter_config.json with `key` set to raw JSON text.
void write_peft(const TempDir& dir, const nl::Model& m) {
  nl::LoraConfig cfg;
  cfg.rank = 2;
  nl::save_adapter_peft(nl::LoraAdapter::init(m.config, cfg), m, (dir / "peft").string());
}
void set_config_key(const TempDir& dir, const std::string& key, const std::string& raw) {
  nlohmann::json cfg = nlohmann::json::parse(nltest::read_text(dir / "peft/adapter_config.json"));
  cfg[key] = "@@";
  std::string text = cfg.dump(2);
  text.replace(text.find("\"@@\""), 4, raw);
  nltest::write_text(dir / "peft/adapter_config.json", text);
}

TEST(AdapterConfigHostile, PeftConfigFieldsNameTheKey) {
  auto m = small_model();
  TempDir tmp;
  struct Case {
    const char* key;
    const char* raw;
    const char* problem;
  };
  const Case cases[] = {
      {"r", "\"8\"", "expected an integer, found string \"8\""},
      {"r", "0", "out of range"},
      {"r", "1e100", "expected an integer"},
      {"lora_alpha", "1e506", "the number 1e506 is out of range"},
      {"lora_alpha", "\"16\"", "expected a number"},
      {"lora_alpha", "1e300", "out of range"},
      {"target_modules", "5", "expected an array, found number 5"},
      {"target_modules", "[\"q_proj\", 5]", "expected a string"},
      {"lora_dropout", "\"0.1\"", "expected a number"},
      {"use_dora", "\"yes\"", "expected true or false"},
      {"bias", "false", "expected a string"},
      {"peft_type", "[\"LORA\"]", "expected a string"},
      {"rank_pattern", "7", "expected an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.raw);
    write_peft(tmp, *m);
    ASSERT_NO_THROW(nl::load_adapter((tmp / "peft").string(), *m));
    set_config_key(tmp, c.key, c.raw);
    const std::string msg = input_error_of([&] { nl::load_adapter((tmp / "peft").string(), *m); });
    const std::string place = c.key == std::string("target_modules") && c.raw[0] == '[' ? "target_modules[1]" : c.key;
    expect_mentions(msg, {"adapter_config.json: \"" + place + "\"", c.problem});
  }
}

TEST(AdapterConfigHostile, LayerNumbersBeyondAnyModelAreRefused) {
  auto m = small_model();
  TempDir tmp;
  write_peft(tmp, *m);
  // A PEFT tensor whose layer number does not fit in 64 bits.
  const std::string huge = "99999999999999999999";
  const float values[8] = {};
  nl::write_safetensors(
      (tmp / "peft/adapter_model.safetensors").string(),
      {nl::SafetensorsOut::from_f32("base_model.model.model.layers." + huge + ".self_attn.q_proj.lora_A.weight", {2, 4}, values)});
  expect_mentions(input_error_of([&] { nl::load_adapter((tmp / "peft").string(), *m); }),
                  {"adapter_model.safetensors", "layers." + huge, "layer number", "out of range"});

  // The same in a GGUF LoRA, and a GGUF LoRA whose alpha is a string.
  auto gguf = [&](const std::string& tensor, nl::GgufValue alpha) {
    nl::GgufWriter w;
    w.set("general.architecture", nl::GgufValue::str("llama"));
    w.set("general.type", nl::GgufValue::str("adapter"));
    w.set("adapter.type", nl::GgufValue::str("lora"));
    w.set("adapter.lora.alpha", alpha);
    w.add_tensor_data(tensor, nl::QType::F32, {4, 2}, values);
    const std::string path = (tmp / "a.gguf").string();
    w.write(path);
    return input_error_of([&] { nl::load_adapter(path, *m); });
  };
  expect_mentions(gguf("blk." + huge + ".attn_q.weight.lora_a", nl::GgufValue::f32(8)), {"a.gguf", "layer number", "out of range"});
  expect_mentions(gguf("blk.0.attn_q.weight.lora_a", nl::GgufValue::str("8")), {"a.gguf", "adapter.lora.alpha", "should be a number"});
}

}  // namespace
