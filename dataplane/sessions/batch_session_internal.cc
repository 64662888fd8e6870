// The helpers batch_session*.cc share (batch_session_internal.h).
#include "dataplane/sessions/batch_session_internal.h"

#include <exception>
#include <new>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/strings/str_cat.h"
#include "common/field_spec.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/sample/sample_watch.h"

namespace stoker {
namespace batch_session_internal {

// An allocation that failed while a sample was made (std::bad_alloc, or
// OpenCV's out-of-memory error): the process is at a memory limit, the
// sample is not bad, so it is not replaced: its batch fails with this.
constexpr char kOutOfMemoryPayload[] = "stoker.dev/out-of-memory";

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  const auto* cv_error = dynamic_cast<const cv::Exception*>(&e);
  return cv_error != nullptr && cv_error->code == cv::Error::StsNoMem;
}

// What a sample's processing threw, as its status.
absl::Status ProcessingError(const std::exception& e, absl::string_view what) {
  if (!IsOutOfMemory(e)) return DecodeError(DecodeFailure::kCorrupt, absl::StrCat(what, " failed: ", e.what()));
  absl::Status status =
      absl::ResourceExhaustedError(absl::StrCat("out of memory while ", what,
                                                " (the process is at its cgroup, RLIMIT_AS or RLIMIT_DATA limit; "
                                                "lower --max-inflight-bytes or ask for smaller batches): ",
                                                e.what()));
  status.SetPayload(kOutOfMemoryPayload, absl::Cord("1"));
  return status;
}

bool IsOutOfMemory(const absl::Status& status) { return status.GetPayload(kOutOfMemoryPayload).has_value(); }

bool FailsTheBatch(const absl::Status& status) { return IsOutOfMemory(status) || IsTimerError(status); }

// A batch whose memory could not be allocated: the batch's failure, with
// what the operator can change.
absl::Status OutOfMemory(int64_t batch_index, int64_t bytes, int64_t budget) {
  return absl::ResourceExhaustedError(
      absl::StrCat("batch ", batch_index, ": could not allocate ", bytes,
                   " bytes (the process is at a memory limit: its "
                   "cgroup, RLIMIT_AS or RLIMIT_DATA); the server's budget for batches in flight is ",
                   budget, " bytes (--max-inflight-bytes): lower it, or ask for smaller batches"));
}

int64_t Nanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

// The failed_samples reason of a read's error: a decode failure's name (a
// file over --max-file-bytes is too_large, as an image over --max-pixels),
// read_error for the rest.
std::string ReadFailureReason(const absl::Status& s) {
  return absl::IsInvalidArgument(s) ? DecodeFailureName(DecodeFailureOf(s)) : "read_error";
}

// The session's image field's member extensions (empty: the source's image).
std::vector<std::string> ImageExtensions(const v1::SessionConfig& config) {
  for (const v1::FieldSpec& f : config.fields()) {
    if (f.kind() == v1::IMAGE) return {f.extensions().begin(), f.extensions().end()};
  }
  return {};
}
double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

}  // namespace batch_session_internal
}  // namespace stoker
