// The wire between the server and its Python worker processes
// (python_stage.h runs them; python_worker.py is the other end): messages
// framed by a 4-byte little-endian length, JSON bodies, read against a
// deadline and the sample's stop (SampleWatch); the child is not trusted, so
// a field of the wrong type reads as absent. Also how a worker's process and
// what it started are found and ended. Internal to user_ops/. Functions of file
// descriptors and processes; thread-compatible.
#ifndef STOKER_DATAPLANE_USER_OPS_PYTHON_PROTOCOL_H_
#define STOKER_DATAPLANE_USER_OPS_PYTHON_PROTOCOL_H_

#include <cstddef>
#include <string>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace python_protocol {

// STOKER_PYTHON_WORKER=<token> in a worker's environment, inherited by all it starts.
constexpr char kTokenVariable[] = "STOKER_PYTHON_WORKER";

enum class ReadResult { kOk, kTimeout, kClosed, kStopped };

// A sample that must stop (its stream ended) still waits this long for its
// reply: a function that is about to return keeps its process.
constexpr absl::Duration kStopGrace = absl::Milliseconds(500);

// "what: strerror(errno)".
std::string ErrnoText(const char* what);
// Writes all of `data`; false when the pipe is closed.
bool WriteAll(int fd, const std::string& data);
// Reads exactly n bytes before `deadline`; kStopped when the sample must stop
// (SampleWatch, looked at every 100 ms) and kStopGrace has passed since.
ReadResult ReadExact(int fd, char* out, size_t n, absl::Time deadline);
// The message as a frame: its length, then its JSON (invalid UTF-8 replaced).
std::string Frame(const nlohmann::json& message);
// One framed message; kOk with *message parsed, or why not (*problem: a
// reply over 16 MiB or not a JSON object, read as kClosed).
ReadResult ReadMessage(int fd, absl::Time deadline, nlohmann::json* message, std::string* problem);
// The child is not trusted: a field of the wrong type reads as false or `otherwise`.
bool BoolField(const nlohmann::json& m, const char* key);
std::string StringField(const nlohmann::json& m, const char* key, const std::string& otherwise);
// How a process ended, from waitpid's status ("killed by signal 9 (Killed)").
std::string ExitText(int status);
// A copy of `fd` numbered 10 or above (close-on-exec), so that the child's
// dup2 to 3 and 4 never meets a source that is itself 3 or 4.
int HighCopy(int fd);
// Kills every process of this user whose environment holds
// kTokenVariable=token: what a worker started, wherever it was re-parented
// (a transform's fork, a setsid daemon). A few passes, for processes started
// while the last one looked.
void KillTokenHolders(const std::string& token);

}  // namespace python_protocol
}  // namespace stoker

#endif  // STOKER_DATAPLANE_USER_OPS_PYTHON_PROTOCOL_H_
