#include "dataplane/user_ops/python_stage.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/sample_fields.h"
#include "dataplane/sample/sample_watch.h"
#include "dataplane/user_ops/python_protocol.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace stoker {

// python_worker.py, embedded at build time (python_worker_script.cc.in).
extern const char* const kPythonWorkerScript;

using python_protocol::BoolField;
using python_protocol::ErrnoText;
using python_protocol::ExitText;
using python_protocol::Frame;
using python_protocol::HighCopy;
using python_protocol::KillTokenHolders;
using python_protocol::kTokenVariable;
using python_protocol::ReadMessage;
using python_protocol::ReadResult;
using python_protocol::StringField;
using python_protocol::WriteAll;

namespace {

constexpr int64_t kAlign = 64;  // load-bearing: python_worker.py's ALIGN

nlohmann::json ArgumentJson(const v1::OpArgument& a) {
  switch (a.value_case()) {
    case v1::OpArgument::kIntValue: return a.int_value();
    case v1::OpArgument::kFloatValue: return a.float_value();
    case v1::OpArgument::kBoolValue: return a.bool_value();
    case v1::OpArgument::kStringValue: return a.string_value();
    default: return nullptr;
  }
}

// How a value field crosses to Python: its encoded values as a NumPy dtype.
const char* FieldDtype(v1::FieldKind kind) {
  const int64_t element = FieldElementBytes(kind);
  return element == 1 ? "uint8" : kind == v1::NUMBER ? "float32" : "int32";
}

absl::Status Failure(const v1::PythonTransform& op, const std::string& what) {
  return DecodeError(DecodeFailure::kTransform, absl::StrCat("python(", op.function(), ") ", what));
}

}  // namespace

PythonStage::PythonStage(PythonStageConfig config, ServerMetrics* metrics)
    : config_(std::move(config)), metrics_(metrics), script_(kPythonWorkerScript) {}

