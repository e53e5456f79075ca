// Running `nightlora train` as a child process of the nightly job (see nightly.h for why).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace nl {

struct ChildExit {
  bool exited = false;  // normal exit; else killed by a signal
  int code = 0;         // exit code, or the signal number when !exited
};

// Runs `exe args...` with stdout and stderr appended to `log_path`, and waits for it. The
// child gets SIGTERM if this process dies first (PR_SET_PDEATHSIG), and inherits every file
// descriptor not marked close-on-exec (the job's lock). `stop` (may be empty) is polled while
// the child runs: once it returns a signal number, the child is sent SIGTERM (never SIGINT: a
// second SIGINT makes `train` stop at once, without its checkpoint) and waited for. Throws
// nl::Error when it cannot start.
ChildExit run_child(const std::string& exe, const std::vector<std::string>& args, const std::string& log_path,
                    const std::function<int()>& stop = {});

// The last `max_bytes` of a file (for error messages), "" when unreadable.
std::string file_tail(const std::string& path, size_t max_bytes = 2000);

}  // namespace nl
