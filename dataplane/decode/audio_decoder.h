// Decodes a sample's audio stream (WAV, FLAC, MP3, Ogg Opus/Vorbis, and the
// audio track of MP4/Matroska/WebM) to float32 at a chosen rate and channel
// count, through FFmpeg's libraries in libstoker_media.so (media_loader.h):
// libavformat demuxes from memory, libavcodec decodes, libswresample
// resamples and mixes down with its default filter. Thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_AUDIO_DECODER_H_
#define STOKER_DATAPLANE_DECODE_AUDIO_DECODER_H_

#include <cstdint>
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

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_AUDIO_DECODER_H_
