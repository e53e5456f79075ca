// The server's readers of request bytes against hostile input: request bodies (JSON objects
// and their typed fields) and uploaded training files. Whatever the bytes, the answer is a
// value or an ApiError with a 4xx status, never another exception or a crash. This file also
// runs in test_hostile_sanitized (AddressSanitizer + UBSan; tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/file_store.h"
#include "serve/request_fields.h"
#include "test_util.h"

namespace {

using nl::serve::ApiError;

// Runs f; passes when it returns or throws an ApiError with a 4xx status.
template <class F>
void value_or_4xx(F f, const std::string& what) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_GE(e.status, 400) << what;
    EXPECT_LT(e.status, 500) << what;
    EXPECT_FALSE(std::string(e.what()).empty()) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": escaped as " << e.what();
  }
}

// Every typed field reader on every key of a parsed body.
void read_all_fields(const nlohmann::json& body) {
  for (const auto& item : body.items()) {
    const std::string key = item.key();  // not a structured binding: clang 14 cannot capture one
    value_or_4xx([&] { nl::serve::opt_string(body, key); }, key);
    value_or_4xx([&] { nl::serve::opt_bool(body, key); }, key);
    value_or_4xx([&] { nl::serve::opt_number(body, key, 0, 2); }, key);
    value_or_4xx([&] { nl::serve::opt_integer(body, key, 1, 1024); }, key);
    value_or_4xx([&] { nl::serve::opt_integer(body, key, INT64_MIN, INT64_MAX); }, key);
    value_or_4xx([&] { nl::serve::req_string(body, key); }, key);
  }
}

TEST(ServeRequestHostile, BodiesThatAreNotObjects) {
  const std::vector<std::string> bodies = {
      "", " ", "{", "}", "[]", "null", "1", "\"x\"", "{\"a\":}", "{\"a\":1,}", "{'a': 1}", "{\"a\": 1e400}",
      "{\"a\": -1e400}", "{\"a\": NaN}", "{\"a\": Infinity}", std::string("{\"a\": \"\0\"}", 10),
      "{\"a\": \"\xff\xfe\"}", "{\"a\": \"\xc0\xaf\"}", "{\"a\": \"\\ud800\"}", "{\"a\": 1} {\"b\": 2}",
      std::string(100000, '['), std::string(100000, '{'), "{\"a\":" + std::string(50000, '[') + std::string(50000, ']') + "}"};
  for (const std::string& b : bodies)
    value_or_4xx([&] { read_all_fields(nl::serve::parse_body_object(b)); }, b.substr(0, 40));
}

TEST(ServeRequestHostile, FieldsOfEveryType) {
  const nlohmann::json body = nlohmann::json::parse(R"({
    "s": "x", "b": true, "i": 7, "neg": -3, "f": 2.5, "big": 18446744073709551615, "huge": 1e300,
    "min": -9223372036854775808, "n": null, "a": [1, "x"], "o": {"k": 1}, "e": "", "z": 0, "mz": -0.0
  })");
  read_all_fields(body);
  // Whole numbers written as floats are integers; others are not.
  EXPECT_EQ(nl::serve::opt_integer(nlohmann::json{{"k", 8.0}}, "k", 1, 1024), 8);
  EXPECT_THROW(nl::serve::opt_integer(nlohmann::json{{"k", 8.5}}, "k", 1, 1024), ApiError);
  EXPECT_THROW(nl::serve::opt_integer(body, "big", 1, INT64_MAX), ApiError);
  EXPECT_EQ(nl::serve::opt_integer(body, "min", INT64_MIN, INT64_MAX), INT64_MIN);
  EXPECT_FALSE(nl::serve::opt_string(body, "n").has_value());
}

TEST(ServeRequestHostile, RandomlyDamagedBodies) {
  const std::vector<std::string> seeds = {
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0.5, "stream": true, "stop": ["a", "b"]})",
      R"({"model": "m", "training_file": "file-0123", "hyperparameters": {"n_epochs": "auto", "batch_size": 4, "learning_rate_multiplier": 2}})",
      R"({"model": "m", "prompt": ["x"], "seed": -1, "top_p": 1, "stream_options": {"include_usage": true}})"};
  std::mt19937 rng(12345);
  for (int i = 0; i < 3000; ++i) {
    std::string b = seeds[static_cast<size_t>(i) % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      const size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0: b[at] = static_cast<char>(rng() & 0xff); break;             // flip a byte
        case 1: b.erase(at, 1 + rng() % 8); break;                           // drop some
        case 2: b.insert(at, b.substr(rng() % b.size(), rng() % 16)); break;  // duplicate a piece
        default: b.insert(at, 1, "{}[]\":,0-e.\\"[rng() % 13]); break;       // a JSON character
      }
    }
    value_or_4xx(
        [&] {
          nlohmann::json j = nl::serve::parse_body_object(b);
          read_all_fields(j);
          for (const auto& [key, v] : j.items())
            if (v.is_object()) read_all_fields(v);
        },
        b.substr(0, 60));
  }
}

TEST(ServeRequestHostile, UploadedTrainingFiles) {
  nltest::TempDir tmp;
  nl::serve::FileStore store((tmp / "files").string(), 1000);
  std::mt19937 rng(7);
  std::vector<std::string> files = {
      "", "\n\n", "not json", "[", "[1, 2]", "[{\"text\": 1}, 5]", "{\"text\": \"a\"}\n{", std::string("\0\0\0", 3),
      "{\"text\": \"\xff\"}\n", std::string(200000, '['), std::string(300000, 'x'),
      "{\"text\": \"a\"}\r\n{\"prompt\": \"b\", \"completion\": \"c\"}\r\n"};
  for (int i = 0; i < 200; ++i) {
    std::string f(rng() % 512, '\0');
    for (char& c : f) c = static_cast<char>(rng() & 0xff);
    files.push_back(f);
  }
  int accepted = 0;
  for (const std::string& f : files)
    value_or_4xx([&] { store.add("x.jsonl", "fine-tune", f), ++accepted; }, f.substr(0, 40));
  EXPECT_EQ(accepted, 1);  // only the well-formed one (CRLF lines are fine)
  value_or_4xx([&] { store.add("x.jsonl", "assistants", "{\"text\": \"a\"}"); }, "purpose");
  // Ids that are not this store's are unknown, whatever they look like.
  const std::vector<std::string> ids = {"../files/x", "file-", "file-../../../etc/passwd", std::string("file-\0", 6)};
  for (const std::string& id : ids)
    EXPECT_THROW(store.data_path(id, "training_file"), ApiError) << id;
}

}  // namespace
