// Video samples: a pipeline whose first op is video_clip(...) (stoker.proto)
// indexes the sample's video stream (video_decoder.h), chooses its clips'
// frames, decodes only those clips and runs the pipeline's image ops on each
// frame with one random draw per clip. Stateless; thread-safe.
#ifndef STOKER_DATAPLANE_OPS_VIDEO_OPS_H_
#define STOKER_DATAPLANE_OPS_VIDEO_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/rng.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// Fills in video_clip's defaults and checks it, as its entry in the op
// registry declares (media_ops.cc; INVALID_ARGUMENT names `where` and the
// range).
absl::Status CheckVideoClip(const std::string& where, v1::VideoClip& clip);
// The entry's own check: what its declared ranges do not say (the mode).
absl::Status CheckVideoClipRules(const std::string& where, const v1::VideoClip& clip);

// The frame numbers (0-based, presentation order) of each of the op's
// clips in a video of `frames` frames: clips x frames numbers, clip-major.
// Random starts are drawn from `rng`, one per clip, in clip order.
std::vector<int64_t> ClipFrames(const v1::VideoClip& clip, int64_t frames, Rng& rng);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_VIDEO_OPS_H_
