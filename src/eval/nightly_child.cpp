#include "nightly_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "nightlora/util/error.h"

namespace nl {

ChildExit run_child(const std::string& exe, const std::vector<std::string>& args, const std::string& log_path,
                    const std::function<int()>& stop) {
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<std::string> argv_s;
  argv_s.push_back(exe);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) fail(log_path, std::string("cannot open the training log: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(log_fd);
    fail(exe, std::string("cannot start the training process: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Dies (cleanly: train checkpoints on SIGTERM) with the job; the job may already be gone.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(143);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(exe.c_str(), argv.data());
    const char msg[] = "nightly: cannot run the training executable\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(log_fd);
  int status = 0;
  pid_t r;
  bool forwarded = false;
  for (;;) {
    r = ::waitpid(pid, &status, stop ? WNOHANG : 0);
    if (r < 0 && errno == EINTR) continue;
    if (r != 0) break;
    // Polled rather than woken by the signal: the handlers restart system calls (SA_RESTART).
    if (!forwarded && stop() != 0) {
      ::kill(pid, SIGTERM);
      forwarded = true;
    }
    ::usleep(20000);
  }
  if (r < 0) fail(exe, std::string("lost the training process: ") + std::strerror(errno));
  ChildExit e;
  if (WIFEXITED(status)) {
    e.exited = true;
    e.code = WEXITSTATUS(status);
  } else {
    e.code = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
  }
  return e;
}

std::string file_tail(const std::string& path, size_t max_bytes) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return "";
  const std::streamoff size = f.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  f.seekg(start);
  std::string s(static_cast<size_t>(size - start), '\0');
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

}  // namespace nl
