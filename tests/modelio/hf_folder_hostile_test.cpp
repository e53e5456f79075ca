// Damaged and hostile Hugging Face folders: each problem gives an nl::Error naming the file
// and what is wrong, never a crash. Also built against the sanitized library
// (test_hostile_sanitized), so ASan/UBSan watch the same cases.
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nltest::TempDir;
namespace fs = std::filesystem;
using json = nlohmann::json;

void expect_load_error(const fs::path& dir, std::vector<std::string> fragments) {
  try {
    nl::Model::load(dir.string());
    FAIL() << "expected an error loading " << dir;
  } catch (const nl::Error& e) {
    std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

void copy_folder(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"})
    fs::copy_file(from / f, to / f, fs::copy_options::overwrite_existing);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::permissions(to / f, fs::perms::owner_write, fs::perm_options::add);
}

json read_json(const fs::path& p) { return json::parse(nltest::read_text(p)); }

TEST(HfFolderHostile, DamagedFoldersGiveClearErrors) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  TempDir tmp;
  fs::path out = tmp / "bad";
  copy_folder(dir, out);
  const json config = read_json(dir / "config.json");

  auto with_config = [&](const std::function<void(json&)>& edit) {
    json c = config;
    edit(c);
    nltest::write_text(out / "config.json", c.dump(2));
  };

  with_config([](json& c) { c["architectures"] = {"MistralForCausalLM"}; });
  expect_load_error(out, {"MistralForCausalLM", "not supported"});

  with_config([](json& c) { c["hidden_size"] = 96; });
  expect_load_error(out, {"model.safetensors", "shape", "config.json"});

  with_config([](json& c) { c["num_hidden_layers"] = 3; });
  expect_load_error(out, {"model.layers.2.", "missing"});

  with_config([](json& c) { c.erase("hidden_size"); });
  expect_load_error(out, {"config.json", "hidden_size"});

  with_config([](json& c) { c["num_key_value_heads"] = 3; });
  expect_load_error(out, {"config.json", "num_key_value_heads"});

  with_config([](json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
  expect_load_error(out, {"rope_scaling", "yarn"});

  // Untied, the embedding is found through the file's __metadata__ alias
  // (model.embed_tokens.weight -> lm_head.weight), as transformers resolves it.
  with_config([](json& c) { c["tie_word_embeddings"] = false; });
  {
    auto m = nl::Model::load(out.string());
    EXPECT_FALSE(m->config.tied_output);
    EXPECT_EQ(m->weights.tok_embd.data, m->weights.output.data);
  }

  nltest::write_text(out / "config.json", "{ not json");
  expect_load_error(out, {"config.json", "invalid JSON"});

  with_config([](json&) {});
  fs::remove(out / "tokenizer.json");
  expect_load_error(out, {"tokenizer.json"});

  fs::remove(out / "model.safetensors");
  expect_load_error(out, {"model.safetensors"});

  fs::remove(out / "config.json");
  expect_load_error(out, {"config.json"});
}


TEST(HfFolderHostile, HostileIndexAndConfigValues) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  TempDir tmp;
  fs::path out = tmp / "bad";
  copy_folder(dir, out);
  json config = read_json(dir / "config.json");

  // A value nested a million levels deep is named, not printed (printing recurses).
  std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  std::string text = config.dump();
  text.replace(text.find("\"hidden_size\":128"), std::string("\"hidden_size\":128").size(), "\"hidden_size\":" + deep);
  nltest::write_text(out / "config.json", text);
  expect_load_error(out, {"hidden_size", "expected an integer, found an array"});
  nltest::write_text(out / "config.json", config.dump());

  // A shard index may not point outside the folder.
  fs::remove(out / "model.safetensors");
  json index;
  index["weight_map"]["lm_head.weight"] = "../model.safetensors";
  nltest::write_text(out / "model.safetensors.index.json", index.dump());
  expect_load_error(out, {"model.safetensors.index.json", "not a file in the folder"});
  index["weight_map"]["lm_head.weight"] = 7;
  nltest::write_text(out / "model.safetensors.index.json", index.dump());
  expect_load_error(out, {"model.safetensors.index.json", "lm_head.weight"});
  nltest::write_text(out / "model.safetensors.index.json", "{}");
  expect_load_error(out, {"weight_map"});

  // A truncated weight file: the safetensors reader's error, naming the file.
  fs::remove(out / "model.safetensors.index.json");
  std::string w = nltest::read_text(dir / "model.safetensors");
  nltest::write_text(out / "model.safetensors", w.substr(0, w.size() / 2));
  expect_load_error(out, {"model.safetensors", "past the end"});
}

}  // namespace
