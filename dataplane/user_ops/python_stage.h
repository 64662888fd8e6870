// The Python transform stage: a pool of Python worker processes
// (python_worker.py) that run the operator's own functions, the python(...)
// ops of a pipeline, beside the C++ workers. Each process shares one memory
// region with the server: the image goes in and comes out there, never
// through pickling. A function that raises, returns something wrong, runs
// past the timeout or kills its process fails only its sample, with a reason
// that names the function; a process that timed out or died is replaced.
// Nothing a client sends is executed: sessions name functions of the modules
// the operator listed at start.
//
// Thread-safe: any worker thread may Run; a call holds one process for its
// duration (callers wait for a free one). The stage owns its processes and
// stops them when destroyed.
#ifndef STOKER_DATAPLANE_USER_OPS_PYTHON_STAGE_H_
#define STOKER_DATAPLANE_USER_OPS_PYTHON_STAGE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rng.h"
#include "dataplane/base/server_metrics.h"
#include "dataplane/user_ops/user_ops.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct PythonStageConfig {
  // Importable modules whose public functions sessions may name
  // (stoker-server --python-transforms); empty: no stage.
  std::vector<std::string> modules;
  int processes = 1;                                  // --python-workers
  std::string executable = "python3";                 // --python-executable, found on PATH
  absl::Duration timeout = absl::Seconds(10);         // one call (--python-transform-timeout-ms)
  absl::Duration start_timeout = absl::Seconds(120);  // a process importing the modules
  // Shared memory per process, for the image in and the image out.
  int64_t shared_bytes = int64_t{256} << 20;
};

class PythonStage {
 public:
  // Starts the processes and waits until each has imported the modules:
  // INVALID_ARGUMENT naming a module that does not import (and its error), or
  // the interpreter that does not start.
  static absl::StatusOr<std::unique_ptr<PythonStage>> Start(PythonStageConfig config, ServerMetrics* metrics);
  ~PythonStage();

  // OK when `op` names a public function of one of the modules; otherwise
  // INVALID_ARGUMENT naming `where`, the function and what there is.
  absl::Status Check(const std::string& where, const v1::PythonTransform& op) const;

  // Calls the function on `image` (8-bit RGB) with a NumPy generator seeded
  // with [origin.seed, origin.epoch, origin.index, position]. The result is
  // 8-bit RGB of at most max_pixels (0: no limit) pixels. A failure is a
  // DecodeError(kTransform) whose message starts with "python(module:fn)".
  // `io` (may be null): the sample's value fields, passed as NumPy arrays
  // under their names and replaced by what the function returns for them
  // (checked as their kinds are: UTF-8 text, JSON that parses, one class,
  // at most max_field_bytes); untouched when the call fails.
  absl::StatusOr<cv::Mat> Run(const v1::PythonTransform& op, size_t position, const Rng::Origin& origin,
                              const cv::Mat& image, int64_t max_pixels, UserOpIo* io = nullptr);

  int processes() const { return static_cast<int>(workers_.size()); }
  // The running processes' ids (tests kill one to check replacement).
  std::vector<pid_t> Pids() const;

 private:
  struct Worker {
    int shm_fd = -1;
    uint8_t* shm = nullptr;
    std::atomic<pid_t> pid{-1};  // -1: not running (started on its next use); read by Pids()
    int to_child = -1, from_child = -1;
    uint64_t calls = 0;  // requests sent; each reply echoes its request's number
    // STOKER_PYTHON_WORKER=<token> in the process's environment, inherited
    // by everything it starts (also through setsid or a double fork): Stop
    // finds and kills them by it.
    std::string token;
    pid_t spawner = -1;  // the process that started it (the only one that may kill it)
  };
  PythonStage(PythonStageConfig config, ServerMetrics* metrics);
  // Starts w's process and waits for its ready line; fills functions_ from
  // the first one.
  absl::Status Spawn(Worker& w);
  // Kills and reaps w's process (if any) and everything it started (its
  // process group, then every process holding its token), and closes its
  // pipes.
  void Stop(Worker& w);
  // Why w's process ended, once it has ("killed by signal 9").
  std::string Reap(Worker& w);
  // One call on a worker this thread holds.
  absl::StatusOr<cv::Mat> Call(Worker& w, const v1::PythonTransform& op, size_t position, const Rng::Origin& origin,
                               const cv::Mat& image, int64_t max_pixels, UserOpIo* io);
  // Call's steps: replaces a process that ended while idle and starts one
  // where none runs; copies the image and io's fields into w's shared
  // memory, returning the fields' description and where the inputs end; reads
  // the reply's image (checked as untrusted: inside the region, within
  // max_pixels) and its fields.
  absl::Status ReadyWorker(Worker& w, const v1::PythonTransform& op);
  absl::StatusOr<nlohmann::json> WriteInputs(Worker& w, const v1::PythonTransform& op, const cv::Mat& image,
                                             const UserOpIo* io, int64_t* end);
  absl::StatusOr<cv::Mat> ReadImage(const Worker& w, const v1::PythonTransform& op, nlohmann::json& reply,
                                    int64_t max_pixels, UserOpIo* io) const;
  // The reply's fields, checked, into io's values.
  absl::Status TakeFields(const v1::PythonTransform& op, const Worker& w, const nlohmann::json& reply,
                          UserOpIo* io) const;
  int Acquire();
  void Release(int slot);

  // Constant after construction.
  const PythonStageConfig config_;
  ServerMetrics* const metrics_;  // nullable
  std::string script_;
  // Constant after Start: each module's public callables.
  std::map<std::string, std::vector<std::string>> functions_;
  // A Worker is used by the one thread that acquired its slot.
  std::vector<std::unique_ptr<Worker>> workers_;

  mutable absl::Mutex mu_;
  std::deque<int> free_ ABSL_GUARDED_BY(mu_);  // taken from the front: calls rotate over the processes
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_USER_OPS_PYTHON_STAGE_H_
