#include "nightlora/data/data_fingerprint.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "nightlora/util/error.h"

namespace nl {

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // host byte order: a fingerprint is compared only on the machine that wrote it
}

// Four independent lanes over 32-byte blocks (so the multiplies overlap), a byte-wise tail.
class Hasher {
 public:
  void update(const unsigned char* p, size_t n) {
    total_ += n;
    // Fill a partial block first.
    while (n > 0 && fill_ > 0) {
      block_[fill_++] = *p++;
      --n;
      if (fill_ == 32) {
        round(block_);
        fill_ = 0;
      }
    }
    for (; n >= 32; p += 32, n -= 32) round(p);
    while (n > 0) {
      block_[fill_++] = *p++;
      --n;
    }
  }
  uint64_t finish() const {
    uint64_t h = rotl(lane_[0], 1) + rotl(lane_[1], 7) + rotl(lane_[2], 12) + rotl(lane_[3], 18);
    for (uint64_t l : lane_) h = (h ^ rotl(l * kP2, 31) * kP1) * kP1 + kP3;
    h ^= total_;
    for (size_t i = 0; i < fill_; ++i) h = rotl(h ^ (block_[i] * kP3), 11) * kP1;
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }

 private:
  void round(const unsigned char* p) {
    for (int i = 0; i < 4; ++i) lane_[i] = rotl(lane_[i] + load64(p + 8 * i) * kP2, 31) * kP1;
  }
  uint64_t lane_[4] = {kP1 + kP2, kP2, 0, 0 - kP1};
  unsigned char block_[32] = {};
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

}  // namespace

uint64_t hash_bytes64(std::string_view bytes) {
  Hasher h;
  h.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return h.finish();
}

std::string fingerprint_data_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(path, "cannot open the data file to fingerprint it", "check the path and its permissions");
  Hasher h;
  std::vector<unsigned char> buf(1 << 20);
  uint64_t size = 0;
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
    if (n == 0) break;
    h.update(buf.data(), n);
    size += n;
  }
  if (std::ferror(f.get())) fail(path, "a read error while fingerprinting the data file");
  char out[64];
  std::snprintf(out, sizeof out, "bytes:%llu,hash64:%016llx", static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(h.finish()));
  return out;
}

}  // namespace nl
