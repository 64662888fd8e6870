// A validated preprocessing pipeline: the session's ops with defaults filled
// in, the fixed output geometry and dtype, and the code that turns one encoded
// image into one sample of the batch buffer. The first op is fused with
// decoding where its registry entry says how (OpEntry::fused in op_entry.h):
// a leading crop decodes only the crop's region of a JPEG, and a crop (or
// resize) at least twice its output is shrunk in the DCT domain (by 1/2, 1/4
// or 1/8) first. Immutable after Create and so thread-safe; shared by all of
// a session's workers.
#ifndef STOKER_DATAPLANE_OPS_PIPELINE_H_
#define STOKER_DATAPLANE_OPS_PIPELINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/rng.h"
#include "dataplane/decode/video_decoder.h"
#include "dataplane/ops/audio_ops.h"
#include "dataplane/ops/op_entry.h"
#include "dataplane/sample/geometry.h"
#include "dataplane/user_ops/user_ops.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct OpEntry;      // op_entry.h
struct UserOpHooks;  // op_entry.h

class PluginInstance;

// Limits on session parameters; part of the documented contract.
// kMaxImageSide (op_entry.h): pixels, for every size argument.
inline constexpr int kMaxBatchSize = 65536;                  // samples
inline constexpr int64_t kMaxBatchBytes = int64_t{2} << 30;  // one batch's image buffer
// Most ops a pipeline may have: each is checked, copied and kept per
// session (500,000 took 820 MB at open); real pipelines have a dozen.
inline constexpr int kMaxPipelineOps = 1024;
inline constexpr size_t kMaxClipBytes = size_t{1} << 30;  // one video clip's decoded RGB frames

// Worker time one sample spent per stage.
struct SampleTimes {
  absl::Duration decode, augment;
  absl::Duration python;  // in python(...) ops (user_ops.h); not part of augment
};

class Pipeline {
 public:
  // Validates everything in `config` but the dataset name. INVALID_ARGUMENT
  // names the field (e.g. "pipeline[1].random_resized_crop.scale") and the
  // allowed range.
  // `user` runs the operator's own ops (python(...), plugin ops); a
  // pipeline that names one the server lacks is INVALID_ARGUMENT.
  static absl::StatusOr<Pipeline> Create(const v1::SessionConfig& config, UserOps user = {});
  // The deterministic prefix a materialiser runs offline: ops that draw no
  // random numbers (resize, center_crop, and normalize as the last op: then
  // dtype() is FLOAT32 and the stored pixels are Normalized floats), any
  // output size. INVALID_ARGUMENT names a random op ("random ops stay
  // online"). Only DecodeAndApply and Normalized may be used on it.
  static absl::StatusOr<Pipeline> CreatePrefix(const std::vector<v1::Op>& ops, UserOps user = {});

  // The ops with defaults filled in.
  const std::vector<v1::Op>& ops() const { return ops_; }

  // An audio pipeline (its first op is audio(...)): samples come from
  // ProduceAudio, shaped [C, samples] or [C, n_mels, frames], FLOAT32 in
  // layout AUDIO. Null for images.
  const AudioPipeline* audio() const { return audio_.get(); }
  // A video pipeline (its first op is video_clip(...)): samples come from
  // ProduceVideo, each frame made by the image ops after it, shaped
  // [T, ...frame] or [K, T, ...frame].
  bool video() const { return video_; }
  // A video session with a field of kind AUDIO_TRACK: its item shape, [C, L]
  // or [K, C, L] float32 (proto VideoClip's audio_*); empty without one.
  const std::vector<int64_t>& audio_track_shape() const { return audio_track_shape_; }

  int out_height() const { return out_height_; }
  int out_width() const { return out_width_; }
  v1::Layout layout() const { return layout_; }
  v1::DType dtype() const { return dtype_; }
  int64_t sample_bytes() const;
  // One sample's shape in the session's layout, e.g. {H, W, 3} for NHWC.
  std::vector<int64_t> SampleShape() const;

  // Decodes `encoded` (pixel limit `max_pixels`, 0: none), runs the ops
  // from `first_op` on (the earlier ones were applied before the image was
  // stored: a materialised dataset) and writes the sample to dst
  // (sample_bytes() bytes). Decode errors carry a DecodeFailure (see
  // image_decoder.h).
  // `geometry` (may be null) receives every geometric step the ops take and
  // moves the sample's targets with them (geometry.h); it is started with
  // the decoded image's size, which fails (kBadField) when a mask does not
  // have it.
  // `io` (may be null) carries the sample's value fields to python(...) ops
  // and back; its python_time becomes times->python.
  absl::Status Produce(absl::string_view encoded, Rng& rng, int64_t max_pixels, uint8_t* dst, SampleTimes* times,
                       size_t first_op = 0, GeometrySink* geometry = nullptr, UserOpIo* io = nullptr) const;
  // An audio pipeline's sample (audio() set): at most `max_seconds` of
  // stream decoded (0: the decoder's default, an hour).
  absl::Status ProduceAudio(absl::string_view encoded, Rng& rng, double max_seconds, uint8_t* dst,
                            SampleTimes* times) const;
  // A video pipeline's sample (video() set): the clips' frames chosen from
  // the stream's index and decoded within `limits`, then every frame through
  // ops [1, end) with one random draw per clip.
  // With audio_track_shape() set, `audio_track` receives each clip's
  // window of the audio stream (float32, that shape; zeros outside the
  // stream); a video without an audio stream fails as missing_field.
  // `index` (may be null: then it is built here) is the stream's index,
  // cached by the caller (video_index_cache.h).
  absl::Status ProduceVideo(absl::string_view encoded, Rng& rng, const VideoLimits& limits, uint8_t* dst,
                            SampleTimes* times, std::string* audio_track = nullptr,
                            const VideoIndex* index = nullptr) const;
  // Produce without Store: the RGB image after ops [first_op, end), decoding
  // fused with op first_op as Produce does.
  absl::StatusOr<cv::Mat> DecodeAndApply(absl::string_view encoded, Rng& rng, int64_t max_pixels, size_t first_op,
                                         SampleTimes* times, GeometrySink* geometry = nullptr,
                                         UserOpIo* io = nullptr) const;

