// `nightlora info` on a folder whose config.json holds a number no double holds: bad input
// (exit 1) naming the file and the key, not an internal error (exit 2). In the suite Info, which
// the qemu runs leave out (they have no CLI).
#include "test_util.h"

namespace {

TEST(Info, BadConfigJsonIsAnInputError) {
  nltest::TempDir tmp;
  nltest::write_text(tmp / "config.json",
                     R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1e506,
                         "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256})");
  nltest::CmdResult r = nltest::run_cli("info " + nltest::shq(tmp.path.string()));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("nightlora: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("config.json: \"num_hidden_layers\": the number 1e506 is out of range"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

}  // namespace
