// nl_sigsys_as_enosys, the answer to Android's app sandbox (nightlora/util/sigsys_as_enosys.h):
// a SIGSYS from seccomp becomes an ENOSYS result of the trapped call, any other SIGSYS is
// left alone. Two ways in:
//  - a real seccomp filter, as Android's, trapping one system call (getppid) in a child
//    process. qemu-user refuses filters, so under qemu this one is skipped;
//  - the signal such a filter sends, queued by hand: rt_tgsigqueueinfo to this very thread
//    with si_code SYS_SECCOMP (the kernel lets a thread queue any si_code to itself). The
//    signal arrives as that call returns, so the handler rewrites that call's result. This
//    one runs under qemu too, so the aarch64 register is checked as well as x86-64's.
#include "nightlora/util/sigsys_as_enosys.h"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace {

#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1
#endif

// Queues SIGSYS with this si_code to the calling thread; returns the call's result and errno.
std::pair<long, int> queue_sigsys_to_self(int si_code) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  info.si_signo = SIGSYS;
  info.si_code = si_code;
  errno = 0;
  long r = syscall(SYS_rt_tgsigqueueinfo, getpid(), static_cast<pid_t>(syscall(SYS_gettid)), SIGSYS, &info);
  return {r, errno};
}

class SigsysAsEnosys : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(__aarch64__) && !defined(__x86_64__)
    GTEST_SKIP() << "nl_sigsys_as_enosys supports aarch64 and x86-64 only";
#endif
    ASSERT_EQ(sigaction(SIGSYS, nullptr, &saved_), 0);
    ASSERT_TRUE(nl::install_sigsys_as_enosys());
  }
  void TearDown() override { sigaction(SIGSYS, &saved_, nullptr); }
  struct sigaction saved_ {};
};

#if defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#endif

// In a child: a filter that traps getppid (SECCOMP_RET_TRAP, as Android's filter answers the
// calls it does not know), then getppid. Exit status 0: it returned -1 with ENOSYS; 77: no
// filter could be installed (qemu-user); anything else, or a death by SIGSYS: the handler failed.
int trap_getppid_in_child() {
  pid_t pid = fork();
  if (pid == 0) {
    if (!nl::install_sigsys_as_enosys()) _exit(3);
    sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
      _exit(77);
    errno = 0;
    long r = syscall(SYS_getppid);
    _exit(r == -1 && errno == ENOSYS ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

TEST_F(SigsysAsEnosys, SeccompTrapBecomesEnosys) {
  int r = trap_getppid_in_child();
  if (r == 77) GTEST_SKIP() << "a seccomp filter cannot be installed here (qemu-user refuses them; some containers do)";
  EXPECT_EQ(r, 0) << "128+" << SIGSYS << " means the trapped call killed the process";
}

TEST_F(SigsysAsEnosys, TrappedCallReturnsEnosys) {
  auto [r, err] = queue_sigsys_to_self(SYS_SECCOMP);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(err, ENOSYS);
  // The program goes on normally afterwards, and a second trap is answered the same way.
  auto [r2, err2] = queue_sigsys_to_self(SYS_SECCOMP);
  EXPECT_EQ(r2, -1);
  EXPECT_EQ(err2, ENOSYS);
}

TEST_F(SigsysAsEnosys, OtherSigsysLeavesTheResultAlone) {
  auto [r, err] = queue_sigsys_to_self(SI_QUEUE);  // as sigqueue() sends it: not from seccomp
  EXPECT_EQ(r, 0);
  EXPECT_EQ(err, 0);
}

}  // namespace
