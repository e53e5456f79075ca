#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "backends.h"

namespace nl {

void release_file_pages(const TensorView& v) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(v.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(v.data) + v.nbytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)v;
#endif
}

}  // namespace nl
