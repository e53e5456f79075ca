// Reading JSON that a user hands us (a model's config.json, a tokenizer.json, a precision plan,
// a checkpoint header, an adapter_config.json) so that nothing nlohmann throws reaches the user.
//
// parse_json turns every parser failure, including the numbers no double holds (1e506, which
// nlohmann reports as out_of_range.406, not as a parse error), into an nl::Error naming the file
// and the key path where the parser stopped. JsonPlace then reads typed values out of the parsed
// document; each read that finds the wrong type or an out-of-range value fails with
//   FILE: "a.b[3]": expected an integer, found string "8" (hint)
// so callers check types by reading them, never by catching nlohmann's exceptions.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nl {

// Parses `text`, read from `file`. Throws nl::Error on any problem; `hint` says what to do.
nlohmann::json parse_json(std::string_view text, const std::string& file, const std::string& hint = "");
// Reads the file at `path` and parses it; an unreadable file is an nl::Error too.
nlohmann::json read_json_file(const std::string& path, const std::string& hint = "");

// A JSON value for an error message: "string \"8\"", "number 1.5", "an array". Containers are only
// named, never printed: printing recurses, and a hostile file may nest very deeply.
std::string json_brief(const nlohmann::json& v);

// A value inside a parsed document together with where it came from (file, key path), so every
// typed read can say where it failed. The document must outlive the places read from it.
class JsonPlace {
 public:
  // The document's root; `file` and `hint` are repeated in every error read from it.
  JsonPlace(const nlohmann::json& root, const std::string& file, const std::string& hint = "");

  const nlohmann::json& value() const { return *value_; }
  const std::string& path() const { return path_; }  // "a.b[3]"; empty at the root
  // FILE, or FILE: "a.b[3]" below the root.
  std::string where() const;
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail(const std::string& what, const std::string& hint) const;

  // Navigation. key() requires the member (null counts as missing); find() gives nullopt for an
  // absent or null member. Both fail when this value is not an object.
  bool has(const std::string& key) const;
  JsonPlace key(const std::string& key) const;
  std::optional<JsonPlace> find(const std::string& key) const;
  JsonPlace item(size_t index) const;  // fails when not an array or too short
  // The place of a member or element already in hand (when iterating over object() or array()).
  JsonPlace member(const std::string& key, const nlohmann::json& value) const;
  JsonPlace element(size_t index, const nlohmann::json& value) const;

  // Structure checks: the value itself, failing with "expected an object, found ...".
  const nlohmann::json& object() const;
  const nlohmann::json& array() const;

  // Typed reads. integer() refuses fractions and anything outside [min, max]; number() refuses
  // anything outside [min, max] (NaN included).
  int64_t integer(int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  double number(double min = -std::numeric_limits<double>::max(),
                double max = std::numeric_limits<double>::max()) const;
  bool boolean() const;
  const std::string& string() const;

  // A member's value, or `def` when it is absent or null.
  int64_t integer_or(const std::string& key, int64_t def, int64_t min = std::numeric_limits<int64_t>::min(),
                     int64_t max = std::numeric_limits<int64_t>::max()) const;
  double number_or(const std::string& key, double def, double min = -std::numeric_limits<double>::max(),
                   double max = std::numeric_limits<double>::max()) const;
  bool boolean_or(const std::string& key, bool def) const;
  std::string string_or(const std::string& key, const std::string& def) const;

 private:
  struct Origin {
    std::string file, hint;
  };
  JsonPlace(const nlohmann::json* value, std::shared_ptr<const Origin> origin, std::string path);
  [[noreturn]] void expected(const char* what) const;

  const nlohmann::json* value_;
  std::shared_ptr<const Origin> origin_;
  std::string path_;
};

}  // namespace nl
