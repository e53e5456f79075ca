// UTF-8 helpers and Unicode normalization used by the tokenizers (internal to the module).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nl::unicode {

// Decodes UTF-8 into code points. Invalid bytes become U+FFFD, one per bad byte, the way
// a lenient decoder does; tokenizer input comes from users, so it must never throw.
std::vector<char32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const std::vector<char32_t>& cps);
// Length in bytes of the UTF-8 sequence starting with byte `b` (1 for an invalid lead byte).
size_t utf8_len(unsigned char b);

// Unicode Normalization Form C (canonical decomposition, then canonical composition).
std::string nfc(std::string_view s);
// The Unicode version of the normalization tables.
const char* nfc_unicode_version();

// Unicode White_Space, as Rust's and Oniguruma's `\s` and Python's str.isspace see it.
bool is_white_space(char32_t c);

}  // namespace nl::unicode
