// See flat_string_table.h.
#include "tokenizer/flat_string_table.h"

#include <cstring>
#include <functional>

namespace nl {
namespace {

uint32_t hash_of(std::string_view key) {
  const uint64_t h = std::hash<std::string_view>{}(key);
  return uint32_t(h ^ (h >> 32)) | 1u;
}

size_t capacity_for(size_t keys) {
  size_t cap = 16;
  while (cap < keys + keys / 2) cap *= 2;  // at most 2/3 full
  return cap;
}

}  // namespace

FlatStringTable::FlatStringTable(size_t expected) : slots_(capacity_for(expected)) {}

std::string_view FlatStringTable::key_of(const Slot& s) const {
  if (s.len <= kInline) return {s.key.bytes, s.len};
  return {pool_.data() + s.key.pool_offset, s.len};
}

void FlatStringTable::insert(std::string_view key, int32_t value) {
  if ((size_ + 1) * 3 > slots_.size() * 2) grow();
  const uint32_t h = hash_of(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.hash == h && s.len == key.size() && key_of(s) == key) return;  // keep the first value
    if (s.hash != 0) continue;
    s.hash = h;
    s.len = uint32_t(key.size());
    s.value = value;
    if (key.size() <= kInline) {
      std::memcpy(s.key.bytes, key.data(), key.size());
    } else {
      s.key.pool_offset = pool_.size();
      pool_.append(key);
    }
    ++size_;
    return;
  }
}

bool FlatStringTable::find(std::string_view key, int32_t& value) const {
  const uint32_t h = hash_of(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == h && s.len == key.size() && key_of(s) == key) {
      value = s.value;
      return true;
    }
  }
}

void FlatStringTable::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.hash == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].hash != 0) i = (i + 1) & mask;
    slots_[i] = s;  // pooled keys keep their offsets
  }
}

}  // namespace nl
