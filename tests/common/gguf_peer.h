// Checks a GGUF file we wrote against an independent parser: the npm package
// @huggingface/gguf (tools/js/gguf_dump.mjs). Every metadata key, type and value and every
// tensor's name, shape, type and offset must agree with what our reader sees.
#pragma once
#include <filesystem>

namespace nltest {

// Adds gtest failures for each disagreement. Returns false (and records a skip message in
// the log) when node or tools/js/node_modules is missing.
bool expect_gguf_matches_peer(const std::filesystem::path& gguf_path);

}  // namespace nltest