  // Runs ops [first_op, end) on an RGB image. The result of the whole list is
  // out_height x out_width x 3 (before normalize, which Store applies). An
  // op whose output would exceed `max_pixels` (0: resize's limit is INT32_MAX
  // pixels, the pads' 2^28; OpEntry::limit) fails as too_large before
  // anything is allocated (review 1.11: resize(8192) of a 100:1 panorama
  // asked for gigabytes).
  // `io` (may be null): the sample's value fields for python(...) ops, and
  // the time spent in them.
  absl::StatusOr<cv::Mat> Apply(cv::Mat image, Rng& rng, size_t first_op = 0, int64_t max_pixels = 0,
                                GeometrySink* geometry = nullptr, UserOpIo* io = nullptr) const;
  // Whether any op is python(...) or a plugin's.
  bool has_user_ops() const { return has_user_ops_; }

  // Writes an out_height x out_width RGB image to dst in the session's layout
  // and dtype, normalizing if the last op is normalize. The image is 8-bit,
  // or, when the last op is normalize, may be float already Normalized (a
  // sample stored that way), which is then only laid out.
  absl::Status Store(const cv::Mat& image, uint8_t* dst) const;
  // 8-bit RGB as float: value / 255, then (v - mean) / std if the last op is
  // normalize; exactly what Store writes for FLOAT32.
  cv::Mat Normalized(const cv::Mat& rgb) const;
  bool normalizes() const { return normalize_; }

 private:
  // Appends a checked op with its registry entry (found once, by its check;
  // read per sample by Apply and DecodeAndApply).
  void AddOp(v1::Op op, const OpEntry* entry);
  // Records, after checking op i, whether user ops must keep the size.
  void NoteSize(size_t i, const OpEntry* entry, bool fixed_before, cv::Size before, bool fixed_after, cv::Size after);
  // Fills defaults and validates op i (at `where`), updating `fixed` and the
  // output size; keeps a plugin op's instance and notes the sizes user ops
  // must keep. *entry: the op's registry entry.
  absl::Status CheckOpAt(const std::string& where, size_t i, v1::Op& op, bool& fixed, const OpEntry** entry);
  // The normalize op's mean and std, for Normalized and the client's OpContext.
  void TakeNormalize(const v1::Normalize& normalize);
  // A video session's AUDIO_TRACK field (at most one, no member, a window
  // length): fills in the op's audio defaults and audio_track_shape_.
  absl::Status CheckAudioTrack(const v1::SessionConfig& config);
  // Create's three kinds of session: an audio(...) pipeline's ops and
  // output; an image pipeline's ops checked in order (`fixed`: whether the
  // output size is known at the end); a video_clip session's fields, cache
  // mode, audio track and batch size.
  absl::Status CreateAudio(const v1::SessionConfig& config);
  absl::Status CheckImageOps(const v1::SessionConfig& config, bool& fixed);
  absl::Status CheckVideoSession(const v1::SessionConfig& config);
  // Runs a python(...) or plugin op (ops_[i]) on the image.
  absl::Status ApplyUserOp(size_t i, const UserOpHooks& hooks, cv::Mat& image, Rng& rng, int64_t max_pixels,
                           UserOpIo* io) const;

  std::vector<v1::Op> ops_;              // with defaults filled in
  std::vector<const OpEntry*> entries_;  // ops_[i]'s registry entry (null: no op set)
  bool has_user_ops_ = false;
  std::shared_ptr<const AudioPipeline> audio_;
  bool video_ = false;
  std::vector<int64_t> audio_track_shape_;  // [K,] C, L
  int64_t frame_bytes() const;              // one image (a video's frame) in the session's layout and dtype
  UserOps user_;
  // A user op's output must keep this size: the pipeline's size was fixed
  // before it and no later op sets one (by op position).
  std::map<size_t, cv::Size> keeps_size_;
  std::map<size_t, std::shared_ptr<const PluginInstance>> plugin_ops_;  // by op position
  int out_height_ = 0;
  int out_width_ = 0;
  v1::Layout layout_ = v1::NHWC;
  v1::DType dtype_ = v1::UINT8;
  bool normalize_ = false;  // the last op is normalize
  float mean_[3] = {0, 0, 0};
  float std_[3] = {1, 1, 1};
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_PIPELINE_H_
