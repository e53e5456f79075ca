// Tokenizer::from_hf_dir: reads a Hugging Face tokenizer.json (+ tokenizer_config.json).
// Supported: a BPE model; normalizers NFC / Prepend / Replace (alone or in a Sequence);
// pre-tokenizers none (SentencePiece style), ByteLevel, or Sequence[Split(Regex), ByteLevel];
// added tokens; a TemplateProcessing post-processor that starts with BOS. Anything else is
// a clear error rather than a tokenizer that silently differs from the reference.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nightlora/util/error.h"
#include "tokenizer/tokenizer_spec.h"

namespace nl {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(p.string(), "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    fail(p.string(), std::string("not valid JSON: ") + e.what(), "is the file complete?");
  }
}

// A token given in tokenizer_config.json as a string or as {"content": ...}.
std::string token_name(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

void add_normalizer(const json& n, TokenizerSpec& spec, const std::string& where) {
  if (n.is_null()) return;
  const std::string type = n.value("type", "");
  if (type == "Sequence") {
    for (const json& sub : n.at("normalizers")) add_normalizer(sub, spec, where);
  } else if (type == "NFC") {
    spec.normalizer.push_back({NormalizerStep::Nfc, "", ""});
  } else if (type == "Prepend") {
    spec.normalizer.push_back({NormalizerStep::Prepend, n.at("prepend").get<std::string>(), ""});
  } else if (type == "Replace" && n.contains("pattern") && n["pattern"].contains("String")) {
    spec.normalizer.push_back(
        {NormalizerStep::Replace, n["pattern"]["String"].get<std::string>(), n.at("content").get<std::string>()});
  } else {
    fail(where, "unsupported normalizer \"" + type + "\"",
         "supported: NFC, Prepend, Replace with a literal string, Sequence of these");
  }
}

void set_pre_tokenizer(const json& p, TokenizerSpec& spec, const std::string& where) {
  if (p.is_null()) {
    spec.kind = TokenizerKind::SentencePieceBpe;
    return;
  }
  const std::string type = p.value("type", "");
  spec.kind = TokenizerKind::ByteLevelBpe;
  if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false))
      fail(where, "ByteLevel pre-tokenizer with add_prefix_space is not supported");
    if (!p.value("use_regex", true)) fail(where, "ByteLevel pre-tokenizer without a split regex is not supported");
    spec.pre_regex = kGpt2Regex;
  } else if (type == "Sequence" && p.at("pretokenizers").size() == 2) {
    const json& split = p["pretokenizers"][0];
    const json& bl = p["pretokenizers"][1];
    if (split.value("type", "") != "Split" || !split.contains("pattern") || !split["pattern"].contains("Regex") ||
        split.value("behavior", "") != "Isolated" || split.value("invert", false) || bl.value("type", "") != "ByteLevel" ||
        bl.value("use_regex", true) || bl.value("add_prefix_space", false))
      fail(where, "unsupported pre-tokenizer sequence",
           "supported: Split(Regex, Isolated) followed by ByteLevel(use_regex=false), as Qwen2/3 and Llama 3 use");
    spec.pre_regex = split["pattern"]["Regex"].get<std::string>();
  } else {
    fail(where, "unsupported pre-tokenizer \"" + type + "\"",
         "supported: none, ByteLevel, Sequence[Split, ByteLevel]");
  }
  if (spec.pre_regex == kQwen2Regex) spec.pre_name = "qwen2";
  else if (spec.pre_regex == kLlama3Regex) spec.pre_name = "llama-bpe";
  else if (spec.pre_regex == kGpt2Regex) spec.pre_name = "gpt2";
  else spec.pre_name = "custom";
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_dir(const std::string& dir) {
  const fs::path tj = fs::path(dir) / "tokenizer.json";
  const std::string where = tj.string();
  if (!fs::exists(tj)) fail(dir, "no tokenizer.json in this folder", "pass a GGUF file or a Hugging Face model folder");
  const json j = read_json(tj);
  json cfg = json::object();
  if (fs::exists(fs::path(dir) / "tokenizer_config.json")) cfg = read_json(fs::path(dir) / "tokenizer_config.json");

  TokenizerSpec spec;
  spec.source = where;
  try {
    const json& m = j.at("model");
    if (m.value("type", "BPE") != "BPE") fail(where, "model type \"" + m.value("type", "") + "\" is not supported", "only BPE models are");
    if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
      fail(where, "BPE dropout is not supported for deterministic tokenization");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty())
        fail(where, std::string("BPE option ") + k + " is not supported");

    // Vocabulary: the model's, plus added tokens (which may lie outside it).
    int64_t max_id = -1;
    for (auto it = m.at("vocab").begin(); it != m.at("vocab").end(); ++it) max_id = std::max<int64_t>(max_id, it.value().get<int64_t>());
    for (const json& a : j.value("added_tokens", json::array())) max_id = std::max<int64_t>(max_id, a.at("id").get<int64_t>());
    if (max_id < 0 || max_id > (1 << 24)) fail(where, "vocabulary is empty or has an absurd id " + std::to_string(max_id));
    spec.tokens.assign(size_t(max_id + 1), "");
    spec.types.assign(size_t(max_id + 1), kTokNormal);
    for (auto it = m.at("vocab").begin(); it != m.at("vocab").end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0) fail(where, "negative token id for \"" + it.key() + "\"");
      spec.tokens[size_t(id)] = it.key();
      if (it.key().size() == 6 && it.key().rfind("<0x", 0) == 0 && it.key()[5] == '>') spec.types[size_t(id)] = kTokByte;
    }
    for (const json& mg : m.at("merges")) {
      if (mg.is_string()) {
        const std::string s = mg.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos) fail(where, "merge \"" + s + "\" has no space separating its two parts");
        spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        spec.merges.emplace_back(mg.at(0).get<std::string>(), mg.at(1).get<std::string>());
      }
    }
    spec.ignore_merges = m.value("ignore_merges", false);
    spec.byte_fallback = m.value("byte_fallback", false);
    spec.fuse_unk = m.value("fuse_unk", false);
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      auto it = m["vocab"].find(m["unk_token"].get<std::string>());
      if (it != m["vocab"].end()) spec.unk = it.value().get<int32_t>();
    }

    for (const json& a : j.value("added_tokens", json::array())) {
      AddedToken t;
      t.id = a.at("id").get<int32_t>();
      t.content = a.at("content").get<std::string>();
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.normalized = a.value("normalized", !t.special);
      if (t.id < 0) fail(where, "added token \"" + t.content + "\" has a negative id");
      if (a.value("single_word", false)) fail(where, "added token \"" + t.content + "\" uses single_word, which is not supported");
      spec.tokens[size_t(t.id)] = t.content;
      spec.types[size_t(t.id)] = t.special ? kTokControl : kTokUserDefined;
      spec.added.push_back(t);
    }
    if (spec.unk >= 0) spec.types[size_t(spec.unk)] = kTokUnknown;
    for (size_t i = 0; i < spec.tokens.size(); ++i)
      if (spec.tokens[i].empty()) {
        spec.tokens[i] = "[nightlora_unused_" + std::to_string(i) + "]";
        spec.types[i] = kTokUnused;
      }

    add_normalizer(j.value("normalizer", json()), spec, where);
    set_pre_tokenizer(j.value("pre_tokenizer", json()), spec, where);
    if (spec.kind == TokenizerKind::SentencePieceBpe) {
      // The Strip decoder removes the space that the Prepend normalizer added.
      const json& d = j.value("decoder", json());
      if (d.is_object() && d.value("type", "") == "Sequence")
        for (const json& s : d.at("decoders"))
          if (s.value("type", "") == "Strip" && s.value("start", 0) == 1) spec.strip_leading_space = true;
    }

    auto id_of = [&](const std::string& name) -> int32_t {
      if (name.empty()) return -1;
      for (size_t i = 0; i < spec.tokens.size(); ++i)
        if (spec.tokens[i] == name) return int32_t(i);
      return -1;
    };
    // BOS is added when the post-processor's template starts with it (the template may sit
    // inside a Sequence, as in Llama 3.1/3.2's [ByteLevel, TemplateProcessing]).
    std::vector<json> processors;
    const json pp = j.value("post_processor", json());
    if (pp.is_object() && pp.value("type", "") == "Sequence" && pp.contains("processors"))
      for (const json& sub : pp["processors"]) processors.push_back(sub);
    else processors.push_back(pp);
    for (const json& proc : processors)
      if (proc.is_object() && proc.value("type", "") == "TemplateProcessing" && proc.contains("single") &&
          !proc["single"].empty() && proc["single"][0].contains("SpecialToken")) {
        spec.bos = id_of(proc["single"][0]["SpecialToken"].value("id", ""));
        spec.add_bos = spec.bos >= 0;
      }
    if (cfg.contains("bos_token") && id_of(token_name(cfg["bos_token"])) >= 0) spec.bos = id_of(token_name(cfg["bos_token"]));
    if (cfg.contains("eos_token")) spec.eos = id_of(token_name(cfg["eos_token"]));
    if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) spec.add_bos = cfg["add_bos_token"].get<bool>();
    if (spec.bos < 0) spec.add_bos = false;
    spec.eot = id_of("<|eot_id|>");
    if (cfg.contains("chat_template")) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) spec.chat_template = ct.get<std::string>();
      else if (ct.is_array())
        for (const json& t : ct)
          if (t.value("name", "") == "default") spec.chat_template = t.value("template", "");
    }
    // Newer Hugging Face folders keep the template in its own file.
    if (spec.chat_template.empty() && fs::exists(fs::path(dir) / "chat_template.jinja")) {
      std::ifstream in(fs::path(dir) / "chat_template.jinja", std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      spec.chat_template = ss.str();
    }
  } catch (const json::exception& e) {
    fail(where, std::string("unexpected structure: ") + e.what(), "is this a Hugging Face tokenizer.json?");
  }
  collect_end_of_generation(spec);
  return make_pipeline_tokenizer(std::move(spec));
}

}  // namespace nl
