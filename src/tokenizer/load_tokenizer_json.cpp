// Tokenizer::from_hf_dir: reads a Hugging Face tokenizer.json (+ tokenizer_config.json).
// Supported: a BPE model; normalizers NFC / Prepend / Replace (alone or in a Sequence);
// pre-tokenizers none (SentencePiece style), ByteLevel, or Sequence[Split(Regex), ByteLevel];
// added tokens; a TemplateProcessing post-processor that starts with BOS. Anything else is
// a clear error rather than a tokenizer that silently differs from the reference. Every value
// is read through JsonPlace, so a wrong type or an absurd id names its key path in the file.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nightlora/util/error.h"
#include "nightlora/util/json_read.h"
#include "tokenizer/tokenizer_spec.h"

namespace nl {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const char* const kTokenizerHint = "is this a Hugging Face tokenizer.json, complete and unedited?";
// Token ids beyond this are refused: no real vocabulary comes near, and the tables are sized by
// the largest id.
constexpr int64_t kMaxTokenId = int64_t{1} << 24;

// A token given in tokenizer_config.json as a string or as {"content": ...}.
std::string token_name(const JsonPlace& v) {
  if (v.value().is_string()) return v.string();
  if (v.value().is_object()) return v.string_or("content", "");
  return "";
}

// The "type" of a component, or "" when it has none.
std::string type_of(const JsonPlace& p) { return p.value().is_object() ? p.string_or("type", "") : ""; }

void add_normalizer(const JsonPlace& n, TokenizerSpec& spec) {
  const std::string type = type_of(n);
  if (type == "Sequence") {
    const JsonPlace steps = n.key("normalizers");
    for (size_t i = 0; i < steps.array().size(); ++i) add_normalizer(steps.item(i), spec);
  } else if (type == "NFC") {
    spec.normalizer.push_back({NormalizerStep::Nfc, "", ""});
  } else if (type == "Prepend") {
    spec.normalizer.push_back({NormalizerStep::Prepend, n.key("prepend").string(), ""});
  } else if (type == "Replace" && n.has("pattern") && n.key("pattern").has("String")) {
    spec.normalizer.push_back(
        {NormalizerStep::Replace, n.key("pattern").key("String").string(), n.key("content").string()});
  } else {
    fail(n.where(), "unsupported normalizer \"" + type + "\"",
         "supported: NFC, Prepend, Replace with a literal string, Sequence of these");
  }
}

void set_pre_tokenizer(const std::optional<JsonPlace>& p, TokenizerSpec& spec) {
  if (!p) {
    spec.kind = TokenizerKind::SentencePieceBpe;
    return;
  }
  const std::string type = type_of(*p);
  spec.kind = TokenizerKind::ByteLevelBpe;
  if (type == "ByteLevel") {
    if (p->boolean_or("add_prefix_space", false))
      p->fail("ByteLevel pre-tokenizer with add_prefix_space is not supported");
    if (!p->boolean_or("use_regex", true)) p->fail("ByteLevel pre-tokenizer without a split regex is not supported");
    spec.pre_regex = kGpt2Regex;
  } else if (type == "Sequence" && p->key("pretokenizers").array().size() == 2) {
    const JsonPlace split = p->key("pretokenizers").item(0);
    const JsonPlace bl = p->key("pretokenizers").item(1);
    if (type_of(split) != "Split" || !split.has("pattern") || !split.key("pattern").has("Regex") ||
        split.string_or("behavior", "") != "Isolated" || split.boolean_or("invert", false) || type_of(bl) != "ByteLevel" ||
        bl.boolean_or("use_regex", true) || bl.boolean_or("add_prefix_space", false))
      p->fail("unsupported pre-tokenizer sequence",
              "supported: Split(Regex, Isolated) followed by ByteLevel(use_regex=false), as Qwen2/3 and Llama 3 use");
    spec.pre_regex = split.key("pattern").key("Regex").string();
  } else {
    p->fail("unsupported pre-tokenizer \"" + type + "\"", "supported: none, ByteLevel, Sequence[Split, ByteLevel]");
  }
  if (spec.pre_regex == kQwen2Regex) spec.pre_name = "qwen2";
  else if (spec.pre_regex == kLlama3Regex) spec.pre_name = "llama-bpe";
  else if (spec.pre_regex == kGpt2Regex) spec.pre_name = "gpt2";
  else spec.pre_name = "custom";
}

void read_model(const JsonPlace& m, TokenizerSpec& spec) {
  const std::string type = m.string_or("type", "BPE");
  if (type != "BPE") m.fail("model type \"" + type + "\" is not supported", "only BPE models are");
  if (m.number_or("dropout", 0.0) != 0.0) m.fail("BPE dropout is not supported for deterministic tokenization");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!m.string_or(k, "").empty()) m.fail(std::string("BPE option ") + k + " is not supported");

