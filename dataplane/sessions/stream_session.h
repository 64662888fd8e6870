// What a BatchStream needs from the session that produces its batches:
// BatchSession is the real one; tests drive fakes whose batches finish when
// the test says. gRPC-free.
#ifndef STOKER_DATAPLANE_SESSIONS_STREAM_SESSION_H_
#define STOKER_DATAPLANE_SESSIONS_STREAM_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// A batch ready to send: the header and the image buffer. The buffer is
// shared and immutable, so a cached batch is re-sent, and chunks are streamed,
// without copying.
struct FinishedBatch {
  absl::Status status;  // not OK: the batch failed (BadSamplePolicy FAIL)
  v1::BatchHeader header;
  std::shared_ptr<const std::string> data;
  absl::Time ready_time;
};

class StreamSession {
 public:
  using DoneCallback = std::function<void(FinishedBatch)>;
  virtual ~StreamSession() = default;

  // Checks the request and schedules it. On OK, `done` runs exactly once,
  // later or on another thread (also after Cancel).
  virtual absl::Status Submit(const v1::BatchRequest& request, DoneCallback done) = 0;
  // Makes queued work of this session skip what it can.
  virtual void Cancel() = 0;
  // Bytes of the finished batch's buffer for this request, for the server's
  // memory budget (counted before Submit validates the request).
  virtual int64_t BatchBytes(const v1::BatchRequest& request) const = 0;
  virtual v1::CacheMode cache_mode() const = 0;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_STREAM_SESSION_H_
