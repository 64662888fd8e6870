// What BatchSession's files share (batch_session.cc defines the helpers):
// a batch being made (Job) and the helpers; not for other users.
#ifndef STOKER_DATAPLANE_SESSIONS_BATCH_SESSION_INTERNAL_H_
#define STOKER_DATAPLANE_SESSIONS_BATCH_SESSION_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dataplane/sessions/batch_session.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker::batch_session_internal {

// An allocation that failed while a sample was made (std::bad_alloc, or
// OpenCV's out-of-memory error): the process is at a memory limit.
bool IsOutOfMemory(const std::exception& e);
bool IsOutOfMemory(const absl::Status& status);
// A sample's error that is no verdict on the sample (memory, or a timer that
// depends on load): its batch fails (another server may make it) and no
// replacement is tried.
bool FailsTheBatch(const absl::Status& status);
// What a sample's processing threw, as its status.
absl::Status ProcessingError(const std::exception& e, absl::string_view what);
// A batch whose memory could not be allocated: the batch's failure.
absl::Status OutOfMemory(int64_t batch_index, int64_t bytes, int64_t budget);
int64_t Nanos(absl::Duration d);
// The failed_samples reason of a read's error.
std::string ReadFailureReason(const absl::Status& s);
// The session's image field's member extensions (empty: the source's image).
std::vector<std::string> ImageExtensions(const v1::SessionConfig& config);
double Seconds(int64_t ns);

}  // namespace stoker::batch_session_internal

namespace stoker {

// One batch being produced. Shared by its sample tasks; the last one to
// finish completes it.
struct BatchSession::Job {
  v1::BatchHeader header;
  std::shared_ptr<std::string> data;  // written by the sample tasks, one slot each
  std::vector<std::string> stored;    // a materialising session's samples, joined by Complete
  // Each slot's value fields (SessionConfig.fields), written by its task.
  std::vector<std::vector<std::string>> field_values;
  DoneCallback done;
  absl::Time arrived;
  std::atomic<int64_t> remaining{0};
  std::atomic<bool> started{false};
  // Set with `error`: the batch has failed, so its other samples stop at
  // their next check (SampleWatch) and the ones not started are skipped.
  std::atomic<bool> abandoned{false};
  std::once_flag allocated;  // the buffer is made when the first sample starts
  std::string cache_key;     // set: this session makes the batch for the shared cache
  int64_t bytes = 0;         // its size
  // The samples' field values taken from the budget (on top of `bytes`,
  // which the stream took): released when the batch's buffer goes.
  std::atomic<int64_t> field_charge{0};
  std::atomic<int64_t> read_ns{0}, decode_ns{0}, augment_ns{0}, assemble_ns{0}, python_ns{0};
  // Whole sample tasks that produced a sample (the capacity's measure;
  // tasks a cancellation skipped are left out).
  std::atomic<int64_t> worker_ns{0}, produced{0};
  absl::Mutex mu;
  std::vector<v1::FailedSample> failed ABSL_GUARDED_BY(mu);
  absl::Status error ABSL_GUARDED_BY(mu);  // FAIL policy: the first failure

  uint8_t* Slot(int64_t slot, int64_t sample_bytes) {
    return reinterpret_cast<uint8_t*>(data->data()) + slot * sample_bytes;
  }
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_BATCH_SESSION_INTERNAL_H_
