#include "dataplane/decode/video_decoder.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/media_loader.h"

namespace stoker {
namespace {

StokerVideoLimits Limits(const VideoLimits& l) {
  return {l.max_pixels, l.max_frames, l.max_seconds, l.max_wall_seconds, l.decoder_threads};
}

}  // namespace

absl::StatusOr<VideoIndex> IndexVideo(absl::string_view bytes, const VideoLimits& limits) {
  if (bytes.empty()) return DecodeError(DecodeFailure::kEmpty, "zero bytes");
  std::string why;
  const MediaApi* api = LoadMediaModule(&why);
  if (api == nullptr) return absl::FailedPreconditionError(why);
  const StokerVideoLimits l = Limits(limits);
  VideoIndex index;
  int64_t* pts = nullptr;
  int64_t frames = 0;
  char error[512] = "";
  const int r = api->video_index(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &l, &index.width,
                                 &index.height, &pts, &frames, &index.seconds_per_tick, error, sizeof(error));
  if (r != STOKER_MEDIA_OK) return MediaStatus(r, error, "indexing a video");
  index.pts.assign(pts, pts + frames);
  api->free(pts);
  return index;
}

absl::Status DecodeVideoFrames(absl::string_view bytes, const VideoLimits& limits, const std::vector<int64_t>& pts,
                               int width, int height, uint8_t* out) {
  std::string why;
  const MediaApi* api = LoadMediaModule(&why);
  if (api == nullptr) return absl::FailedPreconditionError(why);
  const StokerVideoLimits l = Limits(limits);
  char error[512] = "";
  const int r = api->video_frames(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &l, pts.data(),
                                  static_cast<int>(pts.size()), width, height, out, error, sizeof(error));
  return MediaStatus(r, error, "decoding a video");
}

}  // namespace stoker