  const JsonPlace vocab = m.key("vocab");
  for (auto it = vocab.object().begin(); it != vocab.object().end(); ++it) {
    const size_t id = static_cast<size_t>(vocab.member(it.key(), it.value()).integer(0, kMaxTokenId));
    if (id >= spec.tokens.size()) {
      spec.tokens.resize(id + 1);
      spec.types.resize(id + 1, kTokNormal);
    }
    spec.tokens[id] = it.key();
    if (it.key().size() == 6 && it.key().rfind("<0x", 0) == 0 && it.key()[5] == '>') spec.types[id] = kTokByte;
  }
  const JsonPlace merges = m.key("merges");
  for (size_t i = 0; i < merges.array().size(); ++i) {
    const JsonPlace mg = merges.item(i);
    if (mg.value().is_string()) {
      const std::string& s = mg.string();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) mg.fail("merge \"" + s + "\" has no space separating its two parts");
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      const std::string& left = mg.item(0).string();  // read in order: the first wrong one is named
      spec.merges.emplace_back(left, mg.item(1).string());
    }
  }
  spec.ignore_merges = m.boolean_or("ignore_merges", false);
  spec.byte_fallback = m.boolean_or("byte_fallback", false);
  spec.fuse_unk = m.boolean_or("fuse_unk", false);
  if (m.has("unk_token") && m.value()["unk_token"].is_string()) {
    auto it = vocab.value().find(m.key("unk_token").string());
    if (it != vocab.value().end()) spec.unk = static_cast<int32_t>(it->get<int64_t>());  // checked above
  }
}

