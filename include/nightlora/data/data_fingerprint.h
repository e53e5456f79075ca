// The identity of a data file for resuming: every byte counts. A run continues only on the
// data it started with, so a checkpoint stores this fingerprint and resume compares it.
// (Model files, gigabytes and immutable in practice, keep the cheaper sampled fingerprint of
// checkpoint.h.) Streams the file in 1 MiB pieces through a 4-lane 64-bit multiply-rotate
// hash: several GB/s, so 100 MB costs a few tens of milliseconds.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace nl {

// "bytes:<size>,hash64:<16 hex digits>". Throws nl::Error when the file cannot be read.
std::string fingerprint_data_file(const std::string& path);

// The hash of a byte string, as fingerprint_data_file computes it over a file's bytes.
uint64_t hash_bytes64(std::string_view bytes);

}  // namespace nl
