#include "nightlora/job/priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nl {

namespace {

// From linux/ioprio.h; glibc has no wrapper for ioprio_set/ioprio_get.
constexpr int kIoprioWhoProcess = 1;  // with id 0 (or a tid): one thread
constexpr int kIoprioClassShift = 13;
constexpr int kIoprioClassIdle = 3;

pid_t this_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

}  // namespace

PriorityResult set_idle_cpu_priority() {
  PriorityResult r;
  sched_param sp{};
  sp.sched_priority = 0;
  if (::sched_setscheduler(0, SCHED_IDLE, &sp) == 0) {
    r.ok = true;
    r.detail = "SCHED_IDLE";
    return r;
  }
  std::string why = std::strerror(errno);
  // On Linux setpriority(PRIO_PROCESS, tid) changes one thread's nice value.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(this_thread_id()), 19) == 0) {
    r.ok = true;
    r.detail = "nice 19 (SCHED_IDLE refused: " + why + ")";
    return r;
  }
  r.detail = "could not lower CPU priority: SCHED_IDLE: " + why + ", nice 19: " + std::strerror(errno);
  return r;
}

PriorityResult set_idle_io_priority() {
  PriorityResult r;
#ifdef SYS_ioprio_set
  int prio = kIoprioClassIdle << kIoprioClassShift;
  if (::syscall(SYS_ioprio_set, kIoprioWhoProcess, 0, prio) == 0) {
    r.ok = true;
    r.detail = "I/O class idle";
  } else {
    r.detail = std::string("could not set idle I/O priority: ") + std::strerror(errno);
  }
#else
  r.detail = "idle I/O priority is not supported on this system";
#endif
  return r;
}

std::string describe_priority() {
  std::string s;
  int pol = ::sched_getscheduler(0);
  s = pol == SCHED_IDLE ? "SCHED_IDLE" : pol == SCHED_BATCH ? "SCHED_BATCH" : pol == SCHED_OTHER ? "SCHED_OTHER" : "policy " + std::to_string(pol);
  errno = 0;
  int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(this_thread_id()));
  if (errno == 0) s += ", nice " + std::to_string(nice);
#ifdef SYS_ioprio_get
  long io = ::syscall(SYS_ioprio_get, kIoprioWhoProcess, 0);
  if (io >= 0) {
    int cls = static_cast<int>(io >> kIoprioClassShift);
    const char* names[] = {"none", "realtime", "best-effort", "idle"};
    s += std::string(", io ") + (cls >= 0 && cls <= 3 ? names[cls] : "?");
  }
#endif
  return s;
}

}  // namespace nl
