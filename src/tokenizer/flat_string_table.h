// A read-only map from strings to int32 values for the BPE merge loop's lookups, made of one
// flat array (open addressing, linear probing): a lookup costs one cache miss where
// std::unordered_map's node chains cost three, and a 1 MB line makes a few million of them
// into tables of up to 280k entries (Llama 3's merges). Keys of up to 20 bytes, almost all
// of them, are stored in the slot itself.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nl {

class FlatStringTable {
 public:
  // Sized for `expected` keys (more may be added; the table grows).
  explicit FlatStringTable(size_t expected = 0);

  // Adds `key` -> `value` unless `key` is already there (the first value is kept).
  void insert(std::string_view key, int32_t value);
  // The value of `key`, or false when absent.
  bool find(std::string_view key, int32_t& value) const;
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInline = 20;
  struct Slot {
    uint32_t hash = 0;  // 0: empty (real hashes have bit 0 set)
    uint32_t len = 0;
    int32_t value = 0;
    union {
      char bytes[kInline];
      uint32_t pool_offset;  // keys longer than kInline live in pool_
    } key{};
  };
  static_assert(sizeof(Slot) == 32, "two slots per cache line");

  std::string_view key_of(const Slot& s) const;
  void grow();

  std::vector<Slot> slots_;
  std::string pool_;
  size_t size_ = 0;
};

}  // namespace nl