absl::StatusOr<std::unique_ptr<PythonStage>> PythonStage::Start(PythonStageConfig config, ServerMetrics* metrics) {
  if (config.modules.empty()) return absl::InvalidArgumentError("--python-transforms names no module");
  if (config.processes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--python-workers = ", config.processes, "; need >= 1"));
  }
  if (config.shared_bytes < (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--python-transform-max-bytes = ", config.shared_bytes, "; need at least 1 MiB"));
  }
  if (config.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--python-transform-timeout-ms must be > 0");
  }
  for (const std::string& m : config.modules) {
    if (m.empty() ||
        m.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--python-transforms: '", m, "' is not a module name"));
    }
  }
  std::unique_ptr<PythonStage> stage(new PythonStage(std::move(config), metrics));
  for (int i = 0; i < stage->config_.processes; ++i) {
    stage->workers_.push_back(std::make_unique<Worker>());
    Worker& w = *stage->workers_.back();
    w.shm_fd = memfd_create("stoker-python-stage", MFD_CLOEXEC);
    if (w.shm_fd < 0 || ftruncate(w.shm_fd, stage->config_.shared_bytes) != 0) {
      return absl::ResourceExhaustedError(ErrnoText("shared memory for a Python worker"));
    }
    void* p = mmap(nullptr, static_cast<size_t>(stage->config_.shared_bytes), PROT_READ | PROT_WRITE, MAP_SHARED,
                   w.shm_fd, 0);
    if (p == MAP_FAILED) return absl::ResourceExhaustedError(ErrnoText("mapping a Python worker's shared memory"));
    w.shm = static_cast<uint8_t*>(p);
  }
  for (auto& w : stage->workers_) {
    if (absl::Status s = stage->Spawn(*w); !s.ok()) return s;
  }
  {
    absl::MutexLock lock(&stage->mu_);
    for (int i = 0; i < stage->config_.processes; ++i) stage->free_.push_back(i);
  }
  LOG(INFO) << "python transforms: " << stage->config_.processes << " processes of " << stage->config_.executable
            << " with " << absl::StrJoin(stage->config_.modules, ", ");
  return stage;
}

PythonStage::~PythonStage() {
  for (auto& w : workers_) {
    Stop(*w);
    if (w->shm != nullptr) munmap(w->shm, static_cast<size_t>(config_.shared_bytes));
    if (w->shm_fd >= 0) close(w->shm_fd);
  }
}

absl::Status PythonStage::Spawn(Worker& w) {
  // A socket pair rather than pipes: a write to a dead child fails with
  // EPIPE (MSG_NOSIGNAL) instead of raising SIGPIPE in the server.
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    return absl::ResourceExhaustedError(ErrnoText("socketpair"));
  }
  const int shm_high = HighCopy(w.shm_fd), child_high = HighCopy(ends[1]);
  const int reader = fcntl(ends[0], F_DUPFD_CLOEXEC, 0);
  close(ends[1]);
  if (shm_high < 0 || child_high < 0 || reader < 0) {
    for (int fd : {shm_high, child_high, reader, ends[0]}) {
      if (fd >= 0) close(fd);
    }
    return absl::ResourceExhaustedError(ErrnoText("file descriptors for a Python worker"));
  }
  // The child sees the shared memory as fd 3 and its end of the socket as
  // fd 4, and nothing else of the server's (or, in local mode, of the
  // training process's); its stdout goes to the server's stderr (the
  // server's stdout is for its start-up lines).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 2, 1);
  posix_spawn_file_actions_adddup2(&actions, shm_high, 3);
  posix_spawn_file_actions_adddup2(&actions, child_high, 4);
  posix_spawn_file_actions_addclosefrom_np(&actions, 5);
  const std::string size = std::to_string(config_.shared_bytes);
  const std::string modules = absl::StrJoin(config_.modules, ",");
  std::vector<char*> argv = {const_cast<char*>(config_.executable.c_str()),
                             const_cast<char*>("-c"),
                             const_cast<char*>(script_.c_str()),
                             const_cast<char*>(size.c_str()),
                             const_cast<char*>(modules.c_str()),
                             nullptr};
  // The server blocks SIGTERM and SIGINT in its threads (one thread waits
  // for them); the child starts with no signal blocked and default handlers.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  // Its own process group: a signal to the server's group (Ctrl-C, a
  // supervisor's SIGTERM) leaves the workers to finish the samples in
  // flight; they end when the server closes their socket.
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  // The server's environment and the worker's token, which its children inherit.
  static std::atomic<uint64_t> spawns{0};
  w.token = absl::StrCat(getpid(), ".", ++spawns, ".", absl::ToUnixNanos(absl::Now()));
  const std::string token_entry = absl::StrCat(kTokenVariable, "=", w.token);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, absl::StrCat(kTokenVariable, "="))) env.push_back(*e);
  }
  env.push_back(const_cast<char*>(token_entry.c_str()));
  env.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, config_.executable.c_str(), &actions, &attributes, argv.data(), env.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(shm_high);
  close(child_high);
  if (spawned != 0) {
    close(ends[0]);
    close(reader);
    return absl::InvalidArgumentError(
        absl::StrCat("--python-executable ", config_.executable, " does not start: ", std::strerror(spawned)));
  }
  w.pid = pid;
  w.spawner = getpid();
  w.to_child = ends[0];
  w.from_child = reader;
  nlohmann::json ready;
  std::string problem;
  const ReadResult r = ReadMessage(w.from_child, absl::Now() + config_.start_timeout, &ready, &problem);
  if (r == ReadResult::kStopped) {  // started for a sample whose stream ended
    Stop(w);
    return SampleWatch::Check();
  }
  if (r != ReadResult::kOk || !BoolField(ready, "ready")) {
    std::string why = r == ReadResult::kTimeout ? absl::StrCat("did not import its modules within ",
                                                               absl::FormatDuration(config_.start_timeout))
                      : r == ReadResult::kOk    ? StringField(ready, "error", "said it is not ready")
                                                : (problem.empty() ? "ended before it was ready" : problem);
    Stop(w);
    const std::string what = absl::StrCat("python transforms (", config_.executable, " with ", modules, "): ", why);
    // A start past its timeout depends on the load (a first start's failure stops the server anyway).
    return r == ReadResult::kTimeout ? TimerError(what) : absl::InvalidArgumentError(what);
  }
  if (functions_.empty() && ready.contains("functions") && ready["functions"].is_object()) {
    for (const auto& [module, names] : ready["functions"].items()) {
      if (!names.is_array()) continue;
      for (const auto& n : names) {
        if (n.is_string()) functions_[module].push_back(n.get<std::string>());
      }
      std::sort(functions_[module].begin(), functions_[module].end());
    }
  }
  return absl::OkStatus();
}

std::string PythonStage::Reap(Worker& w) {
  const pid_t pid = w.pid.exchange(-1);  // cleared first: Pids() never shows a reaped id
  if (pid <= 0) return "not running";
  // A process that closed its socket is ending: give it a moment to end by
  // itself, so that its own cause (a signal, an exit status) is reported.
  int status = 0;
  pid_t got = 0;
  const absl::Time patience = absl::Now() + absl::Seconds(2);
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 && absl::Now() < patience) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    do {
      got = waitpid(pid, &status, 0);
    } while (got < 0 && errno == EINTR);
  }
  if (got < 0) return "lost";
  return ExitText(status);
}

