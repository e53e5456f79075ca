// GPT-2's reversible map between bytes and printable characters: byte-level BPE vocabularies
// store every byte as one visible character (a space is "Ġ", a newline "Ċ").
#pragma once
#include <string>
#include <string_view>

namespace nl::byte_level {

// Maps raw bytes to the vocabulary's characters (UTF-8 encoded).
std::string encode(std::string_view bytes);
// Maps vocabulary characters back to raw bytes; characters outside the map are kept as UTF-8.
std::string decode(std::string_view text);

}  // namespace nl::byte_level
