// The byte <-> character table of GPT-2's bytes_to_unicode(): printable Latin-1 bytes map
// to themselves, the other 68 bytes to U+0100.. in byte order.
#include "tokenizer/byte_level.h"

#include <array>
#include <unordered_map>

#include "tokenizer/unicode_text.h"

namespace nl::byte_level {
namespace {

struct Table {
  std::array<char32_t, 256> to_char{};
  std::unordered_map<char32_t, unsigned char> to_byte;
  Table() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[size_t(b)] = printable ? char32_t(b) : char32_t(256 + n++);
      to_byte[to_char[size_t(b)]] = (unsigned char)b;
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) unicode::append_utf8(out, table().to_char[b]);
  return out;
}

std::string decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : unicode::decode_utf8(text)) {
    auto it = table().to_byte.find(c);
    if (it != table().to_byte.end()) out += char(it->second);
    else unicode::append_utf8(out, c);
  }
  return out;
}

}  // namespace nl::byte_level
