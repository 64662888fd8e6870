// Pipeline's audio and video samples: the audio(...) window, video_clip(...)
// clips through the image ops, and a video's audio track as a field.
#include <algorithm>
#include <cstring>
#include <optional>

#include <opencv2/imgproc.hpp>
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dataplane/decode/audio_decoder.h"
#include "dataplane/decode/decoder_threads.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/media_loader.h"
#include "dataplane/decode/video_decoder.h"
#include "dataplane/kernels/resample.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/video_ops.h"

namespace stoker {

namespace {

// A video's audio track (AUDIO_TRACK): decoded and resampled as the clip
// asks, a window of audio_seconds from each of `starts` (seconds in the
// container's timeline), zeros outside the stream; float32 [K, C, L] to
// *out, resampled only up to the last window. No audio stream:
// missing_field.
absl::Status AudioTrack(absl::string_view encoded, const v1::VideoClip& clip, const std::vector<double>& starts,
                        const VideoLimits& limits, std::string* out) {
  AudioDecodeOptions options;
  options.rate = clip.audio_rate();
  options.channels = clip.audio_channels();
  options.max_seconds = limits.max_seconds;
  options.max_wall_seconds = limits.max_wall_seconds;
  const int64_t window = std::llround(double{clip.audio_seconds()} * clip.audio_rate());
  absl::StatusOr<std::vector<float>> windows = DecodeAudioWindows(encoded, options, starts, window);
  if (!windows.ok()) {
    if (absl::StrContains(windows.status().message(), "has no audio stream")) {
      return DecodeError(DecodeFailure::kMissingField,
                         absl::StrCat("a field of kind audio: ", windows.status().message()));
    }
    return windows.status();
  }
  out->assign(reinterpret_cast<const char*>(windows->data()), windows->size() * sizeof(float));
  return absl::OkStatus();
}

}  // namespace

absl::Status Pipeline::CheckAudioTrack(const v1::SessionConfig& config) {
  int tracks = 0;
  for (const v1::FieldSpec& f : config.fields()) {
    if (f.kind() != v1::AUDIO_TRACK) continue;
    ++tracks;
    if (!f.extensions().empty() || !f.json_path().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("field '", f.name(),
                                                     "' (audio) is the video's own audio track: give it no member "
                                                     "extension or json path"));
    }
  }
  if (tracks == 0) return absl::OkStatus();
  if (tracks > 1) return absl::InvalidArgumentError("at most one field of kind audio (the video's audio track)");
  v1::VideoClip& clip = *ops_[0].mutable_video_clip();
  if (clip.audio_rate() == 0) clip.set_audio_rate(16000);
  if (clip.audio_channels() == 0) clip.set_audio_channels(1);  // their ranges: CheckVideoClip
  const int64_t window = std::llround(double{clip.audio_seconds()} * clip.audio_rate());
  if (!(clip.audio_seconds() > 0) || clip.audio_seconds() > 600 || window < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline[0].video_clip.audio_seconds = ", clip.audio_seconds(),
                     ": a field of kind audio needs each clip's window length, 0..600 s (e.g. video_clip(frames=16, "
                     "audio_seconds=1.0))"));
  }
  audio_track_shape_.clear();
  if (clip.clips() > 1) audio_track_shape_.push_back(clip.clips());
  audio_track_shape_.insert(audio_track_shape_.end(), {int64_t{clip.audio_channels()}, window});
  const int64_t bytes = int64_t{clip.clips()} * clip.audio_channels() * window * 4;
  if (config.batch_size() * (sample_bytes() + bytes) > kMaxBatchBytes) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size x (clip bytes + audio bytes) = ", config.batch_size(),
                                                   " x (", sample_bytes(), " + ", bytes, "); a batch may hold at most ",
                                                   kMaxBatchBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status Pipeline::ProduceVideo(absl::string_view encoded, Rng& rng, const VideoLimits& limits, uint8_t* dst,
                                    SampleTimes* times, std::string* audio_track, const VideoIndex* known) const {
  if (!video_) return absl::FailedPreconditionError("not a video_clip pipeline");
  const absl::Time t0 = absl::Now();
  // One time limit for the whole sample: the index and every clip's decode.
  const absl::Time deadline =
      limits.max_wall_seconds > 0 ? t0 + absl::Seconds(limits.max_wall_seconds) : absl::InfiniteFuture();
  auto within = [&]() -> absl::StatusOr<VideoLimits> {
    VideoLimits l = limits;
    if (deadline == absl::InfiniteFuture()) return l;
    l.max_wall_seconds = absl::ToDoubleSeconds(deadline - absl::Now());
    if (l.max_wall_seconds <= 0) {
      return DecodeError(DecodeFailure::kCorrupt,
                         absl::StrCat("decoding the clips took longer than ", limits.max_wall_seconds, " s"));
    }
    return l;
  };
  absl::StatusOr<VideoLimits> now = within();
  if (!now.ok()) return now.status();
  absl::StatusOr<VideoIndex> index = known != nullptr ? *known : IndexVideo(encoded, *now);
  times->decode += absl::Now() - t0;
  if (!index.ok()) return index.status();
  const v1::VideoClip& clip = ops_[0].video_clip();
  const std::vector<int64_t> frames = ClipFrames(clip, static_cast<int64_t>(index->pts.size()), rng);
  const int T = clip.frames();
  const size_t rgb_bytes = static_cast<size_t>(index->width) * static_cast<size_t>(index->height) * 3;
  if (rgb_bytes * static_cast<size_t>(T) > kMaxClipBytes) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat("a clip of ", T, " frames of ", index->width, "x", index->height, " is ",
                                    rgb_bytes * static_cast<size_t>(T), " bytes decoded; at most ", kMaxClipBytes));
  }
  if (!audio_track_shape_.empty() && audio_track != nullptr) {
    const absl::Time t1 = absl::Now();
    now = within();
    if (!now.ok()) return now.status();
    std::vector<double> starts;  // each clip's first frame, in seconds
    for (int k = 0; k < clip.clips(); ++k) {
      starts.push_back(static_cast<double>(index->pts[static_cast<size_t>(frames[static_cast<size_t>(k * T)])]) *
                       index->seconds_per_tick);
    }
    absl::Status s = AudioTrack(encoded, clip, starts, *now, audio_track);
    times->decode += absl::Now() - t1;
    if (!s.ok()) return s;
  }
  // Each frame goes through the ops as it is decoded: one decoded frame is
  // held, not the clip.
  for (int k = 0; k < clip.clips(); ++k) {
    std::vector<int64_t> pts(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) pts[t] = index->pts[static_cast<size_t>(frames[static_cast<size_t>(k * T + t)])];
    const absl::Time t1 = absl::Now();
    now = within();
    if (!now.ok()) return now.status();
    // One draw for the clip: every frame replays the same random stream.
    const Rng clip_rng(rng.Next());
    absl::Duration augment;
    auto each = [&](int t, const uint8_t* rgb) -> absl::Status {
      const absl::Time a0 = absl::Now();
      cv::Mat frame(index->height, index->width, CV_8UC3, const_cast<uint8_t*>(rgb));
      Rng r = clip_rng;
      absl::StatusOr<cv::Mat> out = Apply(frame, r, 1, limits.max_pixels);
      if (!out.ok()) return out.status();
      absl::Status s = Store(*out, dst + static_cast<size_t>(k * T + t) * static_cast<size_t>(frame_bytes()));
      augment += absl::Now() - a0;
      return s;
    };
    absl::Status decoded;
    {
      const DecoderThreadShare share(limits.decoder_threads, limits.decoder_thread_budget);
      now->decoder_threads = share.threads();
      decoded = DecodeVideoFramesEach(encoded, *now, pts, index->width, index->height, each);
    }
    times->decode += absl::Now() - t1 - augment;
    times->augment += augment;
    if (!decoded.ok()) return decoded;
  }
  return absl::OkStatus();
}

absl::Status Pipeline::ProduceAudio(absl::string_view encoded, Rng& rng, double max_seconds, uint8_t* dst,
                                    SampleTimes* times) const {
  if (!audio_) return absl::FailedPreconditionError("not an audio pipeline");
  return audio_->Produce(encoded, rng, max_seconds, dst, times);
}

}  // namespace stoker
