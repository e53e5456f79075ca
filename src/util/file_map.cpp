#include "nightlora/util/file_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "nightlora/util/error.h"

namespace nl {

namespace {
// The live mappings' [begin, end) ranges, for FileMap::maps. Never destroyed, so a FileMap
// that outlives the statics at exit still finds it.
struct Mappings {
  std::mutex mu;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
};
Mappings& mappings() {
  static Mappings* m = new Mappings;
  return *m;
}
}  // namespace

bool FileMap::maps(const void* p, size_t n) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  Mappings& m = mappings();
  std::lock_guard<std::mutex> lk(m.mu);
  for (const auto& [begin, end] : m.ranges)
    if (b >= begin && b <= end && n <= end - b) return true;
  return false;
}

FileMap::FileMap(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno), "check the path and permissions");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
#if NL_FILEMAP_HEAP
  // The fuzz build (NL_FUZZ): the file's bytes in a heap buffer of exactly its size, so that
  // AddressSanitizer reports a parser reading past the end (a mapping's last page has no redzone).
  if (size_ > 0) {
    auto* buf = new uint8_t[size_];
    size_t got = 0;
    while (got < size_) {
      ssize_t n = ::read(fd, buf + got, size_ - got);
      if (n <= 0) {
        int e = errno;
        delete[] buf;
        ::close(fd);
        fail(path, std::string("cannot read: ") + (n == 0 ? "file shrank" : std::strerror(e)));
      }
      got += static_cast<size_t>(n);
    }
    data_ = buf;
  }
#else
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail(path, std::string("cannot map: ") + std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
    Mappings& m = mappings();
    std::lock_guard<std::mutex> lk(m.mu);
    m.ranges.emplace_back(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + size_);
  }
#endif
  ::close(fd);
}

namespace {
void release(const uint8_t* data, size_t size) {
  if (!data) return;
#if NL_FILEMAP_HEAP
  delete[] data;
#else
  {
    Mappings& m = mappings();
    std::lock_guard<std::mutex> lk(m.mu);
    const uintptr_t b = reinterpret_cast<uintptr_t>(data);
    std::erase_if(m.ranges, [b](const auto& r) { return r.first == b; });
  }
  ::munmap(const_cast<uint8_t*>(data), size);
#endif
}
}  // namespace

FileMap::~FileMap() { release(data_, size_); }

FileMap::FileMap(FileMap&& o) noexcept { *this = std::move(o); }

FileMap& FileMap::operator=(FileMap&& o) noexcept {
  if (this != &o) {
    release(data_, size_);
    data_ = o.data_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

}  // namespace nl
