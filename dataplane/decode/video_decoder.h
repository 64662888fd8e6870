// Video frames through FFmpeg's libraries in libstoker_media.so
// (media_loader.h): an index of a video stream's frames (every frame's
// presentation timestamp, from a demux without decoding) and the decode of
// chosen frames to 8-bit RGB, from the keyframe before the first. H.264,
// HEVC, VP9, AV1, MPEG-4 and the rest Debian's FFmpeg decodes, in MP4/MOV,
// Matroska/WebM and AVI. Thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_VIDEO_DECODER_H_
#define STOKER_DATAPLANE_DECODE_VIDEO_DECODER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

struct VideoLimits {
  int64_t max_pixels = 100'000'000;  // a frame's width x height
  int64_t max_frames = 1'000'000;    // frames in the stream
  double max_seconds = 3600;         // the stream's duration
  double max_wall_seconds = 60;      // an index or a decode running longer is stopped
  // FFmpeg threads decoding one clip. Pipeline::ProduceVideo reads 0 as
  // `decoder_thread_budget` (the pool's workers) shared among the clips
  // being decoded (decoder_threads.h).
  int decoder_threads = 1;
  int decoder_thread_budget = 1;
};

struct VideoIndex {
  int width = 0, height = 0;
  std::vector<int64_t> pts;     // every frame's timestamp, presentation order
  double seconds_per_tick = 0;  // the timestamps' unit (the stream's time base)
};

// Failures are decode failures (image_decoder.h) naming the problem:
// empty, truncated, corrupt, too_large (a limit of `limits`), unsupported
// (no video stream, a codec this FFmpeg lacks); RESOURCE_EXHAUSTED when
// memory ran out; FAILED_PRECONDITION when the media module is missing.
absl::StatusOr<VideoIndex> IndexVideo(absl::string_view bytes, const VideoLimits& limits);

// The frames at `pts` (ascending, from the index), width x height x 3 bytes
// each, to `out`.
absl::Status DecodeVideoFrames(absl::string_view bytes, const VideoLimits& limits, const std::vector<int64_t>& pts,
                               int width, int height, uint8_t* out);

// Receives frame i of a DecodeVideoFramesEach call: height x width x 3
// RGB, continuous, valid during the call. A failure stops the decode and is
// what DecodeVideoFramesEach returns.
using VideoFrameSink = std::function<absl::Status(int i, const uint8_t* rgb)>;

// As DecodeVideoFrames, each frame handed to `sink` as it is decoded: one
// frame is held at a time, not the clip (an 8192 x 8192 frame is 201 MB).
absl::Status DecodeVideoFramesEach(absl::string_view bytes, const VideoLimits& limits, const std::vector<int64_t>& pts,
                                   int width, int height, const VideoFrameSink& sink);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_VIDEO_DECODER_H_
