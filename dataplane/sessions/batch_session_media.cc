// BatchSession's audio and video samples: the pipeline's media ops on a
// file's bytes, with a video's index found once per file.
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dataplane/decode/video_index_cache.h"
#include "dataplane/sessions/batch_session.h"

namespace stoker {

absl::Status BatchSession::ProduceMedia(int64_t index, const std::string& encoded, Rng& rng, uint8_t* dst,
                                        SampleTimes* times, std::vector<std::string>* fields) const {
  if (pipeline_.audio() != nullptr) return pipeline_.ProduceAudio(encoded, rng, max_media_seconds_, dst, times);
  VideoLimits limits;
  limits.max_pixels = max_pixels_;
  limits.max_frames = max_video_frames_;
  limits.decoder_threads = video_decoder_threads_;
  limits.decoder_thread_budget = workers_;
  limits.max_seconds = max_media_seconds_;
  std::string* track = fields != nullptr && audio_track_field_ < static_cast<int>(fields->size())
                           ? &(*fields)[static_cast<size_t>(audio_track_field_)]
                           : nullptr;
  // Kept on disk only for the content as it was read: the file (or shard)
  // not changed since the source opened or stat'ed it, and these bytes not
  // an older cached copy of the sample.
  const absl::Time start = absl::Now();
  std::optional<SampleSource::MediaIndexHome> home = source_->MediaIndexHomeOf(index);
  if (home && (home->bytes != static_cast<int64_t>(encoded.size()) || StampOf(home->file) != home->stamp)) {
    home.reset();
  }
  const std::string key = home ? home->sidecar.string() : absl::StrCat(source_->fingerprint(), "#", index);
  const FileStamp stamp = home ? home->stamp : FileStamp{static_cast<int64_t>(encoded.size()), 0};
  absl::StatusOr<std::shared_ptr<const VideoIndex>> video_index = VideoIndexCache::Shared().Get(
      key, stamp, home ? home->sidecar : std::filesystem::path(), limits, [&] { return IndexVideo(encoded, limits); });
  times->decode += absl::Now() - start;
  if (!video_index.ok()) return video_index.status();
  return pipeline_.ProduceVideo(encoded, rng, limits, dst, times, track, video_index->get());
}

}  // namespace stoker
