// A batch as the client hands it to the training loop. A plain value that
// owns its image buffer; thread-compatible.
#ifndef STOKER_CLIENT_BATCH_H_
#define STOKER_CLIENT_BATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// A batch's image bytes in host memory, left uninitialised on allocation (the
// receive path overwrites every byte). Move-only.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t size) : data_(new uint8_t[size]), size_(size) {}
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  absl::string_view view() const { return {reinterpret_cast<const char*>(data_.get()), size_}; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

struct Batch {
  int64_t epoch = 0;
  int64_t batch_index = 0;
  std::vector<int64_t> sample_indices;
  std::vector<int32_t> labels;
  std::vector<int64_t> shape;  // e.g. {N, H, W, 3} for NHWC
  v1::Layout layout = v1::NHWC;
  HostBuffer data;             // uint8 image buffer, shape's product bytes
  std::string server;          // host:port that produced it
  v1::StageTimes stage_times;  // server-side times (see stoker.proto)
  std::vector<v1::FailedSample> failed_samples;
  absl::Duration receive_latency;  // request sent to last byte received
};

}  // namespace stoker

#endif  // STOKER_CLIENT_BATCH_H_