void read_added_tokens(const JsonPlace& added, TokenizerSpec& spec) {
  for (size_t i = 0; i < added.array().size(); ++i) {
    const JsonPlace a = added.item(i);
    AddedToken t;
    t.id = static_cast<int32_t>(a.key("id").integer(0, kMaxTokenId));
    t.content = a.key("content").string();
    t.special = a.boolean_or("special", false);
    t.lstrip = a.boolean_or("lstrip", false);
    t.rstrip = a.boolean_or("rstrip", false);
    t.normalized = a.boolean_or("normalized", !t.special);
    if (a.boolean_or("single_word", false)) a.fail("added token \"" + t.content + "\" uses single_word, which is not supported");
    const size_t id = static_cast<size_t>(t.id);
    if (id >= spec.tokens.size()) {
      spec.tokens.resize(id + 1);
      spec.types.resize(id + 1, kTokNormal);
    }
    spec.tokens[id] = t.content;
    spec.types[id] = t.special ? kTokControl : kTokUserDefined;
    spec.added.push_back(t);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_dir(const std::string& dir) {
  const fs::path tj = fs::path(dir) / "tokenizer.json";
  const std::string where = tj.string();
  if (!fs::exists(tj)) fail(dir, "no tokenizer.json in this folder", "pass a GGUF file or a Hugging Face model folder");
  const json j_doc = read_json_file(where, kTokenizerHint);
  const JsonPlace j(j_doc, where, kTokenizerHint);
  j.object();
  const fs::path cfg_path = fs::path(dir) / "tokenizer_config.json";
  const json cfg_doc = fs::exists(cfg_path) ? read_json_file(cfg_path.string()) : json::object();
  const JsonPlace cfg(cfg_doc, cfg_path.string(), "is tokenizer_config.json complete and unedited?");
  cfg.object();

  TokenizerSpec spec;
  spec.source = where;
  read_model(j.key("model"), spec);
  if (std::optional<JsonPlace> added = j.find("added_tokens")) read_added_tokens(*added, spec);
  if (spec.tokens.empty()) j.fail("the vocabulary is empty");
  if (spec.unk >= 0) spec.types[size_t(spec.unk)] = kTokUnknown;
  for (size_t i = 0; i < spec.tokens.size(); ++i)
    if (spec.tokens[i].empty()) {
      spec.tokens[i] = "[nightlora_unused_" + std::to_string(i) + "]";
      spec.types[i] = kTokUnused;
    }

  if (std::optional<JsonPlace> n = j.find("normalizer")) add_normalizer(*n, spec);
  set_pre_tokenizer(j.find("pre_tokenizer"), spec);
  if (spec.kind == TokenizerKind::SentencePieceBpe) {
    // The Strip decoder removes the space that the Prepend normalizer added.
    std::optional<JsonPlace> d = j.find("decoder");
    if (d && type_of(*d) == "Sequence") {
      const JsonPlace decoders = d->key("decoders");
      for (size_t i = 0; i < decoders.array().size(); ++i) {
        const JsonPlace s = decoders.item(i);
        if (type_of(s) == "Strip" && s.integer_or("start", 0) == 1) spec.strip_leading_space = true;
      }
    }
  }

  auto id_of = [&](const std::string& name) -> int32_t {
    if (name.empty()) return -1;
    for (size_t i = 0; i < spec.tokens.size(); ++i)
      if (spec.tokens[i] == name) return int32_t(i);
    return -1;
  };
  // BOS is added when the post-processor's template starts with it (the template may sit
  // inside a Sequence, as in Llama 3.1/3.2's [ByteLevel, TemplateProcessing]).
  std::vector<JsonPlace> processors;
  if (std::optional<JsonPlace> pp = j.find("post_processor")) {
    if (type_of(*pp) == "Sequence" && pp->has("processors")) {
      const JsonPlace list = pp->key("processors");
      for (size_t i = 0; i < list.array().size(); ++i) processors.push_back(list.item(i));
    } else {
      processors.push_back(*pp);
    }
  }
  for (const JsonPlace& proc : processors)
    if (type_of(proc) == "TemplateProcessing" && proc.has("single") && !proc.key("single").array().empty()) {
      const JsonPlace first = proc.key("single").item(0);
      if (first.value().is_object() && first.has("SpecialToken")) {
        spec.bos = id_of(first.key("SpecialToken").string_or("id", ""));
        spec.add_bos = spec.bos >= 0;
      }
    }
  if (std::optional<JsonPlace> b = cfg.find("bos_token"); b && id_of(token_name(*b)) >= 0) spec.bos = id_of(token_name(*b));
  if (std::optional<JsonPlace> e = cfg.find("eos_token")) spec.eos = id_of(token_name(*e));
  if (std::optional<JsonPlace> ab = cfg.find("add_bos_token"); ab && ab->value().is_boolean()) spec.add_bos = ab->boolean();
  if (spec.bos < 0) spec.add_bos = false;
  spec.eot = id_of("<|eot_id|>");
  if (std::optional<JsonPlace> ct = cfg.find("chat_template")) {
    if (ct->value().is_string()) {
      spec.chat_template = ct->string();
    } else {
      for (size_t i = 0; i < ct->array().size(); ++i) {
        const JsonPlace t = ct->item(i);
        if (t.value().is_object() && t.string_or("name", "") == "default") spec.chat_template = t.string_or("template", "");
      }
    }
  }
  // Newer Hugging Face folders keep the template in its own file.
  if (spec.chat_template.empty() && fs::exists(fs::path(dir) / "chat_template.jinja")) {
    std::ifstream in(fs::path(dir) / "chat_template.jinja", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    spec.chat_template = ss.str();
  }
  collect_end_of_generation(spec);
  return make_pipeline_tokenizer(std::move(spec));
}

}  // namespace nl
