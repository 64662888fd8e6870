// Audio and video demux + decode (dataplane/decode/media_module.cc and
// media_video.cc, compiled into this target so that their code is
// instrumented; FFmpeg's own libraries are Debian's): the audio path with
// the window and mel spectrogram after it, and the video index with the
// decode of its first, middle and last frames. The first byte chooses the
// output rate and channels (and, with 0x40, checks that windows and the
// length alone agree with the whole decode); the rest is the file.
#include <cstdint>
#include <vector>

#include "common/rng.h"
#include "dataplane/decode/media_abi.h"
#include "dataplane/ops/audio_ops.h"

namespace {

void Video(const uint8_t* data, size_t size) {
  StokerVideoLimits limits{/*max_pixels=*/1 << 20, /*max_frames=*/2000, /*max_seconds=*/60, /*max_wall_seconds=*/5,
                           /*decoder_threads=*/1};
  int width = 0, height = 0;
  int64_t* pts = nullptr;
  int64_t frames = 0;
  char error[256];
  double tick = 0;
  if (stoker_media_video_index(data, size, &limits, &width, &height, &pts, &frames, &tick, error, sizeof(error)) !=
      STOKER_MEDIA_OK) {
    if (pts != nullptr) __builtin_trap();
    return;
  }
  if (frames < 1 || width < 1 || height < 1 || int64_t{width} * height > limits.max_pixels) __builtin_trap();
  const int64_t picks[3] = {pts[0], pts[frames / 2], pts[frames - 1]};
  std::vector<uint8_t> out(static_cast<size_t>(width) * static_cast<size_t>(height) * 3 * 3);
  stoker_media_video_frames(data, size, &limits, picks, 3, width, height, out.data(), error, sizeof(error));
  stoker_media_free(pts);
}

// Windows and the length alone, asked of the module, are what the whole
// decode has (the audio op's two-pass path and a video's audio track).
void KeptAgreesWithWhole(const uint8_t* data, size_t size, const StokerAudioRequest& request, const float* whole,
                         int64_t frames) {
  char error[256];
  StokerAudioRequest mono = request;
  mono.channels = 1;
  StokerAudioKeep count{};
  count.count_only = 1;
  float* none = nullptr;
  int64_t counted = 0;
  if (stoker_media_decode_audio_kept(data, size, &mono, &count, &none, &counted, nullptr, error, sizeof(error)) !=
          STOKER_MEDIA_OK ||
      counted != frames) {
    __builtin_trap();
  }
  stoker_media_free(none);
  const int64_t window = 1 + frames / 4, firsts[2] = {-7, frames / 3};
  StokerAudioKeep two{};
  two.n_windows = 2;
  two.window_frames = window;
  two.first = firsts;
  float* kept = nullptr;
  int64_t n = 0;
  if (stoker_media_decode_audio_kept(data, size, &request, &two, &kept, &n, nullptr, error, sizeof(error)) !=
      STOKER_MEDIA_OK) {
    __builtin_trap();
  }
  for (int k = 0; k < 2; ++k) {
    for (int c = 0; c < request.channels; ++c) {
      for (int64_t i = 0; i < window; ++i) {
        const int64_t at = firsts[k] + i;
        const float want = at >= 0 && at < frames ? whole[c * frames + at] : 0.0f;
        if (kept[(k * request.channels + c) * window + i] != want) __builtin_trap();
      }
    }
  }
  stoker_media_free(kept);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 0x80) {
    Video(data + 1, size - 1);
    return 0;
  }
  static const int kRates[] = {8000, 16000, 22050, 44100};
  const uint8_t mode = data[0];
  StokerAudioRequest request{kRates[mode & 3], 1 + ((mode >> 2) & 1), /*max_seconds=*/30, /*max_wall_seconds=*/5};
  float* samples = nullptr;
  int64_t frames = 0;
  char error[256];
  double start = 0;
  const StokerAudioKeep whole{};
  const int r = stoker_media_decode_audio_kept(data + 1, size - 1, &request, &whole, &samples, &frames, &start, error,
                                               sizeof(error));
  if (r != STOKER_MEDIA_OK) {
    if (samples != nullptr || r < 0 || r > STOKER_MEDIA_NO_MEMORY) __builtin_trap();
    return 0;
  }
  if (frames < 1 || frames > 31 * request.rate) __builtin_trap();
  if (mode & 0x40) KeptAgreesWithWhole(data + 1, size - 1, request, samples, frames);
  // The window and a spectrogram of it, as a session would make them.
  const int64_t window = request.rate / 4;
  std::vector<float> out(static_cast<size_t>(request.channels * window));
  stoker::Rng rng(mode);
  stoker::AudioWindow(samples, request.channels, frames, window, stoker::v1::Audio::RANDOM, rng, out.data());
  stoker::v1::MelSpectrogram op;
  op.set_n_fft(256);
  op.set_n_mels(32);
  if (!stoker::MelSpectrogram::Check("fuzz", request.rate, op).ok()) __builtin_trap();
  stoker::MelSpectrogram mel(op, request.rate);
  std::vector<float> spectrum(static_cast<size_t>(mel.n_mels() * mel.Frames(window)));
  mel.Compute(out.data(), window, spectrum.data());
  stoker_media_free(samples);
  return 0;
}
