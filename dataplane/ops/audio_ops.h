// Audio samples: a pipeline whose first op is audio(...) (stoker.proto)
// decodes the sample's audio stream with FFmpeg (audio_decoder.h), takes a
// fixed window of it and, with mel_spectrogram(...), turns it into a log-mel
// spectrogram computed here (OpenCV's DFT). Output is float32 (or int16
// waveforms with format=int16): [C, samples] or [C, n_mels, frames]. Immutable after Create; thread-safe.
#ifndef STOKER_DATAPLANE_OPS_AUDIO_OPS_H_
#define STOKER_DATAPLANE_OPS_AUDIO_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rng.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct SampleTimes;

// Whether `ops` is an audio pipeline (its first op is audio, or any op is
// an audio op: then Create says what is wrong).
bool IsAudioPipeline(const google::protobuf::RepeatedPtrField<v1::Op>& ops);

// audio(...)'s bounds, which its entry in the op registry declares
// (media_ops.cc), and mel_spectrogram's n_fft.
inline constexpr int kMinAudioRate = 1000, kMaxAudioRate = 384000;  // Hz
inline constexpr int kMaxAudioChannels = 8;
inline constexpr float kMaxAudioSeconds = 600;
inline constexpr int kMinFft = 16, kMaxFft = 16384, kDefaultFft = 400;

// audio(...) alone: fills its defaults (16000 Hz, 1 channel, 4 s) and
// checks its bounds, as its entry declares; INVALID_ARGUMENT names `where`
// (e.g. "pipeline[0]").
absl::Status CheckAudio(const std::string& where, v1::Audio& a);
// The entry's own check: what its declared ranges do not say (seconds above
// 0 and at least one sample; crop and pad).
absl::Status CheckAudioRules(const std::string& where, const v1::Audio& a);

// The first frame of a window of `window` frames in a stream of `frames`:
// by `crop` (random: uniform over the whole starts, one draw from `rng`;
// center: (frames - window) / 2; start: 0); 0 (no draw) when the stream is
// no longer than the window.
int64_t AudioWindowStart(int64_t frames, int64_t window, v1::Audio::Crop crop, Rng& rng);

// A window of `window` frames from planar `channels` x `frames` samples,
// starting at AudioWindowStart, zeros past the end. Writes channels x window
// floats to `out`.
void AudioWindow(const float* samples, int channels, int64_t frames, int64_t window, v1::Audio::Crop crop, Rng& rng,
                 float* out);

// FFmpeg's float to s16 conversion: round(x * 32768), clamped to
// -32768..32767.
void FloatToInt16(const float* in, int64_t n, int16_t* out);

// torchaudio.transforms.MelSpectrogram with its defaults for the given
// parameters, and AmplitudeToDB("power") when `log`.
class MelSpectrogram {
 public:
  // Checks (INVALID_ARGUMENT names `where` and the range) and fills in the
  // op's defaults for a waveform at `rate` Hz.
  static absl::Status Check(const std::string& where, int rate, v1::MelSpectrogram& op);
  MelSpectrogram(const v1::MelSpectrogram& op, int rate);

  int n_mels() const { return n_mels_; }
  // Centred frames of `samples`: 1 + (samples + 2 (n_fft / 2) - n_fft) / hop.
  int64_t Frames(int64_t samples) const { return 1 + (samples + 2 * (n_fft_ / 2) - n_fft_) / hop_; }
  // `samples` floats in, n_mels x Frames(samples) floats out (row per band).
  void Compute(const float* samples, int64_t n, float* out) const;

  // The triangular filters, n_freqs x n_mels (torchaudio's melscale_fbanks).
  const std::vector<float>& filters() const { return filters_; }

 private:
  int n_fft_, hop_, n_mels_, n_freqs_;
  bool log_;
  std::vector<float> window_;   // periodic Hann, n_fft
  std::vector<float> filters_;  // n_freqs x n_mels, row-major
};

// The audio part of a Pipeline (pipeline.h): the checked ops and the code
// that turns one encoded file into one sample.
class AudioPipeline {
 public:
  // `ops` (defaults filled in on return) must be audio(...) then at most one
  // mel_spectrogram(...). INVALID_ARGUMENT names the op and the range.
  static absl::StatusOr<AudioPipeline> Create(std::vector<v1::Op>* ops, int batch_size);

  std::vector<int64_t> SampleShape() const;
  int64_t sample_bytes() const;
  int rate() const { return audio_.rate(); }
  // audio(format=int16): int16 waveforms (FloatToInt16), else float32.
  bool int16() const { return audio_.format() == v1::Audio::INT16; }

  // Decodes `encoded` (at most `max_seconds` of stream, else too_large) and
  // writes the sample (sample_bytes()) to dst.
  absl::Status Produce(absl::string_view encoded, Rng& rng, double max_seconds, uint8_t* dst, SampleTimes* times) const;

 private:
  v1::Audio audio_;
  int64_t window_ = 0;  // frames
  bool mel_ = false;
  std::vector<MelSpectrogram> spectrogram_;  // one, when mel_
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_AUDIO_OPS_H_
