// Hostile and broken GGUF files: every case must give an nl::Error that names the file
// and the problem, never a crash. The suite also runs this program under AddressSanitizer
// and UBSan (scripts/test.sh builds it with -DNL_SANITIZE=ON).
#include <cstring>
#include <random>

#include "nightlora/modelio/gguf.h"
#include "nightlora/util/error.h"
#include "test_util.h"

using namespace nltest;

namespace {

// A small valid file: metadata of several kinds and two tensors (f32 and q8_0-sized f16).
std::string make_valid(const fs::path& p) {
  nl::GgufWriter w;
  w.set("general.architecture", nl::GgufValue::str("llama"));
  w.set("general.name", nl::GgufValue::str("hostile"));
  w.set("llama.block_count", nl::GgufValue::u32(1));
  w.set("test.floats", nl::GgufValue::f32_array({1.5f, -2.0f}));
  w.set("test.strings", nl::GgufValue::str_array({"a", "bc", ""}));
  static std::vector<float> a(64, 0.5f);
  static std::vector<uint16_t> b(32 * 2, 0x3c00);
  w.add_tensor_data("a.weight", nl::QType::F32, {16, 4}, a.data());
  w.add_tensor_data("b.weight", nl::QType::F16, {32, 2}, b.data());
  w.write(p.string());
  return read_text(p);
}

// Byte offsets inside the valid file, found by scanning for known strings.
size_t find(const std::string& s, const std::string& needle) {
  size_t at = s.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return at;
}

template <class T>
void poke(std::string& s, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), s.size());
  std::memcpy(&s[at], &v, sizeof(T));
}

// Opens `bytes` as a GGUF file and returns the error message ("" if it opened).
std::string open_error(const TempDir& td, const std::string& bytes) {
  fs::path p = td / "x.gguf";
  write_text(p, bytes);
  try {
    auto f = nl::GgufFile::open(p.string());
    return "";
  } catch (const nl::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(p.string()), std::string::npos) << "error does not name the file: " << m;
    return m;
  }
}

void expect_error(const TempDir& td, const std::string& bytes, const std::string& words) {
  std::string m = open_error(td, bytes);
  EXPECT_FALSE(m.empty()) << "expected an error mentioning '" << words << "'";
  EXPECT_NE(m.find(words), std::string::npos) << "error '" << m << "' does not mention '" << words << "'";
}

}  // namespace

