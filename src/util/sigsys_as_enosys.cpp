#include "nightlora/util/sigsys_as_enosys.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ucontext.h>

#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1  // si_code of a SIGSYS from seccomp (linux/signal.h)
#endif

// Runs before glibc has set up the thread (no errno, no stack protector guard): it touches
// only its arguments.
extern "C" __attribute__((no_stack_protector)) void nl_sigsys_as_enosys(int, siginfo_t* info, void* context) {
  if (info == nullptr || info->si_code != SYS_SECCOMP) return;
  auto* uc = static_cast<ucontext_t*>(context);
  // The trapped call did not run; its result register is what the program sees on return.
#if defined(__aarch64__)
  uc->uc_mcontext.regs[0] = static_cast<uint64_t>(-ENOSYS);
#elif defined(__x86_64__)
  uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#else
  (void)uc;
#endif
}

namespace nl {

bool install_sigsys_as_enosys() {
#if defined(__aarch64__) || defined(__x86_64__)
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = nl_sigsys_as_enosys;
  sa.sa_flags = SA_SIGINFO;
  return sigaction(SIGSYS, &sa, nullptr) == 0;
#else
  return false;
#endif
}

}  // namespace nl
