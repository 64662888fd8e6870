// A batch as the client hands it to the training loop. A plain value that
// owns its image buffer; thread-compatible.
#ifndef STOKER_CLIENT_BATCH_H_
#define STOKER_CLIENT_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/device/host_buffer.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct Batch {
  int64_t epoch = 0;
  int64_t batch_index = 0;
  std::vector<int64_t> sample_indices;
  std::vector<int32_t> labels;
  std::vector<int64_t> shape;  // e.g. {N, H, W, 3} for NHWC
  v1::Layout layout = v1::NHWC;
  v1::DType dtype = v1::UINT8;
  HostBuffer data;             // image buffer: shape's product x dtype's size bytes
  std::string server;          // host:port that produced it
  v1::StageTimes stage_times;  // server-side times (see stoker.proto)
  std::vector<v1::FailedSample> failed_samples;
  // A materialising session's samples (SessionConfig.store): each one's bytes
  // in `data`, in order (0: left out, see failed_samples). Empty otherwise.
  std::vector<int64_t> sample_sizes;
  absl::Duration receive_latency;  // request sent to last byte received
  // SessionConfig.fields: each value field's place in field_data (checked
  // against the session before the batch was accepted), in the session's
  // order without the image, and the bytes after the image buffer.
  std::vector<v1::FieldData> fields;
  std::string field_data;

  // The value field called `name`, or null.
  const v1::FieldData* Field(absl::string_view name) const;
  // Sample i's values of a field of this batch (the bytes of a text, bytes
  // or json value; int32 little-endian class ids).
  absl::string_view FieldValue(const v1::FieldData& field, int64_t i) const;
};

// Sets every field of *batch but `data` and `receive_latency` from a batch's
// header; `producer` is its host:port (or the local producer's name).
void FillBatchFromHeader(const v1::BatchHeader& header, const std::string& producer, Batch* batch);

}  // namespace stoker

#endif  // STOKER_CLIENT_BATCH_H_
