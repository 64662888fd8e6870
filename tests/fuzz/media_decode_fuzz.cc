// Audio demux + decode + resample (dataplane/media_module.cc, compiled into
// this target so that its code is instrumented; FFmpeg's own libraries are
// Debian's) and the window and mel spectrogram after it. The first byte
// chooses the output rate and channels; the rest is the file.
#include <cstdint>
#include <vector>

#include "common/rng.h"
#include "dataplane/audio_ops.h"
#include "dataplane/media_abi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const int kRates[] = {8000, 16000, 22050, 44100};
  const uint8_t mode = data[0];
  StokerAudioRequest request{kRates[mode & 3], 1 + ((mode >> 2) & 1), /*max_seconds=*/30, /*max_wall_seconds=*/5};
  float* samples = nullptr;
  int64_t frames = 0;
  char error[256];
  const int r = stoker_media_decode_audio(data + 1, size - 1, &request, &samples, &frames, error, sizeof(error));
  if (r != STOKER_MEDIA_OK) {
    if (samples != nullptr || r < 0 || r > STOKER_MEDIA_NO_MEMORY) __builtin_trap();
    return 0;
  }
  if (frames < 1 || frames > 31 * request.rate) __builtin_trap();
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