void PythonStage::Stop(Worker& w) {
  if (w.to_child >= 0) close(w.to_child);
  // A forked copy of this process (a training process's DataLoader worker)
  // does not own the workers: it only closes its copies of their sockets.
  const bool owner = w.spawner == getpid();
  if (w.pid > 0 && owner) {
    const pid_t pid = w.pid.load();
    kill(-pid, SIGKILL);  // its process group (not reaped yet, so not reused): the worker and its children
    kill(pid, SIGKILL);
    Reap(w);
  }
  if (!w.token.empty() && owner) KillTokenHolders(w.token);  // children that left the group (setsid), orphans
  w.token.clear();
  if (w.from_child >= 0) close(w.from_child);
  w.to_child = w.from_child = -1;
}

absl::Status PythonStage::Check(const std::string& where, const v1::PythonTransform& op) const {
  const std::string& f = op.function();
  const size_t colon = f.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == f.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".python.function = '", f, "'; expected module:function, e.g. mypkg.aug:strong_aug"));
  }
  const std::string module = f.substr(0, colon), name = f.substr(colon + 1);
  auto it = functions_.find(module);
  if (it == functions_.end()) {
    std::vector<std::string> modules;
    for (const auto& [m, unused] : functions_) modules.push_back(m);
    return absl::InvalidArgumentError(absl::StrCat(where, ".python: module '", module,
                                                   "' is not one of this server's --python-transforms (",
                                                   absl::StrJoin(modules, ", "), ")"));
  }
  if (!std::binary_search(it->second.begin(), it->second.end(), name)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".python: ", module, " has no public function '", name,
                                                   "'; it has ", absl::StrJoin(it->second, ", ")));
  }
  if (op.has_p() && !(op.p() >= 0 && op.p() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".python.p = ", op.p(), "; allowed range is 0..1"));
  }
  for (const v1::OpArgument& a : op.kwargs()) {
    if (a.name().empty() || a.name() == "sample" || a.name() == "rng") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".python: keyword '", a.name(), "' is not allowed (sample and rng are the call's own)"));
    }
    if (a.has_float_value() && !std::isfinite(a.float_value())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".python: keyword '", a.name(), "' = ", a.float_value(), "; numbers must be finite"));
    }
    if (a.value_case() == v1::OpArgument::VALUE_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".python: keyword '", a.name(), "' has no value"));
    }
  }
  return absl::OkStatus();
}

std::vector<pid_t> PythonStage::Pids() const {
  std::vector<pid_t> pids;
  for (const auto& w : workers_) pids.push_back(w->pid.load());
  return pids;
}

int PythonStage::Acquire() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::deque<int>* free) { return !free->empty(); }, &free_));
  const int slot = free_.front();
  free_.pop_front();
  return slot;
}

