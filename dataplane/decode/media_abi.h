// The C interface of libstoker_media.so (media_module.cc), the module that
// holds every FFmpeg call. The data plane loads it on first use with dlopen
// (media_loader.cc), so that neither the server's core nor the Python wheel
// links FFmpeg's libraries (and the hundred codec libraries Debian builds
// them with) unless audio or video is asked for. Plain C types only: no
// exception or C++ object crosses it.
#ifndef STOKER_DATAPLANE_DECODE_MEDIA_ABI_H_
#define STOKER_DATAPLANE_DECODE_MEDIA_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Why a decode failed: the module's answer, mapped to DecodeFailure by the
// loader.
enum StokerMediaResult {
  STOKER_MEDIA_OK = 0,
  STOKER_MEDIA_EMPTY = 1,        // zero bytes
  STOKER_MEDIA_TRUNCATED = 2,    // less than the header announces
  STOKER_MEDIA_CORRUPT = 3,      // the container or the stream does not decode
  STOKER_MEDIA_TOO_LARGE = 4,    // over a limit (duration, channels, rate)
  STOKER_MEDIA_UNSUPPORTED = 5,  // no stream of the kind asked for, or a codec this FFmpeg lacks
  STOKER_MEDIA_NO_MEMORY = 6,    // an allocation failed
  STOKER_MEDIA_LONGER = 7,       // not a failure: the stream is longer than StokerAudioKeep.whole_up_to
  STOKER_MEDIA_STOPPED = 8,      // a frame sink asked to stop (its own failure is the caller's to report)
  STOKER_MEDIA_TIMEOUT = 9,      // past the wall-clock bound: depends on the load, not on the file alone
};

// What an audio decode is asked for.
struct StokerAudioRequest {
  int rate;                 // output samples per second per channel
  int channels;             // output channels: 1 mixes down, 2 is stereo, n the default layout of n
  double max_seconds;       // longest stream decoded (announced or found): else TOO_LARGE
  double max_wall_seconds;  // a demux or decode running longer is stopped (CORRUPT); <= 0: none
};

// Which of the resampled stream's frames an audio decode keeps. One of:
// - the whole stream (n_windows 0, count_only 0), planar C x frames; with
//   whole_up_to > 0, a stream longer than that many frames stops the decode
//   with STOKER_MEDIA_LONGER and nothing kept;
// - its length alone (count_only 1): the whole stream is resampled, nothing
//   kept (ask for one channel: the length does not depend on them);
// - windows (n_windows > 0) of window_frames each, K x C x L, zeros where a
//   window leaves the stream: the frames from `first[k]`, or, when `seconds`
//   is set, from llround((seconds[k] - start) x rate), start being the first
//   decoded sample's time in the container. Resampling stops once the last
//   window is filled; the rest is still decoded, so a cut or corrupt stream
//   fails as it would whole. The kept frames are those a whole decode has.
struct StokerAudioKeep {
  int64_t whole_up_to;
  int count_only;
  int n_windows;
  int64_t window_frames;
  const int64_t* first;
  const double* seconds;
};

// Decodes the first audio stream of the container in data[0, size) and
// resamples it (libswresample, its default filter) to float32, keeping what
// `keep` asks in *samples (freed with stoker_media_free). *frames: the
// stream's resampled length (-1 when resampling stopped after the last
// window). *start_seconds (when not null): the first decoded sample's time
// in the container's timeline (its timestamp x time base; 0 without one), to
// align a video's audio with its frames. On failure returns the reason and
// writes a message of at most error_size bytes (NUL-terminated) naming the
// problem.
int stoker_media_decode_audio_kept(const uint8_t* data, size_t size, const struct StokerAudioRequest* request,
                                   const struct StokerAudioKeep* keep, float** samples, int64_t* frames,
                                   double* start_seconds, char* error, size_t error_size);

// What a video's index and decode are bounded by.
struct StokerVideoLimits {
  int64_t max_pixels;       // width x height of a frame (else TOO_LARGE)
  int64_t max_frames;       // frames in the stream (else TOO_LARGE)
  double max_seconds;       // the stream's duration (else TOO_LARGE)
  double max_wall_seconds;  // a demux or decode running longer is stopped (CORRUPT); <= 0: none
  int decoder_threads;      // threads the decoder of one clip may use (FFmpeg's frame and slice threads); <= 1: one
};

// The first video stream of a container: its frame size and every frame's
// presentation timestamp (in the stream's time base), in presentation
// order, from a demux of the whole file (no decoding), and the seconds of
// one timestamp tick (the stream's time base). *pts is freed with
// stoker_media_free.
int stoker_media_video_index(const uint8_t* data, size_t size, const struct StokerVideoLimits* limits, int* width,
                             int* height, int64_t** pts, int64_t* frames, double* seconds_per_tick, char* error,
                             size_t error_size);

// Decodes the frames whose timestamps are pts[0..n) (ascending; repeats
// allowed) to 8-bit RGB (width x height x 3 each, as the index said) in
// out, seeking to the keyframe before pts[0] and decoding from there.
// libswscale converts with SWS_BILINEAR and its default colour space, as
// PyAV's to_ndarray(format="rgb24").
int stoker_media_video_frames(const uint8_t* data, size_t size, const struct StokerVideoLimits* limits,
                              const int64_t* pts, int n, int width, int height, uint8_t* out, char* error,
                              size_t error_size);

// Receives decoded frame i (of the pts asked for; a repeated timestamp is
// handed over again) as 8-bit RGB rows of `linesize` bytes, valid during the
// call. Nonzero stops the decode (STOKER_MEDIA_STOPPED).
typedef int (*StokerFrameSink)(void* opaque, int i, const uint8_t* rgb, int linesize);

// As stoker_media_video_frames, each frame handed to `sink` as it is made:
// the caller holds one frame at a time, not the clip.
int stoker_media_video_frames_each(const uint8_t* data, size_t size, const struct StokerVideoLimits* limits,
                                   const int64_t* pts, int n, int width, int height, StokerFrameSink sink, void* opaque,
                                   char* error, size_t error_size);

void stoker_media_free(void* p);

// The FFmpeg libraries' versions, for the server's start-up log.
const char* stoker_media_version(void);

#ifdef __cplusplus
}
#endif

#endif  // STOKER_DATAPLANE_DECODE_MEDIA_ABI_H_