TEST(GgufHostile, ValidFileRoundTrips) {
  TempDir td;
  make_valid(td / "v.gguf");
  auto f = nl::GgufFile::open((td / "v.gguf").string());
  EXPECT_EQ(f->get_str("general.name"), "hostile");
  EXPECT_EQ(f->get_uint("llama.block_count"), 1u);
  ASSERT_NE(f->find("test.strings"), nullptr);
  EXPECT_EQ(f->find("test.strings")->arr_s, (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(f->find("test.floats")->arr_f, (std::vector<double>{1.5, -2.0}));
  const auto* b = f->find_tensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, nl::QType::F16);
  EXPECT_EQ(b->nbytes, 128u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % 32, reinterpret_cast<uintptr_t>(f->tensors()[0].data) % 32);
}

TEST(GgufHostile, EveryTruncationIsAnError) {
  TempDir td;
  std::string v = make_valid(td / "v.gguf");
  // Every prefix shorter than the end of the last tensor must be rejected.
  for (size_t n = 0; n < v.size(); ++n) {
    std::string m = open_error(td, v.substr(0, n));
    ASSERT_FALSE(m.empty()) << "truncation to " << n << " of " << v.size() << " bytes was accepted";
  }
}

TEST(GgufHostile, WrongMagicAndVersion) {
  TempDir td;
  std::string v = make_valid(td / "v.gguf");
  std::string bad = v;
  bad[0] = 'X';
  expect_error(td, bad, "wrong magic");
  bad = v;
  std::memcpy(&bad[0], "ggjt", 4);
  expect_error(td, bad, "old GGML");
  bad = v;
  poke<uint32_t>(bad, 4, 1);
  expect_error(td, bad, "version 1");
  poke<uint32_t>(bad, 4, 77);
  expect_error(td, bad, "unsupported GGUF version 77");
}

TEST(GgufHostile, AbsurdCounts) {
  TempDir td;
  std::string v = make_valid(td / "v.gguf");
  std::string bad = v;
  poke<uint64_t>(bad, 8, 1ull << 62);
  expect_error(td, bad, "absurd tensor count");
  bad = v;
  poke<uint64_t>(bad, 16, 1ull << 60);
  expect_error(td, bad, "absurd metadata count");
  bad = v;
  poke<uint64_t>(bad, 16, 1000);  // more keys than present: runs into the tensor infos
  EXPECT_FALSE(open_error(td, bad).empty());
}

TEST(GgufHostile, AbsurdLengths) {
  TempDir td;
  std::string v = make_valid(td / "v.gguf");
  // The first key's length field is at byte 24.
  std::string bad = v;
  poke<uint64_t>(bad, 24, ~0ull);
  expect_error(td, bad, "runs past the end");
  // The string array's element count.
  bad = v;
  size_t key = find(v, "test.strings");
  size_t count_at = key + std::strlen("test.strings") + 4 + 4;  // value type, element type
  poke<uint64_t>(bad, count_at, 1ull << 59);
  expect_error(td, bad, "more than the file can hold");
  // A nested array.
  bad = v;
  poke<uint32_t>(bad, key + std::strlen("test.strings") + 4, 9);
  expect_error(td, bad, "nested arrays");
  // An unknown value type.
  bad = v;
  poke<uint32_t>(bad, key + std::strlen("test.strings"), 42);
  expect_error(td, bad, "unknown value type 42");
}

TEST(GgufHostile, BadTensorInfos) {
  TempDir td;
  std::string v = make_valid(td / "v.gguf");
  size_t a = find(v, "a.weight") + std::strlen("a.weight");  // -> n_dims
  size_t dims = a + 4, type_at = dims + 16, off_at = type_at + 4;
  std::string bad = v;
  poke<uint32_t>(bad, a, 0);
  expect_error(td, bad, "dimensions");
  poke<uint32_t>(bad, a, 7);
  expect_error(td, bad, "dimensions");
  bad = v;
  poke<uint64_t>(bad, dims, 0);
  expect_error(td, bad, "invalid dimension");
  bad = v;
  poke<uint64_t>(bad, dims + 8, 1ull << 45);
  expect_error(td, bad, "invalid dimension");
  bad = v;
  poke<uint32_t>(bad, type_at, 1234);
  expect_error(td, bad, "unknown type id 1234");
  bad = v;
  poke<uint32_t>(bad, type_at, static_cast<uint32_t>(nl::QType::Q4_0));  // 16 cols: not a multiple of 32
  expect_error(td, bad, "not a multiple");
  bad = v;
  poke<uint64_t>(bad, off_at, 3);
  expect_error(td, bad, "not aligned");
  bad = v;
  poke<uint64_t>(bad, off_at, 1ull << 40);
  expect_error(td, bad, "past the end of the file");
  bad = v;
  poke<uint64_t>(bad, off_at, ~0ull & ~31ull);  // offset that overflows when added
  expect_error(td, bad, "past the end of the file");
  // Two tensors with the same name.
  bad = v;
  size_t b = find(v, "b.weight");
  bad[b] = 'a';
  expect_error(td, bad, "duplicate tensor name");
}

TEST(GgufHostile, BadMetadataValues) {
  TempDir td;
  {
    nl::GgufWriter w;
    w.set("general.alignment", nl::GgufValue::u32(48));
    w.write((td / "a.gguf").string());
    try {
      nl::GgufFile::open((td / "a.gguf").string());
      FAIL() << "alignment 48 accepted";
    } catch (const nl::Error& e) {
      EXPECT_NE(std::string(e.what()).find("power of two"), std::string::npos) << e.what();
    }
  }
  nl::GgufWriter w;
  w.set("k.str", nl::GgufValue::str("x"));
  w.set("k.neg", nl::GgufValue::i32(-3));
  w.write((td / "b.gguf").string());
  auto f = nl::GgufFile::open((td / "b.gguf").string());
  EXPECT_THROW(f->get_uint("k.str"), nl::Error);
  EXPECT_THROW(f->get_uint("k.neg"), nl::Error);
  EXPECT_THROW(f->get_str("k.missing"), nl::Error);
  EXPECT_EQ(f->get_uint("k.missing", 7), 7u);
}

TEST(GgufHostile, NotAFileOrEmpty) {
  TempDir td;
  EXPECT_THROW(nl::GgufFile::open((td / "nope.gguf").string()), nl::Error);
  EXPECT_THROW(nl::GgufFile::open(td.path.string()), nl::Error);  // a folder
  expect_error(td, "", "too short");
}

// Random corruption of a valid file: every mutant either opens or throws nl::Error.
// Under ASan/UBSan this also proves no out-of-bounds read or UB on any of them.
TEST(GgufHostile, RandomCorruptionNeverCrashes) {
  TempDir td;
  std::string v = make_valid(td / "v.gguf");
  std::mt19937 rng(1234);
  int errors = 0;
  for (int k = 0; k < 1500; ++k) {
    std::string bad = v;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < flips; ++j) {
      size_t at = rng() % bad.size();
      if (rng() % 2) bad[at] = static_cast<char>(rng());
      else bad[at] ^= static_cast<char>(1u << (rng() % 8));
    }
    errors += !open_error(td, bad).empty();
  }
  EXPECT_GT(errors, 100);  // many mutants hit the header; the rest only change tensor data
}

TEST(GgufWriter, RejectsBadShapesAndWritesAtomically) {
  TempDir td;
  nl::GgufWriter w;
  std::vector<uint8_t> buf(1024);
  EXPECT_THROW(w.add_tensor_data("t", nl::QType::Q4_0, {20, 2}, buf.data()), nl::Error);
  EXPECT_THROW(w.add_tensor_data("t", nl::QType::F32, {}, buf.data()), nl::Error);
  w.add_tensor_data("t", nl::QType::F32, {4}, buf.data());
  EXPECT_THROW(w.add_tensor_data("t", nl::QType::F32, {4}, buf.data()), nl::Error);
  // A failing fill leaves neither the output nor its temp file behind.
  nl::GgufWriter bad;
  bad.add_tensor("x", nl::QType::F32, {4}, [](uint8_t*, size_t) { throw nl::Error("fill failed"); });
  EXPECT_THROW(bad.write((td / "o.gguf").string()), nl::Error);
  EXPECT_FALSE(fs::exists(td / "o.gguf"));
  EXPECT_FALSE(fs::exists(td / "o.gguf.tmp"));
}
