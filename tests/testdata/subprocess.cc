#include "tests/testdata/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace stoker::testing {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return std::unique_ptr<Subprocess>(new Subprocess(pid, fds[0]));
}

Subprocess::~Subprocess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(stdout_fd_);
}

void Subprocess::ReadAvailable(absl::Duration timeout) {
  pollfd p{stdout_fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return;
  char buf[4096];
  ssize_t n;
  while ((n = read(stdout_fd_, buf, sizeof buf)) > 0) output_.append(buf, static_cast<size_t>(n));
}

absl::StatusOr<std::string> Subprocess::WaitForLine(const std::string& needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    for (;;) {
      const size_t eol = output_.find('\n', consumed_);
      if (eol == std::string::npos) break;
      std::string line = output_.substr(consumed_, eol - consumed_);
      consumed_ = eol + 1;
      if (line.find(needle) != std::string::npos) return line;
    }
    // Every line it printed is read and none matched: it never will.
    if (exited_) return absl::NotFoundError(absl::StrCat("process exited before printing '", needle, "'"));
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no line with '", needle, "' after ", absl::FormatDuration(timeout)));
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;  // reaped here: keep the code for Wait (review 1.19)
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      ReadAvailable(absl::ZeroDuration());  // the rest of its output; scanned before the loop ends
      continue;
    }
    ReadAvailable(absl::Milliseconds(50));
  }
}

void Subprocess::Signal(int signal) {
  if (!exited_) kill(pid_, signal);
}

absl::StatusOr<int> Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (exited_) {
      ReadAvailable(absl::ZeroDuration());
      return exit_code_;
    }
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      ReadAvailable(absl::ZeroDuration());
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError("process still running");
    ReadAvailable(absl::Milliseconds(20));
  }
}

absl::StatusOr<int> PortFromLine(const std::string& line) {
  const size_t colon = line.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(line.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("no port in '", line, "'"));
  }
  return port;
}

}  // namespace stoker::testing
