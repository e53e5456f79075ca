// Where the static aarch64 nightlora starts: the top-level CMakeLists.txt links it with
// -Wl,--entry=nl_static_start when NL_STATIC_START is set (cmake/aarch64-linux-gnu.cmake sets
// it). Before glibc's start-up code runs, it installs nl_sigsys_as_enosys for SIGSYS, so that
// Android's app sandbox answers glibc's newer system calls with ENOSYS instead of killing
// the process (nightlora/util/sigsys_as_enosys.h says which calls and why). A constructor or
// main would be too late: glibc makes the first such calls while setting up the main thread.
//
// Written in assembly because nothing of the C runtime exists yet. It makes one system call,
// rt_sigaction(SIGSYS, &action, NULL, 8), with the kernel's struct sigaction built on the
// stack (no relocation needed), and jumps to glibc's _start with the stack pointer and x0
// (the at-exit function, 0 for a static program) as the kernel gave them.
#if defined(__aarch64__) && defined(NL_STATIC_START)
asm(R"(
  .text
  .global nl_static_start
  .type nl_static_start, %function
nl_static_start:
  mov   x9, x0                          // _start reads x0: keep it
  sub   sp, sp, #32                     // struct sigaction { handler, flags, restorer, mask }
  adrp  x10, nl_sigsys_as_enosys
  add   x10, x10, :lo12:nl_sigsys_as_enosys
  str   x10, [sp]                       // sa_handler (an SA_SIGINFO handler)
  mov   x10, #4                         // SA_SIGINFO; no SA_RESTORER: the kernel's vDSO returns
  str   x10, [sp, #8]
  stp   xzr, xzr, [sp, #16]             // sa_restorer = 0, sa_mask = {}
  mov   x0, #31                         // SIGSYS
  mov   x1, sp
  mov   x2, #0                          // no old action wanted
  mov   x3, #8                          // sizeof(kernel sigset_t)
  mov   x8, #134                        // __NR_rt_sigaction
  svc   #0                              // a failure leaves SIGSYS's default: nothing lost
  add   sp, sp, #32
  mov   x0, x9
  b     _start
  .size nl_static_start, .-nl_static_start
)");
#endif