void PythonStage::Release(int slot) {
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

absl::StatusOr<cv::Mat> PythonStage::Run(const v1::PythonTransform& op, size_t position, const Rng::Origin& origin,
                                         const cv::Mat& image, int64_t max_pixels, UserOpIo* io) {
  const int slot = Acquire();
  Worker& w = *workers_[static_cast<size_t>(slot)];
  absl::StatusOr<cv::Mat> out;
  try {
    out = Call(w, op, position, origin, image, max_pixels, io);
  } catch (const std::exception&
               e) {  // a reply nlohmann cannot read, an allocation: the sample's, and the process is replaced
    Stop(w);
    if (metrics_) metrics_->PythonReplaced("protocol").Increment();
    out = Failure(
        op, absl::StrCat("failed in the server's side of the call (", e.what(), "); the worker process was replaced"));
  }
  Release(slot);
  return out;
}

absl::StatusOr<cv::Mat> PythonStage::Call(Worker& w, const v1::PythonTransform& op, size_t position,
                                          const Rng::Origin& origin, const cv::Mat& image, int64_t max_pixels,
                                          UserOpIo* io) {
  if (absl::Status s = ReadyWorker(w, op); !s.ok()) return s;
  int64_t end = 0;
  absl::StatusOr<nlohmann::json> fields = WriteInputs(w, op, image, io, &end);
  if (!fields.ok()) return fields.status();
  nlohmann::json kwargs = nlohmann::json::object();
  for (const v1::OpArgument& a : op.kwargs()) kwargs[a.name()] = ArgumentJson(a);
  const uint64_t id = ++w.calls;
  const nlohmann::json request = {
      {"id", id},
      {"fn", op.function()},
      {"kwargs", kwargs},
      {"seed", {origin.seed, std::max<int64_t>(0, origin.epoch), std::max<int64_t>(0, origin.index), position}},
      {"image", {image.rows, image.cols, 3}},
      {"fields", *fields},
      {"inputs_end", end},
      {"max_pixels", max_pixels}};
  const absl::Time deadline = absl::Now() + config_.timeout;
  nlohmann::json reply;
  std::string problem;
  ReadResult r = WriteAll(w.to_child, Frame(request)) ? ReadMessage(w.from_child, deadline, &reply, &problem)
                                                      : ReadResult::kClosed;
  if (r == ReadResult::kOk && !(reply.contains("id") && reply["id"] == id)) {
    // Not the reply to this request (the function wrote to the socket
    // itself?): the stream cannot be trusted any more.
    problem = "a reply to another request";
    r = ReadResult::kClosed;
  }
  if (r == ReadResult::kStopped) {  // the function still runs: its process cannot be asked again
    Stop(w);
    if (metrics_) metrics_->PythonReplaced("stopped").Increment();
    return SampleWatch::Check();
  }
  // A timeout or a crash depends on the load of the server (and on memory),
  // not on the sample alone: TimerError fails the batch as retryable instead
  // of replacing the sample (issue 49).
  if (r == ReadResult::kTimeout) {
    Stop(w);
    if (metrics_) metrics_->PythonReplaced("timeout").Increment();
    LOG(WARNING) << "python(" << op.function() << ") ran past " << absl::FormatDuration(config_.timeout)
                 << "; its worker process was killed and will be replaced";
    return TimerError(absl::StrCat("python(", op.function(), ") timed out after ",
                                   absl::ToInt64Milliseconds(config_.timeout),
                                   " ms (--python-transform-timeout-ms); the worker process was replaced"));
  }
  if (r == ReadResult::kClosed) {
    const bool protocol = !problem.empty();
    if (protocol) kill(w.pid.load(), SIGKILL);
    const std::string how = Reap(w);
    Stop(w);
    if (metrics_) metrics_->PythonReplaced(protocol ? "protocol" : "crash").Increment();
    LOG(WARNING) << "python(" << op.function() << "): worker process " << (protocol ? problem : how)
                 << "; it will be replaced";
    const std::string what =
        absl::StrCat("crashed its worker process (", protocol ? problem : how, "); the process was replaced");
    // A protocol breach is the function's doing (it wrote to the socket): the sample's.
    return protocol ? Failure(op, what) : TimerError(absl::StrCat("python(", op.function(), ") ", what));
  }
  if (!BoolField(reply, "ok")) return Failure(op, StringField(reply, "error", "failed"));
  return ReadImage(w, op, reply, max_pixels, io);
}

absl::Status PythonStage::ReadyWorker(Worker& w, const v1::PythonTransform& op) {
  if (w.pid > 0) {  // a process that died while idle (the OOM killer, a stray signal) is replaced, not blamed
    int status = 0;
    if (waitpid(w.pid.load(), &status, WNOHANG) == w.pid.load()) {
      w.pid = -1;
      Stop(w);
      if (metrics_) metrics_->PythonReplaced("crash").Increment();
      LOG(WARNING) << "a Python worker process ended while idle (" << ExitText(status) << "); starting another";
    }
  }
  if (w.pid <= 0) {  // replaced after a timeout or a crash: started on its next use
    if (absl::Status s = Spawn(w); !s.ok()) {
      if (s.code() == absl::StatusCode::kCancelled || IsTimerError(s)) return s;  // stopped; a slow start
      return Failure(op, absl::StrCat("has no worker process: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> PythonStage::WriteInputs(Worker& w, const v1::PythonTransform& op, const cv::Mat& image,
                                                        const UserOpIo* io, int64_t* end_out) {
  if (image.type() != CV_8UC3) return Failure(op, "was given an image that is not 8-bit RGB");
  const int64_t in_bytes = int64_t{image.rows} * image.cols * 3;
  if (in_bytes + kAlign > config_.shared_bytes) {
    return Failure(op, absl::StrCat("cannot take a ", image.cols, "x", image.rows, " image: over the ",
                                    config_.shared_bytes, " bytes of --python-transform-max-bytes"));
  }
  for (int y = 0; y < image.rows; ++y) {
    std::memcpy(w.shm + int64_t{y} * image.cols * 3, image.ptr<uint8_t>(y), size_t(image.cols) * 3);
  }
  // The value fields after the image, each at an aligned offset.
  nlohmann::json fields = nlohmann::json::array();
  int64_t end = in_bytes;
  if (io != nullptr) {
    for (const UserOpField& f : io->fields) {
      const int64_t at = (end + kAlign - 1) / kAlign * kAlign;
      const int64_t bytes = static_cast<int64_t>(f.value->size());
      if (bytes > config_.shared_bytes - at - kAlign) {
        return Failure(op, absl::StrCat("cannot take field '", f.name, "' of ", bytes, " bytes: over the ",
                                        config_.shared_bytes, " bytes of --python-transform-max-bytes"));
      }
      std::memcpy(w.shm + at, f.value->data(), static_cast<size_t>(bytes));
      fields.push_back({{"name", f.name},
                        {"dtype", FieldDtype(f.kind)},
                        {"count", bytes / FieldElementBytes(f.kind)},
                        {"offset", at}});
      end = at + bytes;
    }
  }
  *end_out = end;
  return fields;
}

absl::StatusOr<cv::Mat> PythonStage::ReadImage(const Worker& w, const v1::PythonTransform& op, nlohmann::json& reply,
                                               int64_t max_pixels, UserOpIo* io) const {
  // The reply is checked as untrusted: the image must lie inside the region.
  const nlohmann::json& shape = reply["image"];
  const nlohmann::json& offset = reply["offset"];
  if (!shape.is_array() || shape.size() != 3 || !offset.is_number_integer() || !shape[0].is_number_integer() ||
      !shape[1].is_number_integer() || shape[2] != 3) {
    return Failure(op, "replied without an image shape");
  }
  const int64_t h = shape[0].get<int64_t>(), wd = shape[1].get<int64_t>(), at = offset.get<int64_t>();
  // h and wd are at most 2^20, so h * wd * 3 does not overflow; `at` is
  // compared before anything is added to it.
  if (h < 1 || wd < 1 || h > (int64_t{1} << 20) || wd > (int64_t{1} << 20) || at < 0 || at > config_.shared_bytes ||
      h * wd * 3 > config_.shared_bytes - at) {
    return Failure(op, absl::StrCat("replied with an image of ", wd, "x", h, " at ", at, " that is not in its memory"));
  }
  if (max_pixels > 0 && h * wd > max_pixels) {
    return Failure(op, absl::StrCat("returned ", wd, "x", h, " pixels; --max-pixels is ", max_pixels));
  }
  if (io != nullptr && !io->fields.empty()) {
    if (absl::Status s = TakeFields(op, w, reply, io); !s.ok()) return s;
  }
  cv::Mat out(static_cast<int>(h), static_cast<int>(wd), CV_8UC3);
  std::memcpy(out.data, w.shm + at, static_cast<size_t>(h * wd * 3));
  return out;
}

absl::Status PythonStage::TakeFields(const v1::PythonTransform& op, const Worker& w, const nlohmann::json& reply,
                                     UserOpIo* io) const {
  auto returned = reply.find("fields");
  if (returned == reply.end() || !returned->is_array()) return Failure(op, "replied without its fields");
  // Checked in full before any value is replaced: a failed sample keeps its fields.
  std::vector<std::pair<UserOpField*, std::string>> changes;
  for (const nlohmann::json& r : *returned) {
    const std::string name = r.is_object() ? StringField(r, "name", "") : "";
    auto f = std::find_if(io->fields.begin(), io->fields.end(), [&](const UserOpField& x) { return x.name == name; });
    auto count = r.is_object() ? r.find("count") : r.end();
    auto offset = r.is_object() ? r.find("offset") : r.end();
    if (f == io->fields.end() || count == r.end() || offset == r.end() || !count->is_number_integer() ||
        !offset->is_number_integer()) {
      return Failure(op, absl::StrCat("replied with a field that is not the sample's ('", name, "')"));
    }
    const int64_t n = count->get<int64_t>(), at = offset->get<int64_t>(), element = FieldElementBytes(f->kind);
    if (n < 0 || at < 0 || at > config_.shared_bytes || n > (config_.shared_bytes - at) / element) {
      return Failure(op, absl::StrCat("replied with field '", name, "' outside its memory"));
    }
    std::string value(reinterpret_cast<const char*>(w.shm + at), static_cast<size_t>(n * element));
    absl::StatusOr<std::string> checked = CheckReplacedField(
        f->kind, std::move(value), io->max_field_bytes, absl::StrCat("python(", op.function(), ") field '", name, "'"));
    if (!checked.ok()) return checked.status();
    changes.emplace_back(&*f, *std::move(checked));
  }
  for (auto& [field, value] : changes) *field->value = std::move(value);
  return absl::OkStatus();
}

}  // namespace stoker
