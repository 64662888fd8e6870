// A validated preprocessing pipeline: the session's ops with defaults filled
// in, the fixed output geometry, and the code that runs the ops on one decoded
// image and lays the result out in a batch buffer. Immutable after Create and
// so thread-safe; shared by all of a session's workers.
#ifndef STOKER_SERVER_PIPELINE_H_
#define STOKER_SERVER_PIPELINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rng.h"
#include "proto/stoker/v1/stoker.pb.h"
#include <opencv2/core.hpp>

namespace stoker {

// Limits on session parameters; part of the documented contract.
inline constexpr int kMaxImageSide = 8192;     // pixels, for every size argument
inline constexpr int kMaxBatchSize = 65536;    // samples

class Pipeline {
 public:
  // Validates everything in `config` but the dataset name. INVALID_ARGUMENT
  // names the field (e.g. "pipeline[1].random_resized_crop.scale") and the
  // allowed range.
  static absl::StatusOr<Pipeline> Create(const v1::SessionConfig& config);

  int out_height() const { return out_height_; }
  int out_width() const { return out_width_; }
  v1::Layout layout() const { return layout_; }
  int64_t sample_bytes() const { return int64_t{out_height_} * out_width_ * 3; }
  // One sample's shape in the session's layout, e.g. {H, W, 3} for NHWC.
  std::vector<int64_t> SampleShape() const;

  // Runs the ops, in order, on an RGB image. The result is out_height x
  // out_width x 3.
  cv::Mat Apply(cv::Mat image, Rng& rng) const;

  // Writes an out_height x out_width RGB image to dst (sample_bytes() bytes)
  // in the session's layout.
  void Store(const cv::Mat& image, uint8_t* dst) const;

 private:
  std::vector<v1::Op> ops_;  // with defaults filled in
  int out_height_ = 0;
  int out_width_ = 0;
  v1::Layout layout_ = v1::NHWC;
};

}  // namespace stoker

#endif  // STOKER_SERVER_PIPELINE_H_
