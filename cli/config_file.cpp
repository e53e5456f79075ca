// See config_file.h.
#include "config_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <toml.hpp>

#include "did_you_mean.h"
#include "nightlora/util/error.h"

namespace nlcli {
namespace {

// The name an option has in a config file (and in run.json): its first long name, or a
// positional's name (nightly's "train-args").
std::string key_of(const CLI::Option* opt) {
  if (!opt->get_lnames().empty()) return opt->get_lnames().front();
  return opt->get_name();
}

// Options a config file may set: all but --help and --config itself.
bool settable(const CLI::Option* opt) {
  const std::string key = key_of(opt);
  return !key.empty() && key != "help" && key != "config";
}

// What kind of TOML value an option takes, from CLI11's type name ("INT:NONNEGATIVE" -> INT).
enum class Kind { Flag, Integer, Number, Text, TextList };
Kind kind_of(const CLI::Option* opt) {
  if (opt->get_expected_max() == 0) return Kind::Flag;  // expected(0): a flag
  const std::string type = opt->get_type_name().substr(0, opt->get_type_name().find(':'));
  if (opt->get_expected_max() > 1) return Kind::TextList;  // a vector (nightly's train-args)
  if (type == "INT" || type == "UINT") return Kind::Integer;
  if (type == "FLOAT") return Kind::Number;
  return Kind::Text;
}
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Flag: return "true or false";
    case Kind::Integer: return "an integer";
    case Kind::Number: return "a number";
    case Kind::Text: return "a string (in quotes)";
    case Kind::TextList: return "an array of strings";
  }
  return "";
}

using Value = toml::basic_value<toml::discard_comments, std::map, std::vector>;

std::string where(const std::string& path, const Value& v) {
  return path + ":" + std::to_string(v.location().line());
}

// A TOML number as CLI11 reads it back without loss.
std::string number_text(const Value& v) {
  if (v.is_integer()) return std::to_string(v.as_integer());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v.as_floating());
  return buf;
}

// The strings CLI11 is given for `v`, after checking its type against the option's.
std::vector<std::string> inputs_for(const CLI::Option* opt, const std::string& key, const Value& v,
                                    const std::string& path) {
  const Kind kind = kind_of(opt);
  const bool ok = kind == Kind::Flag      ? v.is_boolean()
                  : kind == Kind::Integer ? v.is_integer()
                  : kind == Kind::Number  ? v.is_integer() || v.is_floating()
                  : kind == Kind::Text    ? v.is_string()
                                          : v.is_array();
  if (!ok)
    nl::fail(where(path, v), "`" + key + "` must be " + kind_name(kind) + ", not " + toml::stringize(v.type()),
             "as on the command line: " + opt->get_name() + (kind == Kind::Flag ? "" : " " + opt->get_type_name()));
  if (kind == Kind::Flag) return {};  // handled by the caller: a flag is given or not
  if (kind == Kind::Integer || kind == Kind::Number) return {number_text(v)};
  if (kind == Kind::Text) return {v.as_string().str};
  std::vector<std::string> items;
  for (const Value& item : v.as_array()) {
    if (!item.is_string()) nl::fail(where(path, item), "`" + key + "` must be an array of strings");
    items.push_back(item.as_string().str);
  }
  return items;
}

// The offset of the first byte of `s` that is not valid UTF-8 (an overlong form, a surrogate
// or a code point past U+10FFFF included), or npos. TOML files must be UTF-8, and toml11 3.7.1
// (Debian 12's) reads out of bounds when it reports invalid UTF-8 inside a '...' string (found
// by fuzz_config_toml; fuzz/regressions/config_toml/): it never sees such a file.
size_t first_invalid_utf8(const std::string& s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = b[i];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned cont = b[i + k];
      if (cont < (k == 1 ? lo : 0x80) || cont > (k == 1 ? hi : 0xBF)) return i;
    }
    i += len;
  }
  return std::string::npos;
}

}  // namespace

