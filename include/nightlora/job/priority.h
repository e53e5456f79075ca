// Background mode stays out of the user's way: the scheduler runs the job only when nothing
// else wants the CPU, and its disk I/O only when the disk is otherwise idle.
//
// On Linux both are per *thread*, and new threads inherit them from the thread that creates
// them: call these on the main thread before starting worker threads (thread pools), or in
// each worker.
#pragma once
#include <string>

namespace nl {

struct PriorityResult {
  bool ok = false;
  std::string detail;  // what was set ("SCHED_IDLE", "nice 19") or why it failed
};

// SCHED_IDLE for the calling thread; where that is refused, nice 19.
PriorityResult set_idle_cpu_priority();

// I/O priority class IDLE (ioprio_set) for the calling thread; honoured by the BFQ and CFQ
// I/O schedulers, ignored by others (the call still succeeds).
PriorityResult set_idle_io_priority();

// The calling thread's current settings, for logs and tests: "SCHED_IDLE, nice 0, io idle".
std::string describe_priority();

}  // namespace nl
