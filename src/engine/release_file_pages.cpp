#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "backends.h"
#include "nightlora/util/file_map.h"

namespace nl {

void release_file_pages(const TensorView& v) {
  if (!v.data || !FileMap::maps(v.data, v.nbytes)) return;  // a buffer of the program's own: kept
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(v.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(v.data) + v.nbytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace nl
