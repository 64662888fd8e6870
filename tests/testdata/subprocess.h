// Runs a program as a child process for multi-process tests: its stdout is
// piped to the test (to read start-up lines such as the bound port), its
// stderr goes to the test's stderr. The destructor kills (SIGKILL) and reaps a
// child still running. Thread-compatible.
#ifndef STOKER_TESTS_TESTDATA_SUBPROCESS_H_
#define STOKER_TESTS_TESTDATA_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace stoker::testing {

class Subprocess {
 public:
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const std::vector<std::string>& argv);
  ~Subprocess();

  // Reads stdout lines until one contains `needle`; returns that line.
  // DEADLINE_EXCEEDED after `timeout`, NOT_FOUND if stdout closes first.
  absl::StatusOr<std::string> WaitForLine(const std::string& needle, absl::Duration timeout);
  // Everything read from stdout so far.
  const std::string& output() const { return output_; }

  void Signal(int signal);
  // Waits up to `timeout` for the exit. Returns the exit code, or 128 + the
  // signal that killed it; DEADLINE_EXCEEDED if still running.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  pid_t pid() const { return pid_; }

 private:
  Subprocess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}
  void ReadAvailable(absl::Duration timeout);

  pid_t pid_;
  int stdout_fd_;
  bool exited_ = false;
  int exit_code_ = -1;  // once exited_
  std::string output_;
  size_t consumed_ = 0;  // output_ before this was already matched
};

// The port in a start-up line such as "stoker-server listening on 0.0.0.0:4242".
absl::StatusOr<int> PortFromLine(const std::string& line);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_SUBPROCESS_H_
