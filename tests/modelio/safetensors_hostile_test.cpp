// Hostile safetensors files: every malformed header gives an nl::Error naming the file, the
// tensor and the problem, never a crash. Also built against the sanitized library
// (test_hostile_sanitized), so ASan/UBSan watch the same cases.
#include <fstream>

#include "nightlora/modelio/safetensors.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nltest::TempDir;
namespace fs = std::filesystem;

// Builds a raw safetensors file from a header text and a data buffer.
void write_raw(const fs::path& p, const std::string& header, const std::string& data, uint64_t declared_len = ~0ull) {
  uint64_t n = declared_len == ~0ull ? header.size() : declared_len;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
  bytes += header + data;
  std::ofstream(p, std::ios::binary) << bytes;
}

// Expects opening to throw nl::Error whose message contains every fragment.
void expect_safetensors_error(const fs::path& p, std::vector<std::string> fragments) {
  try {
    nl::SafetensorsFile::open(p.string());
    FAIL() << "expected an error for " << p;
  } catch (const nl::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(p.string()), std::string::npos) << "error should name the file: " << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

TEST(SafetensorsHostile, MalformedHeadersGiveClearErrors) {
  TempDir tmp;
  fs::path p = tmp / "h.safetensors";
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  std::ofstream(p, std::ios::binary) << "abc";
  expect_safetensors_error(p, {"too short"});

  write_raw(p, ok, std::string(8, '\0'), 1ull << 40);
  expect_safetensors_error(p, {"header length", "absurd"});

  write_raw(p, ok, std::string(8, '\0'), ok.size() + 100);
  expect_safetensors_error(p, {"header length", "past the end"});

  write_raw(p, "[1,2]", "");
  expect_safetensors_error(p, {"JSON object"});

  write_raw(p, R"({"w":{"dtype":"F32",)", "");
  expect_safetensors_error(p, {"invalid JSON"});

  write_raw(p, R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "unsupported dtype"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "non-negative"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "needs 12 bytes"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "past the end"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "end before"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "data_offsets"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "too large"});

  write_raw(p,
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            std::string(12, '\0'));
  expect_safetensors_error(p, {"overlaps"});

  write_raw(p, R"({"__metadata__":{"k":3}})", "");
  expect_safetensors_error(p, {"__metadata__"});

  // A shape nested a million levels deep: rejected without recursing through it.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  write_raw(p, R"({"w":{"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_safetensors_error(p, {"'w'", "shape element"});
}

}  // namespace
