// The wire between the server and its Python worker processes
// (python_protocol.h).
#include "dataplane/user_ops/python_protocol.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dataplane/sample/sample_watch.h"

namespace stoker {
namespace python_protocol {

namespace {
constexpr uint32_t kMaxMessageBytes = 16 << 20;  // a reply or ready line (the function catalogue)
}  // namespace

std::string ErrnoText(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// Writes all of `data`; false when the pipe is closed.
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly n bytes before `deadline`; kStopped when the sample must stop
// (SampleWatch, looked at every 100 ms) and kStopGrace has passed since.
ReadResult ReadExact(int fd, char* out, size_t n, absl::Time deadline) {
  size_t done = 0;
  absl::Time stop_at = absl::InfiniteFuture();
  while (done < n) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (stop_at == absl::InfiniteFuture() && SampleWatch::ShouldStop()) stop_at = absl::Now() + kStopGrace;
    if (absl::Now() >= stop_at) return ReadResult::kStopped;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 100)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (ms <= 100) return ReadResult::kTimeout;
      continue;
    }
    const ssize_t got = read(fd, out + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return ReadResult::kClosed;
    done += static_cast<size_t>(got);
  }
  return ReadResult::kOk;
}

std::string Frame(const nlohmann::json& message) {
  // Invalid UTF-8 in a string argument is replaced, never thrown.
  const std::string body = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + body;
}

// One framed message; kOk with *message parsed, or why not.
ReadResult ReadMessage(int fd, absl::Time deadline, nlohmann::json* message, std::string* problem) {
  unsigned char head[4];
  if (ReadResult r = ReadExact(fd, reinterpret_cast<char*>(head), 4, deadline); r != ReadResult::kOk) return r;
  const uint32_t n = head[0] | (head[1] << 8) | (head[2] << 16) | (uint32_t{head[3]} << 24);
  if (n > kMaxMessageBytes) {
    *problem = absl::StrCat("a reply of ", n, " bytes");
    return ReadResult::kClosed;
  }
  std::string body(n, '\0');
  if (ReadResult r = ReadExact(fd, body.data(), n, deadline); r != ReadResult::kOk) return r;
  *message = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (message->is_discarded() || !message->is_object()) {
    *problem = "a reply that is not a JSON object";
    return ReadResult::kClosed;
  }
  return ReadResult::kOk;
}

// The child is not trusted: a field of the wrong type reads as `otherwise`.
bool BoolField(const nlohmann::json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_boolean() && it->get<bool>();
}
std::string StringField(const nlohmann::json& m, const char* key, const std::string& otherwise) {
  auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

// How a process ended, from waitpid's status.
std::string ExitText(int status) {
  if (WIFSIGNALED(status))
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

// A copy of `fd` numbered 10 or above (close-on-exec), so that the child's
// dup2 to 3 and 4 never meets a source that is itself 3 or 4.
int HighCopy(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 10); }

// Kills every process of this user whose environment holds
// STOKER_PYTHON_WORKER=token: what a worker started, wherever it was
// re-parented (a transform's fork, a setsid daemon). A few passes, for
// processes started while the last one looked.
void KillTokenHolders(const std::string& token) {
  const std::string needle = absl::StrCat(kTokenVariable, "=", token, std::string(1, '\0'));
  const std::string inner = std::string(1, '\0') + needle;  // an entry after the first
  const pid_t self = getpid();
  for (int pass = 0; pass < 4; ++pass) {
    int killed = 0;
    DIR* proc = opendir("/proc");
    if (proc == nullptr) return;
    while (const dirent* e = readdir(proc)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 1 || *end != '\0' || pid == self) continue;
      std::ifstream in(absl::StrCat("/proc/", e->d_name, "/environ"), std::ios::binary);
      if (!in) continue;  // gone, or another user's
      const std::string environment((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (absl::StartsWith(environment, needle) || absl::StrContains(environment, inner)) {
        kill(static_cast<pid_t>(pid), SIGKILL);
        ++killed;
      }
    }
    closedir(proc);
    if (killed == 0) return;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace python_protocol
}  // namespace stoker
