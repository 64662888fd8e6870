// Decodes a sample's audio stream (WAV, FLAC, MP3, Ogg Opus/Vorbis, and the
// audio track of MP4/Matroska/WebM) to float32 at a chosen rate and channel
// count, through FFmpeg's libraries in libstoker_media.so (media_loader.h):
// libavformat demuxes from memory, libavcodec decodes, libswresample
// resamples and mixes down with its default filter. Thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_AUDIO_DECODER_H_
#define STOKER_DATAPLANE_DECODE_AUDIO_DECODER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

struct Waveform {
  int rate = 0;
  int channels = 0;
  int64_t frames = 0;          // samples per channel
  std::vector<float> samples;  // planar: channel c at [c * frames, (c + 1) * frames)
  double start_seconds = 0;    // the first sample's time in the container (a video's timeline)
};

struct AudioDecodeOptions {
  int rate = 16000;
  int channels = 1;
  // Longest stream decoded, announced or found (else too_large).
  double max_seconds = 3600;
  // A demux and decode running longer is stopped (corrupt); 0: none.
  double max_wall_seconds = 60;
};

// Failures are decode failures (image_decoder.h): empty, truncated,
// corrupt, too_large, unsupported (no audio stream, a codec this FFmpeg
// lacks), each with a message naming the problem; RESOURCE_EXHAUSTED when
// memory ran out; FAILED_PRECONDITION when the media module is missing.
absl::StatusOr<Waveform> DecodeAudio(absl::string_view bytes, const AudioDecodeOptions& options);

// Most bytes DecodeAudioCrop holds of a whole stream: a longer one is
// decoded twice (its length, then its window), holding only the window.
inline constexpr int64_t kWholeAudioBytes = int64_t{4} << 20;

// A window of `window` frames of the decoded stream (C x L, float32 planar,
// zeros past its end), whose first frame `choose(stream frames)` picks
// (called once). The samples are those DecodeAudio gives. A stream of at
// most kWholeAudioBytes is decoded once, whole; a longer one is decoded once
// to count its frames (resampled to one channel) and once more, resampled
// only up to the end of the window, so that a sample holds its window, not
// its file. Failures as DecodeAudio's.
absl::StatusOr<std::vector<float>> DecodeAudioCrop(absl::string_view bytes, const AudioDecodeOptions& options,
                                                   int64_t window, const std::function<int64_t(int64_t)>& choose);

// Windows of `window` frames starting at `starts` (seconds on the
// container's timeline, as a video's clips are), K x C x L, zeros outside
// the stream: one pass that resamples only up to the last window. The
// samples are those DecodeAudio gives at llround((start - its
// start_seconds) x rate). Failures as DecodeAudio's.
absl::StatusOr<std::vector<float>> DecodeAudioWindows(absl::string_view bytes, const AudioDecodeOptions& options,
                                                      const std::vector<double>& starts, int64_t window);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_AUDIO_DECODER_H_
