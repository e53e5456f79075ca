// What the C API tests share: a model handle freed at the end of a scope, the CLI's error
// line, a tiny synthetic model (so a test runs without ../shared).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "nightlora.h"
#include "test_util.h"

namespace capitest {

namespace fs = std::filesystem;

// The CLI's error line (stderr's last line), as nl_last_error() should give it.
inline std::string cli_error(const nltest::CmdResult& r) {
  std::string e = r.err;
  while (!e.empty() && e.back() == '\n') e.pop_back();
  const size_t nl_pos = e.rfind('\n');
  return nl_pos == std::string::npos ? e : e.substr(nl_pos + 1);
}

// A model handle freed at the end of the scope.
struct Model {
  nl_model* m = nullptr;
  explicit Model(const fs::path& path, int threads = 2) {
    nl_model_options o;
    nl_model_options_init(&o);
    o.threads = threads;
    EXPECT_EQ(nl_model_load(path.c_str(), &o, &m), NL_OK) << nl_last_error();
  }
  ~Model() { EXPECT_EQ(nl_model_free(m), NL_OK); }
};

// A tiny random llama with a generated tokenizer, written into dir by `nightlora synth-model`.
inline fs::path synthetic_model(const fs::path& dir) {
  const fs::path p = dir / "tiny-llama.gguf";
  const nltest::CmdResult r =
      nltest::run_cli("synth-model --preset tiny-llama --type q8_0 --tokenizer generated " + nltest::shq(p.string()));
  EXPECT_EQ(r.rc, 0) << r.err;
  return p;
}

inline std::string stories_data(const char* name) { return (nltest::source_dir() / "data/stories" / name).string(); }

}  // namespace capitest