CLI::Option* add_config_option(CLI::App& sub, std::string& path) {
  return sub.add_option("--config", path,
                        "TOML file of options: each key an option's name without the dashes (rank = 16, "
                        "targets = \"q,v\", background = true); options on the command line win over it")
      ->check(CLI::ExistingFile);
}

void apply_config_file(CLI::App& sub, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) nl::fail(path, "cannot be read", "check the path given to --config");
  const std::string bytes = text.str();
  if (const size_t bad = first_invalid_utf8(bytes); bad != std::string::npos)
    nl::fail(path + ":" + std::to_string(1 + std::count(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bad), '\n')),
             "is not valid UTF-8 (byte " + std::to_string(bad) + ")", "save the file as UTF-8, as TOML requires");
  Value root;
  try {
    std::istringstream stream(bytes);
    root = toml::parse<toml::discard_comments, std::map, std::vector>(stream, path);
  } catch (const toml::syntax_error& e) {
    nl::fail(path + ":" + std::to_string(e.location().line()), std::string("is not valid TOML:\n") + e.what(),
             "see https://toml.io; keys are option names");
  } catch (const std::runtime_error& e) {
    nl::fail(path, std::string("cannot be read: ") + e.what());
  }
  std::map<std::string, CLI::Option*> options;
  std::vector<std::string> names;
  for (CLI::Option* opt : sub.get_options()) {
    if (!settable(opt)) continue;
    for (const std::string& n : opt->get_lnames()) options[n] = opt, names.push_back(n);
    if (opt->get_lnames().empty()) options[key_of(opt)] = opt, names.push_back(key_of(opt));
  }
  // In the file's order, so the first mistake reported is the first in the file.
  std::vector<std::pair<std::string, const Value*>> entries;
  for (const auto& [key, value] : root.as_table()) entries.emplace_back(key, &value);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.second->location().line() < b.second->location().line(); });
  for (const auto& [key, value] : entries) {
    auto it = options.find(key);
    if (it == options.end()) {
      const std::string hint = value->is_table() ? "keys are option names at the top level, without [sections]"
                                                 : "keys are `nightlora " + sub.get_name() + "` option names "
                                                   "without the dashes; see `nightlora " + sub.get_name() + " --help`";
      nl::fail(where(path, *value), "unknown key `" + key + "`." + did_you_mean(key, names), hint);
    }
    CLI::Option* opt = it->second;
    std::vector<std::string> inputs = inputs_for(opt, key, *value, path);
    if (opt->count() > 0) continue;  // given on the command line: it wins
    if (kind_of(opt) == Kind::Flag) {
      if (!value->as_boolean()) continue;  // false: as if the flag were not given
      inputs = {opt->get_flag_value(key, "")};
    }
    try {
      for (std::string& s : inputs) opt->add_result(s);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      nl::fail(where(path, *value), "`" + key + "`: " + e.what());
    }
  }
}

nlohmann::json merged_option_values(const CLI::App& sub) {
  nlohmann::json values = nlohmann::json::object();
  for (const CLI::Option* opt : sub.get_options()) {
    if (!settable(opt)) continue;
    const std::string key = key_of(opt);
    const Kind kind = kind_of(opt);
    if (kind == Kind::Flag) {
      values[key] = opt->count() > 0;
      continue;
    }
    std::vector<std::string> given = opt->results();
    if (given.empty() && !opt->get_default_str().empty()) given = {opt->get_default_str()};
    if (kind == Kind::TextList) {
      values[key] = given;
    } else if (given.empty()) {
      values[key] = "";
    } else if (kind == Kind::Integer || kind == Kind::Number) {
      // As a JSON number when it reads as one ("1e-4", "8"); a size such as "2GiB" stays text.
      const nlohmann::json number = nlohmann::json::parse(given.back(), nullptr, false);
      values[key] = number.is_number() ? number : nlohmann::json(given.back());
    } else {
      values[key] = given.back();
    }
  }
  return values;
}

}  // namespace nlcli
