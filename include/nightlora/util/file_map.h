// A read-only memory map of a whole file. Model weights are served straight from the page
// cache: nothing is copied unless a backend repacks it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nl {

class FileMap {
 public:
  FileMap() = default;
  explicit FileMap(const std::string& path);  // throws nl::Error naming the file
  ~FileMap();
  FileMap(FileMap&& o) noexcept;
  FileMap& operator=(FileMap&& o) noexcept;
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Whether the n bytes at p lie inside one live FileMap's mapping (not the fuzz build's
  // heap copy): read-only file pages, which MADV_DONTNEED drops from this process and a later
  // read faults in again from the page cache or the file.
  static bool maps(const void* p, size_t n);

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace nl
