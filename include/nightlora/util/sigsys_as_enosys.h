// Android's app sandbox answers a system call it does not know with SIGSYS, which kills the
// process; glibc expects ENOSYS there, the answer of a kernel too old to have the call, and
// then falls back to an older call by itself. This handler gives glibc that answer.
//
// Every process an Android app starts (Termux's shell included; `adb shell` is not one of
// them) inherits a seccomp filter that allows only the system calls bionic, Android's libc,
// uses, and traps the others (SECCOMP_RET_TRAP: the call does not run and the thread gets
// SIGSYS). The static arm64 nightlora carries glibc 2.36, which makes a few newer calls:
// set_robust_list and rseq while starting every thread (the first one before main),
// clone3 to create one, getrandom on older Androids. glibc falls back from each when the
// answer is ENOSYS, as under qemu-user, which implements none of the first two.
//
// The handler sets the trapped call's result register to -ENOSYS and returns, so the
// program continues after the call as if the kernel had answered ENOSYS. It acts only on
// SIGSYS sent by seccomp (si_code SYS_SECCOMP); nothing else ever raises one that way. It
// must be installed before glibc's first such call, which is before main and before any
// constructor: the static aarch64 build starts at nl_static_start (cli/static_start.cpp),
// which installs it with a raw rt_sigaction and then jumps to glibc's _start.
#pragma once
#include <signal.h>

extern "C" {
// The SIGSYS handler (SA_SIGINFO). aarch64 and x86-64 only; elsewhere it does nothing.
void nl_sigsys_as_enosys(int sig, siginfo_t* info, void* ucontext);
}

namespace nl {

// Installs nl_sigsys_as_enosys for SIGSYS with sigaction (for a program whose start-up is
// not the problem, and for tests). Returns false where the architecture is not supported.
bool install_sigsys_as_enosys();

}  // namespace nl
