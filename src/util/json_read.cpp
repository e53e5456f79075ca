#include "nightlora/util/json_read.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "nightlora/util/error.h"

namespace nl {

namespace {

using json = nlohmann::json;

std::string shortened(const std::string& s, size_t n = 48) { return s.size() > n ? s.substr(0, n) + "..." : s; }

// "at least 1", "at most 8", "expected 0 to 1": the side left at the type's limit is not named.
template <class T>
std::string range_text(T min, T max) {
  auto text = [](T v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  if (min <= std::numeric_limits<T>::lowest()) return "at most " + text(max);
  if (max >= std::numeric_limits<T>::max()) return "at least " + text(min);
  return "expected " + text(min) + " to " + text(max);
}

// "line L, column C" of a byte offset, as an editor counts them.
std::string line_and_column(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

// nlohmann's explanation without its "[json.exception.parse_error.101] parse error at line 1,
// column 2: " prefix (the caller says where, in the same words for every kind of failure).
std::string explanation(const json::exception& ex) {
  std::string what = ex.what();
  if (size_t tag = what.find("] "); what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos) what.erase(0, tag + 2);
  if (what.rfind("parse error", 0) == 0)
    if (size_t colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
  return shortened(what, 240);  // its "last read" quotes the input, which may be megabytes
}

// Builds the document as nlohmann's own DOM parser does, but keeps the path of the value being
// read, so a failure (bad syntax, or a number out of range) can name the key it was in. The
// parser itself is iterative; so is this (an explicit stack), whatever the nesting depth.
class PathKeepingParser final : public nlohmann::json_sax<json> {
 public:
  explicit PathKeepingParser(json& root) : root_(root) {}

  bool null() override { return put(json(nullptr)); }
  bool boolean(bool v) override { return put(json(v)); }
  bool number_integer(number_integer_t v) override { return put(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(json(v)); }
  bool string(string_t& v) override { return put(json(std::move(v))); }
  bool binary(binary_t& v) override { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool key(string_t& k) override {
    stack_.back().key = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string& last_token, const json::exception& ex) override {
    failed_ = true;
    position_ = position;
    path_ = current_path();
    // 406 is nlohmann's "number overflow": valid syntax for a number no double can hold.
    if (ex.id == 406)
      what_ = "the number " + shortened(last_token) + " is out of range";
    else
      what_ = "invalid JSON: " + explanation(ex);
    return false;
  }

  bool failed() const { return failed_; }
  size_t position() const { return position_; }
  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }

 private:
  struct Open {
    json* container;
    std::string key;  // the member being read, in an object
  };

  // Where a new value goes: the root, the current object's key, or the end of the current array.
  // Pointers into the containers on the stack stay valid: only the innermost one grows.
  json* slot() {
    if (stack_.empty()) return &root_;
    Open& top = stack_.back();
    if (top.container->is_object()) return &(*top.container)[top.key];
    top.container->push_back(json());
    return &top.container->back();
  }
  bool put(json&& v) {
    *slot() = std::move(v);
    done_with_member();
    return true;
  }
  bool open(json&& empty) {
    json* s = slot();
    *s = std::move(empty);
    stack_.push_back({s, ""});
    return true;
  }
  bool close() {
    stack_.pop_back();
    done_with_member();
    return true;
  }
  // A member read in full leaves the path: a failure after it is not inside it.
  void done_with_member() {
    if (!stack_.empty()) stack_.back().key.clear();
  }
  std::string current_path() const {
    std::string p;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Open& o = stack_[i];
      if (o.container->is_object()) {
        if (o.key.empty() && i + 1 == stack_.size()) break;  // failed before the key was read
        p += (p.empty() ? "" : ".") + o.key;
      } else {
        // An outer array's current element is its last one; the innermost's is the one being read.
        size_t n = o.container->size();
        p.append("[").append(std::to_string(i + 1 == stack_.size() ? n : n - 1)).append("]");
      }
    }
    return p;
  }

  json& root_;
  std::vector<Open> stack_;
  bool failed_ = false;
  size_t position_ = 0;
  std::string path_, what_;
};

}  // namespace

json parse_json(std::string_view text, const std::string& file, const std::string& hint) {
  json root;
  PathKeepingParser parser(root);
  json::sax_parse(text.begin(), text.end(), &parser);
  if (parser.failed()) {
    std::string where = file + (parser.path().empty() ? "" : ": \"" + parser.path() + "\"");
    nl::fail(where, parser.what() + " (at " + line_and_column(text, parser.position()) + ")", hint);
  }
  return root;
}

json read_json_file(const std::string& path, const std::string& hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) nl::fail(path, "cannot read the file", hint);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) nl::fail(path, "read failed", hint);
  return parse_json(ss.str(), path, hint);
}

std::string json_brief(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "string \"" + shortened(v.get_ref<const std::string&>()) + "\"";
    case json::value_t::null: return "null";
    case json::value_t::boolean: return std::string("boolean ") + (v.get<bool>() ? "true" : "false");
    case json::value_t::binary: return "binary data";
    default: return "number " + shortened(v.dump());
  }
}

JsonPlace::JsonPlace(const json& root, const std::string& file, const std::string& hint)
    : value_(&root), origin_(std::make_shared<const Origin>(Origin{file, hint})) {}

JsonPlace::JsonPlace(const json* value, std::shared_ptr<const Origin> origin, std::string path)
    : value_(value), origin_(std::move(origin)), path_(std::move(path)) {}

std::string JsonPlace::where() const { return origin_->file + (path_.empty() ? "" : ": \"" + path_ + "\""); }

void JsonPlace::fail(const std::string& what) const { nl::fail(where(), what, origin_->hint); }
void JsonPlace::fail(const std::string& what, const std::string& hint) const { nl::fail(where(), what, hint); }

void JsonPlace::expected(const char* what) const { fail(std::string("expected ") + what + ", found " + json_brief(*value_)); }

const json& JsonPlace::object() const {
  if (!value_->is_object()) expected("an object");
  return *value_;
}
const json& JsonPlace::array() const {
  if (!value_->is_array()) expected("an array");
  return *value_;
}

bool JsonPlace::has(const std::string& key) const {
  const json& o = object();
  auto it = o.find(key);
  return it != o.end() && !it->is_null();
}

JsonPlace JsonPlace::member(const std::string& key, const json& value) const {
  return JsonPlace(&value, origin_, path_.empty() ? key : path_ + "." + key);
}
JsonPlace JsonPlace::element(size_t index, const json& value) const {
  return JsonPlace(&value, origin_, path_ + "[" + std::to_string(index) + "]");
}

std::optional<JsonPlace> JsonPlace::find(const std::string& key) const {
  const json& o = object();
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  return member(key, *it);
}

JsonPlace JsonPlace::key(const std::string& key) const {
  std::optional<JsonPlace> p = find(key);
  if (!p) member(key, *value_).fail("missing");
  return *p;
}

JsonPlace JsonPlace::item(size_t index) const {
  const json& a = array();
  if (index >= a.size()) element(index, *value_).fail("missing (the array has " + std::to_string(a.size()) + " elements)");
  return element(index, a[index]);
}

int64_t JsonPlace::integer(int64_t min, int64_t max) const {
  if (!value_->is_number_integer()) expected("an integer");
  int64_t v = 0;
  bool in_range = false;
  if (value_->is_number_unsigned()) {
    // Compared as unsigned, never wrapped: 2^64-1 is too large, not -1.
    const uint64_t u = value_->get<uint64_t>();
    in_range = max >= 0 && u <= static_cast<uint64_t>(max) && (min <= 0 || u >= static_cast<uint64_t>(min));
    v = static_cast<int64_t>(u);
  } else {
    v = value_->get<int64_t>();
    in_range = v >= min && v <= max;
  }
  if (!in_range) fail(value_->dump() + " is out of range (" + range_text(min, max) + ")");
  return v;
}

double JsonPlace::number(double min, double max) const {
  if (!value_->is_number()) expected("a number");
  const double v = value_->get<double>();
  if (!(v >= min && v <= max)) fail(shortened(value_->dump()) + " is out of range (" + range_text(min, max) + ")");
  return v;
}

bool JsonPlace::boolean() const {
  if (!value_->is_boolean()) expected("true or false");
  return value_->get<bool>();
}

const std::string& JsonPlace::string() const {
  if (!value_->is_string()) expected("a string");
  return value_->get_ref<const std::string&>();
}

int64_t JsonPlace::integer_or(const std::string& k, int64_t def, int64_t min, int64_t max) const {
  std::optional<JsonPlace> p = find(k);
  return p ? p->integer(min, max) : def;
}
double JsonPlace::number_or(const std::string& k, double def, double min, double max) const {
  std::optional<JsonPlace> p = find(k);
  return p ? p->number(min, max) : def;
}
bool JsonPlace::boolean_or(const std::string& k, bool def) const {
  std::optional<JsonPlace> p = find(k);
  return p ? p->boolean() : def;
}
std::string JsonPlace::string_or(const std::string& k, const std::string& def) const {
  std::optional<JsonPlace> p = find(k);
  return p ? p->string() : def;
}

}  // namespace nl
