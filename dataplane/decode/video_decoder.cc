#include "dataplane/decode/video_decoder.h"

#include <cstring>
#include <new>
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

absl::Status DecodeVideoFramesEach(absl::string_view bytes, const VideoLimits& limits, const std::vector<int64_t>& pts,
                                   int width, int height, const VideoFrameSink& sink) {
  std::string why;
  const MediaApi* api = LoadMediaModule(&why);
  if (api == nullptr) return absl::FailedPreconditionError(why);
  const StokerVideoLimits l = Limits(limits);
  // The frame the sink sees: continuous rows, one at a time (the module's
  // own frame when its rows are not padded, else a copy).
  struct Handoff {
    const VideoFrameSink* sink;
    std::vector<uint8_t> frame;
    size_t row;
    int height;
    absl::Status status;
  } handoff{&sink, {}, static_cast<size_t>(width) * 3, height, absl::OkStatus()};
  const StokerFrameSink each = [](void* opaque, int i, const uint8_t* rgb, int linesize) {
    auto* h = static_cast<Handoff*>(opaque);
    const uint8_t* rows = rgb;
    if (static_cast<size_t>(linesize) != h->row) {
      try {
        h->frame.resize(h->row * static_cast<size_t>(h->height));
      } catch (const std::bad_alloc&) {
        h->status =
            absl::ResourceExhaustedError(absl::StrCat("out of memory for a frame of ", h->row / 3, "x", h->height));
        return 1;
      }
      for (int y = 0; y < h->height; ++y) {
        std::memcpy(h->frame.data() + static_cast<size_t>(y) * h->row, rgb + static_cast<ptrdiff_t>(y) * linesize,
                    h->row);
      }
      rows = h->frame.data();
    }
    h->status = (*h->sink)(i, rows);
    return h->status.ok() ? 0 : 1;
  };
  char error[512] = "";
  const int r =
      api->video_frames_each(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &l, pts.data(),
                             static_cast<int>(pts.size()), width, height, each, &handoff, error, sizeof(error));
  if (r == STOKER_MEDIA_STOPPED) return handoff.status;
  return MediaStatus(r, error, "decoding a video");
}

}  // namespace stoker
