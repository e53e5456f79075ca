// Hugging Face folder files with values of the wrong type, out of range, or numbers no double
// holds (1e506, which the JSON parser reports as an overflow, not as a syntax error): each is an
// nl::Error naming the file and the key path, never a parser's exception. The safetensors header
// and the shard index are covered the same way. (Also run under ASan/UBSan: test_hostile_sanitized.)
#include <nlohmann/json.hpp>

#include "input_error.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/safetensors.h"
#include "test_util.h"

namespace {

using nltest::expect_mentions;
using nltest::input_error_of;
using nltest::TempDir;
namespace fs = std::filesystem;

// A complete Llama config.json; read before the weights, so a folder holding only it reaches
// every check of the configuration.
const nlohmann::json kConfig = {
    {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},          {"num_hidden_layers", 2},
    {"num_attention_heads", 4},              {"num_key_value_heads", 4},   {"intermediate_size", 128},
    {"vocab_size", 256},                     {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5},
    {"rope_theta", 10000.0},                 {"tie_word_embeddings", false}, {"hidden_act", "silu"}};

// config.json with `key` set to the raw JSON text `value` (raw, so it can be 1e506).
std::string config_with(const std::string& key, const std::string& value) {
  nlohmann::json c = kConfig;
  c[key] = "@@";
  std::string text = c.dump(2);
  text.replace(text.find("\"@@\""), 4, value);
  return text;
}

std::string load_error(const fs::path& dir) {
  return input_error_of([&] { nl::Model::load(dir.string()); });
}

TEST(HfConfigHostile, WrongTypesAndOutOfRangeNameTheKey) {
  TempDir tmp;
  struct Case {
    const char* key;
    const char* value;
    const char* place;  // the key path the message must name
    const char* problem;
  };
  const Case cases[] = {
      {"num_hidden_layers", "1e506", "num_hidden_layers", "out of range"},
      {"hidden_size", "\"64\"", "hidden_size", "expected an integer, found string \"64\""},
      {"num_attention_heads", "4.5", "num_attention_heads", "expected an integer"},
      {"vocab_size", "18446744073709551615", "vocab_size", "out of range"},
      {"num_hidden_layers", "-2", "num_hidden_layers", "out of range"},
      {"num_hidden_layers", "100000", "num_hidden_layers", "out of range"},
      {"max_position_embeddings", "[512]", "max_position_embeddings", "expected an integer, found an array"},
      {"rms_norm_eps", "\"small\"", "rms_norm_eps", "expected a number"},
      {"rope_theta", "1e300", "rope_theta", "out of range"},
      {"tie_word_embeddings", "1", "tie_word_embeddings", "expected true or false"},
      {"hidden_act", "7", "hidden_act", "expected a string"},
      {"architectures", "5", "architectures", "expected an array"},
      {"architectures", "[5]", "architectures[0]", "expected a string"},
      {"rope_scaling", R"({"rope_type": "llama3", "factor": [8]})", "rope_scaling.factor", "expected a number"},
      {"rope_scaling", R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1e999})", "rope_scaling.low_freq_factor",
       "out of range"},
      {"rope_scaling", "\"llama3\"", "rope_scaling", "expected an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value);
    nltest::write_text(tmp / "config.json", config_with(c.key, c.value));
    expect_mentions(load_error(tmp.path), {"config.json: \"" + std::string(c.place) + "\"", c.problem});
  }
  // A syntax error is located too.
  nltest::write_text(tmp / "config.json", "{\"hidden_size\": 64,\n \"vocab_size\": }");
  expect_mentions(load_error(tmp.path), {"config.json", "invalid JSON", "line 2"});
}

TEST(HfConfigHostile, ShardIndexAndSafetensorsHeaderNameTheKey) {
  TempDir tmp;
  nltest::write_text(tmp / "config.json", kConfig.dump());
  nltest::write_text(tmp / "model.safetensors.index.json", R"({"weight_map": 5})");
  expect_mentions(load_error(tmp.path), {"model.safetensors.index.json: \"weight_map\"", "expected an object"});
  nltest::write_text(tmp / "model.safetensors.index.json", R"({"weight_map": {"lm_head.weight": 1e506}})");
  expect_mentions(load_error(tmp.path), {"model.safetensors.index.json: \"weight_map.lm_head.weight\"", "out of range"});

  // A safetensors header whose data offset no double holds.
  const std::string header = R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1e506]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  nltest::write_text(tmp / "w.safetensors", bytes + header + std::string(8, '\0'));
  expect_mentions(input_error_of([&] { nl::SafetensorsFile::open((tmp / "w.safetensors").string()); }),
                  {"w.safetensors", "\"w.data_offsets[1]\"", "out of range"});
}

}  // namespace
